package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestKubernetesStaysInItsPackage: client-go is linked by the binary's
// Kubernetes source alone. A `-tags nokube` build has none of it, and
// neither has anything that embeds policyd (switchyard dev and its tests).
func TestKubernetesStaysInItsPackage(t *testing.T) {
	deps := func(args ...string) []string {
		t.Helper()
		out, err := exec.Command("go", append([]string{"list", "-deps"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %v: %v\n%s", args, err, out)
		}
		return strings.Fields(string(out))
	}
	clientGo := func(pkgs []string) int {
		n := 0
		for _, p := range pkgs {
			if strings.HasPrefix(p, "k8s.io/client-go/") {
				n++
			}
		}
		return n
	}
	if n := clientGo(deps(".")); n == 0 {
		t.Error("the default build has no client-go: policyd's Kubernetes source is not registered")
	}
	for _, args := range [][]string{
		{"-tags", "nokube", "."},
		{"../../internal/devenv", "../../services/policyd"},
	} {
		if n := clientGo(deps(args...)); n != 0 {
			t.Errorf("go list -deps %v: %d client-go packages, want none", args, n)
		}
	}
}
