package main

import (
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/apikey"
	"github.com/switchyard-dev/switchyard/internal/policy"
)

// fixedKey is the key the golden outputs show.
const fixedKey = "sy-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

func TestKeys(t *testing.T) {
	old := newKey
	newKey = func() string { return fixedKey }
	t.Cleanup(func() { newKey = old })
	digest := apikey.Digest(fixedKey)
	for _, tt := range []struct {
		name, stdin string
		args        []string
	}{
		{"keys-create", "", []string{"keys", "create", "--tenant", "team-a", "--namespace", "inference"}},
		{"keys-create-files", "", []string{"keys", "create", "--tenant", "team-a", "-o", "files"}},
		{"keys-revoke", "", []string{"keys", "revoke", "--tenant", "team-a", "--namespace", "inference", "--digest", digest}},
		{"keys-revoke-stdin-files", fixedKey + "\n", []string{"keys", "revoke", "--tenant", "team-a", "--key-stdin", "-o", "files"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tt.stdin, tt.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			golden(t, tt.name, "$ yardctl "+strings.Join(tt.args, " ")+"\n--- stdout\n"+out+"--- stderr\n"+errOut)
			// The key reaches the user once, on stderr, and only from create.
			if strings.Contains(out, fixedKey) || strings.Contains(errOut, fixedKey) != strings.Contains(tt.name, "create") {
				t.Errorf("the key is in stdout, or stderr shows it when it should not")
			}
			if !strings.Contains(out, digest) && !strings.Contains(out, secretEntry(digest)) {
				t.Errorf("stdout lacks the digest or its entry")
			}
		})
	}
}

// TestKeysCreatedWork: what create prints in files mode, pasted into a
// GatewayBackend, compiles, and the key printed on stderr names the
// tenant.
func TestKeysCreatedWork(t *testing.T) {
	code, out, errOut := runCLI(t, "", "keys", "create", "--tenant", "team-a", "-o", "files")
	if code != 0 {
		t.Fatal(errOut)
	}
	key := strings.TrimSpace(strings.Split(errOut, "\n")[2])
	if !apikey.WellFormed(key) {
		t.Fatalf("no key on stderr: %q", errOut)
	}
	doc := "apiVersion: switchyard.dev/v1alpha1\nkind: GatewayBackend\nmetadata: {name: front, namespace: inference}\nspec:\n" +
		indent(out, "  ")
	objs, diags := policy.ParseYAML("gateway.yaml", []byte(doc))
	snap, d := policy.Compile(objs)
	if diags.HasErrors() || d.HasErrors() {
		t.Fatalf("%v %v\n%s", diags, d, doc)
	}
	if tenant, ok := snap.Program("front").KeyTenant(sha256.Sum256([]byte(key))); !ok || tenant != "team-a" {
		t.Errorf("the created key names %q %v, want team-a", tenant, ok)
	}
}

func indent(s, by string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString(by + line)
	}
	return b.String()
}

func TestKeysErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"keys", "create"}, "--tenant is required"},
		{[]string{"keys", "create", "--tenant", "Team A"}, "is not a valid tenant name"},
		{[]string{"keys", "rotate", "--tenant", "a"}, `unknown action "rotate"`},
		{[]string{"keys", "revoke", "--tenant", "a"}, "--digest sha256:... or --key-stdin"},
		{[]string{"keys", "revoke", "--tenant", "a", "--digest", fixedKey}, "got a key, not its digest"},
		{[]string{"keys", "revoke", "--tenant", "a", "--digest", "sha256:abc"}, "64 lowercase hex digits"},
		{[]string{"keys", "revoke", "--tenant", "a", "--key-stdin"}, "stdin does not hold a Switchyard key"},
		{[]string{"keys", "create", "--tenant", "a", "-o", "json"}, `-o "json": want yaml or files`},
	} {
		code, out, errOut := runCLI(t, "", tt.args...)
		if code == 0 || !strings.Contains(errOut, tt.want) || strings.Contains(errOut, fixedKey) || out != "" {
			t.Errorf("%v: exit %d, stderr %q, want %q", tt.args, code, errOut, tt.want)
		}
	}
}
