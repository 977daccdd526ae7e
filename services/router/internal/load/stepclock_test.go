package load

import (
	"math"
	"strconv"
	"testing"
	"time"
)

func clocks(m map[string]StepClock) func(string) (StepClock, bool) {
	return func(id string) (StepClock, bool) {
		c, ok := m[id]
		return c, ok
	}
}

// A gateway's step clock puts what is left of the step under way into the
// prediction; a decision without one uses the average of what was left at
// the decisions that had one; a clock that cannot be real is ignored.
func TestStepClockInThePrediction(t *testing.T) {
	tb := fleet(2)
	at := t0.Add(time.Second)
	req := func(id string, steps map[string]StepClock) Request {
		r := Request{Model: "m", ID: id, PromptTokens: 300}
		if steps != nil {
			r.Steps = clocks(steps)
		}
		return r
	}
	blind := decide(tb, req("a", nil), at, false)
	if c := blind.choice(); c.Estimate.StepLeft != 0 || c.Estimate.StepClock {
		t.Fatalf("without clocks or history: step left %v, clocked %v", c.Estimate.StepLeft, c.Estimate.StepClock)
	}
	// e0 is 10 ms into a 50 ms step; e1 has just ended a 50 ms one: it is
	// predicted 40 ms sooner, and chosen.
	steps := map[string]StepClock{"e0": {Since: 0.010, Step: 0.050}, "e1": {Since: 0.050, Step: 0.050}}
	r := decide(tb, req("b", steps), at, false)
	e0, e1 := r.rows[0].Estimate, r.rows[1].Estimate
	if !e0.StepClock || math.Abs(e0.StepLeft-0.040) > 1e-9 || e1.StepLeft != 0 || !e1.StepClock {
		t.Fatalf("step left e0 %v (clocked %v), e1 %v (clocked %v); want 0.04 and 0", e0.StepLeft, e0.StepClock, e1.StepLeft, e1.StepClock)
	}
	if d := e0.TTFT - e1.TTFT; math.Abs(d-0.040) > 1e-9 || math.Abs(e0.Wait-blind.rows[0].Estimate.Wait-0.040) > 1e-9 {
		t.Fatalf("TTFT e0 %v, e1 %v: want e0 0.04 s later, in its wait", e0.TTFT, e1.TTFT)
	}
	if r.id() != "e1" {
		t.Fatalf("chose %s, want e1, whose step is over", r.id())
	}
	// Explain (no commit) leaves no average behind; committed decisions do.
	if r := decide(tb, req("c", nil), at, false); r.rows[0].Estimate.StepLeft != 0 {
		t.Fatalf("an uncommitted decision moved the average: %v", r.rows[0].Estimate.StepLeft)
	}
	for i := range 20 {
		only := map[string]StepClock{"e0": {Since: 0.020, Step: 0.050}}
		r := routeReq(tb, Request{Model: "m", ID: "d" + strconv.Itoa(i), PromptTokens: 300, Exclude: []string{"e1"}, Steps: clocks(only)}, at)
		if r.id() != "e0" {
			t.Fatalf("chose %q", r.id())
		}
	}
	r = decide(tb, req("e", nil), at, false)
	if e0 := r.rows[0].Estimate; e0.StepClock || math.Abs(e0.StepLeft-0.030) > 1e-9 {
		t.Fatalf("e0 without a clock: step left %v (clocked %v), want its average 0.03", e0.StepLeft, e0.StepClock)
	}
	// Clocks that cannot be real are not clocks.
	for _, c := range []StepClock{{Since: math.NaN(), Step: 0.05}, {Since: 0.01, Step: math.Inf(1)}, {Since: -1, Step: 0.05}, {Since: 0.01, Step: 1e9}} {
		r := decide(tb, req("f", map[string]StepClock{"e0": c}), at, false)
		if e0 := r.rows[0].Estimate; e0.StepClock || math.Abs(e0.StepLeft-0.030) > 1e-9 {
			t.Errorf("clock %+v: step left %v (clocked %v), want it ignored", c, e0.StepLeft, e0.StepClock)
		}
	}
}

// The completion of a request decided with a step clock is learned without
// the step's remainder: the fixed cost is the worker's own, not it plus an
// average wait.
func TestStepClockLearnedWithout(t *testing.T) {
	tb := fleet(1)
	const base, rate, step = 0.03, 2700.0, 0.056
	at := t0.Add(time.Second)
	for i := range 200 {
		id := "r" + strconv.Itoa(i)
		since := step * float64((i*37)%100) / 100
		c := StepClock{Since: since, Step: step}
		routeReq(tb, Request{Model: "m", ID: id, PromptTokens: 300, Steps: clocks(map[string]StepClock{"e0": c})}, at)
		ttft := step - since + base + 300/rate
		tb.Complete(Completion{RequestID: id, EndpointID: "e0", At: at, Success: true, TTFTSeconds: ttft, PromptTokens: 300})
		at = at.Add(10 * time.Second)
	}
	v := tb.Endpoints("")[0]
	if v.Learned < 190 || math.Abs(v.Base-base) > 0.004 {
		t.Fatalf("learned %d, base %.4f s; want the worker's own %.3f s", v.Learned, v.Base, base)
	}
}
