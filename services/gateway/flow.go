package gateway

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	"github.com/switchyard-dev/switchyard/internal/policy"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/gateway/admission"
	"github.com/switchyard-dev/switchyard/services/gateway/flowcontrol"
)

// Flow control at the gateway (package flowcontrol has the algorithm):
// the first attempt of a request asks the router with the queue
// threshold, and a request the router holds waits in the queue for its
// turn to ask again. Retries never queue: the request has waited already.

const (
	// PriorityHeader asks for a request's class: critical, standard or
	// sheddable, at most the tenant's maxPriority.
	PriorityHeader = "X-Switchyard-Priority"
	// ShedReasonHeader says why the queue refused a request (429).
	ShedReasonHeader = "X-Switchyard-Shed-Reason"
	// shedRetryAfter is the Retry-After of a shed request, seconds.
	shedRetryAfter = 1
)

// flowRoute is what the router is asked besides the request: the queue
// and KV thresholds, the reserve the request must leave, and whether to
// hold the request whatever the load.
type flowRoute struct {
	threshold int32
	kv        float64
	reserve   float64
	hold      bool
}

// priority is the request's class and its tenant's weight: the tenant's
// default class, or the one the priority header asks for within the
// tenant's maximum.
func (c *call) priority(r *http.Request) (flowcontrol.Class, float64, error) {
	var prog *policy.Program
	if c.g.catalog != nil {
		prog = c.g.catalog.program()
	}
	tf := prog.TenantFlow(c.tenant)
	class := classOf(tf.Priority)
	asked := r.Header.Values(PriorityHeader)
	if len(asked) == 0 {
		return class, float64(tf.Weight), nil
	}
	if len(asked) > 1 {
		return 0, 0, &admission.Refusal{Status: http.StatusBadRequest, Code: "invalid_priority", Message: PriorityHeader + " given more than once"}
	}
	want, err := flowcontrol.ParseClass(asked[0])
	if err != nil {
		return 0, 0, &admission.Refusal{Status: http.StatusBadRequest, Code: "invalid_priority", Message: PriorityHeader + ": " + err.Error()}
	}
	if max := classOf(tf.MaxPriority); want > max {
		return 0, 0, &admission.Refusal{Status: http.StatusForbidden, Code: "priority_not_allowed",
			Message: "tenant " + c.tenant + " may ask for priority " + max.String() + " at most, not " + want.String()}
	}
	return want, float64(tf.Weight), nil
}

// classOf is a configured priority's class; policyd validated it (an
// unknown one, which Rank calls -1, is Standard).
func classOf(p v1alpha1.Priority) flowcontrol.Class {
	if r := p.Rank(); r >= 0 {
		return flowcontrol.Class(r)
	}
	return flowcontrol.Standard
}

// flowAsk is what the router is asked for the request now: a tenant past
// its share (or a sheddable request) leaves the reserve, and a request
// that some waiting one would go before is held to join the queue behind
// it.
func (c *call) flowAsk(cost int64) flowRoute {
	q, cfg := c.g.flow, &c.g.cfg.Flow
	fr := flowRoute{threshold: int32(cfg.Threshold), kv: cfg.KVCacheThreshold}
	if cfg.Reserve > 0 && q.Borrowing(c.tenant, c.weight, c.class) {
		fr.reserve = cfg.Reserve
	}
	fr.hold = q.Ahead(flowcontrol.Item{Tenant: c.tenant, Weight: c.weight, Class: c.class, Cost: cost})
	return fr
}

// routeFirst routes the request's first attempt through flow control. It
// returns the router's answer, or a client-facing error, or a refusal
// (the queue shed the request) for refuse to answer. A routed request's
// claim on the fleet counts in its tenant's share until it finishes.
func (c *call) routeFirst(ctx context.Context, body []byte) (*routerv1.RouteResponse, *openaiapi.APIError, error) {
	q := c.g.flow
	if q == nil {
		rr, apiErr := c.route(ctx, body, nil, flowRoute{})
		return rr, apiErr, nil
	}
	// Before the router has counted the prompt, a newcomer's cost is
	// unknown: it is taken as 1 token, the least a request is charged.
	rr, apiErr := c.route(ctx, body, nil, c.flowAsk(1))
	if apiErr != nil || !rr.GetHeld() {
		c.claim(rr)
		return rr, apiErr, nil
	}
	d := rr.GetDecision()
	cost := d.GetPromptTokens() - d.GetCachedTokens()
	joined := time.Now()
	tk, err := q.Join(flowcontrol.Item{Tenant: c.tenant, Weight: c.weight, Class: c.class, Cost: cost}, joined)
	if err != nil {
		return nil, nil, c.shed(err, 0)
	}
	defer func() {
		c.queued = time.Since(joined)
		c.g.flowMetrics.Waited(c.class, c.queued)
	}()
	for {
		if err := tk.Turn(ctx); err != nil {
			if ctx.Err() != nil {
				return nil, errClientClosed, nil
			}
			return nil, nil, c.shed(err, time.Since(joined))
		}
		fr := c.flowAsk(cost)
		fr.hold = false // its turn: it goes before every request waiting
		rr, apiErr = c.route(ctx, body, nil, fr)
		switch {
		case apiErr != nil:
			tk.Leave()
			return nil, apiErr, nil
		case rr.GetHeld():
			tk.Held()
		default:
			c.claim(rr)
			tk.Routed()
			return rr, nil, nil
		}
	}
}

// claim counts a routed request's claim on the fleet's KV cache (its
// uncached prompt plus its output limit) in its tenant's share, until
// finish releases it.
func (c *call) claim(rr *routerv1.RouteResponse) {
	if rr.GetTarget() == nil {
		return
	}
	d := rr.GetDecision()
	c.unclaim = c.g.flow.Claim(c.tenant, c.weight, d.GetPromptTokens()-d.GetCachedTokens()+c.maxOutput())
}

// maxOutput is the output limit counted in the request's KV claim: its
// own, or flow control's default.
func (c *call) maxOutput() int64 {
	if c.req.MaxTokens > 0 {
		return c.req.MaxTokens
	}
	return c.g.cfg.Flow.DefaultMaxTokens
}

// shed is the refusal of a request the queue gave up.
func (c *call) shed(err error, waited time.Duration) error {
	var se *flowcontrol.ShedError
	if !errors.As(err, &se) {
		return err
	}
	c.g.flowMetrics.Shed(c.class, se.Reason)
	c.outcome = bus.UsageOutcomeShed
	c.log.Info().Str("reason", se.Reason).Str("class", c.class.String()).Dur("waited", waited).Msg("flow control shed the request")
	return &admission.Refusal{
		Status:  http.StatusTooManyRequests,
		Code:    "fleet_saturated",
		Message: se.Error() + "; retry later",
		Header:  http.Header{ShedReasonHeader: {se.Reason}, "Retry-After": {strconv.Itoa(shedRetryAfter)}},
	}
}
