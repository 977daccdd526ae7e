// Package engine is the simulated vLLM engine: a model of vLLM v1's
// continuous-batching scheduler, its prefix-cached KV block pool and the KV
// events it publishes, priced by a step cost model in model time. It has no
// HTTP or tokenizer in it; internal/sim wraps it as a worker.
//
// The engine reproduces vLLM where a router can observe it: which requests
// run or wait, how many prompt tokens hit the prefix cache, when blocks are
// stored and evicted (and the events saying so), preemption under block
// pressure, and time to first token growing with queueing and uncached
// prefill. It does not model sampling, stop strings or EOS: every request
// generates exactly its max tokens.
package engine

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/vllm/kvevents"
)

// EventSink receives one batch of KV events per step that has any. Publish
// must not block the engine (a ZMQ publisher queues and drops when full).
type EventSink interface {
	Publish(kvevents.Batch) error
}

// Observer is told what each step did, for metrics. It is called with the
// engine's lock held, so never concurrently, and before the step's tokens
// reach their clients: a client that got its last token sees metrics that
// count it. It must be quick, must not call the Engine, and must not retain
// slices.
type Observer interface {
	StepDone(StepStats)
	RequestFinished(RequestStats)
}

// StepStats describes one completed step.
type StepStats struct {
	Start, End       float64 // model seconds
	Running, Waiting int     // after the step
	KVUsage          float64 // fraction of usable blocks referenced by requests
	PrefillTokens    int     // scheduled prefill tokens
	DecodeSeqs       int
	// Increments since the previous step.
	PrefixQueries, PrefixHits      uint64
	Preemptions                    uint64
	PromptTokens, GenerationTokens uint64
	TTFTs, InterTokenLatencies     []float64 // model seconds, this step's tokens
}

// RequestStats is one finished (or aborted) request.
type RequestStats struct {
	PromptTokens     int
	CachedTokens     int // prefix-cache hit at first admission
	CompletionTokens int
	MaxTokens        int
	FinishReason     string // "length" or "abort"
	Preemptions      int
	// Model seconds. TTFT and PrefillTime are 0 when no token came out;
	// QueueTime is 0 when never scheduled.
	Arrival, TTFT, E2E, QueueTime, PrefillTime float64
}

// Request is a submission.
type Request struct {
	Prompt    []uint32
	MaxTokens int
	// Seed varies the generated text between otherwise equal requests.
	Seed uint64
}

// Options wire an engine to its surroundings. Zero values: a real-time
// clock, no KV events, no observer, no logs.
type Options struct {
	Clock    Clock
	Sink     EventSink
	Observer Observer
	Log      zerolog.Logger
	// GenerationTokens are the ids generated text cycles through; they
	// should decode to text. Default: 1..4 repeated.
	GenerationTokens []uint32
}

// Errors from Submit and Estimate.
var (
	ErrClosed      = errors.New("engine stopped")
	ErrEmptyPrompt = errors.New("prompt has no tokens")
	ErrTooLong     = errors.New("prompt and completion exceed the maximum model length")
	ErrBadLimit    = errors.New("max tokens must be at least 1")
)

// Engine is one simulated vLLM engine. Submit, Estimate, Stats and Cancel are
// safe for concurrent use; Step and Run drive it from one goroutine.
type Engine struct {
	cfg   Config
	clock Clock
	sink  EventSink
	obs   Observer
	log   zerolog.Logger

	mu       sync.Mutex
	st       *state
	events   []kvevents.Event
	nextID   uint64
	closed   bool
	lastTot  Counters
	ttfts    []float64
	itls     []float64
	finished []RequestStats
	pending  []delivery
	// delivered is the model end time of the last completed step. A client
	// reacting to that step's output cannot arrive before it, even when the
	// engine ran ahead of the wall clock (ScaledClock skips sub-timer
	// sleeps), so arrivals are clamped to it: causality, not wall jitter,
	// decides what a follow-up request waits for.
	delivered time.Duration

	wake chan struct{}
}

// New builds an engine; cfg must pass Validate.
func New(cfg Config, opts Options) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Clock == nil {
		opts.Clock = NewScaledClock(1)
	}
	gen := opts.GenerationTokens
	if len(gen) == 0 {
		gen = []uint32{1, 2, 3, 4}
	}
	root, err := rootHash(cfg.HashSeed)
	if err != nil {
		return nil, err
	}
	e := &Engine{
		cfg:   cfg,
		clock: opts.Clock,
		sink:  opts.Sink,
		obs:   opts.Observer,
		log:   opts.Log,
		wake:  make(chan struct{}, 1),
	}
	e.st = newState(&e.cfg, root, slices.Clone(gen))
	if e.sink != nil {
		e.st.pool.events = &e.events
	}
	return e, nil
}

// rootHash is the parent of every chain's first block, vLLM's NONE_HASH:
// derived from the seed when one is given, random otherwise.
func rootHash(seed string) (uint64, error) {
	if seed != "" {
		return xxhash.Sum64String("switchyard-sim/none-hash/" + seed), nil
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, fmt.Errorf("seed block hashes: %w", err)
	}
	return xxhash.Sum64(b[:]), nil
}

// Config returns the engine's configuration.
func (e *Engine) Config() Config { return e.cfg }

// Now is the engine clock's model time.
func (e *Engine) Now() time.Duration { return e.clock.Now() }

func (e *Engine) newRequest(req Request) (*request, error) {
	switch {
	case len(req.Prompt) == 0:
		return nil, ErrEmptyPrompt
	case req.MaxTokens < 1:
		return nil, ErrBadLimit
	case len(req.Prompt)+req.MaxTokens > e.cfg.MaxModelLen:
		return nil, fmt.Errorf("%w: %d prompt + %d completion tokens > %d",
			ErrTooLong, len(req.Prompt), req.MaxTokens, e.cfg.MaxModelLen)
	}
	toks := make([]uint32, len(req.Prompt), len(req.Prompt)+req.MaxTokens)
	copy(toks, req.Prompt)
	d := xxhash.New()
	var b [8]byte
	for _, v := range []uint64{e.cfg.Seed, req.Seed, uint64(len(req.Prompt)), uint64(req.Prompt[len(req.Prompt)-1])} {
		putU64(b[:], v)
		_, _ = d.Write(b[:])
	}
	return &request{
		tokens:       toks,
		numPrompt:    len(req.Prompt),
		maxTokens:    req.MaxTokens,
		cachedTokens: -1,
		genOffset:    d.Sum64(),
	}, nil
}

func putU64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}

// arrivalNow is the model time of an arrival now. Call with e.mu held.
func (e *Engine) arrivalNow() time.Duration {
	return max(e.clock.Now(), e.delivered)
}

// Submit enqueues a request arriving now.
func (e *Engine) Submit(req Request) (*Handle, error) {
	r, err := e.newRequest(req)
	if err != nil {
		return nil, err
	}
	h := &Handle{eng: e, r: r, notify: make(chan struct{}, 1), promptTokens: r.numPrompt}
	r.handle = h
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	e.nextID++
	r.id = e.nextID
	r.arrival = e.arrivalNow()
	e.st.enqueue(r)
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
	return h, nil
}

// Step runs one engine step: schedule, wait on the clock for the step's
// model duration, then complete it. It reports false when there was nothing
// to run (after publishing any pending events, such as a cache reset's).
// Never call Step concurrently with itself or Run.
func (e *Engine) Step(ctx context.Context) (bool, error) {
	e.mu.Lock()
	p := e.st.schedule()
	if p == nil {
		events := e.takeEvents()
		e.mu.Unlock()
		e.publish(events)
		return false, nil
	}
	end := p.end
	e.mu.Unlock()

	if err := e.clock.WaitUntil(ctx, end); err != nil {
		return false, err
	}
	if sc, ok := e.clock.(StopClock); ok {
		resumed, err := sc.WaitStopped(ctx)
		if err != nil {
			return false, err
		}
		end = max(end, resumed)
	}

	e.mu.Lock()
	p.end = end
	e.st.apply(e.deliver)
	e.delivered = end
	events := e.takeEvents()
	stats := e.stepStats(p)
	if e.obs != nil {
		e.obs.StepDone(stats)
		for _, f := range e.finished {
			e.obs.RequestFinished(f)
		}
	}
	for _, d := range e.pending {
		if d.last {
			d.h.finish(&d.tok, d.rs)
		} else {
			d.h.push(d.tok)
		}
	}
	clear(e.pending)
	e.pending, e.finished = e.pending[:0], e.finished[:0]
	e.ttfts, e.itls = e.ttfts[:0], e.itls[:0]
	e.mu.Unlock()

	e.publish(events)
	return true, nil
}

// Run steps until ctx ends, sleeping while idle. Requests still in the
// engine then end with FinishReason "abort".
func (e *Engine) Run(ctx context.Context) error {
	defer e.shutdown()
	for {
		did, err := e.Step(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if did {
			continue
		}
		select {
		case <-e.wake:
		case <-ctx.Done():
			return nil
		}
	}
}

func (e *Engine) shutdown() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	for _, r := range slices.Concat(e.st.running, e.st.waiting) {
		e.abortLocked(r)
	}
	e.st.plan = nil
}

// delivery is a token on its way to a handle; last carries the final
// accounting with the final token, so a reader sees both at once.
type delivery struct {
	h    *Handle
	tok  uint32
	last bool
	rs   RequestStats
}

// deliver records a step's token for metrics and queues it for its
// handle; called by apply, under mu.
func (e *Engine) deliver(o outcome) {
	r := o.r
	if o.first {
		e.ttfts = append(e.ttfts, (r.firstToken - r.arrival).Seconds())
	} else {
		e.itls = append(e.itls, o.itl.Seconds())
	}
	d := delivery{h: r.handle, tok: o.token}
	if o.finished {
		d.last, d.rs = true, e.requestStats(r, "length")
		e.finished = append(e.finished, d.rs)
	}
	if d.h != nil {
		e.pending = append(e.pending, d)
	}
}

// abortLocked drops r from the engine, reports it and completes its
// handle; called under mu.
func (e *Engine) abortLocked(r *request) {
	e.st.abort(r)
	rs := e.requestStats(r, "abort")
	if e.obs != nil {
		e.obs.RequestFinished(rs)
	}
	if r.handle != nil {
		r.handle.finish(nil, rs)
	}
}

func (e *Engine) requestStats(r *request, reason string) RequestStats {
	end := r.finished
	if reason == "abort" {
		end = e.clock.Now()
	}
	rs := RequestStats{
		PromptTokens:     r.numPrompt,
		CachedTokens:     max(r.cachedTokens, 0),
		CompletionTokens: r.numOutput(),
		MaxTokens:        r.maxTokens,
		FinishReason:     reason,
		Preemptions:      r.preemptions,
		Arrival:          r.arrival.Seconds(),
		E2E:              (end - r.arrival).Seconds(),
	}
	if r.cachedTokens >= 0 {
		rs.QueueTime = (r.firstScheduled - r.arrival).Seconds()
	}
	if r.numOutput() > 0 {
		rs.TTFT = (r.firstToken - r.arrival).Seconds()
		rs.PrefillTime = (r.firstToken - r.firstScheduled).Seconds()
	}
	return rs
}

func (e *Engine) stepStats(p *plan) StepStats {
	t := e.st.totals
	s := StepStats{
		Start: p.start.Seconds(), End: p.end.Seconds(),
		Running:             len(e.st.running),
		Waiting:             len(e.st.waiting),
		KVUsage:             e.st.pool.usage(),
		PrefillTokens:       p.prefillTokens,
		DecodeSeqs:          p.decodeSeqs,
		PrefixQueries:       t.PrefixQueries - e.lastTot.PrefixQueries,
		PrefixHits:          t.PrefixHits - e.lastTot.PrefixHits,
		Preemptions:         t.Preemptions - e.lastTot.Preemptions,
		PromptTokens:        t.PromptTokens - e.lastTot.PromptTokens,
		GenerationTokens:    t.GenerationTokens - e.lastTot.GenerationTokens,
		TTFTs:               e.ttfts,
		InterTokenLatencies: e.itls,
	}
	e.lastTot = t
	return s
}

func (e *Engine) takeEvents() []kvevents.Event {
	if len(e.events) == 0 {
		return nil
	}
	ev := e.events
	e.events = nil
	return ev
}

func (e *Engine) publish(events []kvevents.Event) {
	if len(events) == 0 || e.sink == nil {
		return
	}
	b := kvevents.Batch{TS: float64(time.Now().UnixNano()) / 1e9, Events: events}
	if err := e.sink.Publish(b); err != nil {
		e.log.Warn().Err(err).Int("events", len(events)).Msg("kv event batch dropped")
	}
}

func (e *Engine) cancel(r *request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r.status != statusWaiting && r.status != statusRunning {
		return
	}
	e.abortLocked(r)
}

// ResetPrefixCache forgets every cached block, like vLLM's
// /reset_prefix_cache. Like vLLM it refuses (false) while requests hold
// blocks. The AllBlocksCleared event goes out with the next step, or at
// once on an idle engine driven by Run.
func (e *Engine) ResetPrefixCache() bool {
	e.mu.Lock()
	ok := e.st.pool.reset()
	e.mu.Unlock()
	if ok {
		select {
		case e.wake <- struct{}{}:
		default:
		}
	}
	return ok
}

// Stats is a snapshot of the engine.
type Stats struct {
	ModelTime        time.Duration
	Running, Waiting int
	KVUsage          float64
	NumGPUBlocks     int
	FreeBlocks       int // including cached blocks no request references
	CachedBlocks     int // distinct hashes in the prefix cache
	Counters
}

// Stats returns a snapshot.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return Stats{
		ModelTime:    e.clock.Now(),
		Running:      len(e.st.running),
		Waiting:      len(e.st.waiting),
		KVUsage:      e.st.pool.usage(),
		NumGPUBlocks: e.cfg.NumGPUBlocks,
		FreeBlocks:   e.st.pool.numFree,
		CachedBlocks: len(e.st.pool.cache),
		Counters:     e.st.totals,
	}
}

// Estimate is what a request would get if it arrived now.
type Estimate struct {
	TTFT         float64 // model seconds
	CachedTokens int
	PromptTokens int
}

// CachedPrefix is how many tokens of prompt the prefix cache holds now,
// in whole blocks: what a request admitted at once would hit (at most
// (len-1)/block size blocks, as vLLM leaves the last token to compute).
// Unlike Estimate it runs nothing forward: it is the cache the engine's KV
// events describe at this moment.
func (e *Engine) CachedPrefix(prompt []uint32) int {
	if len(prompt) == 0 {
		return 0
	}
	r := &request{tokens: prompt}
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.st.lookup(r)) * e.cfg.BlockSize
}

// maxEstimateSteps bounds a forward simulation; a valid state finishes far
// sooner (every request fits the pool alone).
const maxEstimateSteps = 10_000_000

// Estimate simulates a copy of the engine forward, with the request added
// now and nothing else arriving, until the request's first token. No wall
// time passes. The answer is exact for this engine: if nothing else
// arrives, the request submitted now gets this TTFT.
func (e *Engine) Estimate(prompt []uint32, maxTokens int) (Estimate, error) {
	r, err := e.newRequest(Request{Prompt: prompt, MaxTokens: maxTokens})
	if err != nil {
		return Estimate{}, err
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return Estimate{}, ErrClosed
	}
	c := e.st.clone()
	r.arrival = e.arrivalNow()
	e.mu.Unlock()

	c.enqueue(r)
	c.apply(nil) // the step in flight, if any, completes first
	for range maxEstimateSteps {
		if c.schedule() == nil {
			return Estimate{}, errors.New("estimate: engine idle before the request ran")
		}
		c.apply(nil)
		if r.numOutput() > 0 {
			return Estimate{TTFT: (r.firstToken - r.arrival).Seconds(), CachedTokens: r.cachedTokens, PromptTokens: r.numPrompt}, nil
		}
	}
	return Estimate{}, errors.New("estimate: no first token within the step limit")
}

// Handle follows one submitted request.
type Handle struct {
	eng          *Engine
	r            *request // guarded by eng.mu
	promptTokens int

	mu     sync.Mutex
	tokens []uint32
	done   bool
	res    RequestStats
	notify chan struct{}
}

func (h *Handle) push(tok uint32) {
	h.mu.Lock()
	h.tokens = append(h.tokens, tok)
	h.mu.Unlock()
	h.signal()
}

func (h *Handle) finish(last *uint32, rs RequestStats) {
	h.mu.Lock()
	if last != nil {
		h.tokens = append(h.tokens, *last)
	}
	h.done, h.res = true, rs
	h.mu.Unlock()
	h.signal()
}

func (h *Handle) signal() {
	select {
	case h.notify <- struct{}{}:
	default:
	}
}

// PromptTokens is the request's prompt length.
func (h *Handle) PromptTokens() int { return h.promptTokens }

// Next blocks until tokens beyond the first `from` exist or the request is
// done, and returns the new tokens. done is true once no more will come;
// then Result is final.
func (h *Handle) Next(ctx context.Context, from int) (tokens []uint32, done bool, err error) {
	for {
		h.mu.Lock()
		n, d := len(h.tokens), h.done
		if n > from || d {
			toks := h.tokens[min(from, n):n:n]
			h.mu.Unlock()
			return toks, d, nil
		}
		h.mu.Unlock()
		select {
		case <-h.notify:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}

// Done reports whether the request has finished or was aborted.
func (h *Handle) Done() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.done
}

// Result is the request's accounting once Next reported done.
func (h *Handle) Result() RequestStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.res
}

// Cancel aborts the request (a client went away) and frees its blocks.
// Cancelling a finished request does nothing.
func (h *Handle) Cancel() { h.eng.cancel(h.r) }
