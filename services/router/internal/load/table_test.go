package load

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/services/router/internal/endpoints"
	"github.com/switchyard-dev/switchyard/services/router/internal/scrape"
)

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
			tb := NewTable()
			tb.SetEndpoints([]endpoints.Spec{spec("a", "m")})
			for i, s := range tt.steps {
				switch s.op {
				case "scrape":
					tb.Observe("a", t0.Add(s.at), ok(s.w, s.r))
				case "fail":
					tb.Observe("a", t0.Add(s.at), scrape.Result{Err: errors.New("boom")})
				case "route":
					c, out := tb.Route("m", nil, s.req, t0.Add(s.at))
					if out != Routed || c.EndpointID != "a" {
						t.Fatalf("step %d: route = %v %+v", i, out, c)
					}
					continue // Route reports the load before the decision
				case "peer":
					tb.AddInFlight(s.req, s.ep, t0.Add(s.at))
				case "complete":
					if got := tb.Complete(s.req, s.ep, t0.Add(s.at)); got != s.released {
						t.Fatalf("step %d: Complete = %v, want %v", i, got, s.released)
					}
				case "expire":
					tb.Expire(t0.Add(s.cutoff))
				}
				if got := tb.Endpoints("")[0].Load; got != s.want {
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
			tb := NewTable()
			tb.SetEndpoints([]endpoints.Spec{spec("a", "m"), spec("b", "m"), spec("c", "m", "m2")})
			for id, l := range tt.loads {
				tb.Observe(id, t0, ok(l[0], l[1]))
			}
			for _, id := range tt.failed {
				tb.Observe(id, t0, scrape.Result{Err: errors.New("down")})
			}
			if tt.wantOut != Routed {
				if _, out := tb.Route(tt.model, tt.exclude, "r", t0.Add(time.Second)); out != tt.wantOut {
					t.Fatalf("outcome %v, want %v", out, tt.wantOut)
				}
				return
			}
			var got []string
			for i := range tt.want {
				c, out := tb.Route(tt.model, tt.exclude, "r"+strconv.Itoa(i), t0.Add(time.Second))
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
	tb := NewTable()
	tb.SetEndpoints([]endpoints.Spec{spec("a", "m"), spec("b", "m")})
	tb.Observe("a", t0, ok(0, 0))
	tb.Observe("b", t0, ok(0, 0))
	for i := 0; i < 4; i++ {
		p1, _ := tb.Pick("m", nil)
		p2, _ := tb.Pick("m", nil)
		c, _ := tb.Route("m", nil, strconv.Itoa(i), t0.Add(time.Second))
		if p1.EndpointID != p2.EndpointID || p1.EndpointID != c.EndpointID {
			t.Fatalf("pick %s, %s then route %s", p1.EndpointID, p2.EndpointID, c.EndpointID)
		}
	}
}

func TestExplainRows(t *testing.T) {
	tb := NewTable()
	tb.SetEndpoints([]endpoints.Spec{spec("a", "m"), spec("b", "m"), spec("c", "m"), spec("d", "other"), {ID: "e", URL: "http://e"}})
	tb.Observe("a", t0, ok(1, 1))
	tb.Observe("b", t0, ok(0, 1))
	tb.Observe("c", t0, scrape.Result{Err: errors.New("dial tcp: connection refused")})
	tb.Observe("d", t0, ok(0, 0))
	rows, c, out := tb.Explain("m", []string{"b"})
	if out != Routed || c.EndpointID != "a" {
		t.Fatalf("explain chose %v %q, want a", out, c.EndpointID)
	}
	want := []struct {
		id       string
		eligible bool
		reason   string
		score    int64
		chosen   bool
	}{
		{"a", true, "", 2, true},
		{"b", false, "excluded by request", 1, false},
		{"c", false, "unhealthy: dial tcp: connection refused", 0, false},
		{"d", false, `does not serve model "m"`, 0, false},
		{"e", false, "models not known yet", 0, false},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for i, w := range want {
		r := rows[i]
		if r.Endpoint.ID != w.id || r.Eligible != w.eligible || !strings.HasPrefix(r.ExcludedReason, w.reason) ||
			r.Score != w.score || r.Chosen != w.chosen {
			t.Errorf("row %d = {%s eligible=%v reason=%q score=%d chosen=%v}, want %+v",
				i, r.Endpoint.ID, r.Eligible, r.ExcludedReason, r.Score, r.Chosen, w)
		}
	}
	if got := tb.Endpoints("")[0].Load.InFlight; got != 0 {
		t.Fatalf("explain changed in-flight: %d", got)
	}
}

func TestDiscoveredModelsAndFirstRound(t *testing.T) {
	tb := NewTable()
	tb.SetEndpoints([]endpoints.Spec{{ID: "a", URL: "http://a"}, spec("b", "fixed")})
	select {
	case <-tb.FirstRound():
		t.Fatal("first round closed before any scrape")
	default:
	}
	if _, out := tb.Route("x", nil, "r", t0); out != ModelNotFound {
		t.Fatalf("before discovery: %v", out)
	}
	tb.Observe("a", t0, scrape.Result{Models: []string{"x"}})
	tb.Observe("b", t0, scrape.Result{Models: []string{"ignored"}}) // configured models win
	<-tb.FirstRound()
	if c, out := tb.Route("x", nil, "r", t0); out != Routed || c.EndpointID != "a" {
		t.Fatalf("after discovery: %v %q", out, c.EndpointID)
	}
	if _, out := tb.Route("ignored", nil, "r", t0); out != ModelNotFound {
		t.Fatalf("configured models overridden: %v", out)
	}
	// Unhealthy endpoints keep their models: the answer is "no healthy
	// endpoint", not "model not found".
	tb.Observe("a", t0, scrape.Result{Err: errors.New("down")})
	if _, out := tb.Route("x", nil, "r2", t0); out != NoHealthyEndpoint {
		t.Fatalf("after failure: %v", out)
	}
	// Removing an endpoint drops it and its entries.
	tb.SetEndpoints([]endpoints.Spec{spec("b", "fixed")})
	if v := tb.Endpoints(""); len(v) != 1 || v[0].ID != "b" {
		t.Fatalf("endpoints after removal: %+v", v)
	}
}

func TestReason(t *testing.T) {
	c := Choice{Load: Load{Waiting: 1, Running: 2, Fresh: 3, CompletedSinceScrape: 1}, Candidates: 4}
	want := "least load 5 = queue 2 (waiting 1, running 2, completed since scrape 1) + 3 routed since scrape, among 4 eligible"
	if got := c.Reason(); got != want {
		t.Fatalf("reason %q\nwant   %q", got, want)
	}
}

// BenchmarkTableRoute measures the decision alone (no gRPC): 16 healthy
// endpoints, each Route followed by its completion so the table stays at a
// steady size.
func BenchmarkTableRoute(b *testing.B) {
	tb := NewTable()
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
	exclude := []string{"ep-3"}
	now := t0.Add(time.Second)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		id := ids[i%len(ids)]
		c, out := tb.Route("m", exclude, id, now)
		if out != Routed {
			b.Fatal(out)
		}
		tb.Complete(id, c.EndpointID, now)
	}
}
