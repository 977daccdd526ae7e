package policy

import (
	"math"
	"strconv"
	"testing"
)

// TestDefaultProgramPicks pins the picker every router decision runs
// through, policies or not: lowest predicted TTFT among the available
// backends of the requested model; near-ties (1 ms or 1%) to the first in
// scan order from the rotation; the runner-up is the best of the others.
func TestDefaultProgramPicks(t *testing.T) {
	b := func(id string, ttft float64) Backend {
		return Backend{ID: id, Model: "m", Type: TypeLocal, PredictedTTFT: ttft}
	}
	tests := []struct {
		name       string
		bs         []Backend
		rotation   uint64
		want, next string // "" for none
	}{
		{name: "lowest wins", bs: []Backend{b("a", 0.3), b("b", 0.1), b("c", 0.2)}, want: "b", next: "c"},
		{name: "a near-tie keeps the first from the rotation", bs: []Backend{b("a", 0.1000), b("b", 0.1005), b("c", 0.5)},
			rotation: 1, want: "b", next: "a"},
		{name: "the rotation wraps", bs: []Backend{b("a", 0.1), b("b", 0.1), b("c", 0.1)}, rotation: 5, want: "c", next: "a"},
		{name: "a clear win is not a tie", bs: []Backend{b("a", 0.1), b("b", 0.2)}, rotation: 1, want: "a", next: "b"},
		{name: "beaten best becomes the runner-up", bs: []Backend{b("a", 0.5), b("b", 0.1), b("c", 0.6)}, want: "b", next: "a"},
		{name: "unavailable and other models are skipped",
			bs:   []Backend{{ID: "a", Model: "m", PredictedTTFT: 0.01, Unavailable: "unhealthy"}, {ID: "b", Model: "x", PredictedTTFT: 0.01}, b("c", 0.9)},
			want: "c"},
		{name: "unknown TTFT ranks last", bs: []Backend{b("a", math.NaN()), b("b", 9)}, want: "b", next: "a"},
		{name: "nothing available", bs: []Backend{{ID: "a", Model: "m", Unavailable: "excluded by request"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d Decision
			req := Request{Model: "m", Tags: []string{"anything"}, Rotation: tt.rotation}
			DefaultProgram().Evaluate(&req, tt.bs, &d)
			id := func(i int) string {
				if i < 0 {
					return ""
				}
				return tt.bs[i].ID
			}
			if got := id(d.Chosen); got != tt.want || id(d.RunnerUp) != tt.next {
				t.Fatalf("chose %q, runner-up %q; want %q, %q (%s)", got, id(d.RunnerUp), tt.want, tt.next, d.Summary(tt.bs))
			}
			if tt.want == "" {
				if d.Outcome != NoBackend || d.Rule != nil {
					t.Fatalf("outcome %v, rule %v", d.Outcome, d.Rule)
				}
				return
			}
			if d.Outcome != Routed || d.Rule != nil || d.Policy() != "" || d.TierLabel() != "default" {
				t.Fatalf("outcome %v by %q tier %q, want default routing", d.Outcome, d.Policy(), d.TierLabel())
			}
		})
	}
}

// TestDefaultProgramAllowsEveryTag: without a GatewayBackend's settings
// every tag counts and no tenant carries defaults.
func TestDefaultProgramAllowsEveryTag(t *testing.T) {
	p := DefaultProgram()
	for i := range 3 {
		if tag := "t" + strconv.Itoa(i); !p.TagAllowed(tag) {
			t.Fatalf("%s not allowed", tag)
		}
	}
	if tags := p.TenantTags("payroll"); len(tags) != 0 {
		t.Fatalf("tenant tags %v", tags)
	}
	if got := p.ConsiderModels(&Request{Model: "m"}, nil); len(got) != 1 || got[0] != "m" {
		t.Fatalf("considers %v, want the requested model alone", got)
	}
}
