package engine

import (
	"encoding/binary"
	"slices"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/switchyard-dev/switchyard/internal/vllm/kvevents"
)

type reqStatus uint8

const (
	statusWaiting reqStatus = iota
	statusRunning
	statusFinished
	statusAborted
)

// request is the engine's view of one request, like vLLM's Request: all its
// tokens so far (prompt then generated), how many have KV computed, and the
// blocks holding that KV.
type request struct {
	id          uint64
	tokens      []uint32
	numPrompt   int
	maxTokens   int
	numComputed int
	blocks      []int32
	// hashes are the chained hashes of tokens' full blocks, as far as they
	// have been computed; they survive preemption.
	hashes []uint64
	// numCommitted blocks of blocks are in the prefix cache.
	numCommitted int
	// cachedTokens is the prefix-cache hit at first admission, -1 before.
	cachedTokens int
	genOffset    uint64
	status       reqStatus
	preemptions  int

	arrival, firstScheduled, firstToken, lastToken, finished time.Duration

	handle *Handle // nil in a simulated copy
}

func (r *request) numOutput() int { return len(r.tokens) - r.numPrompt }

type entry struct {
	r      *request
	n      int
	decode bool
}

// plan is one scheduled step.
type plan struct {
	start, end    time.Duration
	entries       []entry
	prefillTokens int
	decodeSeqs    int
	kvRead        int
}

// Counters are cumulative since the engine started; metrics export them as
// counters. Prefix-cache queries and hits are in tokens, counted when a
// request is admitted (again after a preemption).
type Counters struct {
	PrefixQueries    uint64
	PrefixHits       uint64
	Preemptions      uint64
	PromptTokens     uint64
	GenerationTokens uint64
}

// state is everything a step reads and writes. The live engine and every
// Estimate run the same code on their own state.
type state struct {
	cfg     *Config
	perf    Perf
	pool    pool
	root    uint64
	genIDs  []uint32
	running []*request
	waiting []*request
	lastEnd time.Duration
	plan    *plan
	totals  Counters
	scratch []byte
	hits    []int32
	planBuf plan
}

func newState(cfg *Config, root uint64, genIDs []uint32) *state {
	s := &state{
		cfg:    cfg,
		pool:   newPool(cfg.NumGPUBlocks),
		root:   root,
		genIDs: genIDs,
	}
	s.perf = cfg.Perf
	return s
}

// clone copies the state deeply enough that stepping the copy leaves the
// original untouched. Token and hash slices are shared with their capacity
// cut, so the copy's appends reallocate instead of writing into them.
func (s *state) clone() *state {
	c := *s
	c.pool = s.pool.clone()
	c.scratch, c.hits, c.planBuf = nil, nil, plan{}
	m := make(map[*request]*request, len(s.running)+len(s.waiting))
	cp := func(r *request) *request {
		if n, ok := m[r]; ok {
			return n
		}
		n := *r
		n.tokens = r.tokens[:len(r.tokens):len(r.tokens)]
		n.hashes = r.hashes[:len(r.hashes):len(r.hashes)]
		n.blocks = slices.Clone(r.blocks)
		n.handle = nil
		m[r] = &n
		return &n
	}
	c.running = make([]*request, len(s.running))
	for i, r := range s.running {
		c.running[i] = cp(r)
	}
	c.waiting = make([]*request, len(s.waiting))
	for i, r := range s.waiting {
		c.waiting[i] = cp(r)
	}
	if s.plan != nil {
		p := *s.plan
		p.entries = make([]entry, len(s.plan.entries))
		for i, e := range s.plan.entries {
			e.r = cp(e.r)
			p.entries[i] = e
		}
		c.plan = &p
	}
	return &c
}

// blockHash chains a full block onto its parent's hash.
func (s *state) blockHash(parent uint64, toks []uint32) uint64 {
	need := 8 + 4*len(toks)
	if cap(s.scratch) < need {
		s.scratch = make([]byte, need)
	}
	b := s.scratch[:need]
	binary.LittleEndian.PutUint64(b, parent)
	for i, t := range toks {
		binary.LittleEndian.PutUint32(b[8+4*i:], t)
	}
	return xxhash.Sum64(b)
}

// ensureHashes computes hashes of r's first n full blocks.
func (s *state) ensureHashes(r *request, n int) {
	bs := s.cfg.BlockSize
	for i := len(r.hashes); i < n; i++ {
		parent := s.root
		if i > 0 {
			parent = r.hashes[i-1]
		}
		r.hashes = append(r.hashes, s.blockHash(parent, r.tokens[i*bs:(i+1)*bs]))
	}
}

func (s *state) enqueue(r *request) {
	s.ensureHashes(r, len(r.tokens)/s.cfg.BlockSize)
	s.waiting = append(s.waiting, r)
}

// schedule plans the next step the way vLLM v1's scheduler does, or returns
// nil when there is nothing to run. Running requests come first, in order,
// each taking as many tokens as it needs out of the step budget (one for a
// decode, a chunk for a prefill); a request that cannot get a block preempts
// the most recent running request. Then, if nobody was preempted, waiting
// requests are admitted first-come first-served while a sequence slot, the
// budget and blocks last; the first that does not fit stops admission.
//
// A step starts when the previous one ended, or, on an idle engine, when
// the next request arrived; a request that arrived after a step started
// waits for the next one. Model time therefore never depends on wall-clock
// jitter, only on arrival times.
func (s *state) schedule() *plan {
	start := s.lastEnd
	if len(s.running) == 0 {
		if len(s.waiting) == 0 {
			return nil
		}
		start = max(start, s.waiting[0].arrival)
	}
	p := &s.planBuf
	*p = plan{start: start, entries: p.entries[:0]}
	budget := s.cfg.MaxNumBatchedTokens
	preempted := false

	for i := 0; i < len(s.running) && budget > 0; {
		r := s.running[i]
		n := min(len(r.tokens)-r.numComputed, budget)
		scheduled := true
		for !s.allocate(r, n, nil) {
			victim := s.running[len(s.running)-1]
			s.running = s.running[:len(s.running)-1]
			s.preempt(victim)
			preempted = true
			if victim == r {
				scheduled = false
				break
			}
		}
		if !scheduled {
			break
		}
		s.addEntry(p, r, n)
		budget -= n
		i++
	}

	for !preempted && len(s.waiting) > 0 && budget > 0 && len(s.running) < s.cfg.MaxNumSeqs {
		r := s.waiting[0]
		if r.arrival > start {
			break
		}
		hits := s.lookup(r)
		numHit := len(hits) * s.cfg.BlockSize
		n := min(len(r.tokens)-numHit, budget)
		if !s.allocate(r, n, hits) {
			break
		}
		s.waiting = s.waiting[1:]
		s.totals.PrefixQueries += uint64(len(r.tokens))
		s.totals.PrefixHits += uint64(numHit)
		if r.cachedTokens < 0 {
			r.cachedTokens = numHit
			r.firstScheduled = start
		}
		r.status = statusRunning
		s.running = append(s.running, r)
		s.addEntry(p, r, n)
		budget -= n
	}

	if len(p.entries) == 0 && !preempted {
		return nil
	}
	p.end = start + s.perf.StepBase + time.Duration(p.prefillTokens)*s.perf.PrefillToken +
		time.Duration(p.decodeSeqs)*s.perf.DecodeSeq + time.Duration(p.kvRead)*s.perf.KVReadToken
	if len(p.entries) == 0 {
		p.end = start
	}
	s.plan = p
	return p
}

func (s *state) addEntry(p *plan, r *request, n int) {
	decode := n == 1 && r.numOutput() > 0 && r.numComputed == len(r.tokens)-1
	p.entries = append(p.entries, entry{r: r, n: n, decode: decode})
	if decode {
		p.decodeSeqs++
	} else {
		p.prefillTokens += n
	}
	// n is added to numComputed at schedule time in vLLM too; here it is
	// applied at the step's end, so count the context as it is now.
	p.kvRead += r.numComputed
}

// lookup returns the cached blocks of r's longest cached prefix. Like vLLM
// it stops one token short of the whole request, since the last token must
// be computed to produce logits.
func (s *state) lookup(r *request) []int32 {
	s.hits = s.hits[:0]
	if r.numComputed > 0 {
		return s.hits
	}
	maxBlocks := (len(r.tokens) - 1) / s.cfg.BlockSize
	s.ensureHashes(r, maxBlocks)
	for i := 0; i < maxBlocks; i++ {
		id, ok := s.pool.lookup(r.hashes[i])
		if !ok {
			break
		}
		s.hits = append(s.hits, id)
	}
	return s.hits
}

// allocate gives r the blocks for n more tokens (after hits, for a request
// being admitted) and commits the blocks those tokens fill to the prefix
// cache, as vLLM's allocate_slots does. It changes nothing and returns false
// when the free list cannot cover it.
func (s *state) allocate(r *request, n int, hits []int32) bool {
	bs := s.cfg.BlockSize
	computed := r.numComputed + len(hits)*bs
	need := (computed+n+bs-1)/bs - len(r.blocks) - len(hits)
	evictableHits := 0
	for _, id := range hits {
		if s.pool.blocks[id].ref == 0 {
			evictableHits++
		}
	}
	if need > s.pool.numFree-evictableHits {
		return false
	}
	for _, id := range hits {
		s.pool.touch(id)
	}
	r.blocks = append(r.blocks, hits...)
	if len(hits) > 0 {
		r.numComputed = computed
		r.numCommitted = len(hits)
	}
	for range max(need, 0) {
		r.blocks = append(r.blocks, s.pool.allocate())
	}
	s.commit(r, min(computed+n, len(r.tokens))/bs)
	return true
}

// commit caches r's blocks up to full and reports them in one BlockStored.
func (s *state) commit(r *request, full int) {
	from := r.numCommitted
	if full <= from {
		return
	}
	s.ensureHashes(r, full)
	for i := from; i < full; i++ {
		s.pool.commit(r.blocks[i], r.hashes[i])
	}
	r.numCommitted = full
	if s.pool.events == nil {
		return
	}
	bs := s.cfg.BlockSize
	ev := &kvevents.BlockStored{
		BlockHashes: make([]kvevents.EngineHash, full-from),
		TokenIDs:    r.tokens[from*bs : full*bs : full*bs],
		BlockSize:   bs,
		Medium:      mediumGPU(),
	}
	for i := range ev.BlockHashes {
		ev.BlockHashes[i] = kvevents.EngineHash(r.hashes[from+i])
	}
	if from > 0 {
		parent := kvevents.EngineHash(r.hashes[from-1])
		ev.ParentBlockHash = &parent
	}
	*s.pool.events = append(*s.pool.events, ev)
}

// freeBlocks releases r's blocks last first, so a request's tail is evicted
// before its head (vLLM frees in reverse for the same reason).
func (s *state) freeBlocks(r *request) {
	for i := len(r.blocks) - 1; i >= 0; i-- {
		s.pool.release(r.blocks[i])
	}
	r.blocks = r.blocks[:0]
	r.numCommitted = 0
}

// preempt is vLLM v1's recompute preemption: drop the KV, go back to the
// front of the queue.
func (s *state) preempt(r *request) {
	s.freeBlocks(r)
	r.numComputed = 0
	r.status = statusWaiting
	r.preemptions++
	s.totals.Preemptions++
	s.waiting = slices.Insert(s.waiting, 0, r)
}

// outcome is what a step did to one request, for delivery.
type outcome struct {
	r        *request
	token    uint32
	first    bool
	finished bool
	itl      time.Duration
}

// apply completes the in-flight step at its end time: requests whose tokens
// are all computed sample one token; those that reach their length finish
// and free their blocks. out receives one outcome per produced token.
func (s *state) apply(out func(outcome)) {
	p := s.plan
	if p == nil {
		return
	}
	s.plan = nil
	s.lastEnd = p.end
	finishedAny := false
	for _, e := range p.entries {
		r := e.r
		if r.status != statusRunning {
			continue // aborted while the step ran
		}
		r.numComputed += e.n
		if r.numComputed < len(r.tokens) {
			continue // a prefill chunk; more to come
		}
		tok := s.genIDs[(r.genOffset+uint64(r.numOutput()))%uint64(len(s.genIDs))]
		r.tokens = append(r.tokens, tok)
		o := outcome{r: r, token: tok}
		if r.numOutput() == 1 {
			o.first = true
			r.firstToken = p.end
			s.totals.PromptTokens += uint64(r.numPrompt)
		} else {
			o.itl = p.end - r.lastToken
		}
		r.lastToken = p.end
		s.totals.GenerationTokens++
		if r.numOutput() >= r.maxTokens {
			r.status = statusFinished
			r.finished = p.end
			s.freeBlocks(r)
			o.finished = true
			finishedAny = true
		}
		if out != nil {
			out(o)
		}
	}
	if finishedAny {
		s.running = slices.DeleteFunc(s.running, func(r *request) bool { return r.status != statusRunning })
	}
}

// abort removes r wherever it is and frees its blocks.
func (s *state) abort(r *request) {
	switch r.status {
	case statusRunning:
		s.running = slices.DeleteFunc(s.running, func(x *request) bool { return x == r })
		s.freeBlocks(r)
	case statusWaiting:
		s.waiting = slices.DeleteFunc(s.waiting, func(x *request) bool { return x == r })
	default:
		return
	}
	r.status = statusAborted
}
