package load

import (
	"math"
	"math/rand/v2"
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

// A gateway's step clock shifts the prediction by the share the table
// believes (clockPrior before any completion) of how much later or sooner
// than the endpoint's average its step under way ends; without a clock, a
// clock that cannot be real, the first clock of an endpoint (which only
// starts its average) or prefill ahead (which its tokens price), nothing.
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
	if c := blind.choice(); c.Estimate.StepShift != 0 || c.Estimate.StepClock {
		t.Fatalf("without clocks: shift %v, clocked %v", c.Estimate.StepShift, c.Estimate.StepClock)
	}
	steps := map[string]StepClock{"e0": {Since: 0.010, Step: 0.050}, "e1": {Since: 0.050, Step: 0.050}}
	r := decide(tb, req("b", steps), at, false)
	for _, row := range r.rows {
		if e := row.Estimate; !e.StepClock || e.StepShift != 0 {
			t.Fatalf("%s's first clock: shift %v (clocked %v), want none", row.EndpointID, e.StepShift, e.StepClock)
		}
	}
	// Committed decisions make each endpoint's average: 30 ms left.
	for i := range 40 {
		ep, other := "e"+strconv.Itoa(i%2), "e"+strconv.Itoa(1-i%2)
		c := map[string]StepClock{ep: {Since: 0.020, Step: 0.050}}
		id := "d" + strconv.Itoa(i)
		if r := routeReq(tb, Request{Model: "m", ID: id, PromptTokens: 300, Exclude: []string{other}, Steps: clocks(c)}, at); r.id() != ep {
			t.Fatalf("chose %q, want %s", r.id(), ep)
		}
		complete(tb, id, ep, at)
	}
	if r := decide(tb, req("c", nil), at, false); r.rows[0].Estimate.StepShift != 0 {
		t.Fatalf("without a clock, shifted %v", r.rows[0].Estimate.StepShift)
	}
	// e0 has 40 ms left, 10 more than its average; e1 nothing, 30 less:
	// e1 is predicted sooner by the believed share of the 40 ms between
	// them, and chosen.
	r = decide(tb, req("e", steps), at, false)
	e0, e1 := r.rows[0].Estimate, r.rows[1].Estimate
	w := tb.clock.weight()
	if math.Abs(e0.StepShift-w*0.010) > 1e-9 || math.Abs(e1.StepShift+w*0.030) > 1e-9 || w != clockPrior {
		t.Fatalf("shifts e0 %v, e1 %v at weight %v; want %v and %v", e0.StepShift, e1.StepShift, w, w*0.010, -w*0.030)
	}
	if d := e0.TTFT - e1.TTFT; math.Abs(d-w*0.040) > 1e-9 || math.Abs(e0.Wait-blind.rows[0].Estimate.Wait-w*0.010) > 1e-9 {
		t.Fatalf("TTFT e0 %v, e1 %v: want e0 %v s later, in its wait", e0.TTFT, e1.TTFT, w*0.040)
	}
	if r.id() != "e1" {
		t.Fatalf("chose %s, want e1, whose step is over", r.id())
	}
	// Behind a cold prompt's prefill, which the tokens ahead price, the
	// step under way is likely that prefill's: the clock is not counted
	// on top of it.
	routeReq(tb, Request{Model: "m", ID: "cold", PromptTokens: 8000, Exclude: []string{"e1"}}, at)
	r = decide(tb, req("g", steps), at, false)
	if e0 := r.rows[0].Estimate; e0.StepClock || e0.StepShift != 0 || e0.TokensAhead < 7000 {
		t.Fatalf("behind a cold prompt: shift %v (clocked %v), tokens ahead %v; want none", e0.StepShift, e0.StepClock, e0.TokensAhead)
	}
	tb.Complete(Completion{RequestID: "cold", EndpointID: "e0", At: at})
	// Clocks that cannot be real are not clocks.
	for _, c := range []StepClock{{Since: math.NaN(), Step: 0.05}, {Since: 0.01, Step: math.Inf(1)}, {Since: -1, Step: 0.05}, {Since: 0.01, Step: 1e9}} {
		r := decide(tb, req("f", map[string]StepClock{"e0": c}), at, false)
		if e0 := r.rows[0].Estimate; e0.StepClock || e0.StepShift != 0 {
			t.Errorf("clock %+v: shift %v (clocked %v), want it ignored", c, e0.StepShift, e0.StepClock)
		}
	}
}

// clockedRun routes n requests to one worker whose engine steps take
// step seconds, each at a random point of the step under way, with the
// gateway's clock of it off by up to jitter seconds either way, and
// completes each with the TTFT the worker really gives it. It returns the
// table and the mean absolute error of the predictions over the last
// half.
func clockedRun(t *testing.T, n int, jitter float64) (*Table, float64) {
	t.Helper()
	tb := fleet(1)
	const base, rate, step = 0.03, 2700.0, 0.056
	r := rand.New(rand.NewPCG(11, 12))
	at := t0.Add(time.Second)
	var errSum float64
	for i := range n {
		id := "r" + strconv.Itoa(i)
		since := step * r.Float64() // the truth
		seen := max(0, since+jitter*(2*r.Float64()-1))
		c := StepClock{Since: seen, Step: step}
		res := routeReq(tb, Request{Model: "m", ID: id, PromptTokens: 300, Steps: clocks(map[string]StepClock{"e0": c})}, at)
		ttft := step - since + base + 300/rate
		if i >= n/2 {
			errSum += math.Abs(res.choice().Estimate.TTFT - ttft)
		}
		tb.Complete(Completion{RequestID: id, EndpointID: "e0", At: at, Success: true, TTFTSeconds: ttft, PromptTokens: 300})
		at = at.Add(10 * time.Second)
	}
	return tb, errSum / float64(n-n/2)
}

// The table learns how far to trust the clocks: fully when the TTFTs
// follow them, hardly at all when the clock is mostly jitter.
func TestStepClockWeightLearned(t *testing.T) {
	exact, exactErr := clockedRun(t, 400, 0)
	if w := exact.clock.weight(); w < 0.95 {
		t.Errorf("clocks that are the truth are believed %.2f, want about 1", w)
	}
	// The fixed cost is the worker's own and the average wait for a step.
	v := exact.Endpoints("")[0]
	if v.Learned < 390 || math.Abs(v.Base-0.058) > 0.004 {
		t.Errorf("learned %d, base %.4f s; want 0.030 + 0.028 s", v.Learned, v.Base)
	}
	noisy, noisyErr := clockedRun(t, 400, 0.2)
	if w := noisy.clock.weight(); w > 0.3 {
		t.Errorf("clocks off by up to four steps are believed %.2f, want little", w)
	}
	// Believed fully, the noisy clock would be off by about its jitter
	// (100 ms on average); learned, it is off by no more than ignoring it
	// (14 ms: a quarter of a step).
	if noisyErr > 0.016 || exactErr > 0.002 {
		t.Errorf("mean absolute error %.4f s with noisy clocks, %.4f s with exact ones", noisyErr, exactErr)
	}
}

// Whatever a gateway sends as a clock, predictions stay finite and not
// below zero, and learning from them keeps them so.
func FuzzStepClock(f *testing.F) {
	f.Add(0.01, 0.05, 0.2)
	f.Add(math.NaN(), math.Inf(1), -1.0)
	f.Add(math.Copysign(0, -1), 59.9, 1e-9)
	f.Add(1e300, -1e300, 3600.0)
	f.Fuzz(func(t *testing.T, since, step, ttft float64) {
		tb := fleet(1)
		at := t0.Add(time.Second)
		for i := range 3 {
			id := "r" + strconv.Itoa(i)
			c := map[string]StepClock{"e0": {Since: since, Step: step}}
			r := routeReq(tb, Request{Model: "m", ID: id, PromptTokens: 300, Steps: clocks(c)}, at)
			e := r.choice().Estimate
			if math.IsNaN(e.TTFT) || math.IsInf(e.TTFT, 0) || e.TTFT < 0 || math.IsNaN(e.StepShift) || math.IsInf(e.StepShift, 0) {
				t.Fatalf("clock {%v, %v}: TTFT %v, shift %v", since, step, e.TTFT, e.StepShift)
			}
			tb.Complete(Completion{RequestID: id, EndpointID: "e0", At: at, Success: true, TTFTSeconds: ttft, PromptTokens: 300})
			at = at.Add(time.Second)
		}
		if w := tb.clock.weight(); !(w >= 0 && w <= 1) {
			t.Fatalf("weight %v", w)
		}
	})
}
