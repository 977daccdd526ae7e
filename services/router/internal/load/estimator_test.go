package load

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/services/router/internal/endpoints"
	"github.com/switchyard-dev/switchyard/services/router/internal/predict"
	"github.com/switchyard-dev/switchyard/services/router/internal/scrape"
)

// ttftAt is the TTFT of a worker with base 20 ms prefilling at rate.
func ttftAt(rate float64, tokens int64) float64 { return 0.02 + float64(tokens)/rate }

// serve routes a request of prompt tokens (cached nowhere) at `at`, away
// from exclude, and completes it with the TTFT the chosen endpoint's rate
// gives; it returns the chosen endpoint.
func serve(t *testing.T, tb *Table, id string, prompt int64, at time.Time, exclude []string, rate map[string]float64) string {
	t.Helper()
	r := routeReq(tb, Request{Model: "m", ID: id, PromptTokens: prompt, Exclude: exclude}, at)
	ep := r.id()
	if ep == "" {
		t.Fatalf("%s: nothing chosen", id)
	}
	tb.Complete(Completion{RequestID: id, EndpointID: ep, At: at, Success: true, TTFTSeconds: ttftAt(rate[ep], prompt), PromptTokens: prompt})
	return ep
}

func view(tb *Table, id string) EndpointView {
	for _, v := range tb.Endpoints("") {
		if v.ID == id {
			return v
		}
	}
	return EndpointView{}
}

// TestInFlightAcrossAFailedScrapeIsNotLearned: a request in flight while
// its endpoint failed a scrape (a frozen worker) measured the outage; the
// next one, decided after, is learned from.
func TestInFlightAcrossAFailedScrapeIsNotLearned(t *testing.T) {
	tb := fleet(1)
	at := time.Now() // Observe stamps failures with the local clock
	routeReq(tb, Request{Model: "m", ID: "frozen", PromptTokens: 1000}, at)
	tb.Observe("e0", time.Now(), scrape.Result{Err: errors.New("context deadline exceeded")})
	tb.Observe("e0", time.Now(), ok(0, 1))
	tb.Complete(Completion{RequestID: "frozen", EndpointID: "e0", At: time.Now(), Success: true, TTFTSeconds: 20, PromptTokens: 1000})
	if v := view(tb, "e0"); v.Learned != 0 || v.Rejected != 1 || v.PrefillRate != predict.DefaultPrior().PrefillRate {
		t.Fatalf("learned from a request in flight across a failed scrape: %+v", v)
	}
	if st := tb.AppendStats(nil); st[0].NotLearned != 1 {
		t.Fatalf("stats: %+v, want one completion not learned", st[0])
	}
	later := time.Now().Add(2 * ReorderWindow) // its order with "frozen" is known
	routeReq(tb, Request{Model: "m", ID: "after", PromptTokens: 1000}, later)
	tb.Complete(Completion{RequestID: "after", EndpointID: "e0", At: later, Success: true, TTFTSeconds: 0.3, PromptTokens: 1000})
	if v := view(tb, "e0"); v.Learned != 1 {
		t.Fatalf("a request decided after the recovery should be learned: %+v", v)
	}
}

// TestDivergedEndpointReturnsToTheFleet replays the failure this guards
// against: one of two identical endpoints learned a wildly slow rate (its
// first completions were a stall), so it gets nothing and learns nothing.
// Its prediction is bounded by the fleet's at once, decays to the fleet's
// without samples, it is probed with a new prefix, and its own estimate
// recovers from the traffic that follows.
func TestDivergedEndpointReturnsToTheFleet(t *testing.T) {
	tb := NewTable(Config{Prior: predict.DefaultPrior(), RecomputeWeight: 1, FleetHalfLife: time.Minute, ProbeInterval: 30 * time.Second})
	tb.SetEndpoints([]endpoints.Spec{spec("e0", "m"), spec("e1", "m")})
	for _, id := range []string{"e0", "e1"} {
		tb.Observe(id, t0, ok(0, 0))
	}
	const real = 20000.0
	at := t0.Add(time.Second)
	n := 0
	next := func() string { n++; return "r" + strconv.Itoa(n) }
	// e1's first completions: a frozen worker's.
	for i := range 20 {
		serve(t, tb, next(), int64(1000+100*i), at, []string{"e0"}, map[string]float64{"e1": 150})
		at = at.Add(time.Second)
	}
	// Then e0 serves normally.
	for i := range 200 {
		serve(t, tb, next(), int64(500+(i*733)%7000), at, []string{"e1"}, map[string]float64{"e0": real})
		at = at.Add(100 * time.Millisecond)
	}
	if own := view(tb, "e1").PrefillRate; own > 1000 {
		t.Fatalf("setup: e1 should have learned the stall, own rate %.0f", own)
	}
	dry := decide(tb, Request{Model: "m", PromptTokens: 3000, Cached: cachedOn(map[string]int64{"e0": 100})}, at, false)
	if r := dry.rows[1].Estimate.PrefillRate; r < real/predict.FleetBound*0.9 {
		t.Fatalf("e1 predicted at %.0f tok/s, below the fleet bound of %.0f/%v", r, real, predict.FleetBound)
	}
	if dry.id() != "e0" {
		t.Fatalf("fresh divergence: %s chosen, want e0", dry.id())
	}
	// Ten minutes without a sample: e1 is predicted like its fleet.
	at = at.Add(10 * time.Minute)
	dry = decide(tb, Request{Model: "m", PromptTokens: 3000, Cached: cachedOn(map[string]int64{"e0": 100})}, at, false)
	if r := dry.rows[1].Estimate.PrefillRate; r < real*0.8 || dry.rows[1].Estimate.Probe {
		t.Fatalf("e1 after ten idle minutes: %+v, want about %.0f tok/s and no probe (a prompt cached somewhere)", dry.rows[1].Estimate, real)
	}
	// A prompt cached nowhere probes it.
	probe := decide(tb, Request{Model: "m", ID: next(), PromptTokens: 3000}, at, true)
	if probe.id() != "e1" || !probe.choice().Estimate.Probe || probe.choice().Estimate.Score != 0 {
		t.Fatalf("want a probe of e1, got %s: %s", probe.id(), probe.reason())
	}
	if r := probe.reason(); r[:6] != "probe:" {
		t.Fatalf("reason %q should say it is a probe", r)
	}
	if st := tb.AppendStats(nil); st[1].Probes != 1 {
		t.Fatalf("stats: %+v, want one probe", st[1])
	}
	// One probe at a time per endpoint (e0, idle as long, may be next).
	if again := decide(tb, Request{Model: "m", ID: "x", PromptTokens: 3000}, at, false); again.rows[1].Estimate.Probe {
		t.Fatal("e1 probed twice while the first probe is in flight")
	}
	tb.Complete(Completion{RequestID: "r" + strconv.Itoa(n), EndpointID: "e1", At: at, Success: true, TTFTSeconds: ttftAt(real, 3000), PromptTokens: 3000})
	// Normal traffic over both, two new prompts at a time: e1's own
	// estimate recovers, and each pair is split.
	count := map[string]int{}
	for i := range 150 {
		var ids, eps [2]string
		var prompts [2]int64
		for j := range 2 {
			ids[j], prompts[j] = next(), int64(500+((2*i+j)*733)%7000)
			r := routeReq(tb, Request{Model: "m", ID: ids[j], PromptTokens: prompts[j]}, at)
			eps[j] = r.id()
			count[eps[j]]++
		}
		for j := range 2 {
			// The second of a pair on one worker waits for the first.
			ttft := ttftAt(real, prompts[j])
			if j == 1 && eps[0] == eps[1] {
				ttft += ttftAt(real, prompts[0])
			}
			tb.Complete(Completion{RequestID: ids[j], EndpointID: eps[j], At: at, Success: true, TTFTSeconds: ttft, PromptTokens: prompts[j]})
		}
		at = at.Add(2 * time.Second)
	}
	if own := view(tb, "e1").PrefillRate; own < real*0.8 || own > real*1.25 {
		t.Fatalf("e1's own rate %.0f tok/s after normal traffic, want about %.0f (%+v)", own, real, view(tb, "e1"))
	}
	if count["e1"] < 75 || count["e0"] < 75 { // a quarter each at least
		t.Fatalf("pairs of new prompts over two identical endpoints: %v", count)
	}
}

// TestNoProbeWhenBusyOrCached: probes take only new prompts, only to idle
// healthy local endpoints, never more often than the interval.
func TestNoProbeWhenBusyOrCached(t *testing.T) {
	tb := NewTable(Config{Prior: predict.DefaultPrior(), RecomputeWeight: 1, ProbeInterval: 30 * time.Second})
	tb.SetEndpoints([]endpoints.Spec{spec("e0", "m"), spec("e1", "m")})
	tb.Observe("e0", t0, ok(0, 0))
	tb.Observe("e1", t0, ok(3, 1)) // requests waiting: not idle
	at := t0.Add(time.Second)
	decide(tb, Request{Model: "m", PromptTokens: 100}, at, false) // both first considered now
	at = at.Add(time.Minute)
	if r := decide(tb, Request{Model: "m", PromptTokens: 100, Cached: cachedOn(map[string]int64{"e1": 64})}, at, false); r.rows[0].Estimate.Probe || r.rows[1].Estimate.Probe {
		t.Fatalf("probed with a cached prompt: %s", r.reason())
	}
	r := decide(tb, Request{Model: "m", ID: "p", PromptTokens: 100}, at, true)
	if !r.rows[0].Estimate.Probe || r.rows[1].Estimate.Probe || r.id() != "e0" {
		t.Fatalf("want e0 (idle) probed, not e1 (queue): %s", r.reason())
	}
	tb.Complete(Completion{RequestID: "p", EndpointID: "e0", At: at})
	if r := decide(tb, Request{Model: "m", PromptTokens: 100}, at.Add(10*time.Second), false); r.rows[0].Estimate.Probe {
		t.Fatal("probed again within the interval")
	}
	off := NewTable(Config{Prior: predict.DefaultPrior(), ProbeInterval: -1})
	off.SetEndpoints([]endpoints.Spec{spec("e0", "m")})
	off.Observe("e0", t0, ok(0, 0))
	decide(off, Request{Model: "m", PromptTokens: 100}, t0, false)
	if r := decide(off, Request{Model: "m", PromptTokens: 100}, t0.Add(time.Hour), false); r.rows[0].Estimate.Probe {
		t.Fatal("probed with probes off")
	}
}

// TestUnexplainedCompletionsAreNotLearned: a completion whose TTFT
// depended on requests its features could not see teaches nothing (two
// decided together, whose arrival order is unknown; a small request that
// shared its last prefill step with a cold prompt decided after it), while
// one whose neighbours changed nothing is learned.
func TestUnexplainedCompletionsAreNotLearned(t *testing.T) {
	prior := predict.DefaultPrior()
	prefill := func(tokens int64) float64 { return prior.Base + float64(tokens)/prior.PrefillRate }
	cases := []struct {
		name string
		// second is decided gap after first, whose TTFT is firstTTFT.
		gap                 time.Duration
		firstTokens, second int64
		firstTTFT           float64
		learned             int // of first's completion
	}{
		{"decided together", time.Millisecond, 300, 300, prefill(300), 0},
		{"shared its last step with a cold prompt", 2 * ReorderWindow, 300, 8000, prefill(8300), 0},
		{"a small request after it changed nothing", 2 * ReorderWindow, 300, 300, prefill(300), 1},
		{"decided after its first token", 5 * time.Second, 300, 8000, prefill(8300), 1},
		{"slower than the later prefill explains", 2 * ReorderWindow, 300, 300, 10 * prefill(8000), 1},
		{"a cold prompt whose last step the next one filled", 2 * ReorderWindow, 8000, 8000, prefill(8000) + 1, 1},
	}
	// Behind a queue, a later cold prompt excuses nothing: every TTFT
	// there overlaps later decisions.
	t.Run("behind a queue", func(t *testing.T) {
		tb := fleet(1)
		routeReq(tb, Request{Model: "m", ID: "ahead", PromptTokens: 8000}, t0)
		routeReq(tb, Request{Model: "m", ID: "first", PromptTokens: 300}, t0.Add(2*ReorderWindow))
		routeReq(tb, Request{Model: "m", ID: "second", PromptTokens: 8000}, t0.Add(4*ReorderWindow))
		tb.Complete(Completion{RequestID: "first", EndpointID: "e0", At: t0.Add(10 * time.Second), Success: true, TTFTSeconds: prefill(16300), PromptTokens: 300})
		if v := view(tb, "e0"); v.Learned != 1 {
			t.Fatalf("learned %d, rejected %d; want the sample learned", v.Learned, v.Rejected)
		}
	})
	// A run of unexplained completions is learned: an endpoint must not
	// go blind.
	t.Run("a run is learned", func(t *testing.T) {
		tb := fleet(1)
		n := predict.RegimeRun + 1
		for i := range n {
			routeReq(tb, Request{Model: "m", ID: strconv.Itoa(i), PromptTokens: 300}, t0.Add(time.Duration(i)*time.Millisecond))
		}
		for i := range n {
			tb.Complete(Completion{RequestID: strconv.Itoa(i), EndpointID: "e0", At: t0.Add(time.Second), Success: true, TTFTSeconds: prefill(300), PromptTokens: 300})
		}
		if v := view(tb, "e0"); v.Learned != 1 || v.Rejected != n-1 {
			t.Fatalf("learned %d, rejected %d; want 1 and %d", v.Learned, v.Rejected, n-1)
		}
	})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tb := fleet(1)
			routeReq(tb, Request{Model: "m", ID: "first", PromptTokens: c.firstTokens}, t0)
			routeReq(tb, Request{Model: "m", ID: "second", PromptTokens: c.second}, t0.Add(c.gap))
			ttft := time.Duration(c.firstTTFT * float64(time.Second))
			tb.Complete(Completion{RequestID: "first", EndpointID: "e0", At: t0.Add(ttft + time.Second), Success: true, TTFTSeconds: c.firstTTFT, PromptTokens: c.firstTokens})
			if v := view(tb, "e0"); v.Learned != c.learned || v.Rejected != 1-c.learned {
				t.Fatalf("learned %d, rejected %d; want %d learned", v.Learned, v.Rejected, c.learned)
			}
		})
	}
}
