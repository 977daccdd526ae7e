package router

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/internal/kvblock"
	"github.com/switchyard-dev/switchyard/internal/policy"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify"
	"github.com/switchyard-dev/switchyard/services/router/internal/endpoints"
	"github.com/switchyard-dev/switchyard/services/router/internal/load"
	"github.com/switchyard-dev/switchyard/services/router/internal/prompt"
	"github.com/switchyard-dev/switchyard/services/router/internal/replica"
)

// This file is one request's way through the router, in the order it
// goes: Route (or Explain) → decide → the prompt → the tags → the
// candidates → what each caches of the prompt → the scored table and the
// program's pick → the records the pick leaves. response.go turns the
// decision into the answer.

func (s *service) Route(ctx context.Context, req *routerv1.RouteRequest) (*routerv1.RouteResponse, error) {
	start := time.Now()
	resp, err := s.route(ctx, req, start)
	s.metrics.routeDuration.Observe(time.Since(start).Seconds())
	return resp, toStatus(err)
}

func (s *service) route(ctx context.Context, req *routerv1.RouteRequest, now time.Time) (*routerv1.RouteResponse, error) {
	if err := checkModel(req.GetModel()); err != nil {
		return nil, err
	}
	if req.GetRequestId() == "" {
		return nil, errEmptyRequestID
	}
	if err := checkFlow(req); err != nil {
		return nil, err
	}
	d := s.getDecision()
	defer s.putDecision(d)
	if req.GetCountOnly() {
		return s.countOnly(ctx, d, req, now)
	}
	if err := s.decide(ctx, d, req, now, false); err != nil {
		return nil, err
	}
	return d.response(), nil
}

// countOnly answers a count_only request: the decision made as Explain
// makes it (nothing recorded), answered with the prompt's length only, or
// the rejection of a model nothing serves.
func (s *service) countOnly(ctx context.Context, d *decision, req *routerv1.RouteRequest, now time.Time) (*routerv1.RouteResponse, error) {
	if err := s.decide(ctx, d, req, now, true); err != nil {
		return nil, err
	}
	if d.outcome() == modelNotFound {
		return d.response(), nil
	}
	return &routerv1.RouteResponse{Decision: &routerv1.Decision{
		PromptTokens:      d.tokens,
		PromptTokensExact: d.prompt.Kind == prompt.Tokens,
	}}, nil
}

// Explain is Route traced and without its records: the same decision,
// answered with every candidate's scoring and verdict.
func (s *service) Explain(ctx context.Context, req *routerv1.RouteRequest) (*routerv1.ExplainResponse, error) {
	if err := checkModel(req.GetModel()); err != nil {
		return nil, toStatus(err)
	}
	d := s.getDecision()
	defer s.putDecision(d)
	if err := s.decide(ctx, d, req, time.Now(), true); err != nil {
		return nil, toStatus(err)
	}
	return s.explanation(d), nil
}

// decision is one request's way through decide, and the memory it reuses
// (pooled: an 8k-token prompt needs a few kilobytes of hashes).
type decision struct {
	lookup // the prompt, and what each candidate caches of it
	req    *routerv1.RouteRequest
	st     *policyState
	creq   classify.Request // the request as classifiers see it
	tags   []string
	preq   policy.Request // the request as the program sees it
	models []string       // the models the program may serve it as
	rows   []load.Backend // one per (endpoint, model) of models, scored
	bs     []policy.Backend
	pd     policy.Decision
	// chosen indexes rows, -1 when nothing was chosen; served is the model
	// name the chosen target serves (the gateway writes it into the body).
	chosen int
	served string
	// held indexes the row the program picked when flow control held the
	// request instead (see hold), -1 when it was not held.
	held int
	// ctx is the caller's; Pick refuses to choose once it is done, and
	// ctxErr then says why.
	ctx    context.Context
	ctxErr error
	svc    *service
	// steps is the request's step clocks by endpoint, as of the table's
	// decision (see stepClocks); empty when the gateway sent none.
	steps map[string]load.StepClock
}

func (s *service) getDecision() *decision {
	if d, ok := s.scratch.Get().(*decision); ok {
		return d
	}
	return &decision{held: -1}
}

// putDecision returns d to the pool, holding no request's bytes.
func (s *service) putDecision(d *decision) {
	d.lookup.reset()
	d.req, d.st, d.preq = nil, nil, policy.Request{}
	d.creq.Reset()
	d.served = ""
	d.held = -1
	d.ctx, d.ctxErr, d.svc = nil, nil, nil
	clear(d.steps)
	s.scratch.Put(d)
}

// decide makes the decision for req into d. trace (Explain) stops before
// the decision leaves records: nothing is held in flight, speculated,
// published or counted.
//
// ctx bounds the work: reading the prompt checks it as it goes, and a
// decision whose caller has given up leaves no records — the caller will
// never send its completion, so an in-flight entry would count against the
// worker (on every replica) until --inflight-ttl.
func (s *service) decide(ctx context.Context, d *decision, req *routerv1.RouteRequest, now time.Time, trace bool) error {
	d.req, d.st, d.ctx, d.svc = req, s.pol.Load(), ctx, s

	// The prompt, read and tokenized exactly as the worker will: the
	// classifiers and the cache lookup read it.
	if err := s.readPrompt(ctx, &d.lookup, req); err != nil {
		return err
	}

	// What the request is, as policies see it.
	if err := s.classify(ctx, d); err != nil {
		return err
	}

	// The candidates: every endpoint serving a model the program may
	// serve the request as (an alias's models, or the requested one).
	d.models = d.st.prog.ConsiderModels(&d.preq, d.models[:0])
	s.candidates(d)

	// How much of the prompt each candidate caches.
	s.lookupCached(&d.lookup, now)

	// The scored table and the program's pick, committed in the table
	// unless tracing (see decision.Pick below, which the table calls;
	// it picks nothing once ctx is done).
	d.stepClocks(now)
	d.rows, d.chosen = s.table.Decide(s.tableRequest(d), d.models, now, d.rows[:0], d, !trace)
	if d.ctxErr != nil {
		return d.ctxErr
	}
	if d.chosen >= 0 {
		d.served = d.servedModel()
	}
	if trace {
		return nil
	}
	if d.chosen < 0 {
		s.count(d)
		return nil
	}

	// The record the pick leaves for the other replicas (the prompt's
	// blocks were assumed cached on the worker as it was committed:
	// Committed). A caller that gave up since the pick gets its in-flight
	// entry taken back instead; the assumed blocks expire.
	row := &d.rows[d.chosen]
	if err := ctx.Err(); err != nil {
		s.table.Complete(load.Completion{RequestID: req.GetRequestId(), EndpointID: row.EndpointID, At: now})
		return err
	}
	s.pub.Publish(replica.Decision{
		RequestID:    req.GetRequestId(),
		EndpointID:   row.EndpointID,
		Model:        row.Model,
		Tenant:       req.GetTenant(),
		At:           now,
		PromptTokens: d.tokens,
		CachedTokens: row.CachedTokens,
		OutputTokens: max(0, d.req.GetMaxOutputTokens()),
	})
	s.count(d)
	return nil
}

// lookup is one request's prompt and what each candidate caches of it.
type lookup struct {
	prompt prompt.Prompt
	tokBuf []uint32 // the prompt's token ids are read into it
	tokens int64    // prompt length; 0 when unknown
	cands  []load.Candidate
	cached []int64 // per cands entry
	held   []int   // per cands entry: leading blocks the KV index has on it
	chains []chain // token-block hashes, one chain per block size
	text   []kvblock.Hash
	sparse []kvblock.Hash // a chain's hashes for approx (see approxStride)
	// Per-candidate block size and whether it comes from KV events, and
	// lookup scratch.
	bs     []int
	sizes  []int // the distinct bs, in the order looked up
	events []bool
	ids    []string
	idx    []int
	aids   []string
	aidx   []int
	out    []int
	// coldKey stands for the prompt's opening when no candidate caches
	// any of it, 0 otherwise: Pick starts its near-tie scan there
	// (coldKeyFor says why).
	coldKey uint64
	// gen is the service's speculation count when the lookup was made, at
	// its time (decision.cachedOn).
	gen uint64
	at  time.Time
}

type chain struct {
	blockSize int
	hashes    []kvblock.Hash // every full block
	usable    int            // blocks a cache hit may cover (vLLM recomputes the last token)
}

func (l *lookup) reset() {
	l.prompt = prompt.Prompt{}
	l.tokens = 0
	l.cands = l.cands[:0]
	l.cached = l.cached[:0]
	for i := range l.chains {
		l.chains[i].hashes = l.chains[i].hashes[:0]
	}
	l.chains = l.chains[:0]
	l.text = l.text[:0]
	l.coldKey = 0
	l.gen, l.at = 0, time.Time{}
}

// cachedOn is the table's view of the lookup; cands are in id order.
func (l *lookup) cachedOn(id string) int64 {
	i := sort.Search(len(l.cands), func(i int) bool { return l.cands[i].ID >= id })
	if i < len(l.cands) && l.cands[i].ID == id {
		return l.cached[i]
	}
	return 0
}

func (l *lookup) chainFor(bs int) *chain {
	for i := range l.chains {
		if l.chains[i].blockSize == bs {
			return &l.chains[i]
		}
	}
	return nil
}

// maxPooledTokens bounds the token buffer a pooled lookup keeps (128k
// tokens, 512 KB): longer prompts allocate their own.
const maxPooledTokens = 128 << 10

// readPrompt reads (and tokenizes) the request's prompt. The error is
// ctx's when ctx ended first, or the request over a limit; a prompt that
// cannot be read is no error, only a request without cache-aware
// placement.
func (s *service) readPrompt(ctx context.Context, l *lookup, req *routerv1.RouteRequest) error {
	if l.tokBuf == nil {
		l.tokBuf = make([]uint32, 0, 1024)
	}
	tok := s.toks.For(req.GetModel())
	if tok != nil && s.tc != nil && s.tc.approximate(req.GetModel()) {
		tok = nil // a worker's tokenizer differs: approximate mode
	}
	p, err := prompt.Read(ctx, l.tokBuf, req.GetApi(), req.GetBody(), tok, s.limits)
	if p.Kind == prompt.Tokens && cap(p.Tokens) > cap(l.tokBuf) && cap(p.Tokens) <= maxPooledTokens {
		l.tokBuf = p.Tokens[:0] // grown: keep the larger buffer
	}
	var limit *prompt.LimitError
	switch {
	case errors.As(err, &limit):
		s.metrics.promptReads.WithLabelValues("refused").Inc()
		return &limitError{limit}
	case ctx.Err() != nil:
		s.metrics.promptReads.WithLabelValues("canceled").Inc()
		return ctx.Err()
	case err != nil:
		// The gateway validated the body; what is left here (an API not
		// read yet, a multimodal part) only loses cache-aware placement.
		s.metrics.promptReads.WithLabelValues("error").Inc()
	default:
		s.metrics.promptReads.WithLabelValues(p.Kind.String()).Inc()
	}
	l.prompt = p
	l.tokens = int64(p.Len())
	return nil
}

// classify runs the configured classifiers over the request: the tags it
// carries are every tag they return, each once, in the order first
// returned.
func (s *service) classify(ctx context.Context, d *decision) error {
	req := d.req
	d.creq.Reset()
	c := &d.creq
	c.Tenant, c.Model, c.HeaderTags, c.Program = req.GetTenant(), req.GetModel(), req.GetTags(), d.st.prog
	c.API, c.Body, c.Prompt = req.GetApi(), req.GetBody(), d.prompt
	tags := d.tags[:0]
	for _, c := range s.classifiers {
		n := len(tags)
		var err error
		if tags, err = c.Classify(ctx, &d.creq, tags); err != nil {
			return fmt.Errorf("classifier %s: %w", c.name, err)
		}
		tags = appendNew(tags[:n], tags[n:])
	}
	d.tags = tags
	d.preq = policy.Request{Model: req.GetModel(), Tenant: req.GetTenant(), Tags: tags}
	return nil
}

// appendNew appends to dst the tags of add it does not hold yet. add may
// be dst's own tail (dst[len(dst):]): it is read ahead of the writes.
func appendNew(dst, add []string) []string {
	for _, t := range add {
		if !slices.Contains(dst, t) {
			dst = append(dst, t)
		}
	}
	return dst
}

// candidates lists the eligible endpoints of d.models, for the cache
// lookup, in id order.
func (s *service) candidates(d *decision) {
	for _, m := range d.models {
		d.cands = s.table.Candidates(m, d.req.GetExcludeEndpoints(), d.cands)
	}
	if len(d.models) > 1 {
		// A provider serving several of the models is listed once per
		// model; cachedOn searches by id.
		slices.SortFunc(d.cands, func(a, b load.Candidate) int { return strings.Compare(a.ID, b.ID) })
		d.cands = slices.CompactFunc(d.cands, func(a, b load.Candidate) bool { return a.ID == b.ID })
	}
}

const (
	// defaultBlockSize is vLLM's, used when neither KV events nor the
	// worker's metrics declared one.
	defaultBlockSize = 16
	// approxChunkBytes is the approximate index's unit of prompt text,
	// about one 16-token block of English.
	approxChunkBytes = 16 * prompt.BytesPerToken
	// approxStride: the approximate index keeps every approxStride-th
	// token-block hash of a routed prompt. A chained hash stands for its
	// whole prefix, so the sampled hashes still find the longest routed
	// prefix, to within approxStride blocks (64 tokens at vLLM's block
	// size) — the index is a memory of the router's own decisions, not of
	// what the worker holds. It holds a decision for minutes, not the
	// speculative seconds, and at every block it was the router's
	// largest map: each cold 8k prompt added 512 entries, lookups and
	// inserts missing the CPU cache.
	approxStride = 4
)

// lookupCached fills l.cached for l.cands from the indexes.
func (s *service) lookupCached(l *lookup, now time.Time) {
	l.gen, l.at = s.specGen.Load(), now
	l.cached, l.held = l.cached[:0], l.held[:0]
	for range l.cands {
		l.cached, l.held = append(l.cached, 0), append(l.held, 0)
	}
	switch l.prompt.Kind {
	case prompt.Tokens:
		s.lookupTokens(l, now)
	case prompt.Text:
		s.lookupText(l, now)
	}
	l.coldKey = coldKeyFor(l)
}

// blockSize is the block size a worker caches with.
func (s *service) blockSize(c load.Candidate) (bs int, events bool) {
	if bs := s.sizes.BlockSize(c.ID); bs > 0 {
		return bs, true
	}
	if c.BlockSize > 0 {
		return c.BlockSize, false
	}
	return defaultBlockSize, false
}

func (s *service) lookupTokens(l *lookup, now time.Time) {
	l.bs, l.events = l.bs[:0], l.events[:0]
	for _, c := range l.cands {
		bs, ev := s.blockSize(c)
		l.bs, l.events = append(l.bs, bs), append(l.events, ev)
	}
	// One chain per distinct block size; usually all candidates share one.
	// A chain made by an earlier lookup of this request is reused.
	l.sizes = l.sizes[:0]
	for _, bs := range l.bs {
		if slices.Contains(l.sizes, bs) {
			continue // looked up with the first candidate of its size
		}
		l.sizes = append(l.sizes, bs)
		ch := l.chainFor(bs)
		if ch == nil {
			ch = s.addChain(l, bs, l.prompt.Tokens)
		}
		hashes := ch.hashes[:ch.usable]
		l.ids, l.idx = l.ids[:0], l.idx[:0]
		l.aids, l.aidx = l.aids[:0], l.aidx[:0]
		for i, c := range l.cands {
			if l.bs[i] != bs {
				continue
			}
			l.ids, l.idx = append(l.ids, c.ID), append(l.idx, i)
			if !l.events[i] {
				l.aids, l.aidx = append(l.aids, c.ID), append(l.aidx, i)
			}
		}
		l.out = s.kv.Prefixes(hashes, l.ids, now, l.out)
		for k, i := range l.idx {
			l.held[i] = l.out[k]
			l.cached[i] = int64(l.out[k] * bs)
		}
		if len(l.aids) > 0 {
			l.sparse = sparse(l.sparse, hashes)
			l.out = s.approx.Prefixes(l.sparse, l.aids, now, l.out)
			for k, i := range l.aidx {
				l.cached[i] = max(l.cached[i], int64(l.out[k]*approxStride*bs))
			}
		}
	}
}

// coldKeyTokens is how far into a cold prompt its key reaches, in
// tokens: past a chat template's opening and into a system prompt.
const coldKeyTokens = 1024

// coldKeyFor is the key of a prompt whose opening no candidate caches:
// the hash of its block at about coldKeyTokens (its last full block when
// shorter), which stands for every token before it. Near-ties among idle
// workers are broken by the rotation, which differs from replica to
// replica, so a new system prompt that reaches several replicas at once
// was computed on as many workers (four replicas spread a group over
// 2.7–2.9 workers, one kept it on 1.0–1.1). Started from the prompt's key
// instead, every replica that sees the same new prefix and the same idle
// workers picks the same one, while different prefixes start at
// different workers; a replica's own picks still spread, as its next
// request already sees the worker it just loaded. A chat template's
// opening, which every prompt shares, may be cached anywhere: only a
// cached key block makes the prompt warm. 0 (the rotation) for a warm
// prompt or one without a full block.
func coldKeyFor(l *lookup) uint64 {
	if len(l.chains) == 0 || len(l.chains[0].hashes) == 0 {
		return 0
	}
	ch := &l.chains[0]
	k := min(len(ch.hashes), max(1, coldKeyTokens/ch.blockSize)) - 1
	for _, c := range l.cached {
		if c >= int64((k+1)*ch.blockSize) {
			return 0
		}
	}
	return uint64(ch.hashes[k]) | 1
}

// sparse sets dst to every approxStride-th hash of a chain: the ones that
// end a run of approxStride blocks.
func sparse(dst, hashes []kvblock.Hash) []kvblock.Hash {
	dst = dst[:0]
	for i := approxStride - 1; i < len(hashes); i += approxStride {
		dst = append(dst, hashes[i])
	}
	return dst
}

func (s *service) addChain(l *lookup, bs int, toks []uint32) *chain {
	var hashes []kvblock.Hash
	if n := len(l.chains); n < cap(l.chains) {
		hashes = l.chains[:n+1][n].hashes[:0]
	}
	hashes = kvblock.Chain(hashes, kvblock.Root, toks, bs, "")
	usable := 0
	if len(toks) > 0 {
		usable = min(len(hashes), (len(toks)-1)/bs)
	}
	l.chains = append(l.chains, chain{blockSize: bs, hashes: hashes, usable: usable})
	return &l.chains[len(l.chains)-1]
}

func (s *service) lookupText(l *lookup, now time.Time) {
	l.text = kvblock.TextChain(l.text, kvblock.Root, l.prompt.Text, approxChunkBytes)
	l.ids = l.ids[:0]
	for _, c := range l.cands {
		l.ids = append(l.ids, c.ID)
	}
	l.out = s.approx.Prefixes(l.text, l.ids, now, l.out)
	maxCached := max(0, l.tokens-1)
	for i := range l.cands {
		l.cached[i] = min(maxCached, int64(l.out[i]*approxChunkBytes/prompt.BytesPerToken))
	}
}

// tableRequest is the request as the load table sees it.
func (s *service) tableRequest(d *decision) load.Request {
	r := load.Request{
		Model:        d.req.GetModel(),
		ID:           d.req.GetRequestId(),
		Exclude:      d.req.GetExcludeEndpoints(),
		PromptTokens: d.tokens,
		// The prompt-count check (tokChecker): a chat, or a single
		// completions prompt (a batch's usage sums its prompts), counted
		// by token ids.
		PromptExact:  d.prompt.Kind == prompt.Tokens && (d.prompt.Chat != nil || d.prompt.Completion != nil && len(d.prompt.Completion.Prompt.Texts) == 1),
		OutputTokens: max(0, d.req.GetMaxOutputTokens()),
		Cached:       d.cachedOn,
	}
	if len(d.steps) > 0 {
		r.Steps = d.stepsOn
	}
	return r
}

// maxDecisionLag bounds the time a decision is taken to have spent before
// the table decides it, when moving the gateway's step clocks on: beyond
// it (a clock in a test, a stalled process) the step under way is long
// over anyway.
const maxDecisionLag = 100 * time.Millisecond

// maxStepClocks is the most step clocks a decision reads: a fleet is
// smaller, and the index of them outlives the request in the decision
// pool.
const maxStepClocks = 16384

// stepClocks indexes the request's step clocks by endpoint, each moved on
// by the time since the request arrived (reading and tokenizing the
// prompt): the gateway read its clocks as it sent the request, and the
// step under way kept running. Clocks that cannot be real are left for
// the table to ignore.
func (d *decision) stepClocks(arrived time.Time) {
	cs := d.req.GetStepClocks()
	if len(cs) == 0 {
		return
	}
	cs = cs[:min(len(cs), maxStepClocks)]
	if d.steps == nil {
		d.steps = make(map[string]load.StepClock, len(cs))
	}
	lag := min(max(0, time.Since(arrived)), maxDecisionLag).Seconds()
	for _, c := range cs {
		d.steps[c.GetEndpointId()] = load.StepClock{Since: c.GetSinceStepSeconds() + lag, Step: c.GetStepSeconds()}
	}
}

// stepsOn is the table's view of the step clocks.
func (d *decision) stepsOn(id string) (load.StepClock, bool) {
	c, ok := d.steps[id]
	return c, ok
}

// cachedOn is the table's view of the lookup, asked under the table's
// lock. The lookup was made before the lock, and a decision committed in
// between (a burst's requests are decided a fraction of a millisecond
// apart) may have sent this very prefix somewhere: its speculation is
// written under the lock too (Committed), so a count that moved since the
// lookup means the lookup is made again, here. Without it, the followers
// of a new system prompt decided in the leader's shadow saw it cached
// nowhere, and one was sent to compute it again elsewhere.
func (d *decision) cachedOn(id string) int64 {
	if d.svc != nil && d.svc.specGen.Load() != d.lookup.gen {
		d.svc.lookupCached(&d.lookup, d.lookup.at)
	}
	return d.lookup.cachedOn(id)
}

// Committed is the table's word, under its lock, that the request now
// holds row: its prompt's blocks are assumed cached there from now on, so
// that the next decision's lookup finds them (cachedOn).
func (d *decision) Committed(row *load.Backend, now time.Time) {
	if row.Kind != endpoints.KindProvider {
		d.svc.speculate(&d.lookup, row, now)
	}
}

// Pick is the program's step of decide, which the load table calls with
// the scored rows (under its lock, so that concurrent decisions see each
// other): the rows as the program sees them, with the providers' prices,
// evaluated. Default routing takes the lowest score; the rotation spreads
// near-ties, or for a cold prompt its key (coldKeyFor) places them.
func (d *decision) Pick(rows []load.Backend, rotation uint64) int {
	if err := d.ctx.Err(); err != nil {
		d.ctxErr = err
		return -1
	}
	d.bs = d.bs[:0]
	for i := range rows {
		b := rows[i].Policy()
		if b.Type == policy.TypeProvider {
			if p := d.st.snap.Provider(rows[i].Group); p != nil {
				b.Price = p.InputPrice
			}
		}
		d.bs = append(d.bs, b)
	}
	if d.coldKey != 0 {
		rotation = d.coldKey
	}
	d.preq.Rotation = rotation
	d.st.prog.Evaluate(&d.preq, d.bs, &d.pd)
	if c := d.pd.Chosen; c >= 0 {
		return d.flow(rows, c)
	}
	return -1
}

// flow is flow control's step of the pick, made under the table's lock
// with the program's choice in hand. It returns the row that takes the
// request, or -1 with d.held set when the request is held: the gateway
// asks (its queue has requests waiting), or every eligible local worker
// is full for it (open says when). A choice that is full while another
// eligible local worker is open is made again without the full ones, so
// a request the fleet has room for starts where the room is. Holding,
// rather than sending a request on to a full worker, keeps the waiting in
// the gateway, where it is released fairly across tenants, and out of
// vLLM's first-come-first-served queue. A provider's pick is never held:
// a burst policy already decided where the overflow goes.
func (d *decision) flow(rows []load.Backend, chosen int) int {
	if rows[chosen].Kind == endpoints.KindProvider {
		return chosen
	}
	if d.req.GetHold() {
		d.held = chosen
		return -1
	}
	if d.req.GetQueueThreshold() <= 0 || d.open(&rows[chosen]) {
		return chosen
	}
	room := false
	for i := range rows {
		r := &rows[i]
		if r.Kind == endpoints.KindProvider || d.bs[i].Unavailable != "" {
			continue
		}
		if d.open(r) {
			room = true
		} else {
			d.bs[i].Unavailable = "full"
		}
	}
	if room {
		d.st.prog.Evaluate(&d.preq, d.bs, &d.pd)
		if c := d.pd.Chosen; c >= 0 {
			return c
		}
	}
	d.held = chosen
	return -1
}

// open reports whether worker row r can start the request now, as flow
// control sees it: fewer than the gateway's queue threshold of requests
// waiting to be scheduled there (load.Load.WaitingNow), and, with a KV
// threshold or reserve, room in its KV cache for the request's claim (its
// uncached prompt tokens plus its output limit) within the threshold less
// the reserve (load.Load.KVDemand). An idle worker always has room: a
// request bigger than the threshold allows would otherwise never start.
func (d *decision) open(r *load.Backend) bool {
	if r.Load.WaitingNow() >= int64(d.req.GetQueueThreshold()) {
		return false
	}
	limit, reserve := d.req.GetKvCacheThreshold(), d.req.GetKvReserve()
	if (limit <= 0 && reserve <= 0) || r.KVCapacity <= 0 {
		return true
	}
	if limit <= 0 {
		limit = 1
	}
	demand := r.Load.KVDemand(r.KVCacheUsage, r.KVCapacity)
	if demand <= 0 {
		return true
	}
	claim := max(0, d.tokens-r.CachedTokens) + max(0, d.req.GetMaxOutputTokens())
	return float64(demand+claim) <= (limit-reserve)*float64(r.KVCapacity)
}

// servedModel is the model name the chosen row's target serves: the
// row's model, under the provider's own name for a provider that renames
// it.
func (d *decision) servedModel() string {
	row := &d.rows[d.chosen]
	if row.Kind == endpoints.KindProvider {
		if p := d.st.snap.Provider(row.Group); p != nil {
			if name, ok := p.ServedName(row.Model); ok && name != "" {
				return name
			}
		}
	}
	return row.Model
}

// speculate records the chosen worker as holding the prompt's blocks.
func (s *service) speculate(l *lookup, c *load.Backend, now time.Time) {
	switch l.prompt.Kind {
	case prompt.Tokens:
		bs, events, held := defaultBlockSize, false, 0
		for i, cand := range l.cands {
			if cand.ID == c.EndpointID {
				bs, events, held = l.bs[i], l.events[i], l.held[i]
				break
			}
		}
		ch := l.chainFor(bs)
		if ch == nil {
			ch = s.addChain(l, bs, l.prompt.Tokens)
		}
		// Until its first token the request is still prefilling: count the
		// TTL from then. The blocks the index already has on the worker
		// need no guess: confirmed ones stay until evicted (a hit refreshes
		// them on the worker), and earlier guesses already cover this
		// request's prefill. In a multi-turn conversation that is all but
		// the newest turn.
		until := now.Add(time.Duration(c.Estimate.TTFT*float64(time.Second)) + s.specTTL)
		// The guess is kept on the chain lookups ask about (the usable
		// blocks), so that a repeat of this prompt meets its last grid
		// block; the last full block, which the worker caches too, is
		// added for a longer prompt to find.
		s.kv.Speculate(c.EndpointID, ch.hashes[:ch.usable], held, until)
		if ch.usable < len(ch.hashes) {
			s.kv.Speculate(c.EndpointID, ch.hashes, max(held, ch.usable), until)
		}
		if !events {
			// Likewise on the sampled chain.
			l.sparse = sparse(l.sparse, ch.hashes[:ch.usable])
			au := len(l.sparse)
			s.approx.Speculate(c.EndpointID, l.sparse, 0, now.Add(s.approxTTL))
			if l.sparse = sparse(l.sparse, ch.hashes); len(l.sparse) > au {
				s.approx.Speculate(c.EndpointID, l.sparse, au, now.Add(s.approxTTL))
			}
		}
	case prompt.Text:
		s.approx.Speculate(c.EndpointID, l.text, 0, now.Add(s.approxTTL))
	}
	s.specGen.Add(1)
}

// count records a decision Route made in the metrics.
func (s *service) count(d *decision) {
	model, out := d.req.GetModel(), d.outcome()
	switch out {
	case routed:
		row := &d.rows[d.chosen]
		s.metrics.decisions.WithLabelValues(model, row.EndpointID, out.String()).Inc()
		if d.tokens > 0 {
			s.metrics.promptTokens.WithLabelValues(model).Add(float64(d.tokens))
			s.metrics.cachedTokens.WithLabelValues(model).Add(float64(row.CachedTokens))
		}
		return
	case modelNotFound:
		model = unknownModel
	}
	s.metrics.decisions.WithLabelValues(model, "", out.String()).Inc()
}
