package router

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/kvblock"
	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	"github.com/switchyard-dev/switchyard/internal/tokenizer"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router/internal/endpoints"
	"github.com/switchyard-dev/switchyard/services/router/internal/load"
	"github.com/switchyard-dev/switchyard/services/router/internal/scrape"
)

// benchService is a router's decision path without servers: 16 healthy
// endpoints with some load, an index in which each endpoint holds a
// different share of the benchmark prompt's 8k-token prefix (and other
// prompts' blocks), like a warm fleet.
func benchService(tb testing.TB) (*service, []byte) { return benchFleet(tb, 16) }

// benchFleet is benchService with n endpoints, endpoint i holding
// i/(n-1) of the prefix.
func benchFleet(tb testing.TB, n int) (*service, []byte) {
	tb.Helper()
	cfg := DefaultConfig()
	table := load.NewTable(load.Config{Prior: cfg.predictPrior(), RecomputeWeight: cfg.RecomputeWeight})
	var specs []endpoints.Spec
	for i := range n {
		specs = append(specs, endpoints.Spec{ID: "w" + strconv.Itoa(i), URL: "http://w" + strconv.Itoa(i), Kind: endpoints.KindLocal, Models: []string{"m"}})
	}
	table.SetEndpoints(specs)
	for i, s := range specs {
		table.Observe(s.ID, time.Now(), scrape.Result{Metrics: scrape.Metrics{Waiting: int64(i % 3), Running: int64(i % 5), BlockSize: 16}})
	}
	tokSpecs, err := parseTokenizers(cfg.Tokenizers)
	if err != nil {
		tb.Fatal(err)
	}
	toks, err := loadTokenizers(tokSpecs)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := newService(cfg, table, newMetrics(table, kvblock.NewIndex(), nil), kvblock.NewIndex(), kvblock.NewIndex(), toks)
	if err != nil {
		tb.Fatal(err)
	}
	s.sizes = eventSizes{}
	system := strings.Repeat(tokenizer.SampleText+" ", 55)
	body := []byte(`{"model":"m","messages":[{"role":"system","content":"` + system + `"},{"role":"user","content":"Summarise."}]}`)
	tok := tokenizer.NewSimple()
	for i, sp := range specs {
		// Endpoint i holds i/(n-1) of the prompt, and 2,000 unrelated blocks.
		ids := tok.Encode("<|im_start|>system\n" + system)
		hashes := kvblock.Chain(nil, kvblock.Root, ids, 16, "")
		s.kv.Store(sp.ID, hashes[:len(hashes)*i/(n-1)])
		other := kvblock.Chain(nil, kvblock.Root, tok.Encode(strings.Repeat("noise "+sp.ID+" ", 4000)), 16, "")
		s.kv.Store(sp.ID, other)
	}
	return s, body
}

// eventSizes stands for a KV replica that has seen every worker's events.
type eventSizes struct{}

func (eventSizes) BlockSize(string) int { return 16 }

// BenchmarkDecide8k is Route's decision for an 8k-token chat prompt
// across 16 candidates, from body to response without gRPC: read the
// prompt (BenchmarkReadPrompt8k is that part alone), classify, chain the
// block hashes, look up every candidate's cached prefix, score, run the
// default program, record the in-flight entry and the speculative blocks.
// Each decision's request completes right away, so the table stays at a
// steady size. With clocks, the request carries a step clock for every
// endpoint, as from a gateway streaming from all of them.
func BenchmarkDecide8k(b *testing.B) {
	for _, n := range []int{16, 128} {
		b.Run(strconv.Itoa(n)+"-endpoints", func(b *testing.B) { benchDecide8k(b, n, false) })
	}
	b.Run("128-endpoints-clocks", func(b *testing.B) { benchDecide8k(b, 128, true) })
}

func benchDecide8k(b *testing.B, n int, clocks bool) {
	s, body := benchFleet(b, n)
	req := &routerv1.RouteRequest{Model: "m", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: body}
	if clocks {
		for i := range n {
			req.StepClocks = append(req.StepClocks, &routerv1.StepClock{EndpointId: "w" + strconv.Itoa(i), SinceStepSeconds: 0.01 * float64(i%5), StepSeconds: 0.05})
		}
	}
	ids := make([]string, 4096)
	for i := range ids {
		ids[i] = "r" + strconv.Itoa(i)
	}
	ctx := context.Background()
	ex, err := s.Explain(ctx, req)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(ex.GetResult().GetDecision().GetPromptTokens()), "prompt-tokens")
	lat := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		req.RequestId = ids[i%len(ids)]
		resp, err := s.route(ctx, req, start)
		if err != nil || resp.GetTarget() == nil {
			b.Fatal(err, resp)
		}
		lat = append(lat, time.Since(start))
		s.table.Complete(load.Completion{RequestID: req.RequestId, EndpointID: resp.GetTarget().GetId(), At: start})
	}
	b.StopTimer()
	testkit.ReportPercentiles(b, "", lat)
}

// BenchmarkReadPrompt8k is the part BenchmarkDecide8k leaves out: parse the
// body and tokenize the prompt.
func BenchmarkReadPrompt8k(b *testing.B) {
	s, body := benchService(b)
	req := &routerv1.RouteRequest{Model: "m", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: body}
	d := s.getDecision()
	for b.Loop() {
		d.reset()
		_ = s.readPrompt(context.Background(), &d.lookup, req)
	}
	b.ReportMetric(float64(d.tokens), "prompt-tokens")
}

// TestDecideMatchesIndex checks the benchmark's setup does what it says:
// the endpoint holding the whole prefix wins with it cached.
func TestDecideMatchesIndex(t *testing.T) {
	s, body := benchService(t)
	req := &routerv1.RouteRequest{RequestId: "x", Model: "m", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: body}
	resp, err := s.route(context.Background(), req, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	d := resp.GetDecision()
	if d.GetPromptTokens() < 8000 || d.GetCachedTokens() < d.GetPromptTokens()-32 {
		t.Fatalf("decision %v", d)
	}
	if got := resp.GetTarget().GetId(); got != "w15" {
		t.Fatalf("routed to %s, want w15 (holds the whole prefix): %s", got, d.GetReason())
	}
}

// TestApproxIndexSampled: for workers without KV events the approximate
// index keeps every approxStride-th block hash of a routed prompt, and
// still finds the routed prefix, rounded down to approxStride blocks, once
// the speculative entries are gone.
func TestApproxIndexSampled(t *testing.T) {
	s, body := benchService(t)
	s.sizes = noBlockSizes{}
	s.kv = kvblock.NewIndex() // nothing confirmed: a fleet without events
	now := time.Now()
	req := &routerv1.RouteRequest{RequestId: "x", Model: "m", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: body}
	resp, err := s.route(context.Background(), req, now)
	if err != nil {
		t.Fatal(err)
	}
	target := resp.GetTarget().GetId()
	d := s.getDecision()
	l := &d.lookup
	if err := s.readPrompt(context.Background(), l, req); err != nil {
		t.Fatal(err)
	}
	usable := (len(l.prompt.Tokens) - 1) / defaultBlockSize
	if usable%approxStride == 0 {
		t.Fatalf("prompt of %d usable blocks: pick one that is not a multiple of %d", usable, approxStride)
	}
	later := now.Add(time.Minute) // past the speculative TTL, within the approximate one
	s.kv.Sweep(later)
	if l.cands = s.table.Candidates("m", nil, l.cands); len(l.cands) != 16 {
		t.Fatalf("%d candidates", len(l.cands))
	}
	s.lookupCached(l, later)
	want := int64(usable / approxStride * approxStride * defaultBlockSize)
	if got := l.cachedOn(target); got != want {
		t.Fatalf("approximate index: %d tokens cached on %s, want %d", got, target, want)
	}
	for _, c := range l.cands {
		if c.ID != target && l.cachedOn(c.ID) != 0 {
			t.Fatalf("%d tokens cached on %s, which was not routed to", l.cachedOn(c.ID), c.ID)
		}
	}
}

// flowPick runs the program's pick over rows (in id order) for req, with
// the default program: the lowest score wins.
func flowPick(t *testing.T, req *routerv1.RouteRequest, tokens int64, rows []load.Backend) (chosen, held int) {
	t.Helper()
	d := &decision{req: req, st: noPolicies(), held: -1, ctx: context.Background()}
	d.tokens = tokens
	d.preq = policy.Request{Model: "m"}
	for i := range rows {
		rows[i].Model = "m"
		if rows[i].Kind == "" {
			rows[i].Kind = endpoints.KindLocal
		}
	}
	return d.Pick(rows, 0), d.held
}

// Flow control's part of the pick (decision.flow, decision.open): a
// provider's pick is never held, an unavailable worker's empty queue is no
// room, a full pick gives way to an open worker, and the KV test counts
// claims at their peak, within the threshold less the tenant's reserve.
func TestFlowHoldsOnlyWhenNoWorkerHasRoom(t *testing.T) {
	const capacity = 10_000
	local := func(id string, score float64, l load.Load) load.Backend {
		return load.Backend{EndpointID: id, Healthy: true, Load: l, KVCapacity: capacity, Estimate: load.Estimate{Score: score}}
	}
	waiting := load.Load{Waiting: 5}
	for _, c := range []struct {
		name   string
		req    *routerv1.RouteRequest
		tokens int64
		rows   []load.Backend
		chosen string // "" when held
		held   string
	}{
		{
			name: "the only healthy worker has a queue: held",
			req:  &routerv1.RouteRequest{QueueThreshold: 2},
			rows: []load.Backend{local("w0", 1, waiting), {EndpointID: "w1", Healthy: false, Estimate: load.Estimate{Score: 0}}},
			held: "w0",
		},
		{
			name:   "a provider's pick is never held",
			req:    &routerv1.RouteRequest{QueueThreshold: 2},
			rows:   []load.Backend{local("w0", 2, waiting), {EndpointID: "p", Kind: endpoints.KindProvider, Healthy: true, Estimate: load.Estimate{Score: 1}}},
			chosen: "p",
		},
		{
			name:   "one waiting under a threshold of 2: routed",
			req:    &routerv1.RouteRequest{QueueThreshold: 2},
			rows:   []load.Backend{local("w0", 1, load.Load{FreshPending: 1})},
			chosen: "w0",
		},
		{
			name:   "the pick is full, another worker is open: the open one takes it",
			req:    &routerv1.RouteRequest{QueueThreshold: 2},
			rows:   []load.Backend{local("w0", 1, waiting), local("w1", 3, load.Load{}), local("w2", 2, waiting)},
			chosen: "w1",
		},
		{
			name:   "no KV threshold or reserve: claims do not hold",
			req:    &routerv1.RouteRequest{QueueThreshold: 2, MaxOutputTokens: 500},
			tokens: 1000,
			rows:   []load.Backend{local("w0", 1, load.Load{Claimed: 9_900})},
			chosen: "w0",
		},
		{
			name:   "claims at their peak past the KV threshold: the roomier worker",
			req:    &routerv1.RouteRequest{QueueThreshold: 2, KvCacheThreshold: 1, MaxOutputTokens: 500},
			tokens: 1000,
			rows:   []load.Backend{local("w0", 1, load.Load{Claimed: 8_600}), local("w1", 2, load.Load{Claimed: 8_500})},
			chosen: "w1",
		},
		{
			name:   "the scraped usage counts when it is above the claims",
			req:    &routerv1.RouteRequest{QueueThreshold: 2, KvCacheThreshold: 1, MaxOutputTokens: 500},
			tokens: 1000,
			rows: []load.Backend{func() load.Backend {
				b := local("w0", 1, load.Load{Claimed: 1_000, FreshClaimed: 100})
				b.KVCacheUsage = 0.85 // 8,500 + 100 routed since + 1,500 > 10,000
				return b
			}()},
			held: "w0",
		},
		{
			name:   "the tenant's reserve: the room left must stay unclaimed",
			req:    &routerv1.RouteRequest{QueueThreshold: 2, KvReserve: 0.1, MaxOutputTokens: 500},
			tokens: 1000,
			rows:   []load.Backend{local("w0", 1, load.Load{Claimed: 7_600})},
			held:   "w0",
		},
		{
			name:   "within the reserve's limit",
			req:    &routerv1.RouteRequest{QueueThreshold: 2, KvReserve: 0.1, MaxOutputTokens: 500},
			tokens: 1000,
			rows:   []load.Backend{local("w0", 1, load.Load{Claimed: 7_500})},
			chosen: "w0",
		},
		{
			name:   "cached prompt tokens are not claimed again",
			req:    &routerv1.RouteRequest{QueueThreshold: 2, KvReserve: 0.1, MaxOutputTokens: 500},
			tokens: 1000,
			rows: []load.Backend{func() load.Backend {
				b := local("w0", 1, load.Load{Claimed: 7_600})
				b.CachedTokens = 800
				return b
			}()},
			chosen: "w0",
		},
		{
			name:   "an idle worker takes a request bigger than its threshold allows",
			req:    &routerv1.RouteRequest{QueueThreshold: 2, KvCacheThreshold: 0.5, MaxOutputTokens: 500},
			tokens: 8000,
			rows:   []load.Backend{local("w0", 1, load.Load{})},
			chosen: "w0",
		},
		{
			name:   "capacity unknown: no KV test",
			req:    &routerv1.RouteRequest{QueueThreshold: 2, KvCacheThreshold: 0.5, MaxOutputTokens: 500},
			tokens: 8000,
			rows:   []load.Backend{{EndpointID: "w0", Healthy: true, Load: load.Load{Claimed: 50_000}}},
			chosen: "w0",
		},
		{
			name: "hold: a worker's pick is held",
			req:  &routerv1.RouteRequest{Hold: true},
			rows: []load.Backend{local("w0", 1, load.Load{})},
			held: "w0",
		},
		{
			name:   "hold: a provider's pick is not",
			req:    &routerv1.RouteRequest{Hold: true},
			rows:   []load.Backend{{EndpointID: "p", Kind: endpoints.KindProvider, Healthy: true}},
			chosen: "p",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			chosen, held := flowPick(t, c.req, c.tokens, c.rows)
			name := func(i int) string {
				if i < 0 {
					return ""
				}
				return c.rows[i].EndpointID
			}
			if name(chosen) != c.chosen || name(held) != c.held {
				t.Errorf("chosen %q held %q, want chosen %q held %q", name(chosen), name(held), c.chosen, c.held)
			}
		})
	}
}
