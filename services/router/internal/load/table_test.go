package load

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/services/router/internal/endpoints"
	"github.com/switchyard-dev/switchyard/services/router/internal/predict"
	"github.com/switchyard-dev/switchyard/services/router/internal/scrape"
)

func newTable() *Table { return NewTable(Config{Prior: predict.DefaultPrior(), RecomputeWeight: 1}) }

// lowest is the router's default routing as a Picker: the default policy
// program, so that these tests rank as the router ranks.
type lowest struct {
	bs  []policy.Backend
	req policy.Request
	d   policy.Decision
}

func (p *lowest) Pick(rows []Backend, rotation uint64) int {
	p.bs = p.bs[:0]
	for i := range rows {
		p.bs = append(p.bs, rows[i].Policy())
	}
	p.req.Rotation = rotation
	policy.DefaultProgram().Evaluate(&p.req, p.bs, &p.d)
	return p.d.Chosen
}

// result is a decision made by decide.
type result struct {
	rows             []Backend
	chosen, runnerUp int // -1 for none
	eligible         int
	prompt           int64
}

// decide runs Decide for req.Model with the default program, committing
// as Route does, or not (as Explain does).
func decide(tb *Table, req Request, at time.Time, commit bool) result {
	p := &lowest{req: policy.Request{Model: req.Model}}
	rows, i := tb.Decide(req, []string{req.Model}, at, nil, p, commit)
	return result{rows: rows, chosen: i, runnerUp: p.d.RunnerUp, eligible: p.d.Candidates, prompt: req.PromptTokens}
}

// id is the chosen endpoint, "" when none was.
func (r result) id() string {
	if r.chosen < 0 {
		return ""
	}
	return r.rows[r.chosen].EndpointID
}

// choice is the chosen backend, zero when none was.
func (r result) choice() Backend {
	if r.chosen < 0 {
		return Backend{}
	}
	return r.rows[r.chosen]
}

func (r result) reason() string {
	if r.chosen < 0 {
		return "nothing chosen"
	}
	var next *Backend
	if r.runnerUp >= 0 {
		next = &r.rows[r.runnerUp]
	}
	return Reason(&r.rows[r.chosen], next, r.prompt, r.eligible)
}

func route(tb *Table, model string, exclude []string, id string, at time.Time) result {
	return decide(tb, Request{Model: model, ID: id, Exclude: exclude}, at, true)
}

// routeReq is route with a whole request.
func routeReq(tb *Table, req Request, at time.Time) result { return decide(tb, req, at, true) }

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
					if r := route(tb, "m", nil, s.req, t0.Add(s.at)); r.id() != "a" {
						t.Fatalf("step %d: routed to %q", i, r.id())
					}
					continue // the rows show the load before the decision
				case "peer":
					tb.AddInFlight(s.req, s.ep, "m", t0.Add(s.at), 0, 0, 0)
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

// TestDecideRanksByLoadAndSpreadsTies: with the default program, the
// least loaded endpoint wins and a burst spreads over equal ones.
func TestDecideRanksByLoadAndSpreadsTies(t *testing.T) {
	tests := []struct {
		name    string
		loads   map[string][2]int64 // waiting, running
		failed  []string
		exclude []string
		model   string
		want    []string // endpoints chosen by consecutive decisions
		// wantRows, when nothing is chosen: rows listed (endpoints
		// serving the model, available or not).
		wantRows int
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
			exclude: []string{"a", "b", "c"}, model: "m", wantRows: 3},
		{name: "all unhealthy", loads: map[string][2]int64{"a": {0, 0}, "b": {0, 0}, "c": {0, 0}},
			failed: []string{"a", "b", "c"}, model: "m", wantRows: 3},
		{name: "unknown model", loads: map[string][2]int64{"a": {0, 0}, "b": {0, 0}, "c": {0, 0}},
			model: "nope", wantRows: 0},
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
			if len(tt.want) == 0 {
				if r := route(tb, tt.model, tt.exclude, "r", t0.Add(time.Second)); r.id() != "" || len(r.rows) != tt.wantRows {
					t.Fatalf("chose %q among %d rows, want none among %d", r.id(), len(r.rows), tt.wantRows)
				}
				return
			}
			var got []string
			for i := range tt.want {
				r := route(tb, tt.model, tt.exclude, "r"+strconv.Itoa(i), t0.Add(time.Second))
				if r.id() == "" {
					t.Fatalf("route %d: nothing chosen", i)
				}
				got = append(got, r.id())
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("chose %v, want %v", got, tt.want)
			}
		})
	}
}

// TestDecideWithoutCommitChangesNothing: a decision not committed (what
// Explain makes) records nothing and agrees with the committed one.
func TestDecideWithoutCommitChangesNothing(t *testing.T) {
	tb := newTable()
	tb.SetEndpoints([]endpoints.Spec{spec("a", "m"), spec("b", "m")})
	tb.Observe("a", t0, ok(0, 0))
	tb.Observe("b", t0, ok(0, 0))
	for i := 0; i < 4; i++ {
		p1 := decide(tb, Request{Model: "m"}, t0.Add(time.Second), false)
		p2 := decide(tb, Request{Model: "m"}, t0.Add(time.Second), false)
		c := route(tb, "m", nil, strconv.Itoa(i), t0.Add(time.Second))
		if p1.id() != p2.id() || p1.id() != c.id() {
			t.Fatalf("dry %s, %s then committed %s", p1.id(), p2.id(), c.id())
		}
	}
	if a, b := tb.Endpoints("")[0].Load.InFlight, tb.Endpoints("")[1].Load.InFlight; a != 2 || b != 2 {
		t.Fatalf("in flight %d and %d, want 2 and 2 (the committed decisions alone)", a, b)
	}
}

// TestConcurrentDecisionsSeeEachOther: decisions made at once are made
// one after another, each seeing the ones before: a burst over idle
// endpoints takes each once.
func TestConcurrentDecisionsSeeEachOther(t *testing.T) {
	const n = 8
	tb := fleet(n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { route(tb, "m", nil, "r"+strconv.Itoa(i), t0.Add(time.Second)) })
	}
	wg.Wait()
	for _, v := range tb.Endpoints("") {
		if v.Load.InFlight != 1 {
			t.Errorf("%s: %d in flight, want 1", v.ID, v.Load.InFlight)
		}
	}
}

// TestDecideRows: one row per endpoint serving the model, in id order,
// each saying whether it could take the request and why not; the
// available ones carry the estimate they are ranked by, and their policy
// view ranks by its score.
func TestDecideRows(t *testing.T) {
	tb := newTable()
	tb.SetEndpoints([]endpoints.Spec{spec("a", "m"), spec("b", "m"), spec("c", "m"), spec("d", "other"), {ID: "e", URL: "http://e"}})
	tb.Observe("a", t0, ok(1, 1))
	tb.Observe("b", t0, ok(0, 1))
	tb.Observe("c", t0, scrape.Result{Err: errors.New("dial tcp: connection refused")})
	tb.Observe("d", t0, ok(0, 0))
	r := decide(tb, Request{Model: "m", Exclude: []string{"b"}}, t0.Add(time.Second), false)
	if r.id() != "a" {
		t.Fatalf("chose %q, want a", r.id())
	}
	want := []struct {
		id     string
		reason string
		policy string // the policy view's Unavailable
	}{
		{"a", "", ""},
		{"b", "excluded by request", "excluded by request"},
		{"c", "unhealthy: dial tcp: connection refused", "unhealthy"},
	}
	if len(r.rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(r.rows), len(want))
	}
	for i, w := range want {
		b := &r.rows[i]
		pb := b.Policy()
		if b.EndpointID != w.id || b.Model != "m" || b.Unavailable() != w.reason || b.Available() != (w.reason == "") || pb.Unavailable != w.policy {
			t.Errorf("row %d = {%s %s unavailable=%q policy=%q}, want %+v", i, b.EndpointID, b.Model, b.Unavailable(), pb.Unavailable, w)
		}
		if b.Available() != (b.Estimate.Score > 0) || pb.PredictedTTFT != b.Estimate.Score || pb.ID != b.EndpointID || pb.Type != policy.TypeLocal {
			t.Errorf("row %d: estimate %+v, policy view %+v", i, b.Estimate, pb)
		}
	}
	if r.rows[1].Load.Running != 1 || r.rows[2].Healthy || r.rows[2].LastError == "" {
		t.Errorf("rows carry the endpoints' state: %+v", r.rows)
	}
	if got := tb.Endpoints("")[0].Load.InFlight; got != 0 {
		t.Fatalf("an uncommitted decision changed in-flight: %d", got)
	}
}

// pickID is a Picker that takes the first available row of one endpoint.
type pickID string

func (p pickID) Pick(rows []Backend, _ uint64) int {
	for i := range rows {
		if rows[i].EndpointID == string(p) && rows[i].Available() {
			return i
		}
	}
	return -1
}

// TestDecideRowsPerModel: an alias considers several models; each endpoint
// is listed once per model it serves, in models order, and the commit
// records the request for the chosen row's model.
func TestDecideRowsPerModel(t *testing.T) {
	tb := newTable()
	tb.SetEndpoints([]endpoints.Spec{spec("a", "m1"), spec("b", "m2"),
		{ID: "p", URL: "http://p", Kind: endpoints.KindProvider, Group: "prov", Models: []string{"m1", "m2"}}})
	tb.Observe("a", t0, ok(0, 0))
	tb.Observe("b", t0, ok(0, 0))
	rows, i := tb.Decide(Request{Model: "alias", ID: "r"}, []string{"m2", "m1"}, t0.Add(time.Second), nil, pickID("p"), true)
	var got []string
	for _, r := range rows {
		got = append(got, r.EndpointID+"/"+r.Model)
	}
	if strings.Join(got, " ") != "b/m2 p/m2 a/m1 p/m1" || i != 1 {
		t.Fatalf("rows %v, chose %d", got, i)
	}
	if pb := rows[i].Policy(); pb.Type != policy.TypeProvider || pb.Group != "prov" || pb.Model != "m2" {
		t.Fatalf("provider row as the policy sees it: %+v", pb)
	}
	if v := tb.Endpoints("m2"); len(v) != 2 || v[1].ID != "p" || v[1].Load.InFlight != 1 {
		t.Fatalf("the request is not in flight on p: %+v", v)
	}
	if _, i := tb.Decide(Request{Model: "alias", ID: "s"}, []string{"m1"}, t0.Add(time.Second), nil, pickID("gone"), true); i != -1 {
		t.Fatalf("chose %d when the picker chose none", i)
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
	if r := route(tb, "x", nil, "r", t0); len(r.rows) != 0 {
		t.Fatalf("before discovery: %d rows", len(r.rows))
	}
	tb.Observe("a", t0, scrape.Result{Models: []string{"x"}})
	tb.Observe("b", t0, scrape.Result{Models: []string{"ignored"}}) // configured models win
	<-tb.FirstRound()
	if r := route(tb, "x", nil, "r", t0); r.id() != "a" {
		t.Fatalf("after discovery: %q", r.id())
	}
	if r := route(tb, "ignored", nil, "r", t0); len(r.rows) != 0 {
		t.Fatalf("configured models overridden: %d rows", len(r.rows))
	}
	// Unhealthy endpoints keep their models: the answer is "no healthy
	// endpoint", not "model not found".
	tb.Observe("a", t0, scrape.Result{Err: errors.New("down")})
	if r := route(tb, "x", nil, "r2", t0); r.id() != "" || len(r.rows) != 1 {
		t.Fatalf("after failure: chose %q among %d rows", r.id(), len(r.rows))
	}
	// Removing an endpoint drops it and its entries.
	tb.SetEndpoints([]endpoints.Spec{spec("b", "fixed")})
	if v := tb.Endpoints(""); len(v) != 1 || v[0].ID != "b" {
		t.Fatalf("endpoints after removal: %+v", v)
	}
}

func TestReason(t *testing.T) {
	c := Backend{
		EndpointID: "a", Load: Load{Waiting: 1, Running: 2, Fresh: 3, CompletedSinceScrape: 1},
		Estimate:     Estimate{TTFT: 0.5, Wait: 0.2, Prefill: 0.3, TokensAhead: 1500, PrefillRate: 3000},
		CachedTokens: 7292,
	}
	next := Backend{EndpointID: "b", Estimate: Estimate{TTFT: 3.25, Score: 5.68}, Load: Load{Waiting: 1}}
	want := "predicted TTFT 0.500s = wait 0.200s (ahead: 5 requests, 1500 prefill tokens) + prefill 0.300s " +
		"(900 uncached of 8192 prompt tokens, 7292 cached, at 3000 tok/s); next best b 3.250s (score 5.680s, 0 cached, 1 ahead); 4 eligible"
	if got := Reason(&c, &next, 8192, 4); got != want {
		t.Fatalf("reason %q\nwant   %q", got, want)
	}
	c.CachedTokens = 0
	c.Estimate.Recompute, c.Estimate.Score = 0.25, 0.75
	want = "predicted TTFT 0.500s = wait 0.200s (ahead: 5 requests, 1500 prefill tokens) + prefill 0.300s " +
		"(prompt unknown: typical uncached size, at 3000 tok/s); score 0.750s with recompute 0.250s; 4 eligible"
	if got := Reason(&c, nil, 0, 4); got != want {
		t.Fatalf("reason %q\nwant   %q", got, want)
	}
	c.Estimate.Pressure, c.Estimate.Score = 0.125, 0.875
	want = "predicted TTFT 0.500s = wait 0.200s (ahead: 5 requests, 1500 prefill tokens) + prefill 0.300s " +
		"(prompt unknown: typical uncached size, at 3000 tok/s); score 0.875s with recompute 0.250s + cache pressure 0.125s; 4 eligible"
	if got := Reason(&c, nil, 0, 4); got != want {
		t.Fatalf("reason %q\nwant   %q", got, want)
	}
	c.Estimate.Recompute, c.Estimate.Score = 0, 0.625
	if got, want := Reason(&c, nil, 0, 4), "score 0.625s with cache pressure 0.125s; 4 eligible"; !strings.HasSuffix(got, want) {
		t.Fatalf("reason %q\nwant suffix %q", got, want)
	}
	// A warm request is ranked without the prefill under way, which its
	// predicted TTFT counts.
	c.Estimate.UnderWay, c.Estimate.Score = 0.25, 0.375
	if got, want := Reason(&c, nil, 0, 4), "score 0.375s without 0.250s of prefill under way, cache pressure 0.125s; 4 eligible"; !strings.HasSuffix(got, want) {
		t.Fatalf("reason %q\nwant suffix %q", got, want)
	}
	c.Estimate.UnderWay, c.Estimate.Pressure, c.Estimate.Score = -0.125, 0, 0.625
	if got, want := Reason(&c, nil, 0, 4), "score 0.625s with pending prefill in full (+0.125s); 4 eligible"; !strings.HasSuffix(got, want) {
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
			r := routeReq(tb, Request{Model: "m", ID: "r", PromptTokens: prompt, Cached: cachedOn(tt.cached)}, t0.Add(time.Second))
			if r.id() != tt.want {
				t.Fatalf("routed to %s, want %s: %s", r.id(), tt.want, r.reason())
			}
			if c := r.choice(); c.CachedTokens != tt.cached[tt.want] {
				t.Fatalf("choice cached %d", c.CachedTokens)
			}
			if c := r.choice(); c.Estimate.TTFT <= 0 || r.runnerUp < 0 || r.rows[r.runnerUp].Estimate.Score < c.Estimate.Score {
				t.Fatalf("estimate %+v runner-up %d: %s", c.Estimate, r.runnerUp, r.reason())
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
				r := routeReq(tb, Request{Model: "m", ID: "b" + strconv.Itoa(i), PromptTokens: 8192 + 64, Cached: cachedOn(holders)}, at)
				holders[r.id()] = 8192 // the speculative entry
				counts[r.id()]++
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
		if r := routeReq(tb, Request{Model: "m", ID: "p" + strconv.Itoa(i), Exclude: []string{"e1"}, PromptTokens: 4096}, at); r.id() != "e0" {
			t.Fatal("exclusion ignored")
		}
	}
	l := tb.Endpoints("")[0].Load
	if l.Pending != 3 || l.PendingTokens != 3*4096 {
		t.Fatalf("pending %d / %d tokens, want 3 / %d", l.Pending, l.PendingTokens, 3*4096)
	}
	// A request that e0 has cached still goes to e1: 12k tokens are ahead.
	r := routeReq(tb, Request{Model: "m", ID: "x", PromptTokens: 4096, Cached: cachedOn(map[string]int64{"e0": 4000})}, at)
	if r.id() != "e1" {
		t.Fatalf("routed to %s behind 12k pending tokens: %s", r.id(), r.reason())
	}
	// Long after their predicted first tokens, they no longer count.
	dry := decide(tb, Request{Model: "m", PromptTokens: 100}, at.Add(time.Minute), false)
	if p := dry.rows[0].Estimate.TokensAhead; p != 0 {
		t.Fatalf("tokens ahead a minute later: %v", p)
	}
	// A scrape with an empty waiting queue starts pending requests it knew
	// of, oldest first.
	tb2 := fleet(1)
	for i := range 3 {
		routeReq(tb2, Request{Model: "m", ID: "q" + strconv.Itoa(i), PromptTokens: 2000}, at)
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
	// Once the pending one's predicted first token passes it is taken as
	// started; the scrape counted it among the five, so four are still
	// unknown.
	decide(tb2, Request{Model: "m", PromptTokens: 100}, at.Add(time.Minute), false)
	if l = tb2.Endpoints("")[0].Load; l.Pending != 0 || l.Untracked != 4 {
		t.Fatalf("after its predicted first token: %+v, want nothing pending and 4 untracked", l)
	}
	// Completion releases the pending work at once.
	tb3 := fleet(1)
	routeReq(tb3, Request{Model: "m", ID: "z", PromptTokens: 3000}, at)
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
	tb.OnLearn(func(_ string, predicted, _, observed float64) { learned = append(learned, predicted-observed) })
	at := t0.Add(time.Second)
	for i := range 300 {
		id := "r" + strconv.Itoa(i)
		prompt := int64(500 + (i*977)%8000)
		cached := int64((i * 331) % int(prompt))
		r := routeReq(tb, Request{Model: "m", ID: id, PromptTokens: prompt, Cached: cachedOn(map[string]int64{"e0": cached})}, at)
		// The worker really had a bit less cached than predicted.
		realCached := cached * 9 / 10
		ttft := base + float64(prompt-realCached)/rate
		tb.Complete(Completion{RequestID: id, EndpointID: r.id(), At: at, Success: true, TTFTSeconds: ttft,
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
	routeReq(tb, Request{Model: "m", ID: "fail", PromptTokens: 1000}, at)
	tb.Complete(Completion{RequestID: "fail", EndpointID: "e0", At: at, Success: false, TTFTSeconds: 99})
	if tb.Endpoints("")[0].Learned != 300 {
		t.Fatal("learned from a failure")
	}
}

// BenchmarkTableDecide measures the decision alone (no gRPC): 16 healthy
// endpoints scored and ranked by the default program, each decision
// followed by its completion so the table stays at a steady size.
func BenchmarkTableDecide(b *testing.B) {
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
	p := &lowest{req: policy.Request{Model: "m"}}
	models := []string{"m"}
	var rows []Backend
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		req.ID = ids[i%len(ids)]
		var c int
		rows, c = tb.Decide(req, models, now, rows[:0], p, true)
		if c < 0 {
			b.Fatal("nothing chosen")
		}
		tb.Complete(Completion{RequestID: req.ID, EndpointID: rows[c].EndpointID, At: now})
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
		routeReq(tb, Request{Model: "m", ID: id, Exclude: []string{"e1"}, PromptTokens: prompt}, at)
		tb.Complete(Completion{RequestID: id, EndpointID: "e0", At: at, Success: true, TTFTSeconds: 0.01 + float64(prompt)/30000, PromptTokens: prompt})
		at = at.Add(time.Minute)
	}
	dry := decide(tb, Request{Model: "m", PromptTokens: 3000}, at, false)
	if r := dry.rows[1].Estimate.PrefillRate; r < 25000 {
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
			r := routeReq(tb, Request{Model: "m", ID: "r", PromptTokens: tt.prompt, Cached: cachedOn(tt.cached)}, t0.Add(time.Second))
			if r.id() != tt.want {
				t.Fatalf("routed to %s, want %s: %s", r.id(), tt.want, r.reason())
			}
			if c := r.choice(); (tt.weight > 0 && tt.blocks > 0) != (c.Estimate.Pressure > 0) || c.Estimate.Score != c.Estimate.TTFT+c.Estimate.Recompute+c.Estimate.Pressure {
				t.Fatalf("estimate %+v", r.choice().Estimate)
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
	routeReq(tb, Request{Model: "m", ID: "x", PromptTokens: 400}, t0.Add(time.Second))
	if got := ep.displaced(400); got != 400 { // 400 × min(1, (800+400+400)/1600)
		t.Fatalf("after routing 400 tokens: displaced(400) = %v, want 400", got)
	}
	if !tb.Complete(Completion{RequestID: "x", EndpointID: "e0", At: t0.Add(2 * time.Second)}) {
		t.Fatal("completion released nothing")
	}
	if got := ep.displaced(400); got != 300 {
		t.Fatalf("after its completion: displaced(400) = %v, want 300", got)
	}
	routeReq(tb, Request{Model: "m", ID: "y", PromptTokens: 800}, t0.Add(3*time.Second))
	tb.Observe("e0", t0.Add(4*time.Second), withCache(0, 0.25, 100)) // the scrape after y: 400 live
	if got := ep.displaced(400); got != 200 {                        // 400 × (400+400)/1600
		t.Fatalf("after the next scrape: displaced(400) = %v, want 200", got)
	}
	if got := ep.displaced(0); got != 0 {
		t.Fatalf("displaced(0) = %v", got)
	}
}

// Each entry claims its uncached prompt tokens plus its output limit of the
// chosen worker's KV cache until it completes or expires, whichever
// replica decided it; the part decided since the last scrape is kept apart
// for KVDemand, which takes the larger of the claims and the scraped usage
// plus that part.
func TestKVClaims(t *testing.T) {
	tb := newTable()
	tb.SetEndpoints([]endpoints.Spec{spec("a", "m")})
	res := ok(0, 0)
	res.KVCacheUsage, res.BlockSize, res.NumGPUBlocks = 0.5, 16, 625 // 10,000 tokens
	tb.Observe("a", t0, res)
	claims := func() (Load, Backend) {
		r := decide(tb, Request{Model: "m", PromptTokens: 1}, t0.Add(time.Second), false)
		return r.rows[0].Load, r.rows[0]
	}
	routeReq(tb, Request{Model: "m", ID: "r1", PromptTokens: 1000, OutputTokens: 300}, t0.Add(time.Millisecond))
	tb.AddInFlight("r2", "a", "m", t0.Add(2*time.Millisecond), 2000, 500, 200)
	l, b := claims()
	if l.Claimed != 1300+1700 || l.FreshClaimed != 3000 || b.KVCapacity != 10_000 {
		t.Fatalf("claimed %d, fresh %d, capacity %d: want 3000, 3000, 10000", l.Claimed, l.FreshClaimed, b.KVCapacity)
	}
	if got := l.KVDemand(b.KVCacheUsage, b.KVCapacity); got != 5000+3000 {
		t.Errorf("demand %d: want the scraped 5,000 plus 3,000 claimed since", got)
	}
	tb.Observe("a", t0.Add(3*time.Millisecond), res) // both are in this scrape now
	l, b = claims()
	if l.Claimed != 3000 || l.FreshClaimed != 0 || l.KVDemand(b.KVCacheUsage, b.KVCapacity) != 5000 {
		t.Errorf("after a scrape: claimed %d, fresh %d, demand %d: want 3000, 0, 5000", l.Claimed, l.FreshClaimed, l.KVDemand(b.KVCacheUsage, b.KVCapacity))
	}
	if l.KVDemand(0.1, b.KVCapacity) != 3000 {
		t.Errorf("claims above the scraped usage: demand %d, want the claims", l.KVDemand(0.1, b.KVCapacity))
	}
	complete(tb, "r1", "a", t0.Add(4*time.Millisecond))
	if l, _ = claims(); l.Claimed != 1700 {
		t.Errorf("after r1 completed: claimed %d, want 1700", l.Claimed)
	}
	tb.Expire(t0.Add(time.Hour))
	if l, _ = claims(); l.Claimed != 0 || l.FreshClaimed != 0 {
		t.Errorf("after expiry: claimed %d, fresh %d, want 0", l.Claimed, l.FreshClaimed)
	}
}

// TestStartedPrefillStillDelays: a scrape showing a routed request started
// (vLLM counts it running) does not make its worker look idle to a cold
// request: until its predicted first token the rest of its prefill is
// ahead, and a cold request goes to a worker with nothing to prefill even
// if that one runs more requests. A request cached on the busy worker
// stays.
func TestStartedPrefillStillDelays(t *testing.T) {
	tb := fleet(2)
	at := t0.Add(time.Second)
	if r := routeReq(tb, Request{Model: "m", ID: "a", Exclude: []string{"e1"}, PromptTokens: 8192}, at); r.id() != "e0" {
		t.Fatal("exclusion ignored")
	}
	// e0 prefills a; e1 decodes three requests routed by someone else.
	scraped := at.Add(100 * time.Millisecond)
	tb.Observe("e0", scraped, ok(0, 1))
	tb.Observe("e1", scraped, ok(0, 3))
	if l := tb.Endpoints("")[0].Load; l.Pending != 0 {
		t.Fatalf("a still pending after the scrape showed it started: %+v", l)
	}
	// One second into a's prefill (about three at the prior's rate), most
	// of it is left.
	next := at.Add(time.Second)
	dry := decide(tb, Request{Model: "m", PromptTokens: 8192}, next, false)
	var ahead float64
	for _, row := range dry.rows {
		if row.EndpointID == "e0" {
			ahead = row.Estimate.TokensAhead
		}
	}
	rate := predict.DefaultPrior().PrefillRate
	if want := 8192 - rate*0.9; ahead < want-rate*0.2 || ahead > 8192 {
		t.Fatalf("tokens ahead on e0 a second in: %.0f, want about %.0f", ahead, want)
	}
	// A request whose prefix e0 caches stays there: the prefill under
	// way does not count against the prefix's holder.
	warm := Request{Model: "m", PromptTokens: 8192, Cached: cachedOn(map[string]int64{"e0": 6000})}
	r := decide(tb, warm, next, false)
	if r.id() != "e0" {
		t.Fatalf("a request cached on e0 routed to %s: %s", r.id(), r.reason())
	}
	// It is ranked without that prefill, but its predicted TTFT, which
	// it is learned from and reported with, waits for it.
	for _, row := range r.rows {
		if row.EndpointID != "e0" {
			continue
		}
		e := row.Estimate
		if e.TokensAhead < ahead-1 || e.UnderWay <= 0 || math.Abs(e.Score-(e.TTFT-e.UnderWay)) > 1e-9 {
			t.Fatalf("warm estimate on e0: %+v, want %.0f tokens ahead, all of them under way and out of the score", e, ahead)
		}
		if want := ahead / e.PrefillRate; math.Abs(e.UnderWay-want) > 1e-6 {
			t.Fatalf("under way %.4fs, want %.4fs", e.UnderWay, want)
		}
	}
	if r := routeReq(tb, Request{Model: "m", ID: "b", PromptTokens: 8192}, next); r.id() != "e1" {
		t.Fatalf("b routed to %s, to wait behind a's prefill: %s", r.id(), r.reason())
	}
	// Once a's first token is due (by a prefill after the scrape at the
	// latest), nothing of it is ahead.
	late := scraped.Add(time.Duration(8192/rate*float64(time.Second)) + time.Millisecond)
	dry = decide(tb, Request{Model: "m", PromptTokens: 100}, late, false)
	for _, row := range dry.rows {
		if row.EndpointID == "e0" && row.Estimate.TokensAhead != 0 {
			t.Fatalf("tokens ahead on e0 after a's first token: %v", row.Estimate.TokensAhead)
		}
	}
}

// TestRecentAccuracy: an endpoint's view carries the TTFT its decisions
// were routed on against the TTFT their completions reported, and their
// mean absolute percentage error; the hook hears the routed prediction.
func TestRecentAccuracy(t *testing.T) {
	tb := fleet(1)
	var routed []float64
	tb.OnLearn(func(_ string, _, r, _ float64) { routed = append(routed, r) })
	at := t0.Add(time.Second)
	var lastPredicted, lastObserved float64
	for i := range 40 {
		id := "r" + strconv.Itoa(i)
		r := routeReq(tb, Request{Model: "m", ID: id, PromptTokens: 4000}, at)
		// Every request takes twice what it was routed on: 50 % off.
		lastPredicted = r.choice().Estimate.TTFT
		lastObserved = 2 * lastPredicted
		tb.Complete(Completion{RequestID: id, EndpointID: "e0", At: at, Success: true, TTFTSeconds: lastObserved, PromptTokens: 4000})
		at = at.Add(10 * time.Second)
	}
	v := tb.Endpoints("")[0]
	if v.AccuracySamples != 40 || math.Abs(v.RecentTTFTError-0.5) > 1e-9 {
		t.Fatalf("accuracy over %d completions: error %v, want 40 at 0.5", v.AccuracySamples, v.RecentTTFTError)
	}
	// The averages follow the predictions as the predictor learns.
	if r := v.RecentObservedTTFT / v.RecentPredictedTTFT; math.Abs(r-2) > 1e-9 || v.RecentPredictedTTFT <= 0 {
		t.Fatalf("recent predicted %v, observed %v: want a ratio of 2", v.RecentPredictedTTFT, v.RecentObservedTTFT)
	}
	if len(routed) != 40 || routed[39] != lastPredicted {
		t.Fatalf("the hook heard %d routed predictions, last %v, want 40 ending at %v", len(routed), routed[len(routed)-1], lastPredicted)
	}
}

// TestPromptCountHeard: a successful completion of a request decided with
// an exact prompt count reports both counts; an inexact one, a failure
// and a completion for another endpoint report nothing.
func TestPromptCountHeard(t *testing.T) {
	tb := fleet(2)
	type heard struct {
		model          string
		routed, worker int64
	}
	var got []heard
	tb.OnPromptCount(func(model string, routed, worker int64) { got = append(got, heard{model, routed, worker}) })
	at := t0.Add(time.Second)
	exact := routeReq(tb, Request{Model: "m", ID: "exact", PromptTokens: 900, PromptExact: true}, at)
	inexact := routeReq(tb, Request{Model: "m", ID: "inexact", PromptTokens: 900}, at)
	failed := routeReq(tb, Request{Model: "m", ID: "failed", PromptTokens: 900, PromptExact: true}, at)
	tb.Complete(Completion{RequestID: "inexact", EndpointID: inexact.id(), At: at, Success: true, PromptTokens: 500})
	tb.Complete(Completion{RequestID: "failed", EndpointID: failed.id(), At: at, PromptTokens: 500})
	other := "e0"
	if exact.id() == "e0" {
		other = "e1"
	}
	tb.Complete(Completion{RequestID: "exact", EndpointID: other, At: at, Success: true, PromptTokens: 500})
	if len(got) != 0 {
		t.Fatalf("heard %v before the exact request's own completion", got)
	}
	tb.Complete(Completion{RequestID: "exact", EndpointID: exact.id(), At: at, Success: true, PromptTokens: 512})
	if len(got) != 1 || got[0] != (heard{"m", 900, 512}) {
		t.Fatalf("heard %v, want the exact request's 900 against the worker's 512", got)
	}
}
