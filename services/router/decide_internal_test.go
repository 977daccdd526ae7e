package router

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/kvblock"
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
func benchService(tb testing.TB) (*service, []byte) {
	tb.Helper()
	cfg := DefaultConfig()
	table := load.NewTable(load.Config{Prior: cfg.predictPrior(), RecomputeWeight: cfg.RecomputeWeight})
	var specs []endpoints.Spec
	for i := range 16 {
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
	s := &service{
		table: table, pub: noPublisher{}, metrics: newMetrics(table, kvblock.NewIndex(), nil),
		kv: kvblock.NewIndex(), approx: kvblock.NewIndex(), sizes: eventSizes{}, toks: toks,
		specTTL: cfg.SpeculativeTTL, approxTTL: cfg.ApproxTTL,
	}
	system := strings.Repeat(tokenizer.SampleText+" ", 55)
	body := []byte(`{"model":"m","messages":[{"role":"system","content":"` + system + `"},{"role":"user","content":"Summarise."}]}`)
	tok := tokenizer.NewSimple()
	for i, sp := range specs {
		// Endpoint i holds i/15 of the prompt, and 2,000 unrelated blocks.
		ids := tok.Encode("<|im_start|>system\n" + system)
		hashes := kvblock.Chain(nil, kvblock.Root, ids, 16, "")
		s.kv.Store(sp.ID, hashes[:len(hashes)*i/15])
		other := kvblock.Chain(nil, kvblock.Root, tok.Encode(strings.Repeat("noise "+sp.ID+" ", 4000)), 16, "")
		s.kv.Store(sp.ID, other)
	}
	return s, body
}

// eventSizes stands for a KV replica that has seen every worker's events.
type eventSizes struct{}

func (eventSizes) BlockSize(string) int { return 16 }

// BenchmarkDecide8k is Route's work for an 8k-token chat prompt across 16
// candidates, excluding reading and tokenizing the body: chain the block
// hashes, look up every candidate's cached prefix, predict and pick,
// record the in-flight entry and the speculative blocks. Each decision's
// request completes right away, so the table stays at a steady size.
func BenchmarkDecide8k(b *testing.B) {
	s, body := benchService(b)
	req := &routerv1.RouteRequest{Model: "m", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: body}
	l := s.getLookup()
	s.readPrompt(l, req)
	p, tokens := l.prompt, l.tokens
	b.ReportMetric(float64(tokens), "prompt-tokens")
	ids := make([]string, 4096)
	for i := range ids {
		ids[i] = "r" + strconv.Itoa(i)
	}
	lat := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		req.RequestId = ids[i%len(ids)]
		l.reset()
		l.prompt, l.tokens = p, tokens
		var out load.Outcome
		l.cands, out = s.table.Candidates("m", nil, l.cands)
		if out != load.Routed {
			b.Fatal(out)
		}
		s.lookupCached(l, start)
		c, out := s.table.Route(s.tableRequest(l, req), start)
		if out != load.Routed {
			b.Fatal(out)
		}
		s.speculate(l, c, start)
		_ = routed("m", c)
		lat = append(lat, time.Since(start))
		s.table.Complete(load.Completion{RequestID: req.RequestId, EndpointID: c.EndpointID, At: start})
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

// BenchmarkReadPrompt8k is the part BenchmarkDecide8k leaves out: parse the
// body and tokenize the prompt.
func BenchmarkReadPrompt8k(b *testing.B) {
	s, body := benchService(b)
	req := &routerv1.RouteRequest{Model: "m", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: body}
	l := s.getLookup()
	for b.Loop() {
		l.reset()
		s.readPrompt(l, req)
	}
	b.ReportMetric(float64(l.tokens), "prompt-tokens")
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

// TestDecideMatchesIndex checks the benchmark's setup does what it says:
// the endpoint holding the whole prefix wins with it cached.
func TestDecideMatchesIndex(t *testing.T) {
	s, body := benchService(t)
	req := &routerv1.RouteRequest{RequestId: "x", Model: "m", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: body}
	resp, err := s.route(req, time.Now())
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
	resp, err := s.route(req, now)
	if err != nil {
		t.Fatal(err)
	}
	target := resp.GetTarget().GetId()
	l := s.getLookup()
	s.readPrompt(l, req)
	usable := (len(l.prompt.Tokens) - 1) / defaultBlockSize
	if usable%approxStride == 0 {
		t.Fatalf("prompt of %d usable blocks: pick one that is not a multiple of %d", usable, approxStride)
	}
	later := now.Add(time.Minute) // past the speculative TTL, within the approximate one
	s.kv.Sweep(later)
	var out load.Outcome
	l.cands, out = s.table.Candidates("m", nil, l.cands)
	if out != load.Routed {
		t.Fatal(out)
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
