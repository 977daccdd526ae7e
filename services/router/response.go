package router

import (
	"slices"
	"strconv"
	"strings"

	"github.com/switchyard-dev/switchyard/internal/policy"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router/internal/load"
	"github.com/switchyard-dev/switchyard/services/router/internal/prompt"
)

// StrategyPolicy names decisions a policy rule made; default routing's is
// load.Strategy.
const StrategyPolicy = "policy"

// outcome is what came of a decision, as metrics label it.
type outcome uint8

const (
	routed outcome = iota
	modelNotFound
	noHealthyEndpoint
	policyRejected
	held
)

func (o outcome) String() string {
	return [...]string{"routed", "model_not_found", "no_healthy_endpoint", "policy_rejected", "held"}[o]
}

func (d *decision) outcome() outcome {
	switch {
	case d.pd.Outcome == policy.Rejected:
		return policyRejected
	case d.held >= 0:
		return held
	case d.chosen < 0 && len(d.rows) == 0:
		return modelNotFound
	case d.chosen < 0:
		return noHealthyEndpoint
	}
	return routed
}

// response is the one mapping of a decision to the router's answer: Route
// returns it, Explain returns it as its result.
func (d *decision) response() *routerv1.RouteResponse {
	model := d.req.GetModel()
	switch d.outcome() {
	case routed:
		row := &d.rows[d.chosen]
		t := &routerv1.Target{Id: row.EndpointID, Url: row.URL, Kind: targetKind(row.Kind), ServedModel: d.served, Type: row.Type}
		if t.Kind == routerv1.TargetKind_TARGET_KIND_PROVIDER {
			t.Provider = row.Group
		}
		return &routerv1.RouteResponse{Target: t, Decision: &routerv1.Decision{
			Policy:               d.pd.Policy(),
			Rule:                 d.pd.RuleName(),
			Strategy:             d.strategy(),
			PredictedTtftSeconds: row.Estimate.TTFT,
			CachedTokens:         row.CachedTokens,
			PromptTokens:         d.tokens,
			Reason:               d.reason(),
		}}
	case policyRejected:
		return &routerv1.RouteResponse{
			Rejection: &routerv1.Rejection{Code: routerv1.RejectCode_REJECT_CODE_POLICY, Message: d.pd.RejectMessage()},
			Decision:  &routerv1.Decision{Policy: d.pd.Policy(), Rule: d.pd.RuleName(), Strategy: StrategyPolicy, Reason: d.pd.Summary(d.bs)},
		}
	case modelNotFound:
		return rejection(routerv1.RejectCode_REJECT_CODE_MODEL_NOT_FOUND, "no endpoint serves model "+model)
	case held:
		row := &d.rows[d.held]
		return &routerv1.RouteResponse{Held: true, Decision: &routerv1.Decision{
			Policy:            d.pd.Policy(),
			Rule:              d.pd.RuleName(),
			Strategy:          d.strategy(),
			CachedTokens:      row.CachedTokens,
			PromptTokens:      d.tokens,
			PromptTokensExact: d.prompt.Kind == prompt.Tokens,
			Reason:            d.holdReason(),
		}}
	}
	return rejection(routerv1.RejectCode_REJECT_CODE_NO_HEALTHY_ENDPOINT, "no healthy endpoint for model "+model+" (all unhealthy or excluded)")
}

// holdReason says why a request was held.
func (d *decision) holdReason() string {
	if d.req.GetHold() {
		return "held: the gateway's queue has requests waiting"
	}
	msg := "held: every eligible local worker has " + strconv.Itoa(int(d.req.GetQueueThreshold())) + " or more requests waiting to be scheduled"
	limit, reserve := d.req.GetKvCacheThreshold(), d.req.GetKvReserve()
	if limit <= 0 && reserve <= 0 {
		return msg
	}
	if limit <= 0 {
		limit = 1
	}
	msg += " or no room for the request's claim within " + strconv.FormatFloat((limit-reserve)*100, 'f', -1, 64) + "% of its KV cache"
	if reserve > 0 {
		msg += " (the tenant is past its share: " + strconv.FormatFloat(reserve*100, 'f', -1, 64) + "% kept for others)"
	}
	return msg
}

func rejection(code routerv1.RejectCode, msg string) *routerv1.RouteResponse {
	return &routerv1.RouteResponse{
		Rejection: &routerv1.Rejection{Code: code, Message: msg},
		Decision:  &routerv1.Decision{Strategy: load.Strategy},
	}
}

func (d *decision) strategy() string {
	if d.pd.Rule != nil {
		return StrategyPolicy
	}
	return load.Strategy
}

// reason says why the target won. Default routing is explained by the
// load table's account of the winner's score; a decision a policy took
// part in (a rule decided, rules before it found nothing, guards applied)
// by the policy's.
func (d *decision) reason() string {
	if d.pd.Rule != nil || d.pd.Fallbacks > 0 || len(d.pd.Guards) > 0 {
		return d.pd.Summary(d.bs)
	}
	var next *load.Backend
	if d.pd.RunnerUp >= 0 {
		next = &d.rows[d.pd.RunnerUp]
	}
	return load.Reason(&d.rows[d.chosen], next, d.tokens, d.pd.Candidates)
}

// explanation is Explain's answer: the decision's response, and one
// candidate per scored row with the program's verdict on it, then the
// endpoints serving none of the models considered; all in endpoint id
// order.
func (s *service) explanation(d *decision) *routerv1.ExplainResponse {
	views := s.table.Endpoints("")
	resp := &routerv1.ExplainResponse{Result: d.response(), Candidates: make([]*routerv1.Candidate, 0, len(d.rows)+len(views))}
	if s.tc != nil {
		resp.Tokenizer = s.tc.status(d.req.GetModel())
	}
	for i := range d.rows {
		resp.Candidates = append(resp.Candidates, candidate(&d.rows[i], d.pd.Trace[i]))
	}
	for _, v := range views {
		if slices.ContainsFunc(d.rows, func(r load.Backend) bool { return r.EndpointID == v.ID }) {
			continue
		}
		resp.Candidates = append(resp.Candidates, &routerv1.Candidate{
			Endpoint:       endpointProto(v),
			ExcludedReason: notServing(v, d.models),
			InFlight:       v.Load.InFlight,
			Waiting:        v.Load.Waiting,
			Running:        v.Load.Running,
		})
	}
	slices.SortStableFunc(resp.Candidates, func(a, b *routerv1.Candidate) int {
		return strings.Compare(a.GetEndpoint().GetId(), b.GetEndpoint().GetId())
	})
	return resp
}

// candidate is one scored row with its verdict. Its endpoint is the
// endpoint as it would serve the row's model.
func candidate(r *load.Backend, v policy.Verdict) *routerv1.Candidate {
	c := &routerv1.Candidate{
		Endpoint: endpointProto(load.EndpointView{
			ID: r.EndpointID, URL: r.URL, Kind: r.Kind, Models: []string{r.Model}, Healthy: r.Healthy, LastError: r.LastError,
			Load: r.Load, KVCacheUsage: r.KVCacheUsage, LastScrape: r.LastScrape,
		}),
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
		c.ExcludedReason = r.Unavailable()
	case policy.Dropped:
		c.ExcludedReason = "dropped by " + v.By
		if v.Guard {
			c.ExcludedReason += " (guard)"
		}
	}
	return c
}

// notServing says why an endpoint is no candidate for models.
func notServing(v load.EndpointView, models []string) string {
	if len(v.Models) == 0 {
		return "models not known yet (not scraped successfully)"
	}
	quoted := make([]string, len(models))
	for i, m := range models {
		quoted[i] = strconv.Quote(m)
	}
	return "does not serve model " + strings.Join(quoted, " nor ")
}
