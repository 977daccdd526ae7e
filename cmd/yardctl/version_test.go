package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	code, out, errOut := runCLI(t, "", "version")
	if code != 0 || !strings.HasPrefix(out, "yardctl ") || !strings.Contains(out, runtime.Version()) {
		t.Fatalf("version: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, "", "version", "extra"); code == 0 || !strings.Contains(errOut, "unexpected arguments") {
		t.Errorf("version extra: %d %q", code, errOut)
	}
}

// TestMakeBuildStamps builds yardctl with the -ldflags `make build` passes
// (read from make -n, with VERSION and COMMIT set as a packager would) and
// runs it: a renamed variable or package would otherwise go unnoticed, as
// the linker ignores -X for symbols that do not exist.
func TestMakeBuildStamps(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end; skipped in -short")
	}
	if testing.Short() {
		t.Skip("SKIP: builds a binary")
	}
	for _, tool := range []string{"make", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIP: %s is not installed", tool)
		}
	}
	root := filepath.Join("..", "..")
	plan, err := exec.Command("make", "-C", root, "-n", "build", "VERSION=v9.9.9-test", "COMMIT=feedface").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n build: %v\n%s", err, plan)
	}
	m := regexp.MustCompile(`go build -ldflags '([^']*)' -o \S*/yardctl ./cmd/yardctl`).FindSubmatch(plan)
	if m == nil {
		t.Fatalf("make -n build builds no stamped yardctl:\n%s", plan)
	}
	bin := filepath.Join(t.TempDir(), "yardctl")
	if out, err := exec.Command("go", "build", "-ldflags", string(m[1]), "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -ldflags %q: %v\n%s", m[1], err, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("yardctl version: %v\n%s", err, out)
	}
	want := "yardctl v9.9.9-test (commit feedface, " + runtime.Version() + " "
	if !strings.HasPrefix(string(out), want) {
		t.Fatalf("stamped yardctl version printed %q, want %q...", out, want)
	}
}
