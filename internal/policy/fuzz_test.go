package policy

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the parser and, when they compile,
// evaluates a request with the result: nothing may panic, and a snapshot
// is only returned without errors.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join(examplesDir, "*.yaml"))
	more, _ := filepath.Glob(filepath.Join(examplesDir, "policies", "*.yaml"))
	broken, _ := filepath.Glob("testdata/broken/*.yaml")
	for _, p := range append(append(seeds, more...), broken...) {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("a: &a [*a, *a]\n"))
	f.Add([]byte("apiVersion: switchyard.dev/v1alpha1\nkind: InferencePolicy\nmetadata: {name: x}\nspec: {rules: [{name: r, route: {}}]}\n"))
	catalog, cdiags, err := LoadPaths(catalogFiles...)
	if err != nil || cdiags.HasErrors() {
		f.Fatalf("catalog: %v %v", err, cdiags)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, diags := ParseYAML("fuzz.yaml", data)
		for _, d := range diags {
			_ = d.String()
		}
		for _, withCatalog := range []bool{false, true} {
			all := objs
			if withCatalog {
				all = append(append([]*Object(nil), catalog...), objs...)
			}
			s, ds := Compile(all)
			if s != nil && ds.HasErrors() {
				t.Fatalf("snapshot returned with errors:\n%s", ds.Error())
			}
			if s == nil {
				if !ds.HasErrors() && !diags.HasErrors() {
					t.Fatalf("no snapshot and no error")
				}
				continue
			}
			bs := devBackends()
			var d Decision
			for _, p := range s.Programs {
				for _, req := range []Request{{Model: qwen}, {Model: "standard-model", Tags: []string{"pii-detected", "batch"}}, {Model: glm, Tenant: "t"}} {
					p.Evaluate(&req, bs, &d)
					_ = d.Summary(bs)
					if d.Outcome == Routed && (d.Chosen < 0 || d.Chosen >= len(bs) || bs[d.Chosen].Unavailable != "") {
						t.Fatalf("bad choice %d", d.Chosen)
					}
				}
			}
			if _, err := FromProto(ToProto(s, 1)); err != nil {
				t.Fatalf("proto round trip: %v", err)
			}
		}
	})
}
