package load

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/services/router/internal/endpoints"
	"github.com/switchyard-dev/switchyard/services/router/internal/predict"
	"github.com/switchyard-dev/switchyard/services/router/internal/scrape"
)

func newTable() *Table { return NewTable(Config{Prior: predict.DefaultPrior(), RecomputeWeight: 1}) }

func route(tb *Table, model string, exclude []string, id string, at time.Time) (Choice, Outcome) {
	return tb.Route(Request{Model: model, ID: id, Exclude: exclude}, at)
}

func complete(tb *Table, id, ep string, at time.Time) bool {
	return tb.Complete(Completion{RequestID: id, EndpointID: ep, At: at})
}

// counts keeps the request counts of a Load, the part the accounting
// tests pin down.
func counts(l Load) Load {
	return Load{InFlight: l.InFlight, Fresh: l.Fresh, Waiting: l.Waiting, Running: l.Running, CompletedSinceScrape: l.CompletedSinceScrape}
}

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func spec(id string, models ...string) endpoints.Spec {
	return endpoints.Spec{ID: id, URL: "http://" + id, Kind: endpoints.KindLocal, Models: models}
}

func ok(waiting, running int64) scrape.Result {
	return scrape.Result{Metrics: scrape.Metrics{Waiting: waiting, Running: running}}
}

func TestLoadAccounting(t *testing.T) {
	type step struct {
		op       string // scrape, route, peer, complete, expire
		at       time.Duration
		w, r     int64
		req, ep  string
		cutoff   time.Duration
		want     Load // load of endpoint "a" after the step
		released bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "decisions after a scrape add to the queue", steps: []step{
			{op: "scrape", at: 0, w: 1, r: 2, want: Load{Waiting: 1, Running: 2}},
			{op: "route", at: 1 * time.Second, req: "x", want: Load{InFlight: 1, Fresh: 1, Waiting: 1, Running: 2}},
			{op: "peer", at: 2 * time.Second, req: "y", ep: "a", want: Load{InFlight: 2, Fresh: 2, Waiting: 1, Running: 2}},
		}},
		{name: "the next scrape absorbs older decisions", steps: []step{
			{op: "scrape", at: 0, w: 0, r: 0},
			{op: "route", at: 1 * time.Second, req: "x", want: Load{InFlight: 1, Fresh: 1}},
			{op: "scrape", at: 2 * time.Second, w: 0, r: 1, want: Load{InFlight: 1, Running: 1}},
			{op: "route", at: 3 * time.Second, req: "y", want: Load{InFlight: 2, Fresh: 1, Running: 1}},
		}},
		{name: "completing an absorbed request reduces the scraped queue", steps: []step{
			{op: "scrape", at: 0},
			{op: "route", at: 1 * time.Second, req: "x"},
			{op: "scrape", at: 2 * time.Second, w: 0, r: 1, want: Load{InFlight: 1, Running: 1}},
			{op: "complete", req: "x", ep: "a", released: true, want: Load{Running: 1, CompletedSinceScrape: 1}},
			{op: "scrape", at: 3 * time.Second, w: 0, r: 0, want: Load{}},
		}},
		{name: "completing a fresh request removes it", steps: []step{
			{op: "scrape", at: 0, w: 2, want: Load{Waiting: 2}},
			{op: "route", at: 1 * time.Second, req: "x"},
			{op: "complete", req: "x", ep: "", released: true, want: Load{Waiting: 2}},
			{op: "complete", req: "x", ep: "a", released: false, want: Load{Waiting: 2}},
		}},
		{name: "duplicate decisions count once", steps: []step{
			{op: "scrape", at: 0},
			{op: "route", at: 1 * time.Second, req: "x"},
			{op: "peer", at: 2 * time.Second, req: "x", ep: "a", want: Load{InFlight: 1, Fresh: 1}},
		}},
		{name: "expiry drops entries older than the cutoff", steps: []step{
			{op: "scrape", at: 0},
			{op: "route", at: 1 * time.Second, req: "old"},
			{op: "route", at: 5 * time.Second, req: "new"},
			{op: "expire", cutoff: 2 * time.Second, want: Load{InFlight: 1, Fresh: 1}},
		}},
		{name: "failed scrape keeps the last numbers", steps: []step{
			{op: "scrape", at: 0, w: 3, r: 1, want: Load{Waiting: 3, Running: 1}},
			{op: "fail", at: time.Second, want: Load{Waiting: 3, Running: 1}},
		}},
		{name: "a completion that overtook the peer decision cancels it", steps: []step{
			{op: "scrape", at: 0},
			{op: "complete", at: time.Second, req: "x", ep: "a", released: false, want: Load{}},
			{op: "peer", at: 2 * time.Second, req: "x", ep: "a", want: Load{}},
			{op: "peer", at: 3 * time.Second, req: "x", ep: "a", want: Load{InFlight: 1, Fresh: 1}}, // tombstone used up
			{op: "complete", at: 4 * time.Second, req: "y", ep: "", released: false, want: Load{InFlight: 1, Fresh: 1}},
			{op: "peer", at: 5 * time.Second, req: "y", ep: "a", want: Load{InFlight: 1, Fresh: 1}},
		}},
		{name: "tombstones expire with the ttl", steps: []step{
			{op: "scrape", at: 0},
			{op: "complete", at: time.Second, req: "x", ep: "a", released: false},
			{op: "expire", cutoff: 2 * time.Second},
			{op: "peer", at: 3 * time.Second, req: "x", ep: "a", want: Load{InFlight: 1, Fresh: 1}},
		}},
		{name: "peer decision for unknown endpoint is ignored", steps: []step{
			{op: "scrape", at: 0},
			{op: "peer", at: time.Second, req: "x", ep: "zz", want: Load{}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := newTable()
			tb.SetEndpoints([]endpoints.Spec{spec("a", "m")})
			for i, s := range tt.steps {
				switch s.op {
				case "scrape":
					tb.Observe("a", t0.Add(s.at), ok(s.w, s.r))
				case "fail":
					tb.Observe("a", t0.Add(s.at), scrape.Result{Err: errors.New("boom")})
				case "route":
					c, out := route(tb, "m", nil, s.req, t0.Add(s.at))
					if out != Routed || c.EndpointID != "a" {
						t.Fatalf("step %d: route = %v %+v", i, out, c)
					}
					continue // Route reports the load before the decision
				case "peer":
					tb.AddInFlight(s.req, s.ep, "m", t0.Add(s.at), 0, 0)
				case "complete":
					if got := complete(tb, s.req, s.ep, t0.Add(s.at)); got != s.released {
						t.Fatalf("step %d: Complete = %v, want %v", i, got, s.released)
					}
				case "expire":
					tb.Expire(t0.Add(s.cutoff))
				}
				if got := counts(tb.Endpoints("")[0].Load); got != s.want {
					t.Fatalf("step %d (%s): load %+v, want %+v", i, s.op, got, s.want)
				}
			}
		})
	}
}

func TestRoutePicksLeastLoadedAndSpreadsTies(t *testing.T) {
	tests := []struct {
		name    string
		loads   map[string][2]int64 // waiting, running
		failed  []string
		exclude []string
		model   string
		want    []string // endpoints chosen by consecutive Routes
		wantOut Outcome
	}{
		{name: "least loaded wins", loads: map[string][2]int64{"a": {2, 2}, "b": {0, 1}, "c": {1, 1}},
			model: "m", want: []string{"b"}},
		{name: "a burst spreads over idle endpoints", loads: map[string][2]int64{"a": {0, 0}, "b": {0, 0}, "c": {0, 0}},
			model: "m", want: []string{"a", "b", "c", "a", "b", "c"}},
		{name: "in flight fills the gap first", loads: map[string][2]int64{"a": {3, 0}, "b": {0, 0}, "c": {1, 0}},
			model: "m", want: []string{"b", "b", "c", "b"}},
		{name: "unhealthy skipped", loads: map[string][2]int64{"a": {0, 0}, "b": {9, 9}, "c": {0, 0}},
			failed: []string{"a", "c"}, model: "m", want: []string{"b"}},
		{name: "excluded skipped", loads: map[string][2]int64{"a": {0, 0}, "b": {9, 9}, "c": {0, 0}},
			exclude: []string{"a", "c"}, model: "m", want: []string{"b", "b"}},
		{name: "all excluded", loads: map[string][2]int64{"a": {0, 0}, "b": {0, 0}, "c": {0, 0}},
			exclude: []string{"a", "b", "c"}, model: "m", wantOut: NoHealthyEndpoint},
		{name: "all unhealthy", loads: map[string][2]int64{"a": {0, 0}, "b": {0, 0}, "c": {0, 0}},
			failed: []string{"a", "b", "c"}, model: "m", wantOut: NoHealthyEndpoint},
		{name: "unknown model", loads: map[string][2]int64{"a": {0, 0}, "b": {0, 0}, "c": {0, 0}},
			model: "nope", wantOut: ModelNotFound},
		{name: "other model only on c", loads: map[string][2]int64{"a": {0, 0}, "b": {0, 0}, "c": {5, 5}},
			model: "m2", want: []string{"c", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := newTable()
			tb.SetEndpoints([]endpoints.Spec{spec("a", "m"), spec("b", "m"), spec("c", "m", "m2")})
			for id, l := range tt.loads {
				tb.Observe(id, t0, ok(l[0], l[1]))
			}
			for _, id := range tt.failed {
				tb.Observe(id, t0, scrape.Result{Err: errors.New("down")})
			}
			if tt.wantOut != Routed {
				if _, out := route(tb, tt.model, tt.exclude, "r", t0.Add(time.Second)); out != tt.wantOut {
					t.Fatalf("outcome %v, want %v", out, tt.wantOut)
				}
				return
			}
			var got []string
			for i := range tt.want {
				c, out := route(tb, tt.model, tt.exclude, "r"+strconv.Itoa(i), t0.Add(time.Second))
				if out != Routed {
					t.Fatalf("route %d: %v", i, out)
				}
				got = append(got, c.EndpointID)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("chose %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPickIsSideEffectFreeAndAgreesWithRoute(t *testing.T) {
	tb := newTable()
	tb.SetEndpoints([]endpoints.Spec{spec("a", "m"), spec("b", "m")})
	tb.Observe("a", t0, ok(0, 0))
	tb.Observe("b", t0, ok(0, 0))
	for i := 0; i < 4; i++ {
		p1, _ := tb.Pick(Request{Model: "m"}, t0.Add(time.Second))
		p2, _ := tb.Pick(Request{Model: "m"}, t0.Add(time.Second))
		c, _ := route(tb, "m", nil, strconv.Itoa(i), t0.Add(time.Second))
		if p1.EndpointID != p2.EndpointID || p1.EndpointID != c.EndpointID {
			t.Fatalf("pick %s, %s then route %s", p1.EndpointID, p2.EndpointID, c.EndpointID)
		}
	}
}

func TestExplainRows(t *testing.T) {
	tb := newTable()
	tb.SetEndpoints([]endpoints.Spec{spec("a", "m"), spec("b", "m"), spec("c", "m"), spec("d", "other"), {ID: "e", URL: "http://e"}})
	tb.Observe("a", t0, ok(1, 1))
	tb.Observe("b", t0, ok(0, 1))
	tb.Observe("c", t0, scrape.Result{Err: errors.New("dial tcp: connection refused")})
	tb.Observe("d", t0, ok(0, 0))
	rows, c, out := tb.Explain(Request{Model: "m", Exclude: []string{"b"}}, t0.Add(time.Second))
	if out != Routed || c.EndpointID != "a" {
		t.Fatalf("explain chose %v %q, want a", out, c.EndpointID)
	}
	want := []struct {
		id       string
		eligible bool
		reason   string
		chosen   bool
	}{
		{"a", true, "", true},
		{"b", false, "excluded by request", false},
		{"c", false, "unhealthy: dial tcp: connection refused", false},
		{"d", false, `does not serve model "m"`, false},
		{"e", false, "models not known yet", false},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for i, w := range want {
		r := rows[i]
		if r.Endpoint.ID != w.id || r.Eligible != w.eligible || !strings.HasPrefix(r.ExcludedReason, w.reason) || r.Chosen != w.chosen {
			t.Errorf("row %d = {%s eligible=%v reason=%q chosen=%v}, want %+v",
				i, r.Endpoint.ID, r.Eligible, r.ExcludedReason, r.Chosen, w)
		}
		// Eligible rows carry the prediction they were ranked by.
		if w.eligible != (r.Score > 0) || r.Score != r.Estimate.Score || (w.chosen && r.Score != c.Estimate.Score) {
			t.Errorf("row %d: score %v, estimate %+v, choice %+v", i, r.Score, r.Estimate, c.Estimate)
		}
	}
	if got := tb.Endpoints("")[0].Load.InFlight; got != 0 {
		t.Fatalf("explain changed in-flight: %d", got)
	}
}

func TestDiscoveredModelsAndFirstRound(t *testing.T) {
	tb := newTable()
	tb.SetEndpoints([]endpoints.Spec{{ID: "a", URL: "http://a"}, spec("b", "fixed")})
	select {
	case <-tb.FirstRound():
		t.Fatal("first round closed before any scrape")
	default:
	}
	if _, out := route(tb, "x", nil, "r", t0); out != ModelNotFound {
		t.Fatalf("before discovery: %v", out)
	}
	tb.Observe("a", t0, scrape.Result{Models: []string{"x"}})
	tb.Observe("b", t0, scrape.Result{Models: []string{"ignored"}}) // configured models win
	<-tb.FirstRound()
	if c, out := route(tb, "x", nil, "r", t0); out != Routed || c.EndpointID != "a" {
		t.Fatalf("after discovery: %v %q", out, c.EndpointID)
	}
	if _, out := route(tb, "ignored", nil, "r", t0); out != ModelNotFound {
		t.Fatalf("configured models overridden: %v", out)
	}
	// Unhealthy endpoints keep their models: the answer is "no healthy
	// endpoint", not "model not found".
	tb.Observe("a", t0, scrape.Result{Err: errors.New("down")})
	if _, out := route(tb, "x", nil, "r2", t0); out != NoHealthyEndpoint {
		t.Fatalf("after failure: %v", out)
	}
	// Removing an endpoint drops it and its entries.
	tb.SetEndpoints([]endpoints.Spec{spec("b", "fixed")})
	if v := tb.Endpoints(""); len(v) != 1 || v[0].ID != "b" {
		t.Fatalf("endpoints after removal: %+v", v)
	}
}

func TestReason(t *testing.T) {
	c := Choice{
		EndpointID: "a", Load: Load{Waiting: 1, Running: 2, Fresh: 3, CompletedSinceScrape: 1},
		Estimate:     Estimate{TTFT: 0.5, Wait: 0.2, Prefill: 0.3, TokensAhead: 1500, PrefillRate: 3000},
		PromptTokens: 8192, CachedTokens: 7292, Candidates: 4,
		RunnerUp: Contender{ID: "b", TTFT: 3.25, Score: 5.68, CachedTokens: 0, Ahead: 1},
	}
	want := "predicted TTFT 0.500s = wait 0.200s (ahead: 5 requests, 1500 prefill tokens) + prefill 0.300s " +
		"(900 uncached of 8192 prompt tokens, 7292 cached, at 3000 tok/s); next best b 3.250s (score 5.680s, 0 cached, 1 ahead); 4 eligible"
	if got := c.Reason(); got != want {
		t.Fatalf("reason %q\nwant   %q", got, want)
	}
	c.PromptTokens, c.CachedTokens, c.RunnerUp = 0, 0, Contender{}
	c.Estimate.Recompute, c.Estimate.Score = 0.25, 0.75
	want = "predicted TTFT 0.500s = wait 0.200s (ahead: 5 requests, 1500 prefill tokens) + prefill 0.300s " +
		"(prompt unknown: typical uncached size, at 3000 tok/s); score 0.750s with recompute 0.250s; 4 eligible"
	if got := c.Reason(); got != want {
		t.Fatalf("reason %q\nwant   %q", got, want)
	}
	c.Estimate.Pressure, c.Estimate.Score = 0.125, 0.875
	want = "predicted TTFT 0.500s = wait 0.200s (ahead: 5 requests, 1500 prefill tokens) + prefill 0.300s " +
		"(prompt unknown: typical uncached size, at 3000 tok/s); score 0.875s with recompute 0.250s + cache pressure 0.125s; 4 eligible"
	if got := c.Reason(); got != want {
		t.Fatalf("reason %q\nwant   %q", got, want)
	}
	c.Estimate.Recompute, c.Estimate.Score = 0, 0.625
	if got, want := c.Reason(), "score 0.625s with cache pressure 0.125s; 4 eligible"; !strings.HasSuffix(got, want) {
		t.Fatalf("reason %q\nwant suffix %q", got, want)
	}
}

// fleet builds a table of n idle endpoints e0..e(n-1) serving "m".
func fleet(n int) *Table {
	tb := newTable()
	var specs []endpoints.Spec
	for i := range n {
		specs = append(specs, spec("e"+strconv.Itoa(i), "m"))
	}
	tb.SetEndpoints(specs)
	for _, s := range specs {
		tb.Observe(s.ID, t0, ok(0, 0))
	}
	return tb
}

func cachedOn(m map[string]int64) func(string) int64 {
	return func(id string) int64 { return m[id] }
}

func TestCacheAndQueueTradeOff(t *testing.T) {
	const prompt = 8192
	tests := []struct {
		name    string
		loads   map[string][2]int64 // waiting, running
		cached  map[string]int64
		want    string
		comment string
	}{
		{name: "the holder of a long prefix wins", cached: map[string]int64{"e1": 8000}, want: "e1"},
		{name: "longest prefix wins", cached: map[string]int64{"e0": 2048, "e1": 4096, "e2": 1024}, want: "e1"},
		{name: "a busy holder still wins when its queue is cheaper than the prefill",
			loads: map[string][2]int64{"e1": {1, 6}}, cached: map[string]int64{"e1": 8000}, want: "e1"},
		{name: "a saturated holder loses to an idle worker",
			loads: map[string][2]int64{"e1": {20, 40}}, cached: map[string]int64{"e1": 8000}, want: "e0"},
		{name: "nothing cached: least work ahead",
			loads: map[string][2]int64{"e0": {2, 0}, "e1": {0, 3}, "e2": {1, 0}}, want: "e1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := fleet(3)
			for id, l := range tt.loads {
				tb.Observe(id, t0, ok(l[0], l[1]))
			}
			c, out := tb.Route(Request{Model: "m", ID: "r", PromptTokens: prompt, Cached: cachedOn(tt.cached)}, t0.Add(time.Second))
			if out != Routed || c.EndpointID != tt.want {
				t.Fatalf("routed to %s (%v), want %s: %s", c.EndpointID, out, tt.want, c.Reason())
			}
			if c.CachedTokens != tt.cached[tt.want] || c.PromptTokens != prompt {
				t.Fatalf("choice cached %d prompt %d", c.CachedTokens, c.PromptTokens)
			}
			if c.Estimate.TTFT <= 0 || c.RunnerUp.ID == "" || c.RunnerUp.Score < c.Estimate.Score {
				t.Fatalf("estimate %+v runner-up %+v", c.Estimate, c.RunnerUp)
			}
		})
	}
}

// TestBurstStaysWithThePrefix routes a burst sharing a new 8k-token prefix:
// once the first request is placed, the others are told (as speculative
// entries tell the router) that its worker holds the prefix, and they follow
// it until its queue costs more than recomputing the prefix elsewhere.
func TestBurstStaysWithThePrefix(t *testing.T) {
	for _, tt := range []struct {
		name     string
		weight   float64
		wantMost int // requests on the first worker, at least
	}{
		{name: "with the recompute charge", weight: 1, wantMost: 20},
		{name: "greedy on TTFT alone", weight: 0, wantMost: 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tb := NewTable(Config{Prior: predict.DefaultPrior(), RecomputeWeight: tt.weight})
			var specs []endpoints.Spec
			for i := range 3 {
				specs = append(specs, spec("e"+strconv.Itoa(i), "m"))
			}
			tb.SetEndpoints(specs)
			for _, s := range specs {
				tb.Observe(s.ID, t0, ok(0, 0))
			}
			holders := map[string]int64{}
			counts := map[string]int{}
			at := t0.Add(time.Second)
			for i := range 20 {
				c, _ := tb.Route(Request{Model: "m", ID: "b" + strconv.Itoa(i), PromptTokens: 8192 + 64, Cached: cachedOn(holders)}, at)
				holders[c.EndpointID] = 8192 // the speculative entry
				counts[c.EndpointID]++
			}
			first := 0
			for _, n := range counts {
				first = max(first, n)
			}
			if first < tt.wantMost || (tt.wantMost == 0 && first == 20) {
				t.Fatalf("burst of 20 placed %v", counts)
			}
		})
	}
}

// TestPendingPrefillWork follows the prefill work routed to one endpoint:
// it weighs on the next decisions until the requests are believed started.
func TestPendingPrefillWork(t *testing.T) {
	tb := fleet(2)
	at := t0.Add(time.Second)
	// Pin three 4k-token requests on e0 by excluding e1.
	for i := range 3 {
		if c, _ := tb.Route(Request{Model: "m", ID: "p" + strconv.Itoa(i), Exclude: []string{"e1"}, PromptTokens: 4096}, at); c.EndpointID != "e0" {
			t.Fatal("exclusion ignored")
		}
	}
	l := tb.Endpoints("")[0].Load
	if l.Pending != 3 || l.PendingTokens != 3*4096 {
		t.Fatalf("pending %d / %d tokens, want 3 / %d", l.Pending, l.PendingTokens, 3*4096)
	}
	// A request that e0 has cached still goes to e1: 12k tokens are ahead.
	c, _ := tb.Route(Request{Model: "m", ID: "x", PromptTokens: 4096, Cached: cachedOn(map[string]int64{"e0": 4000})}, at)
	if c.EndpointID != "e1" {
		t.Fatalf("routed to %s behind 12k pending tokens: %s", c.EndpointID, c.Reason())
	}
	// Long after their predicted first tokens, they no longer count.
	rows, _, _ := tb.Explain(Request{Model: "m", PromptTokens: 100}, at.Add(time.Minute))
	if p := rows[0].Estimate.TokensAhead; p != 0 {
		t.Fatalf("tokens ahead a minute later: %v", p)
	}
	// A scrape with an empty waiting queue starts pending requests it knew
	// of, oldest first.
	tb2 := fleet(1)
	for i := range 3 {
		tb2.Route(Request{Model: "m", ID: "q" + strconv.Itoa(i), PromptTokens: 2000}, at)
	}
	tb2.Observe("e0", at.Add(time.Millisecond), ok(1, 2))
	l = tb2.Endpoints("")[0].Load
	if l.Pending != 1 || l.PendingTokens != 2000 || l.Untracked != 0 {
		t.Fatalf("after scrape with 1 waiting: %+v", l)
	}
	tb2.Observe("e0", at.Add(2*time.Millisecond), ok(5, 2))
	if l = tb2.Endpoints("")[0].Load; l.Untracked != 4 {
		t.Fatalf("untracked waiting %d, want 4", l.Untracked)
	}
	// Completion releases the pending work at once.
	tb3 := fleet(1)
	tb3.Route(Request{Model: "m", ID: "z", PromptTokens: 3000}, at)
	tb3.Complete(Completion{RequestID: "z", EndpointID: "e0", At: at})
	if l = tb3.Endpoints("")[0].Load; l.Pending != 0 || l.PendingTokens != 0 || l.InFlight != 0 {
		t.Fatalf("after completion: %+v", l)
	}
}

// TestLearnsPrefillRateFromCompletions routes synthetic requests and
// completes them with TTFTs from a known worker; the endpoint's learned
// rate must converge to the worker's.
func TestLearnsPrefillRateFromCompletions(t *testing.T) {
	tb := fleet(1)
	const rate, base = 9000.0, 0.02
	var learned []float64
	tb.OnLearn(func(_ string, predicted, observed float64) { learned = append(learned, predicted-observed) })
	at := t0.Add(time.Second)
	for i := range 300 {
		id := "r" + strconv.Itoa(i)
		prompt := int64(500 + (i*977)%8000)
		cached := int64((i * 331) % int(prompt))
		c, _ := tb.Route(Request{Model: "m", ID: id, PromptTokens: prompt, Cached: cachedOn(map[string]int64{"e0": cached})}, at)
		// The worker really had a bit less cached than predicted.
		realCached := cached * 9 / 10
		ttft := base + float64(prompt-realCached)/rate
		tb.Complete(Completion{RequestID: id, EndpointID: c.EndpointID, At: at, Success: true, TTFTSeconds: ttft,
			PromptTokens: prompt, CachedTokens: realCached})
		at = at.Add(10 * time.Second) // each request alone on the worker
	}
	v := tb.Endpoints("")[0]
	if v.Learned != 300 || v.PrefillRate < rate*0.9 || v.PrefillRate > rate*1.1 {
		t.Fatalf("learned %d completions, rate %.0f tok/s; want 300 and about %.0f", v.Learned, v.PrefillRate, rate)
	}
	if last := learned[len(learned)-1]; last > 0.05 || last < -0.05 {
		t.Fatalf("last prediction error %.3fs", last)
	}
	// Failed requests and completions without a first token teach nothing.
	tb.Route(Request{Model: "m", ID: "fail", PromptTokens: 1000}, at)
	tb.Complete(Completion{RequestID: "fail", EndpointID: "e0", At: at, Success: false, TTFTSeconds: 99})
	if tb.Endpoints("")[0].Learned != 300 {
		t.Fatal("learned from a failure")
	}
}

// BenchmarkTableRoute measures the decision alone (no gRPC): 16 healthy
// endpoints, each Route followed by its completion so the table stays at a
// steady size.
func BenchmarkTableRoute(b *testing.B) {
	tb := newTable()
	var specs []endpoints.Spec
	for i := range 16 {
		specs = append(specs, spec("ep-"+strconv.Itoa(i), "m"))
	}
	tb.SetEndpoints(specs)
	for i, s := range specs {
		tb.Observe(s.ID, t0, ok(int64(i%3), int64(i%5)))
	}
	ids := make([]string, 1024)
	for i := range ids {
		ids[i] = "req-" + strconv.Itoa(i)
	}
	cached := map[string]int64{"ep-5": 4096}
	req := Request{Model: "m", Exclude: []string{"ep-3"}, PromptTokens: 8192, Cached: cachedOn(cached)}
	now := t0.Add(time.Second)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		req.ID = ids[i%len(ids)]
		c, out := tb.Route(req, now)
		if out != Routed {
			b.Fatal(out)
		}
		tb.Complete(Completion{RequestID: req.ID, EndpointID: c.EndpointID, At: now})
	}
}

// TestNewEndpointPredictedLikeItsFleet: an endpoint without completions of
// its own is predicted with what its fleet learned, not the static prior;
// otherwise a fast fleet would make every new worker look slow and leave
// it idle.
func TestNewEndpointPredictedLikeItsFleet(t *testing.T) {
	tb := fleet(2)
	at := t0.Add(time.Second)
	for i := range 60 {
		id := "r" + strconv.Itoa(i)
		prompt := int64(1000 + (i*613)%6000)
		tb.Route(Request{Model: "m", ID: id, Exclude: []string{"e1"}, PromptTokens: prompt}, at)
		tb.Complete(Completion{RequestID: id, EndpointID: "e0", At: at, Success: true, TTFTSeconds: 0.01 + float64(prompt)/30000, PromptTokens: prompt})
		at = at.Add(time.Minute)
	}
	rows, _, _ := tb.Explain(Request{Model: "m", PromptTokens: 3000}, at)
	if r := rows[1].Estimate.PrefillRate; r < 25000 {
		t.Fatalf("new endpoint predicted at %.0f tok/s; its fleet runs at 30000", r)
	}
	if v := tb.Endpoints("")[1]; v.Learned != 0 || v.PrefillRate != predict.DefaultPrior().PrefillRate {
		t.Fatalf("endpoint view should show its own (empty) history: %+v", v)
	}
}

// withCache is a scrape of an idle-queued worker (running requests, none
// waiting) whose KV cache of blocks×16 tokens is usage full.
func withCache(running int64, usage float64, blocks int) scrape.Result {
	return scrape.Result{Metrics: scrape.Metrics{Running: running, KVCacheUsage: usage, BlockSize: 16, NumGPUBlocks: blocks}}
}

// TestCachePressure: with the queues alike, a new context goes to the
// worker with room in its KV cache; a request whose prefix is cached stays
// with it however full it is; without the weight, or without a known cache
// size, occupancy plays no part.
func TestCachePressure(t *testing.T) {
	const blocks = 1781 // the simulator's default cache, ~28.5k tokens
	usage := map[string]float64{"e0": 0.9, "e1": 0.2, "e2": 0.6}
	tests := []struct {
		name   string
		weight float64
		blocks int
		prompt int64
		cached map[string]int64
		want   string
	}{
		{name: "a new conversation goes where there is room", weight: 1, blocks: blocks, prompt: 4500, want: "e1"},
		{name: "a cached history stays on a full worker", weight: 1, blocks: blocks, prompt: 6400, cached: map[string]int64{"e0": 6000}, want: "e0"},
		{name: "weight 0: the tie goes by rotation", weight: 0, blocks: blocks, prompt: 4500, want: "e0"},
		{name: "cache size unknown: the tie goes by rotation", weight: 1, blocks: 0, prompt: 4500, want: "e0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := NewTable(Config{Prior: predict.DefaultPrior(), RecomputeWeight: 1, PressureWeight: tt.weight})
			tb.SetEndpoints([]endpoints.Spec{spec("e0", "m"), spec("e1", "m"), spec("e2", "m")})
			for id, u := range usage {
				tb.Observe(id, t0, withCache(3, u, tt.blocks))
			}
			c, out := tb.Route(Request{Model: "m", ID: "r", PromptTokens: tt.prompt, Cached: cachedOn(tt.cached)}, t0.Add(time.Second))
			if out != Routed || c.EndpointID != tt.want {
				t.Fatalf("routed to %s (%v), want %s: %s", c.EndpointID, out, tt.want, c.Reason())
			}
			if (tt.weight > 0 && tt.blocks > 0) != (c.Estimate.Pressure > 0) || c.Estimate.Score != c.Estimate.TTFT+c.Estimate.Recompute+c.Estimate.Pressure {
				t.Fatalf("estimate %+v", c.Estimate)
			}
		})
	}
}

// TestDisplacedCountsRoutedSinceScrape: what was routed to a worker since
// its last scrape fills its cache as far as the charge is concerned, until
// the next scrape reports the occupancy itself.
func TestDisplacedCountsRoutedSinceScrape(t *testing.T) {
	tb := NewTable(Config{Prior: predict.DefaultPrior(), PressureWeight: 1})
	tb.SetEndpoints([]endpoints.Spec{spec("e0", "m")})
	tb.Observe("e0", t0, withCache(0, 0.5, 100)) // 1600 tokens, 800 live
	ep := tb.byID["e0"]
	if got := ep.displaced(400); got != 300 { // 400 × (800+400)/1600
		t.Fatalf("displaced(400) = %v, want 300", got)
	}
	tb.Route(Request{Model: "m", ID: "x", PromptTokens: 400}, t0.Add(time.Second))
	if got := ep.displaced(400); got != 400 { // 400 × min(1, (800+400+400)/1600)
		t.Fatalf("after routing 400 tokens: displaced(400) = %v, want 400", got)
	}
	if !tb.Complete(Completion{RequestID: "x", EndpointID: "e0", At: t0.Add(2 * time.Second)}) {
		t.Fatal("completion released nothing")
	}
	if got := ep.displaced(400); got != 300 {
		t.Fatalf("after its completion: displaced(400) = %v, want 300", got)
	}
	tb.Route(Request{Model: "m", ID: "y", PromptTokens: 800}, t0.Add(3*time.Second))
	tb.Observe("e0", t0.Add(4*time.Second), withCache(0, 0.25, 100)) // the scrape after y: 400 live
	if got := ep.displaced(400); got != 200 {                        // 400 × (400+400)/1600
		t.Fatalf("after the next scrape: displaced(400) = %v, want 200", got)
	}
	if got := ep.displaced(0); got != 0 {
		t.Fatalf("displaced(0) = %v", got)
	}
}
