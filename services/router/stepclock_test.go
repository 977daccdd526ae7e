package router_test

import (
	"context"
	"math"
	"strings"
	"testing"

	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

// A gateway's step clock for a worker shifts that worker's predicted TTFT,
// and no other's, by the believed share (half, before any completion) of
// how much later its step under way ends than at the decisions routed
// there before; a clock for an endpoint the router does not know, or one
// that cannot be real, changes nothing.
func TestRouteRequestStepClocks(t *testing.T) {
	a, b := newFakeWorker(t, "m"), newFakeWorker(t, "m")
	tr := startRouter(t, nil, a, b)
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	req := func(id string, clocks ...*routerv1.StepClock) *routerv1.RouteRequest {
		return &routerv1.RouteRequest{RequestId: id, Model: "m", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: body, StepClocks: clocks}
	}
	// Two decisions on a with 0.2 s left of its step make its average.
	for _, id := range []string{"r1", "r2"} {
		r := req(id, &routerv1.StepClock{EndpointId: "a", SinceStepSeconds: 0.3, StepSeconds: 0.5})
		r.ExcludeEndpoints = []string{"b"}
		if resp, err := tr.client.Route(context.Background(), r); err != nil || resp.GetTarget().GetId() != "a" {
			t.Fatalf("route: %v, %v", resp, err)
		}
	}
	predicted := func(clocks ...*routerv1.StepClock) map[string]float64 {
		t.Helper()
		resp, err := tr.client.Explain(context.Background(), req("explain", clocks...))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, c := range resp.GetCandidates() {
			out[c.GetEndpoint().GetId()] = c.GetPredictedTtftSeconds()
		}
		return out
	}
	// Once their prefill is predicted done (it would be priced by its
	// tokens, not the clock), a's last step, 0.5 s long, ended just now:
	// 0.3 s more is left than on average, of which half is believed, less
	// the moments the decision took.
	waitFor(t, "the decisions' prefill over", func() bool {
		return predicted()["a"] == predicted()["b"]
	})
	blind := predicted()
	clocked := predicted(&routerv1.StepClock{EndpointId: "a", SinceStepSeconds: 0, StepSeconds: 0.5},
		&routerv1.StepClock{EndpointId: "nobody", SinceStepSeconds: 0, StepSeconds: 0.5})
	if d := clocked["a"] - blind["a"]; d < 0.12 || d > 0.152 {
		t.Errorf("a predicted %.3f s later with its clock, want 0.12-0.15 s", d)
	}
	if clocked["b"] != blind["b"] {
		t.Errorf("b moved with a's clock: %v, was %v", clocked["b"], blind["b"])
	}
	// Before any completion the router believes half of a clock, and
	// says so.
	if m := tr.metricsText(t); !strings.Contains(m, "switchyard_router_step_clock_weight 0.5\n") {
		t.Errorf("metrics do not show the clock weight 0.5")
	}
	bad := predicted(&routerv1.StepClock{EndpointId: "a", SinceStepSeconds: math.NaN(), StepSeconds: 0.5},
		&routerv1.StepClock{EndpointId: "b", SinceStepSeconds: 0, StepSeconds: -1})
	if bad["a"] != blind["a"] || bad["b"] != blind["b"] {
		t.Errorf("clocks that cannot be real moved the predictions: %v, was %v", bad, blind)
	}
}
