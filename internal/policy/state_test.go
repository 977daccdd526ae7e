package policy

import (
	"strings"
	"testing"
)

func TestStateBackends(t *testing.T) {
	s := mustLoad(t, examplesDir)
	st, err := ParseState([]byte(`
backends:
  sim-9: {group: qwen-workers, model: qwen-3.6-27b, queuedPrompts: 1}
  sim-0: {queuedPrompts: 3, kvCacheUsage: 0.5, predictedTTFT: 1.5, cachedTokens: 900, unavailable: draining}
  sim-8: {group: qwen-workers, model: qwen-3.6-27b}
  provider/bedrock: {predictedTTFT: 0.7}
`))
	if err != nil {
		t.Fatal(err)
	}
	bs, err := s.Backends(st)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, b := range bs {
		ids = append(ids, b.ID+"/"+b.Model)
	}
	want := "sim-2/glm-5.3 sim-0/qwen-3.6-27b sim-1/qwen-3.6-27b provider/bedrock/qwen-3.6-27b provider/bedrock/glm-5.3 provider/databricks/qwen-3.6-27b sim-9/qwen-3.6-27b sim-8/qwen-3.6-27b"
	if got := strings.Join(ids, " "); got != want {
		t.Errorf("backends\n%s\nwant\n%s", got, want)
	}
	b0 := bs[1]
	if b0.QueuedPrompts != 3 || b0.KVCacheUsage != 0.5 || b0.PredictedTTFT != 1.5 || b0.CachedTokens != 900 || b0.Unavailable != "draining" || b0.Pool != "sim-gpus" {
		t.Errorf("sim-0 %+v", b0)
	}
	if b := bs[6]; b.Type != TypeLocal || b.Pool != "sim-gpus" || b.QueuedPrompts != 1 {
		t.Errorf("sim-9 %+v", b)
	}
	if bs[3].PredictedTTFT != 0.7 || bs[4].PredictedTTFT != 0.7 || bs[3].Price != 0.35 {
		t.Errorf("bedrock %+v %+v", bs[3], bs[4])
	}
}

func TestParseStateErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"backends:\n  sim-0: {queued: 1}\n", `unknown field "queued"`},
		{"backends:\n  sim-0: {kvCacheUsage: 70}\n", "want a fraction in 0..1"},
		{"backends:\n  sim-0: {queuedPrompts: -1}\n", "must not be negative"},
		{"backends:\n  sim-0: {type: GPU}\n", "want Local or Provider"},
		{"backends: [1, 2]\n", "parse state"},
	} {
		if _, err := ParseState([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.in, err, tc.want)
		}
	}
	s := mustLoad(t, examplesDir)
	st, err := ParseState([]byte("backends:\n  sim-7: {queuedPrompts: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Backends(st); err == nil || !strings.Contains(err.Error(), "give its model and group") {
		t.Errorf("unknown endpoint without model: %v", err)
	}
}

// FuzzParseState: a state file is outside input to yardctl.
func FuzzParseState(f *testing.F) {
	f.Add([]byte("backends:\n  sim-0: {queuedPrompts: 3, predictedTTFT: 0.2}\n  x: {model: m, group: g}\n"))
	f.Add([]byte("{\"backends\": {\"a\": {\"kvCacheUsage\": 0.5}}}"))
	s, diags, err := Load(examplesDir)
	if err != nil || s == nil {
		f.Fatal(err, diags)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParseState(data)
		if err != nil {
			return
		}
		bs, err := s.Backends(st)
		if err != nil {
			return
		}
		var d Decision
		s.Program("").Evaluate(&Request{Model: qwen, Tags: []string{"pii-detected"}}, bs, &d)
		if d.Outcome == Routed && bs[d.Chosen].Unavailable != "" {
			t.Fatalf("chose an unavailable backend")
		}
	})
}
