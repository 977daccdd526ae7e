package engine

import (
	"context"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/vllm/kvevents"
)

// sink records published batches.
type sink struct {
	mu      sync.Mutex
	batches []kvevents.Batch
}

func (s *sink) Publish(b kvevents.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, b)
	return nil
}

func (s *sink) events() []kvevents.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []kvevents.Event
	for _, b := range s.batches {
		out = append(out, b.Events...)
	}
	return out
}

func (s *sink) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = nil
}

// testCfg is a small engine with round step costs.
func testCfg() Config {
	return Config{
		BlockSize:           16,
		NumGPUBlocks:        1001,
		MaxNumSeqs:          8,
		MaxNumBatchedTokens: 2048,
		MaxModelLen:         8192,
		Perf: Perf{
			StepBase:     10 * time.Millisecond,
			PrefillToken: 100 * time.Microsecond,
			DecodeSeq:    time.Millisecond,
			KVReadToken:  time.Microsecond,
		},
		HashSeed: "test",
	}
}

type harness struct {
	t     *testing.T
	e     *Engine
	clock *ManualClock
	sink  *sink
	steps []StepStats
	done  []RequestStats
}

func (h *harness) StepDone(s StepStats) {
	s.TTFTs, s.InterTokenLatencies = slices.Clone(s.TTFTs), slices.Clone(s.InterTokenLatencies)
	h.steps = append(h.steps, s)
}
func (h *harness) RequestFinished(r RequestStats) { h.done = append(h.done, r) }

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := &harness{t: t, clock: &ManualClock{}, sink: &sink{}}
	e, err := New(cfg, Options{Clock: h.clock, Sink: h.sink, Observer: h})
	if err != nil {
		t.Fatal(err)
	}
	h.e = e
	return h
}

func (h *harness) submit(prompt []uint32, maxTokens int) *Handle {
	h.t.Helper()
	hd, err := h.e.Submit(Request{Prompt: prompt, MaxTokens: maxTokens})
	if err != nil {
		h.t.Fatal(err)
	}
	return hd
}

func (h *harness) step() bool {
	h.t.Helper()
	did, err := h.e.Step(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return did
}

// drain steps until the engine is idle.
func (h *harness) drain() {
	h.t.Helper()
	for i := 0; h.step(); i++ {
		if i > 1_000_000 {
			h.t.Fatal("engine never went idle")
		}
	}
}

func result(t *testing.T, hd *Handle) ([]uint32, RequestStats) {
	t.Helper()
	toks, done, err := hd.Next(context.Background(), 0)
	if err != nil || !done {
		t.Fatalf("request not done: done=%v err=%v", done, err)
	}
	return toks, hd.Result()
}

func seq(start, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(start + i)
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestRepeatedPromptHitsCacheAndLowersTTFT(t *testing.T) {
	h := newHarness(t, testCfg())
	prompt := seq(1000, 1000)

	first := h.submit(prompt, 4)
	h.drain()
	toks1, r1 := result(t, first)

	second := h.submit(prompt, 4)
	h.drain()
	toks2, r2 := result(t, second)

	// One prefill step of 1000 tokens: 10 ms + 1000 × 0.1 ms.
	if want := 0.010 + 1000*0.0001; !near(r1.TTFT, want) {
		t.Errorf("cold TTFT = %v, want %v", r1.TTFT, want)
	}
	if r1.CachedTokens != 0 {
		t.Errorf("cold cached tokens = %d", r1.CachedTokens)
	}
	// 62 full blocks of the 999 tokens before the last are cached.
	if r2.CachedTokens != 992 {
		t.Errorf("warm cached tokens = %d, want 992", r2.CachedTokens)
	}
	// 8 uncached tokens, reading 992 cached ones.
	if want := 0.010 + 8*0.0001 + 992*1e-6; !near(r2.TTFT, want) {
		t.Errorf("warm TTFT = %v, want %v", r2.TTFT, want)
	}
	if r2.TTFT >= r1.TTFT {
		t.Errorf("warm TTFT %v not below cold %v", r2.TTFT, r1.TTFT)
	}
	if !slices.Equal(toks1, toks2) || len(toks1) != 4 {
		t.Errorf("generation not deterministic: %v vs %v", toks1, toks2)
	}
	st := h.e.Stats()
	if st.PrefixQueries != 2000 || st.PrefixHits != 992 {
		t.Errorf("prefix counters = %d/%d, want 2000/992", st.PrefixHits, st.PrefixQueries)
	}
	if st.PromptTokens != 2000 || st.GenerationTokens != 8 {
		t.Errorf("token counters = %d/%d", st.PromptTokens, st.GenerationTokens)
	}
}

func TestFullyCachedBlockAlignedPromptRecomputesLastBlock(t *testing.T) {
	h := newHarness(t, testCfg())
	prompt := seq(5, 64) // exactly 4 blocks
	h.submit(prompt, 1)
	h.drain()
	hd := h.submit(prompt, 1)
	h.drain()
	_, r := result(t, hd)
	// vLLM caps the hit at len-1 tokens, so the last block is recomputed.
	if r.CachedTokens != 48 {
		t.Errorf("cached tokens = %d, want 48", r.CachedTokens)
	}
}

func TestBusyWorkerQueuesLongPrompt(t *testing.T) {
	h := newHarness(t, testCfg())
	a := h.submit(seq(1, 2000), 8)
	b := h.submit(seq(100000, 2000), 8)
	c := h.submit(seq(200000, 2000), 8)
	h.step()
	// a takes 2000 of the 2048-token budget, b gets a 48-token chunk, c
	// must wait.
	s := h.steps[0]
	if s.Running != 2 || s.Waiting != 1 {
		t.Fatalf("after step 1: running %d waiting %d, want 2 and 1", s.Running, s.Waiting)
	}
	if s.PrefillTokens != 2048 {
		t.Errorf("step 1 prefill tokens = %d, want 2048", s.PrefillTokens)
	}
	h.drain()
	_, ra := result(t, a)
	_, rb := result(t, b)
	_, rc := result(t, c)
	if ra.QueueTime != 0 || rb.QueueTime != 0 {
		t.Errorf("a, b queue times = %v, %v, want 0", ra.QueueTime, rb.QueueTime)
	}
	if rc.QueueTime <= 0 {
		t.Errorf("c queue time = %v, want > 0", rc.QueueTime)
	}
	if !(ra.TTFT < rb.TTFT && rb.TTFT < rc.TTFT) {
		t.Errorf("TTFTs not in arrival order: %v %v %v", ra.TTFT, rb.TTFT, rc.TTFT)
	}
}

func TestBlockStoredChainsParentsAndTokens(t *testing.T) {
	cfg := testCfg()
	h := newHarness(t, cfg)
	prompt := seq(7, 40)
	hd := h.submit(prompt, 12)
	h.drain()
	gen, _ := result(t, hd)
	all := slices.Concat(prompt, gen)

	var stored []*kvevents.BlockStored
	for _, ev := range h.sink.events() {
		if bs, ok := ev.(*kvevents.BlockStored); ok {
			stored = append(stored, bs)
		}
	}
	// The prompt's 2 full blocks after prefill, then block 3 once its last
	// (generated) token is fed back during decode. The 52nd token is the
	// last sampled and never computed, so block 4 (48..63) never fills.
	if len(stored) != 2 {
		t.Fatalf("got %d BlockStored events, want 2: %+v", len(stored), stored)
	}
	first, second := stored[0], stored[1]
	if first.ParentBlockHash != nil || len(first.BlockHashes) != 2 ||
		!slices.Equal(first.TokenIDs, all[:32]) || first.BlockSize != 16 {
		t.Errorf("prompt event wrong: %+v", first)
	}
	if second.ParentBlockHash == nil || *second.ParentBlockHash != first.BlockHashes[1] ||
		len(second.BlockHashes) != 1 || !slices.Equal(second.TokenIDs, all[32:48]) {
		t.Errorf("decode event wrong: %+v (parent should be %v)", second, first.BlockHashes[1])
	}
	for _, bs := range stored {
		if bs.Medium == nil || *bs.Medium != kvevents.MediumGPU || bs.LoRAID != nil || bs.LoRAName != nil {
			t.Errorf("event fields: %+v", bs)
		}
	}

	// A request extending the cached chain reports its new block under the
	// last hit block.
	h.sink.reset()
	longer := slices.Concat(all[:48], seq(900, 20))
	h.submit(longer, 1)
	h.drain()
	evs := h.sink.events()
	if len(evs) != 1 {
		t.Fatalf("extension events: %+v", evs)
	}
	ext := evs[0].(*kvevents.BlockStored)
	if ext.ParentBlockHash == nil || *ext.ParentBlockHash != second.BlockHashes[0] ||
		!slices.Equal(ext.TokenIDs, longer[48:64]) {
		t.Errorf("extension event: %+v", ext)
	}
}

func TestHashSeedControlsEngineHashes(t *testing.T) {
	hashes := func(seed string) kvevents.EngineHash {
		cfg := testCfg()
		cfg.HashSeed = seed
		h := newHarness(t, cfg)
		h.submit(seq(1, 20), 1)
		h.drain()
		return h.sink.events()[0].(*kvevents.BlockStored).BlockHashes[0]
	}
	a1, a2 := hashes("a"), hashes("a")
	if a1 != a2 {
		t.Error("same seed, different hashes")
	}
	if r1, r2 := hashes(""), hashes(""); a1 == hashes("b") || r1 == r2 {
		t.Error("different or random seeds gave equal hashes")
	}
}

func TestEvictionEmitsBlockRemoved(t *testing.T) {
	cfg := testCfg()
	cfg.BlockSize, cfg.NumGPUBlocks, cfg.MaxModelLen = 4, 9, 32 // 8 usable blocks
	h := newHarness(t, cfg)
	h.submit(seq(1, 17), 1) // 4 full blocks cached, 5 used
	h.drain()
	a := h.sink.events()[0].(*kvevents.BlockStored)
	if len(a.BlockHashes) != 4 {
		t.Fatalf("first request stored %d blocks", len(a.BlockHashes))
	}
	h.sink.reset()

	h.submit(seq(100, 29), 1) // needs all 8 blocks: evicts from the LRU head
	h.drain()
	var removed []kvevents.EngineHash
	for _, ev := range h.sink.events() {
		if r, ok := ev.(*kvevents.BlockRemoved); ok {
			if r.Medium == nil || *r.Medium != kvevents.MediumGPU {
				t.Errorf("BlockRemoved medium: %v", r.Medium)
			}
			removed = append(removed, r.BlockHashes...)
		}
	}
	// Blocks are freed last-first, so the chain's tail is evicted first;
	// the 3 never-used blocks and the first request's partial block go
	// before any cached block.
	want := []kvevents.EngineHash{a.BlockHashes[3], a.BlockHashes[2], a.BlockHashes[1], a.BlockHashes[0]}
	if !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	if st := h.e.Stats(); st.FreeBlocks != 8 {
		t.Errorf("free blocks after all done = %d, want 8", st.FreeBlocks)
	}
}

func TestPreemptionFreesAndRecomputes(t *testing.T) {
	cfg := testCfg()
	cfg.BlockSize, cfg.NumGPUBlocks, cfg.MaxModelLen = 4, 7, 24 // 6 usable blocks
	solo := func(prompt []uint32) []uint32 {
		h := newHarness(t, cfg)
		hd := h.submit(prompt, 10)
		h.drain()
		toks, _ := result(t, hd)
		return toks
	}
	pa, pb := seq(1, 8), seq(50, 8)
	wantA, wantB := solo(pa), solo(pb)

	h := newHarness(t, cfg)
	a := h.submit(pa, 10)
	b := h.submit(pb, 10)
	h.drain()
	ta, ra := result(t, a)
	tb, rb := result(t, b)
	if !slices.Equal(ta, wantA) || !slices.Equal(tb, wantB) {
		t.Errorf("tokens differ from solo runs: %v/%v vs %v/%v", ta, tb, wantA, wantB)
	}
	if rb.Preemptions == 0 || ra.Preemptions != 0 {
		t.Errorf("preemptions a=%d b=%d, want the later request preempted", ra.Preemptions, rb.Preemptions)
	}
	st := h.e.Stats()
	if st.Preemptions == 0 {
		t.Error("preemption counter is 0")
	}
	if st.FreeBlocks != 6 || st.KVUsage != 0 {
		t.Errorf("after all done: free %d usage %v", st.FreeBlocks, st.KVUsage)
	}
	// The recompute after preemption is prefill work beyond the two
	// prompts.
	prefill := 0
	for _, s := range h.steps {
		prefill += s.PrefillTokens
	}
	if prefill <= 16 {
		t.Errorf("prefill tokens = %d, want recompute beyond 16", prefill)
	}
}

func TestCancelFreesBlocks(t *testing.T) {
	cfg := testCfg()
	h := newHarness(t, cfg)
	tests := []struct {
		name  string
		steps int
	}{
		{"waiting", 0},
		{"prefilling", 1},
		{"decoding", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hd := h.submit(seq(1, 3000), 50)
			for range tc.steps {
				h.step()
			}
			hd.Cancel()
			_, done, err := hd.Next(context.Background(), 0)
			if !done || err != nil {
				t.Fatalf("cancelled request not done: %v %v", done, err)
			}
			if r := hd.Result(); r.FinishReason != "abort" {
				t.Errorf("finish reason %q", r.FinishReason)
			}
			st := h.e.Stats()
			if st.Running+st.Waiting != 0 || st.FreeBlocks != cfg.NumGPUBlocks-1 {
				t.Errorf("after cancel: running %d waiting %d free %d", st.Running, st.Waiting, st.FreeBlocks)
			}
			h.drain()
		})
	}
}

func TestResetPrefixCache(t *testing.T) {
	h := newHarness(t, testCfg())
	prompt := seq(1, 100)
	hd := h.submit(prompt, 3)
	h.step()
	if h.e.ResetPrefixCache() {
		t.Error("reset succeeded while a request holds blocks")
	}
	h.drain()
	result(t, hd)
	h.sink.reset()
	if !h.e.ResetPrefixCache() {
		t.Fatal("reset refused on an idle engine")
	}
	if h.step() {
		t.Error("idle step did work")
	}
	evs := h.sink.events()
	if len(evs) != 1 || evs[0].Tag() != kvevents.TagAllBlocksCleared {
		t.Errorf("events after reset: %+v", evs)
	}
	again := h.submit(prompt, 1)
	h.drain()
	if _, r := result(t, again); r.CachedTokens != 0 {
		t.Errorf("cached tokens after reset = %d", r.CachedTokens)
	}
}

func TestEstimateMatchesObservedTTFT(t *testing.T) {
	tests := []struct {
		name  string
		setup func(h *harness)
	}{
		{"idle", func(h *harness) {}},
		{"busy", func(h *harness) {
			for i := range 6 {
				h.submit(seq(i*10000, 1500+300*i), 40)
			}
			h.step()
			h.step()
		}},
		{"cached prefix behind a queue", func(h *harness) {
			h.submit(seq(0, 1200), 1)
			h.drain()
			for i := range 10 {
				h.submit(seq(50000+i*5000, 1800), 30)
			}
			h.step()
		}},
		{"under block pressure", func(h *harness) {
			for i := range 8 {
				h.submit(seq(i*3000, 1900), 200)
			}
			for range 5 {
				h.step()
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testCfg()
			cfg.NumGPUBlocks = 601 // 9600 tokens: the pressure case preempts
			h := newHarness(t, cfg)
			tc.setup(h)
			prompt := slices.Concat(seq(0, 1200), seq(777777, 40))
			est, err := h.e.Estimate(prompt, 5)
			if err != nil {
				t.Fatal(err)
			}
			hd := h.submit(prompt, 5)
			h.drain()
			_, r := result(t, hd)
			if est.TTFT != r.TTFT || est.CachedTokens != r.CachedTokens || est.PromptTokens != r.PromptTokens {
				t.Errorf("estimate %+v, observed TTFT %v cached %d prompt %d", est, r.TTFT, r.CachedTokens, r.PromptTokens)
			}
		})
	}
}

// gateClock blocks WaitUntil until released, to hold a step in flight.
type gateClock struct {
	ManualClock
	entered chan struct{}
	release chan struct{}
}

func (c *gateClock) WaitUntil(ctx context.Context, t time.Duration) error {
	select {
	case c.entered <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-c.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return c.ManualClock.WaitUntil(ctx, t)
}

func TestEstimateDuringStepInFlight(t *testing.T) {
	clock := &gateClock{entered: make(chan struct{}), release: make(chan struct{})}
	e, err := New(testCfg(), Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := e.Submit(Request{Prompt: seq(i*5000, 1500), MaxTokens: 10}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runDone := make(chan error, 1)
	go func() { runDone <- e.Run(ctx) }()
	<-clock.entered // step 1 is in flight: scheduled, not completed

	prompt := seq(900000, 700)
	est, err := e.Estimate(prompt, 3)
	if err != nil {
		t.Fatal(err)
	}
	hd, err := e.Submit(Request{Prompt: prompt, MaxTokens: 3})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			select {
			case clock.release <- struct{}{}:
			case <-clock.entered:
			case <-ctx.Done():
				return
			}
		}
	}()
	waitDone(t, ctx, hd)
	if r := hd.Result(); r.TTFT != est.TTFT {
		t.Errorf("estimate %v, observed %v", est.TTFT, r.TTFT)
	}
	cancel()
	if err := <-runDone; err != nil {
		t.Fatal(err)
	}
}

// waitDone reads hd to its end.
func waitDone(t *testing.T, ctx context.Context, hd *Handle) {
	t.Helper()
	for n := 0; ; {
		toks, done, err := hd.Next(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if done {
			return
		}
		n += len(toks)
	}
}

func TestSubmitValidation(t *testing.T) {
	h := newHarness(t, testCfg())
	tests := []struct {
		name string
		req  Request
	}{
		{"empty prompt", Request{MaxTokens: 1}},
		{"zero max tokens", Request{Prompt: seq(1, 3)}},
		{"too long", Request{Prompt: seq(1, 8000), MaxTokens: 193}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := h.e.Submit(tc.req); err == nil {
				t.Error("accepted")
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	tests := []struct {
		name string
		mod  func(*Config)
	}{
		{"block size", func(c *Config) { c.BlockSize = 0 }},
		{"blocks", func(c *Config) { c.NumGPUBlocks = 1 }},
		{"seqs", func(c *Config) { c.MaxNumSeqs = 0 }},
		{"budget below seqs", func(c *Config) { c.MaxNumBatchedTokens = 100 }},
		{"model len beyond cache", func(c *Config) { c.MaxModelLen = 1 << 20 }},
		{"negative cost", func(c *Config) { c.Perf.KVReadToken = -1 }},
		{"free steps", func(c *Config) { c.Perf = Perf{} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mod(&c)
			if err := c.Validate(); err == nil {
				t.Error("accepted")
			}
		})
	}
}
