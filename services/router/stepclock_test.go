package router_test

import (
	"context"
	"math"
	"testing"

	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

// A gateway's step clock for a worker adds what is left of its step under
// way to that worker's predicted TTFT, and to no other's; a clock for an
// endpoint the router does not know, or one that cannot be real, changes
// nothing.
func TestRouteRequestStepClocks(t *testing.T) {
	a, b := newFakeWorker(t, "m"), newFakeWorker(t, "m")
	tr := startRouter(t, nil, a, b)
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	predicted := func(clocks ...*routerv1.StepClock) map[string]float64 {
		t.Helper()
		resp, err := tr.client.Explain(context.Background(), &routerv1.RouteRequest{
			RequestId: "explain", Model: "m", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: body, StepClocks: clocks,
		})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, c := range resp.GetCandidates() {
			out[c.GetEndpoint().GetId()] = c.GetPredictedTtftSeconds()
		}
		return out
	}
	blind := predicted()
	// a's last step, 0.5 s long, ended just now: up to 0.5 s is left of
	// the one under way, less the moments the decision took.
	clocked := predicted(&routerv1.StepClock{EndpointId: "a", SinceStepSeconds: 0, StepSeconds: 0.5},
		&routerv1.StepClock{EndpointId: "nobody", SinceStepSeconds: 0, StepSeconds: 0.5})
	if d := clocked["a"] - blind["a"]; d < 0.4 || d > 0.5 {
		t.Errorf("a predicted %.3f s later with its clock, want 0.4-0.5 s", d)
	}
	if clocked["b"] != blind["b"] {
		t.Errorf("b moved with a's clock: %v, was %v", clocked["b"], blind["b"])
	}
	bad := predicted(&routerv1.StepClock{EndpointId: "a", SinceStepSeconds: math.NaN(), StepSeconds: 0.5},
		&routerv1.StepClock{EndpointId: "b", SinceStepSeconds: 0, StepSeconds: -1})
	if bad["a"] != blind["a"] || bad["b"] != blind["b"] {
		t.Errorf("clocks that cannot be real moved the predictions: %v, was %v", bad, blind)
	}
}
