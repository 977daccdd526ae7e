package router

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard-dev/switchyard/internal/kvblock"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router/internal/endpoints"
	"github.com/switchyard-dev/switchyard/services/router/internal/load"
	"github.com/switchyard-dev/switchyard/services/router/internal/prompt"
	"github.com/switchyard-dev/switchyard/services/router/internal/replica"
)

// maxModelLen bounds the client-chosen model name echoed in rejections.
const maxModelLen = 256

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

func checkModel(model string) error {
	switch {
	case model == "":
		return errEmptyModel
	case len(model) > maxModelLen:
		return errModelTooLong
	}
	return nil
}

// Request errors. toStatus maps them to gRPC codes; grpc-gateway maps those
// to HTTP statuses for the REST surface.
var (
	errEmptyModel     = errors.New("model is required")
	errModelTooLong   = fmt.Errorf("model name longer than %d bytes", maxModelLen)
	errEmptyRequestID = errors.New("request_id is required: in-flight tracking and completions are keyed by it")
)

// toStatus is the one place router errors become gRPC statuses.
func toStatus(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errEmptyModel), errors.Is(err, errEmptyRequestID):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, errModelTooLong):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// publisher is where decisions go for the other replicas; nil-safe through
// noPublisher when NATS is disabled.
type publisher interface {
	Publish(replica.Decision)
}

type noPublisher struct{}

func (noPublisher) Publish(replica.Decision) {}

// blockSizer reports the block size a worker's KV events declared, 0 when
// it has sent none.
type blockSizer interface {
	BlockSize(worker string) int
}

type noBlockSizes struct{}

func (noBlockSizes) BlockSize(string) int { return 0 }

// service implements routerv1.RouterServer.
//
// A decision reads the prompt out of the body (tokenizing it like the
// worker will), asks the load table for the eligible candidates, looks up
// how much of the prompt each already caches, and lets the table pick the
// lowest predicted TTFT. The chosen worker is then assumed to hold the
// prompt's blocks for a while (speculative entries), so a burst sharing a
// new prefix stays together before the worker's KV events arrive.
//
// Two indexes answer "what is cached where":
//
//   - kv holds the blocks the kvtracker reports (kvsync keeps it), in
//     Switchyard's token-block hashes, plus speculative entries;
//   - approx remembers the router's own decisions for a TTL: keyed on
//     chunks of prompt text for models without a tokenizer, and on the
//     token-block hashes for workers that send no KV events at all (no
//     kvtracker, or a vLLM started without --kv-events-config).
type service struct {
	routerv1.UnimplementedRouterServer
	table     *load.Table
	pub       publisher
	metrics   *metrics
	kv        *kvblock.Index
	approx    *kvblock.Index
	sizes     blockSizer
	toks      tokenizers
	specTTL   time.Duration
	approxTTL time.Duration
	scratch   sync.Pool // *lookup
	// pol is the policy snapshot routed by; nil without policyd.
	pol atomic.Pointer[policyState]
}

// lookup is one request's prompt and what each candidate caches of it.
// Pooled: an 8k-token prompt needs a few kilobytes of hashes.
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
	events []bool
	ids    []string
	idx    []int
	aids   []string
	aidx   []int
	out    []int
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

func (s *service) getLookup() *lookup {
	if l, ok := s.scratch.Get().(*lookup); ok {
		l.reset()
		return l
	}
	return &lookup{}
}

func (s *service) Route(ctx context.Context, req *routerv1.RouteRequest) (*routerv1.RouteResponse, error) {
	start := time.Now()
	resp, err := s.route(req, start)
	s.metrics.routeDuration.Observe(time.Since(start).Seconds())
	return resp, toStatus(err)
}

func (s *service) route(req *routerv1.RouteRequest, now time.Time) (*routerv1.RouteResponse, error) {
	model := req.GetModel()
	if err := checkModel(model); err != nil {
		return nil, err
	}
	if req.GetRequestId() == "" {
		return nil, errEmptyRequestID
	}
	if st := s.pol.Load(); st != nil && st.prog != nil {
		return s.routePolicy(st, req, now)
	}
	l := s.getLookup()
	defer s.scratch.Put(l)
	if out := s.prepare(l, req, now); out != load.Routed {
		return s.reject(model, out), nil
	}
	choice, out := s.table.Route(s.tableRequest(l, req), now)
	if out != load.Routed {
		return s.reject(model, out), nil
	}
	s.speculate(l, choice, now)
	s.pub.Publish(replica.Decision{
		RequestID:    req.GetRequestId(),
		EndpointID:   choice.EndpointID,
		Model:        model,
		Tenant:       req.GetTenant(),
		At:           now,
		PromptTokens: l.tokens,
		CachedTokens: choice.CachedTokens,
	})
	s.metrics.decisions.WithLabelValues(model, choice.EndpointID, out.String()).Inc()
	if l.tokens > 0 {
		s.metrics.promptTokens.WithLabelValues(model).Add(float64(l.tokens))
		s.metrics.cachedTokens.WithLabelValues(model).Add(float64(choice.CachedTokens))
	}
	return routed(model, choice), nil
}

func (s *service) reject(model string, out load.Outcome) *routerv1.RouteResponse {
	label := model
	if out == load.ModelNotFound {
		label = unknownModel
	}
	s.metrics.decisions.WithLabelValues(label, "", out.String()).Inc()
	return rejection(model, out)
}

func (s *service) tableRequest(l *lookup, req *routerv1.RouteRequest) load.Request {
	return load.Request{
		Model:        req.GetModel(),
		ID:           req.GetRequestId(),
		Exclude:      req.GetExcludeEndpoints(),
		PromptTokens: l.tokens,
		Cached:       l.cachedOn,
	}
}

// prepare lists the candidates, reads the prompt and fills the
// candidates' cached tokens.
func (s *service) prepare(l *lookup, req *routerv1.RouteRequest, now time.Time) load.Outcome {
	var out load.Outcome
	l.cands, out = s.table.Candidates(req.GetModel(), req.GetExcludeEndpoints(), l.cands)
	if out != load.Routed {
		return out
	}
	s.readPrompt(l, req)
	s.lookupCached(l, now)
	return load.Routed
}

// readPrompt reads (and tokenizes) the request's prompt.
func (s *service) readPrompt(l *lookup, req *routerv1.RouteRequest) {
	if l.tokBuf == nil {
		l.tokBuf = make([]uint32, 0, 1024)
	}
	p, err := prompt.Read(l.tokBuf, req.GetApi(), req.GetBody(), s.toks.For(req.GetModel()))
	if p.Kind == prompt.Tokens && cap(p.Tokens) > cap(l.tokBuf) && cap(p.Tokens) <= maxPooledTokens {
		l.tokBuf = p.Tokens[:0] // grown: keep the larger buffer
	}
	switch {
	case err != nil:
		// The gateway validated the body; what is left here (an API not
		// read yet, a multimodal part) only loses cache-aware placement.
		s.metrics.promptReads.WithLabelValues("error").Inc()
	default:
		s.metrics.promptReads.WithLabelValues(p.Kind.String()).Inc()
	}
	l.prompt = p
	l.tokens = int64(p.Len())
}

// lookupCached fills l.cached for l.cands from the indexes.
func (s *service) lookupCached(l *lookup, now time.Time) {
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
	for {
		bs := 0
		for _, b := range l.bs {
			if l.chainFor(b) == nil {
				bs = b
				break
			}
		}
		if bs == 0 {
			return
		}
		ch := s.addChain(l, bs, l.prompt.Tokens)
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

// speculate records the chosen worker as holding the prompt's blocks.
func (s *service) speculate(l *lookup, c load.Choice, now time.Time) {
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
		s.kv.Speculate(c.EndpointID, ch.hashes[min(held, len(ch.hashes)):], until)
		if !events {
			l.sparse = sparse(l.sparse, ch.hashes)
			s.approx.Speculate(c.EndpointID, l.sparse, now.Add(s.approxTTL))
		}
	case prompt.Text:
		s.approx.Speculate(c.EndpointID, l.text, now.Add(s.approxTTL))
	}
}

func routed(model string, c load.Choice) *routerv1.RouteResponse {
	return &routerv1.RouteResponse{
		Target: &routerv1.Target{
			Id:          c.EndpointID,
			Url:         c.URL,
			Kind:        targetKind(c.Kind),
			ServedModel: model,
		},
		Decision: &routerv1.Decision{
			Strategy:             load.Strategy,
			PredictedTtftSeconds: c.Estimate.TTFT,
			CachedTokens:         c.CachedTokens,
			PromptTokens:         c.PromptTokens,
			Reason:               c.Reason(),
		},
	}
}

func rejection(model string, out load.Outcome) *routerv1.RouteResponse {
	r := &routerv1.Rejection{}
	switch out {
	case load.ModelNotFound:
		r.Code = routerv1.RejectCode_REJECT_CODE_MODEL_NOT_FOUND
		r.Message = "no endpoint serves model " + model
	default:
		r.Code = routerv1.RejectCode_REJECT_CODE_NO_HEALTHY_ENDPOINT
		r.Message = "no healthy endpoint for model " + model + " (all unhealthy or excluded)"
	}
	return &routerv1.RouteResponse{Rejection: r, Decision: &routerv1.Decision{Strategy: load.Strategy}}
}

func (s *service) Explain(ctx context.Context, req *routerv1.RouteRequest) (*routerv1.ExplainResponse, error) {
	model := req.GetModel()
	if err := checkModel(model); err != nil {
		return nil, toStatus(err)
	}
	now := time.Now()
	if st := s.pol.Load(); st != nil && st.prog != nil {
		return s.explainPolicy(st, req, now), nil
	}
	l := s.getLookup()
	defer s.scratch.Put(l)
	s.prepare(l, req, now) // no candidates: the table explains why below
	rows, choice, out := s.table.Explain(s.tableRequest(l, req), now)
	resp := &routerv1.ExplainResponse{Candidates: make([]*routerv1.Candidate, 0, len(rows))}
	if out == load.Routed {
		resp.Result = routed(model, choice)
	} else {
		resp.Result = rejection(model, out)
	}
	for _, r := range rows {
		resp.Candidates = append(resp.Candidates, &routerv1.Candidate{
			Endpoint:             endpointProto(r.Endpoint),
			Eligible:             r.Eligible,
			ExcludedReason:       r.ExcludedReason,
			InFlight:             r.Endpoint.Load.InFlight,
			Waiting:              r.Endpoint.Load.Waiting,
			Running:              r.Endpoint.Load.Running,
			CachedTokens:         r.CachedTokens,
			PredictedTtftSeconds: r.Estimate.TTFT,
			Score:                r.Score,
			Chosen:               r.Chosen,
		})
	}
	return resp, nil
}

func (s *service) ListEndpoints(ctx context.Context, req *routerv1.ListEndpointsRequest) (*routerv1.ListEndpointsResponse, error) {
	views := s.table.Endpoints(req.GetModel())
	resp := &routerv1.ListEndpointsResponse{Endpoints: make([]*routerv1.Endpoint, 0, len(views))}
	for _, v := range views {
		resp.Endpoints = append(resp.Endpoints, endpointProto(v))
	}
	return resp, nil
}

func endpointProto(v load.EndpointView) *routerv1.Endpoint {
	return &routerv1.Endpoint{
		Id:           v.ID,
		Url:          v.URL,
		Models:       v.Models,
		Kind:         targetKind(v.Kind),
		Healthy:      v.Healthy,
		LastError:    v.LastError,
		Waiting:      v.Load.Waiting,
		Running:      v.Load.Running,
		InFlight:     v.Load.InFlight,
		KvCacheUsage: v.KVCacheUsage,
		LastScrape:   timestampOrNil(v.LastScrape),
	}
}

// timestampOrNil leaves a time never set (an endpoint not scraped yet)
// out of the message rather than claiming the year 1.
func timestampOrNil(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func targetKind(kind string) routerv1.TargetKind {
	switch kind {
	case endpoints.KindLocal, "":
		return routerv1.TargetKind_TARGET_KIND_LOCAL
	case endpoints.KindProvider:
		return routerv1.TargetKind_TARGET_KIND_PROVIDER
	}
	return routerv1.TargetKind_TARGET_KIND_UNSPECIFIED
}
