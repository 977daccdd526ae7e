package router

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/internal/policy/watch"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router/internal/endpoints"
	"github.com/switchyard-dev/switchyard/services/router/internal/load"
	"github.com/switchyard-dev/switchyard/services/router/internal/replica"
)

// StrategyPolicy names decisions a policy rule made; default routing keeps
// load.Strategy.
const StrategyPolicy = "policy"

// policyState is one policyd revision as the router routes by it. prog is
// nil when the snapshot has no program for the configured GatewayBackend:
// the router then routes without policies.
type policyState struct {
	revision int64
	snap     *policy.Snapshot
	prog     *policy.Program
}

// policySource follows policyd: each snapshot swaps the routing program
// and yields the endpoint set (static endpoints, then the catalog's).
type policySource struct {
	client  watch.Client
	static  []endpoints.Spec
	backend string
	log     zerolog.Logger
	set     func(*policyState)
}

func (p *policySource) Watch(ctx context.Context, update func([]endpoints.Spec)) error {
	if len(p.static) > 0 {
		update(slices.Clone(p.static))
	}
	w := watch.New(p.client, p.log, watch.Options{OnUpdate: func(c watch.Current) {
		prog := c.Snapshot.Program(p.backend)
		if prog == nil {
			p.log.Warn().Str("gateway_backend", p.backend).Int64("revision", c.Revision).
				Msg("gateway backend not in the policy snapshot: routing without policies")
		}
		p.set(&policyState{revision: c.Revision, snap: c.Snapshot, prog: prog})
		update(catalogSpecs(p.static, c.Snapshot))
	}})
	return w.Run(ctx)
}

// catalogSpecs is the static endpoints followed by the snapshot's static
// workers and providers; a static endpoint wins over a catalog one with
// the same id.
func catalogSpecs(static []endpoints.Spec, snap *policy.Snapshot) []endpoints.Spec {
	specs := slices.Clone(static)
	have := func(id string) bool {
		return slices.ContainsFunc(specs, func(s endpoints.Spec) bool { return s.ID == id })
	}
	for _, ws := range snap.WorkerSets {
		for _, w := range ws.Static {
			if have(w.ID) {
				continue
			}
			specs = append(specs, endpoints.Spec{
				ID: w.ID, URL: strings.TrimRight(w.URL, "/"), Models: []string{ws.Model},
				Kind: endpoints.KindLocal, Group: ws.Name, Pool: ws.Pool,
			})
		}
	}
	for _, p := range snap.Providers {
		id := policy.ProviderEndpointID(p.Name)
		if have(id) || len(p.Models) == 0 {
			continue
		}
		models := make([]string, 0, len(p.Models))
		for _, m := range p.Models {
			models = append(models, m.Name)
		}
		specs = append(specs, endpoints.Spec{
			ID: id, URL: strings.TrimRight(p.BaseURL, "/"), Models: models,
			Kind: endpoints.KindProvider, Group: p.Name,
		})
	}
	return specs
}

// scraped keeps the endpoints that have metrics to scrape.
func scraped(specs []endpoints.Spec) []endpoints.Spec {
	return slices.DeleteFunc(slices.Clone(specs), func(s endpoints.Spec) bool { return s.Kind == endpoints.KindProvider })
}

// policyScratch is one policy decision's reusable memory.
type policyScratch struct {
	d      policy.Decision
	req    policy.Request
	tags   []string
	models []string
	rows   []load.Backend
	bs     []policy.Backend
}

var policyScratches = sync.Pool{New: func() any { return &policyScratch{} }}

// requestTags are the tags a decision sees: the client's (already
// filtered by the gateway's header rules) that the program allows, then
// the tenant's defaults.
func requestTags(dst []string, prog *policy.Program, req *routerv1.RouteRequest) []string {
	for _, t := range req.GetTags() {
		if prog.TagAllowed(t) && !slices.Contains(dst, t) {
			dst = append(dst, t)
		}
	}
	for _, t := range prog.TenantTags(req.GetTenant()) {
		if !slices.Contains(dst, t) {
			dst = append(dst, t)
		}
	}
	return dst
}

// evaluate runs the program over the (endpoint, model) rows of every
// model the request may be served as; l holds the prompt and the cached
// tokens of every candidate afterwards.
func (s *service) evaluate(st *policyState, ps *policyScratch, l *lookup, req *routerv1.RouteRequest, now time.Time) {
	ps.tags = requestTags(ps.tags[:0], st.prog, req)
	ps.req = policy.Request{Model: req.GetModel(), Tenant: req.GetTenant(), Tags: ps.tags}
	ps.models = st.prog.ConsiderModels(&ps.req, ps.models[:0])

	l.cands = l.cands[:0]
	for _, m := range ps.models {
		l.cands, _ = s.table.Candidates(m, req.GetExcludeEndpoints(), l.cands)
	}
	// A provider serving several considered models is listed once per
	// model; cachedOn searches by id.
	sort.Slice(l.cands, func(i, j int) bool { return l.cands[i].ID < l.cands[j].ID })
	l.cands = slices.CompactFunc(l.cands, func(a, b load.Candidate) bool { return a.ID == b.ID })
	s.readPrompt(l, req)
	s.lookupCached(l, now)

	var rot uint64
	ps.rows, rot = s.table.Backends(s.tableRequest(l, req), ps.models, now, ps.rows[:0])
	ps.req.Rotation = rot
	ps.bs = ps.bs[:0]
	for i := range ps.rows {
		r := &ps.rows[i]
		b := policy.Backend{
			ID: r.EndpointID, Model: r.Model, Type: policy.TypeLocal, Group: r.Group, Pool: r.Pool,
			Unavailable:     r.Unavailable,
			QueuedPrompts:   r.Load.Waiting,
			RunningRequests: r.Load.Running,
			InFlight:        r.Load.InFlight,
			KVCacheUsage:    r.KVCacheUsage,
			// The score (predicted TTFT plus the recompute charge) is what
			// the KV-aware pick minimises: using it as the policy's
			// PredictedTTFT makes default routing pick what Route would.
			PredictedTTFT: r.Estimate.Score,
			CachedTokens:  r.CachedTokens,
		}
		if r.Kind == endpoints.KindProvider {
			b.Type = policy.TypeProvider
			if p := st.snap.Provider(r.Group); p != nil {
				b.Price = p.InputPrice
			}
		}
		ps.bs = append(ps.bs, b)
	}
	st.prog.Evaluate(&ps.req, ps.bs, &ps.d)
}

// routePolicy is route under a policy program.
func (s *service) routePolicy(st *policyState, req *routerv1.RouteRequest, now time.Time) (*routerv1.RouteResponse, error) {
	model := req.GetModel()
	l := s.getLookup()
	defer s.scratch.Put(l)
	ps := policyScratches.Get().(*policyScratch)
	defer policyScratches.Put(ps)
	s.evaluate(st, ps, l, req, now)

	d := &ps.d
	switch d.Outcome {
	case policy.Rejected:
		s.metrics.decisions.WithLabelValues(model, "", "policy_rejected").Inc()
		return &routerv1.RouteResponse{
			Rejection: &routerv1.Rejection{Code: routerv1.RejectCode_REJECT_CODE_POLICY, Message: d.RejectMessage()},
			Decision:  &routerv1.Decision{Policy: d.Policy(), Rule: d.RuleName(), Strategy: StrategyPolicy, Reason: d.Summary(ps.bs)},
		}, nil
	case policy.NoBackend:
		out := load.NoHealthyEndpoint
		if len(ps.rows) == 0 {
			out = load.ModelNotFound
		}
		return s.reject(model, out), nil
	}

	row := &ps.rows[d.Chosen]
	served, kind, provider := row.Model, routerv1.TargetKind_TARGET_KIND_LOCAL, ""
	if row.Kind == endpoints.KindProvider {
		kind, provider = routerv1.TargetKind_TARGET_KIND_PROVIDER, row.Group
		if p := st.snap.Provider(row.Group); p != nil {
			if name, ok := p.ServedName(row.Model); ok && name != "" {
				served = name
			}
		}
	}
	var body []byte
	if served != model {
		var err error
		if body, err = replaceModel(req.GetBody(), served); err != nil {
			return &routerv1.RouteResponse{Rejection: &routerv1.Rejection{
				Code: routerv1.RejectCode_REJECT_CODE_INVALID_REQUEST, Message: "the request body has no model to rewrite: " + err.Error(),
			}}, nil
		}
	}

	treq := s.tableRequest(l, req)
	if !s.table.Commit(treq, row.EndpointID, row.Model, row.Estimate, row.CachedTokens, now) {
		// The endpoint set changed between the rows and the commit.
		return s.reject(model, load.NoHealthyEndpoint), nil
	}
	if kind == routerv1.TargetKind_TARGET_KIND_LOCAL {
		s.speculate(l, load.Choice{EndpointID: row.EndpointID, Estimate: row.Estimate}, now)
	}
	s.pub.Publish(replica.Decision{
		RequestID:    req.GetRequestId(),
		EndpointID:   row.EndpointID,
		Model:        row.Model,
		Tenant:       req.GetTenant(),
		At:           now,
		PromptTokens: l.tokens,
		CachedTokens: row.CachedTokens,
	})
	s.metrics.decisions.WithLabelValues(model, row.EndpointID, "routed").Inc()
	if l.tokens > 0 {
		s.metrics.promptTokens.WithLabelValues(model).Add(float64(l.tokens))
		s.metrics.cachedTokens.WithLabelValues(model).Add(float64(row.CachedTokens))
	}
	strategy := load.Strategy
	if d.Rule != nil {
		strategy = StrategyPolicy
	}
	return &routerv1.RouteResponse{
		Target: &routerv1.Target{
			Id: row.EndpointID, Url: row.URL, Kind: kind, Provider: provider, ServedModel: served,
		},
		RewrittenBody: body,
		Decision: &routerv1.Decision{
			Policy:               d.Policy(),
			Rule:                 d.RuleName(),
			Strategy:             strategy,
			PredictedTtftSeconds: row.Estimate.TTFT,
			CachedTokens:         row.CachedTokens,
			PromptTokens:         l.tokens,
			Reason:               d.Summary(ps.bs),
		},
	}, nil
}

// explainPolicy is Explain under a policy program: one candidate per
// (endpoint, model) row, with the policy's verdict on it.
func (s *service) explainPolicy(st *policyState, req *routerv1.RouteRequest, now time.Time) *routerv1.ExplainResponse {
	model := req.GetModel()
	l := s.getLookup()
	defer s.scratch.Put(l)
	ps := policyScratches.Get().(*policyScratch)
	defer policyScratches.Put(ps)
	s.evaluate(st, ps, l, req, now)
	d := &ps.d

	resp := &routerv1.ExplainResponse{Candidates: make([]*routerv1.Candidate, 0, len(ps.rows))}
	switch d.Outcome {
	case policy.Routed:
		row := &ps.rows[d.Chosen]
		kind, provider, served := routerv1.TargetKind_TARGET_KIND_LOCAL, "", row.Model
		if row.Kind == endpoints.KindProvider {
			kind, provider = routerv1.TargetKind_TARGET_KIND_PROVIDER, row.Group
			if p := st.snap.Provider(row.Group); p != nil {
				if name, ok := p.ServedName(row.Model); ok && name != "" {
					served = name
				}
			}
		}
		strategy := load.Strategy
		if d.Rule != nil {
			strategy = StrategyPolicy
		}
		resp.Result = &routerv1.RouteResponse{
			Target: &routerv1.Target{Id: row.EndpointID, Url: row.URL, Kind: kind, Provider: provider, ServedModel: served},
			Decision: &routerv1.Decision{Policy: d.Policy(), Rule: d.RuleName(), Strategy: strategy,
				PredictedTtftSeconds: row.Estimate.TTFT, CachedTokens: row.CachedTokens, PromptTokens: l.tokens, Reason: d.Summary(ps.bs)},
		}
	case policy.Rejected:
		resp.Result = &routerv1.RouteResponse{
			Rejection: &routerv1.Rejection{Code: routerv1.RejectCode_REJECT_CODE_POLICY, Message: d.RejectMessage()},
			Decision:  &routerv1.Decision{Policy: d.Policy(), Rule: d.RuleName(), Strategy: StrategyPolicy, Reason: d.Summary(ps.bs)},
		}
	default:
		out := load.NoHealthyEndpoint
		if len(ps.rows) == 0 {
			out = load.ModelNotFound
		}
		resp.Result = rejection(model, out)
	}
	for i := range ps.rows {
		r, v := &ps.rows[i], d.Trace[i]
		kind := routerv1.TargetKind_TARGET_KIND_LOCAL
		if r.Kind == endpoints.KindProvider {
			kind = routerv1.TargetKind_TARGET_KIND_PROVIDER
		}
		c := &routerv1.Candidate{
			Endpoint: &routerv1.Endpoint{Id: r.EndpointID, Url: r.URL, Models: []string{r.Model}, Kind: kind,
				Healthy: !strings.HasPrefix(r.Unavailable, "unhealthy"), LastError: r.LastError, Waiting: r.Load.Waiting, Running: r.Load.Running,
				InFlight: r.Load.InFlight, KvCacheUsage: r.KVCacheUsage, LastScrape: timestampOrNil(r.LastScrape)},
			InFlight:             r.Load.InFlight,
			Waiting:              r.Load.Waiting,
			Running:              r.Load.Running,
			CachedTokens:         r.CachedTokens,
			PredictedTtftSeconds: r.Estimate.TTFT,
			Score:                r.Estimate.Score,
			Chosen:               v.Status == policy.Chosen,
		}
		switch v.Status {
		case policy.Candidate, policy.Lost, policy.Chosen:
			c.Eligible = true
		case policy.NotConsidered:
			c.ExcludedReason = "not considered by the deciding rule"
		case policy.Unavailable:
			c.ExcludedReason = v.By
		case policy.Dropped:
			c.ExcludedReason = "dropped by " + v.By
			if v.Guard {
				c.ExcludedReason += " (guard)"
			}
		}
		resp.Candidates = append(resp.Candidates, c)
	}
	return resp
}
