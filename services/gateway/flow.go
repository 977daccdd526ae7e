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
// threshold, and whether to hold the request whatever the load.
type flowRoute struct {
	threshold int32
	kv        float64
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

// routeFirst routes the request's first attempt through flow control. It
// returns the router's answer, or a client-facing error, or a refusal
// (the queue shed the request) for refuse to answer.
func (c *call) routeFirst(ctx context.Context, body []byte) (*routerv1.RouteResponse, *openaiapi.APIError, error) {
	q := c.g.flow
	if q == nil {
		rr, apiErr := c.route(ctx, body, nil, flowRoute{})
		return rr, apiErr, nil
	}
	fr := flowRoute{threshold: int32(c.g.cfg.Flow.Threshold), kv: c.g.cfg.Flow.KVCacheThreshold, hold: q.Busy()}
	rr, apiErr := c.route(ctx, body, nil, fr)
	if apiErr != nil || !rr.GetHeld() {
		return rr, apiErr, nil
	}
	d := rr.GetDecision()
	joined := time.Now()
	tk, err := q.Join(flowcontrol.Item{
		Tenant: c.tenant, Weight: c.weight, Class: c.class,
		Cost: d.GetPromptTokens() - d.GetCachedTokens(),
	}, joined)
	if err != nil {
		return nil, nil, c.shed(err, 0)
	}
	defer func() {
		c.queued = time.Since(joined)
		c.g.flowMetrics.Waited(c.class, c.queued)
	}()
	fr.hold = false
	for {
		if err := tk.Turn(ctx); err != nil {
			if ctx.Err() != nil {
				return nil, errClientClosed, nil
			}
			return nil, nil, c.shed(err, time.Since(joined))
		}
		rr, apiErr = c.route(ctx, body, nil, fr)
		switch {
		case apiErr != nil:
			tk.Leave()
			return nil, apiErr, nil
		case rr.GetHeld():
			tk.Held()
		default:
			tk.Routed()
			return rr, nil, nil
		}
	}
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
