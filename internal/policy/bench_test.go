package policy

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// benchCatalog: 8 worker sets of 6 workers over 4 models (48 local rows)
// and 4 providers serving the 4 models (16 rows): 64 backends.
func benchCatalog() (string, []Backend) {
	var b strings.Builder
	var bs []Backend
	for w := range 8 {
		model := fmt.Sprintf("m%d", w%4)
		fmt.Fprintf(&b, "apiVersion: switchyard.dev/v1alpha1\nkind: InferenceWorkerSet\nmetadata: {name: ws%d}\nspec:\n  model: %s\n  static:\n", w, model)
		for i := range 6 {
			id := fmt.Sprintf("w%d-%d", w, i)
			fmt.Fprintf(&b, "  - {id: %s, url: \"http://127.0.%d.%d:8000\"}\n", id, w, i)
			bs = append(bs, Backend{ID: id, Model: model, Type: TypeLocal, Group: fmt.Sprintf("ws%d", w),
				QueuedPrompts: int64((w + i) % 6), RunningRequests: int64(i), KVCacheUsage: float64(i) / 7, PredictedTTFT: 0.1 + float64((w*6+i)%11)/50})
		}
		b.WriteString("---\n")
	}
	for p := range 4 {
		fmt.Fprintf(&b, "apiVersion: switchyard.dev/v1alpha1\nkind: InferenceProvider\nmetadata: {name: p%d}\nspec:\n  type: OpenAICompatible\n  baseURL: https://p%d.example.com/v1\n  models:\n", p, p)
		for m := range 4 {
			fmt.Fprintf(&b, "  - {name: m%d}\n", m)
			bs = append(bs, Backend{ID: fmt.Sprintf("provider/p%d", p), Model: fmt.Sprintf("m%d", m), Type: TypeProvider, Group: fmt.Sprintf("p%d", p), PredictedTTFT: 0.5 + float64(p)/10})
		}
		b.WriteString("---\n")
	}
	return b.String(), bs
}

// benchPolicy writes one policy of n rules; each matches a tag (so every
// rule is looked at for every model), and the last is a catch-all.
func benchPolicy(n int) string {
	var b strings.Builder
	b.WriteString("apiVersion: switchyard.dev/v1alpha1\nkind: InferencePolicy\nmetadata: {name: big}\nspec:\n  rules:\n")
	for i := range n - 1 {
		fmt.Fprintf(&b, `  - name: r%d
    matches: [ {tag: t%d}, {tenant: team%d, model: m%d} ]
    route:
      exclude:
      - name: busy
        drop: { backend: {type: Local}, queuedPrompts: {greaterThan: 3}, kvCacheUsage: {greaterThanOrEqual: 0.8} }
      - name: pii
        if: {tag: pii}
        drop: { backend: {type: Provider} }
      select:
      - { type: Local, minimize: PredictedTTFT }
      - { type: Provider, order: [p%d, p%d] }
`, i, i, i, i%4, i%4, (i+1)%4)
	}
	b.WriteString("  - name: catch-all\n    route: {}\n")
	return b.String()
}

func benchSnapshot(b *testing.B, rules int) (*Snapshot, []Backend) {
	cat, bs := benchCatalog()
	objs, diags := ParseYAML("bench.yaml", []byte(cat+benchPolicy(rules)))
	s, d := Compile(objs)
	if s == nil {
		b.Fatalf("compile: %s", append(diags, d...).Error())
	}
	return s, bs
}

// BenchmarkEvaluate is one decision with 50 rules and 64 backends; the
// request matches rule 47, so 48 rules are tested, and both filters and
// both tiers run over every backend of its model.
func BenchmarkEvaluate(b *testing.B) {
	s, bs := benchSnapshot(b, 50)
	if len(bs) != 64 {
		b.Fatalf("%d backends", len(bs))
	}
	prog := s.Program("")
	req := Request{Model: "m1", Tenant: "acme", Tags: []string{"x", "t47", "pii"}}
	var d Decision
	prog.Evaluate(&req, bs, &d)
	if d.Outcome != Routed || d.Rule.Name != "r47" {
		b.Fatalf("decision %s", d.Summary(bs))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		req.Rotation = uint64(i)
		prog.Evaluate(&req, bs, &d)
	}
}

// BenchmarkCompile1000Rules parses and compiles a policy of 1,000 rules
// with the 64-backend catalog.
func BenchmarkCompile1000Rules(b *testing.B) {
	cat, _ := benchCatalog()
	src := []byte(cat + benchPolicy(1000))
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	var parse, compile time.Duration
	n := 0
	for b.Loop() {
		t0 := time.Now()
		objs, _ := ParseYAML("bench.yaml", src)
		t1 := time.Now()
		s, d := Compile(objs)
		t2 := time.Now()
		if s == nil {
			b.Fatal(d.Error())
		}
		parse += t1.Sub(t0)
		compile += t2.Sub(t1)
		n++
	}
	b.ReportMetric(float64(parse.Milliseconds())/float64(n), "parse-ms/op")
	b.ReportMetric(float64(compile.Microseconds())/1000/float64(n), "compile-ms/op")
}
