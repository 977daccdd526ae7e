package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A GatewayBackend's external classifiers: defaults applied, carried over
// the wire, asked only when a policy reads their tags, and refused with
// field paths when wrong.
func TestExternalClassifiers(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	backend := func(classifiers string) string {
		return write("backend.yaml", `apiVersion: switchyard.dev/v1alpha1
kind: GatewayBackend
metadata: {name: dev, namespace: inference}
spec:
  models: [{name: qwen-3.6-27b}]
  policies: [{name: pii-stays-local, mode: Guard}]
  classifiers:
`+classifiers)
	}
	files := append(catalogFiles, examplePolicy("pii-stays-local.yaml"))
	s := mustLoad(t, append(files, backend(`  - {name: presidio, url: "http://presidio:5001/classify", tags: [pii-detected, pii:name]}
  - {name: topics, url: "https://topics.example/v1", tags: [finance], timeout: 1s, maxConcurrency: 4, failTag: unclassified}
`))...)
	wire, err := FromProto(ToProto(s, 1))
	if err != nil {
		t.Fatal(err)
	}
	for name, snap := range map[string]*Snapshot{"compiled": s, "over the wire": wire} {
		cs := snap.Program("dev").Classifiers
		if len(cs) != 2 {
			t.Fatalf("%s: %d classifiers", name, len(cs))
		}
		p, topics := cs[0], cs[1]
		if p.Timeout != DefaultClassifierTimeout || p.MaxConcurrency != DefaultClassifierConcurrency || p.FailTag != "pii-detected" {
			t.Errorf("%s: presidio without defaults: %+v", name, p)
		}
		if topics.Timeout != time.Second || topics.MaxConcurrency != 4 || topics.FailTag != "unclassified" || topics.URL != "https://topics.example/v1" {
			t.Errorf("%s: topics %+v", name, topics)
		}
		// The guard reads pii-detected; nothing reads finance or unclassified.
		if !p.Reads(snap.Program("dev")) || topics.Reads(snap.Program("dev")) {
			t.Errorf("%s: Reads: presidio %v topics %v, want true false", name, p.Reads(snap.Program("dev")), topics.Reads(snap.Program("dev")))
		}
	}

	for _, c := range []struct{ spec, want string }{
		{`  - {name: a, url: "ftp://x", tags: [t]}` + "\n", "spec.classifiers[0].url"},
		{`  - {name: a, url: "http://x", tags: []}` + "\n", "spec.classifiers[0].tags"},
		{`  - {name: a, url: "http://x", tags: [t], timeout: 1m}` + "\n", "spec.classifiers[0].timeout"},
		{`  - {name: a, url: "http://x", tags: [t]}` + "\n" + `  - {name: a, url: "http://y", tags: [t]}` + "\n", `spec.classifiers[1].name: classifier "a" listed twice`},
	} {
		_, diags, err := Load(append(files, backend(c.spec))...)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(diags.Error(), c.want) {
			t.Errorf("%q: diagnostics %q, want %q", c.spec, diags.Error(), c.want)
		}
	}
}
