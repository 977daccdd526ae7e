package policy

import (
	"path/filepath"
	"testing"
)

// examplesDir is the dev catalog; its policies are the seed examples.
const examplesDir = "../../deploy/examples"

var (
	catalogFiles = []string{filepath.Join(examplesDir, "workers.yaml"), filepath.Join(examplesDir, "providers.yaml")}
)

func examplePolicy(name string) string { return filepath.Join(examplesDir, "policies", name) }

// mustLoad compiles files and fails the test on any error.
func mustLoad(t testing.TB, paths ...string) *Snapshot {
	t.Helper()
	s, diags, err := Load(paths...)
	if err != nil {
		t.Fatal(err)
	}
	if s == nil {
		t.Fatalf("compile %v:\n%s", paths, diags.Error())
	}
	return s
}

// devBackends is the dev catalog's backends, idle, local workers predicted
// faster than providers.
func devBackends() []Backend {
	return []Backend{
		{ID: "sim-0", Model: "qwen-3.6-27b", Type: TypeLocal, Group: "qwen-workers", Pool: "sim-gpus", PredictedTTFT: 0.20},
		{ID: "sim-1", Model: "qwen-3.6-27b", Type: TypeLocal, Group: "qwen-workers", Pool: "sim-gpus", PredictedTTFT: 0.25},
		{ID: "sim-2", Model: "glm-5.3", Type: TypeLocal, Group: "glm-workers", Pool: "sim-gpus", PredictedTTFT: 0.30},
		{ID: "provider/bedrock", Model: "qwen-3.6-27b", Type: TypeProvider, Group: "bedrock", PredictedTTFT: 0.60, Price: 0.35},
		{ID: "provider/bedrock", Model: "glm-5.3", Type: TypeProvider, Group: "bedrock", PredictedTTFT: 0.60, Price: 0.35},
		{ID: "provider/databricks", Model: "qwen-3.6-27b", Type: TypeProvider, Group: "databricks", PredictedTTFT: 0.50, Price: 0.30},
	}
}

// edit changes the state of the backends with an id (every model row).
type edit func([]Backend)

func on(id string, f func(*Backend)) edit {
	return func(bs []Backend) {
		for i := range bs {
			if bs[i].ID == id {
				f(&bs[i])
			}
		}
	}
}

func queued(id string, n int64) edit { return on(id, func(b *Backend) { b.QueuedPrompts = n }) }
func kv(id string, u float64) edit   { return on(id, func(b *Backend) { b.KVCacheUsage = u }) }
func ttft(id string, s float64) edit { return on(id, func(b *Backend) { b.PredictedTTFT = s }) }
func down(id string) edit {
	return on(id, func(b *Backend) { b.Unavailable = "unhealthy: connection refused" })
}

// decisionCase is one request against one fleet state.
type decisionCase struct {
	name  string
	req   Request
	state []edit
	// want: outcome, and when routed the chosen backend (id and model).
	outcome   Outcome
	id, model string
	// rule ("policy/rule", "" for default routing) that decided or
	// rejected, and the tier label when routed.
	rule, tier string
	// neverType: no backend of this type may be chosen.
	neverType BackendType
	// dropped: backend ids (first row) that must be dropped, by filter.
	dropped map[string]string
}

func runDecisions(t *testing.T, prog *Program, cases []decisionCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bs := devBackends()
			for _, e := range tc.state {
				e(bs)
			}
			var d Decision
			prog.Evaluate(&tc.req, bs, &d)
			if d.Outcome != tc.outcome {
				t.Fatalf("outcome %s, want %s: %s", d.Outcome, tc.outcome, d.Summary(bs))
			}
			rule := ""
			if d.Outcome == Rejected {
				rule = d.Rejector.Label()
			} else if d.Rule != nil {
				rule = d.Rule.Label()
			}
			if rule != tc.rule {
				t.Errorf("rule %q, want %q (%s)", rule, tc.rule, d.Summary(bs))
			}
			if tc.outcome == Routed {
				c := bs[d.Chosen]
				if c.ID != tc.id || c.Model != tc.model {
					t.Errorf("chose %s/%s, want %s/%s (%s)", c.ID, c.Model, tc.id, tc.model, d.Summary(bs))
				}
				if tc.neverType != TypeAny && c.Type == tc.neverType {
					t.Errorf("chose a %s backend: %s", c.Type, d.Summary(bs))
				}
				if d.TierLabel() != tc.tier {
					t.Errorf("tier %q, want %q", d.TierLabel(), tc.tier)
				}
			}
			for id, by := range tc.dropped {
				i := indexOf(bs, id)
				if v := d.Trace[i]; v.Status != Dropped || v.By != by {
					t.Errorf("%s: %s by %q, want dropped by %q", id, v.Status, v.By, by)
				}
			}
			// Deterministic: the same input gives the same decision.
			var again Decision
			prog.Evaluate(&tc.req, bs, &again)
			if again.Chosen != d.Chosen || again.Outcome != d.Outcome || again.Rule != d.Rule {
				t.Errorf("second evaluation differs: %s vs %s", again.Summary(bs), d.Summary(bs))
			}
		})
	}
}

func indexOf(bs []Backend, id string) int {
	for i := range bs {
		if bs[i].ID == id {
			return i
		}
	}
	panic("no backend " + id)
}
