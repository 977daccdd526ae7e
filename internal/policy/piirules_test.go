package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A GatewayBackend's spec.pii: compiled, carried over the wire, read only
// by programs whose policies read pii tags, refused with field paths when
// wrong.
func TestPIIRules(t *testing.T) {
	dir := t.TempDir()
	backend := func(name, policies, pii string) string {
		p := filepath.Join(dir, name)
		body := `apiVersion: switchyard.dev/v1alpha1
kind: GatewayBackend
metadata: {name: ` + strings.TrimSuffix(name, ".yaml") + `, namespace: inference}
spec:
  models: [{name: qwen-3.6-27b}]
` + policies + `  pii:
` + pii
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const rules = `    patterns:
    - {kind: employee-id, regex: "EMP-[0-9]{6}"}
    dictionaries:
    - {kind: codename, terms: [Project Falcon, 青い鳥]}
`
	files := append(catalogFiles, examplePolicy("pii-stays-local.yaml"),
		backend("guarded.yaml", "  policies: [{name: pii-stays-local, mode: Guard}]\n", rules),
		backend("open.yaml", "", rules))
	s := mustLoad(t, files...)
	wire, err := FromProto(ToProto(s, 1))
	if err != nil {
		t.Fatal(err)
	}
	for name, snap := range map[string]*Snapshot{"compiled": s, "over the wire": wire} {
		g := snap.Program("guarded")
		if g.PII == nil {
			t.Fatalf("%s: no pii rules", name)
		}
		if kinds := strings.Join(g.PII.Set.Kinds(), ","); kinds != "employee-id,codename" {
			t.Errorf("%s: kinds %s", name, kinds)
		}
		hit := make([]bool, 2)
		g.PII.Set.Scan("ask EMP-123456 about the project falcon", hit)
		if !hit[0] || !hit[1] {
			t.Errorf("%s: scan found %v, want both kinds", name, hit)
		}
		if !g.PII.Reads(g) {
			t.Errorf("%s: the guard reads pii-detected, Reads says no", name)
		}
		if o := snap.Program("open"); o.PII == nil || o.PII.Reads(o) {
			t.Errorf("%s: a backend without policies reads no pii tag", name)
		}
	}

	for _, c := range []struct{ spec, want string }{
		{"    patterns: [{kind: a, regex: \"EMP-[0-9\"}]\n", "spec.pii.patterns[0].regex: error parsing regexp: missing closing ]"},
		{"    patterns: [{kind: a, regex: \"[0-9]*\"}]\n", "spec.pii.patterns[0].regex: matches the empty word"},
		{"    patterns: [{kind: a, regex: \"Project [A-Z]+\"}]\n", "spec.pii.patterns[0].regex: patterns match single words"},
		{"    patterns: [{kind: Bad, regex: \"x1\"}]\n", "spec.pii.patterns[0].kind"},
		{"    dictionaries: [{kind: a, terms: [ok, \" \"]}]\n", "spec.pii.dictionaries[0].terms[1]: empty term"},
	} {
		_, diags, err := Load(append(catalogFiles, backend("bad.yaml", "", c.spec))...)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(diags.Error(), c.want) {
			t.Errorf("%q: diagnostics %q, want %q", c.spec, diags.Error(), c.want)
		}
	}
}
