package gateway

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	"github.com/switchyard-dev/switchyard/internal/upstream"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/gateway/admission"
	"github.com/switchyard-dev/switchyard/services/gateway/flowcontrol"
	"github.com/switchyard-dev/switchyard/services/gateway/internal/apibody"
	"github.com/switchyard-dev/switchyard/services/gateway/internal/sse"
	"github.com/switchyard-dev/switchyard/services/gateway/ratelimit"
)

const (
	// clientWriteTimeout bounds one write to a client that stopped reading.
	clientWriteTimeout = time.Minute
	// maxErrorBody is how much of an upstream 5xx body is kept to replay it.
	maxErrorBody = 64 << 10
	// maxUsageCapture is how much of a non-streamed body is kept to read its
	// usage; real completions are far smaller.
	maxUsageCapture = 4 << 20
	maxTags         = 16
	maxTagLen       = 64
	maxRequestIDLen = 128
)

var (
	errHeaderTimeout = errors.New("upstream response headers timed out")
	// errStreamIdle ends a response whose upstream sent nothing for
	// Config.StreamIdleTimeout.
	errStreamIdle = errors.New("upstream sent nothing within the stream idle timeout")
	// errEndpointUnhealthy ends a silent response whose endpoint the
	// router marked unhealthy (health.go).
	errEndpointUnhealthy = errors.New("the router marked the endpoint unhealthy")
	// errUpstreamStreamError ends a native stream whose upstream sent an
	// error event.
	errUpstreamStreamError = errors.New("the upstream ended the stream with an error event")
	// errClientWrite marks a relay that failed writing to the client.
	errClientWrite = errors.New("write to client")
)

var relayBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// call is one client request, across its attempts.
type call struct {
	g     *Gateway
	api   apibody.API
	path  string
	start time.Time
	id    string
	log   zerolog.Logger

	apiName string // the client's API, for the usage event
	// native is the client's request in its own API when an inbound API
	// other than OpenAI's handed it on (native.go); nil for OpenAI clients.
	native *nativeRequest
	// meter reads the usage of the current attempt's answer when it went
	// natively; nil on the chat path.
	meter      usageMeter
	req        apibody.Request
	parsed     bool
	tenant     string
	tags       []string
	modelKnown bool // the router recognised the model: safe as a metric label
	// reserved is the request's tokens reserved by the ratelimit step,
	// settled with the real usage in finish; nil without limits.
	reserved *ratelimit.Reservation
	// class and weight place the request in the flow-control queue;
	// queued is how long it waited there.
	class  flowcontrol.Class
	weight float64
	queued time.Duration
	// unclaim releases the routed request's claim in its tenant's share
	// of the fleet (flow control); nil when none was counted.
	unclaim func()

	attempts int
	target   *routerv1.Target
	decision *routerv1.Decision

	// Outcome.
	outcome   string // a bus.UsageOutcome* value; empty: judged from status
	status    int
	errType   string
	abort     bool // the response broke after headers: cut the connection
	committed bool // a 2xx-or-4xx upstream response is being relayed
	streamed  bool
	usage     apibody.Usage
	hasUsage  bool
	ttft      time.Duration // from request arrival to the first data event
	first     time.Time     // first data event
	done      bool          // the stream's [DONE] event was forwarded
	last      time.Time     // last data event
	// upstreamFailed ends a stream whose upstream sent its own error event
	// (a native API's, passed on as it is): the upstream broke it.
	upstreamFailed error
	events         int64 // streamed data events carrying tokens
}

func (g *Gateway) completions(api apibody.API, path string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.inflight.Add(1)
		defer g.inflight.Add(-1)
		if g.limiter != nil {
			key := clientKey(r)
			if !g.limiter.acquire(key) {
				g.metrics.requests.WithLabelValues(unknownModel, statusLabel(http.StatusTooManyRequests)).Inc()
				g.metrics.clientLimited.Inc()
				g.tooManyStreams(w)
				return
			}
			defer g.limiter.release(key)
		}
		c := &call{g: g, api: api, path: path, start: time.Now(), id: rand.Text(), apiName: apiName(api)}
		if in := inboundOf(r.Context()); in.name != "" {
			c.apiName, c.native = in.name, in.native
			if in.id != "" {
				c.id = in.id // one id from the first byte to the usage event
			}
		}
		lc := g.log.With().Str("request_id", c.id)
		if cid := r.Header.Get(RequestIDHeader); saneRequestID(cid) {
			lc = lc.Str("client_request_id", cid)
		}
		c.log = lc.Logger()
		w.Header().Set(RequestIDHeader, c.id)
		c.serve(w, r)
		c.finish()
		if c.abort {
			// Tell the client the stream broke rather than ending it
			// cleanly; net/http closes the connection without logging.
			panic(http.ErrAbortHandler)
		}
	})
}

// The request id is always the gateway's own: it keys the router's in-flight
// entries and is the usage event's Nats-Msg-Id, so a client reusing an id
// must not make JetStream drop a later request's usage as a duplicate. A
// sane client-supplied X-Request-Id is logged beside it for correlation;
// the response's X-Request-Id is the gateway's id.
func saneRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !idByteOK(id[i]) {
			return false
		}
	}
	return true
}

func idByteOK(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		c == '-' || c == '_' || c == '.' || c == ':'
}

func (c *call) serve(w http.ResponseWriter, r *http.Request) {
	ar := admission.Request{HTTP: r}
	if tenant, ok := admittedTenant(r.Context()); ok {
		ar.Tenant = tenant // admitted by the inbound API that translated the request
	} else if err := c.admitRequest(&ar); err != nil {
		c.tenant = ar.Tenant // a step after authentication refused it: whose it was is known
		c.refuse(w, r, err)
		return
	}
	c.tenant = ar.Tenant
	addHeaders(w, ar.Header)
	body, apiErr := c.readBody(w, r)
	if apiErr != nil {
		c.fail(w, apiErr)
		return
	}
	req, apiErr := apibody.Parse(c.api, body)
	if apiErr != nil {
		c.fail(w, apiErr)
		return
	}
	c.req, c.parsed = req, true
	class, weight, err := c.priority(r)
	if err != nil {
		c.refuse(w, r, err)
		return
	}
	c.class, c.weight = class, weight
	header := ""
	if c.g.catalog != nil {
		header = c.g.catalog.tagsHeader()
	}
	if header == "" && c.g.cfg.AllowTagsHeader {
		header = TagsHeader
	}
	if header != "" {
		tags, apiErr := parseTags(header, r.Header.Values(header))
		if apiErr != nil {
			c.fail(w, apiErr)
			return
		}
		c.tags = tags
	}
	c.proxy(w, r, body)
}

func (c *call) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *openaiapi.APIError) {
	limit := c.g.cfg.MaxBodyBytes
	body, fault, err := readClientBody(w, r, limit, c.g.cfg.BodyReadTimeout)
	switch fault {
	case bodyRead:
		return body, nil
	case bodyTooLarge:
		return nil, tooLarge(limit)
	case bodySlow:
		return nil, bodyTimeout(c.g.cfg.BodyReadTimeout)
	case bodyClientGone:
		return nil, errClientClosed
	default:
		return nil, openaiapi.InvalidRequest("", "could not read the request body: "+err.Error())
	}
}

// bodyTimeout answers a body that did not arrive in time.
func bodyTimeout(d time.Duration) *openaiapi.APIError {
	return &openaiapi.APIError{
		Status:  http.StatusRequestTimeout,
		Type:    openaiapi.ErrTypeInvalidRequest,
		Message: fmt.Sprintf("the request body did not arrive within %s (the gateway's --body-read-timeout)", d),
		Code:    "request_timeout",
	}
}

func tooLarge(limit int64) *openaiapi.APIError {
	return &openaiapi.APIError{
		Status:  http.StatusRequestEntityTooLarge,
		Type:    openaiapi.ErrTypeInvalidRequest,
		Message: fmt.Sprintf("the request body is larger than the limit of %d bytes", limit),
		Code:    "request_too_large",
	}
}

// parseTags reads comma-separated tags from every TagsHeader line,
// de-duplicated in order.
func parseTags(header string, values []string) ([]string, *openaiapi.APIError) {
	var tags []string
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			t = strings.TrimSpace(t)
			if t == "" {
				continue
			}
			if len(t) > maxTagLen || !validTag(t) {
				return nil, openaiapi.InvalidRequest("", fmt.Sprintf("%s: invalid tag %q: want up to %d of [A-Za-z0-9._:/-]", header, truncate(t, maxTagLen), maxTagLen))
			}
			dup := false
			for _, have := range tags {
				dup = dup || have == t
			}
			if dup {
				continue
			}
			if len(tags) == maxTags {
				return nil, openaiapi.InvalidRequest("", fmt.Sprintf("%s: more than %d tags", header, maxTags))
			}
			tags = append(tags, t)
		}
	}
	return tags, nil
}

func validTag(t string) bool {
	for i := 0; i < len(t); i++ {
		if c := t[i]; !idByteOK(c) && c != '/' {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// attemptEnd is how an attempt ended, as the routers learn it from its
// route completion: their predictors learn from successes, providers'
// circuit breakers count the upstream's failures, and what the client
// caused says nothing of the upstream.
type attemptEnd int

const (
	endClient   attemptEnd = iota // the client went away, sent a bad request or was refused
	endOK                         // the upstream served it
	endUpstream                   // the upstream failed it: no connection, no headers in time, 429, 5xx, broke off, refused our credentials
)

// endOf is how an attempt the upstream answered with status ended.
func endOf(status int) attemptEnd {
	switch {
	case status < 300:
		return endOK
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return endUpstream // the provider refuses our key: no request will pass
	}
	return endClient
}

// failure is an attempt that failed before anything reached the client, so
// the request may be retried elsewhere.
type failure struct {
	err      error // transport error; nil when the upstream answered 5xx
	timeout  bool
	status   int
	header   http.Header
	body     []byte
	endpoint string
	native   bool // the answer is in the client's own API (a native attempt)
}

func (c *call) proxy(w http.ResponseWriter, r *http.Request, body []byte) {
	ctx := r.Context()
	var exclude []string
	var first *failure
	for attempt := 1; attempt <= c.g.cfg.MaxAttempts; attempt++ {
		var rr *routerv1.RouteResponse
		var apiErr *openaiapi.APIError
		if attempt == 1 {
			var shed error
			if rr, apiErr, shed = c.routeFirst(ctx, body); shed != nil {
				c.refuse(w, r, shed)
				return
			}
		} else {
			rr, apiErr = c.route(ctx, body, exclude, flowRoute{})
		}
		if apiErr != nil {
			if first != nil && apiErr != errClientClosed {
				// Nowhere left to retry: the client hears about the
				// upstream failure, not about the empty retry.
				c.replay(w, first)
				return
			}
			c.fail(w, apiErr)
			return
		}
		if attempt == 1 && !c.reserveTokens(w, r, rr) {
			return
		}
		c.attempts = attempt
		c.target, c.decision = rr.GetTarget(), rr.GetDecision()
		if c.g.cfg.DecisionHeaders {
			c.decisionHeaders(w)
		}
		f := c.attempt(w, r, body)
		if f == nil {
			return
		}
		if first == nil {
			first = f
		}
		exclude = append(exclude, f.endpoint)
		c.g.cooldowns.note(f, time.Now())
		if attempt == c.g.cfg.MaxAttempts || time.Since(c.start) > c.g.cfg.RetryWindow {
			c.replay(w, f)
			return
		}
		c.g.metrics.retries.WithLabelValues(c.req.Model).Inc()
		c.log.Info().Str("endpoint", f.endpoint).Int("status", f.status).AnErr("error", f.err).Msg("retrying on another endpoint")
	}
}

// decisionHeaders puts the attempt's target and predicted TTFT on the
// answer (Config.DecisionHeaders); a retry's replace them.
func (c *call) decisionHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set(TargetHeader, c.target.GetId())
	if p := c.decision.GetPredictedTtftSeconds(); p > 0 {
		h.Set(PredictedTTFTHeader, strconv.FormatFloat(p, 'f', 4, 64))
	} else {
		h.Del(PredictedTTFTHeader)
	}
}

// addHeaders puts what admission gave an admitted request (its rate
// limits' state) on the answer.
func addHeaders(w http.ResponseWriter, h http.Header) {
	for k, v := range h {
		w.Header()[k] = v
	}
}

// reserveTokens reserves the routed request's tokens with the ratelimit
// step: the router's prompt count and the request's max_tokens. Refused,
// it answers the client, releases the router's slot and returns false.
func (c *call) reserveTokens(w http.ResponseWriter, r *http.Request, rr *routerv1.RouteResponse) bool {
	if c.g.ratelimit == nil {
		return true
	}
	res, h, err := c.g.ratelimit.ReserveTokens(r.Context(), c.tenant, c.req.Model, callerAPI(r) == apiAnthropic,
		rr.GetDecision().GetPromptTokens(), c.req.MaxTokens)
	if err != nil {
		c.completed(rr.GetTarget().GetId(), time.Now(), endClient, 0)
		c.refuse(w, r, err)
		return false
	}
	addHeaders(w, h)
	c.reserved = res
	return true
}

// route asks the router for a target; errors are client-facing.
func (c *call) route(ctx context.Context, body []byte, exclude []string, fr flowRoute) (*routerv1.RouteResponse, *openaiapi.APIError) {
	rctx, cancel := context.WithTimeout(ctx, c.g.cfg.RouteTimeout)
	defer cancel()
	api := routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS
	if c.api == apibody.Completions {
		api = routerv1.ApiKind_API_KIND_COMPLETIONS
	}
	t0 := time.Now()
	resp, err := c.g.router.Route(rctx, &routerv1.RouteRequest{
		RequestId:        c.id,
		Tenant:           c.tenant,
		Model:            c.req.Model,
		Api:              api,
		Tags:             c.tags,
		Body:             body,
		ExcludeEndpoints: c.g.cooldowns.active(slices.Clip(exclude), t0),
		QueueThreshold:   fr.threshold,
		KvCacheThreshold: fr.kv,
		KvReserve:        fr.reserve,
		MaxOutputTokens:  c.maxOutput(),
		Hold:             fr.hold,
		StepClocks:       c.g.steps.Append(nil, t0),
	})
	c.g.metrics.routeSeconds.Observe(time.Since(t0).Seconds())
	if err != nil {
		if ctx.Err() != nil {
			return nil, errClientClosed
		}
		code := status.Code(err)
		c.log.Warn().Str("grpc_code", code.String()).Err(err).Msg("route call failed")
		if code == codes.InvalidArgument {
			return nil, openaiapi.InvalidRequest("", "the request could not be routed: "+status.Convert(err).Message())
		}
		return nil, errRouterUnavailable
	}
	if rej := resp.GetRejection(); rej != nil {
		c.modelKnown = rej.GetCode() == routerv1.RejectCode_REJECT_CODE_NO_HEALTHY_ENDPOINT ||
			rej.GetCode() == routerv1.RejectCode_REJECT_CODE_POLICY
		if rej.GetCode() == routerv1.RejectCode_REJECT_CODE_POLICY {
			c.outcome = bus.UsageOutcomeRejectedPolicy
		}
		return nil, rejectionError(c.req.Model, rej)
	}
	if resp.GetHeld() && (fr.threshold > 0 || fr.hold) {
		c.modelKnown = true
		return resp, nil
	}
	if resp.GetTarget().GetUrl() == "" || resp.GetTarget().GetId() == "" {
		c.log.Error().Msg("router answered without target or rejection")
		return nil, &openaiapi.APIError{Status: http.StatusInternalServerError, Type: openaiapi.ErrTypeServer, Message: "the routing service returned an unexpected answer"}
	}
	c.modelKnown = true
	return resp, nil
}

// attempt sends the request (body, as routed) to the routed target, under
// the name the target serves the model by: the chat path's body, or the
// client's own when the target's adapter takes its API natively. It
// returns a failure when the request may be retried (nothing was written
// to the client); otherwise it has written the response, or the client is
// gone.
func (c *call) attempt(w http.ResponseWriter, r *http.Request, body []byte) *failure {
	ep := c.target.GetId()
	sent := time.Now()
	c.meter = nil
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	t := upstream.Target{Type: c.target.GetType(), BaseURL: c.target.GetUrl()}
	adapter, err := c.g.upstreams.For(t.Type)
	if err == nil && c.target.GetKind() == routerv1.TargetKind_TARGET_KIND_PROVIDER {
		if c.g.catalog == nil {
			err = fmt.Errorf("provider %s: %w (the gateway has no --policyd-addr)", c.target.GetProvider(), errNoCredentials)
		} else {
			err = c.g.catalog.providerTarget(c.target.GetProvider(), &t, adapter)
		}
	}
	if err != nil {
		c.completed(ep, sent, endUpstream, 0)
		c.g.metrics.attempts.WithLabelValues(ep, outcomeConnectError).Inc()
		c.log.Error().Str("endpoint", ep).Str("type", t.Type).Err(err).Msg("target cannot be reached")
		return &failure{err: err, endpoint: ep}
	}
	h := http.Header{RequestIDHeader: {c.id}}
	for _, name := range []string{"Accept", "Traceparent", "Tracestate"} {
		if v := r.Header.Values(name); len(v) > 0 {
			h[name] = v
		}
	}
	path, send, injected := c.path, c.req.Forward(body, c.target.GetServedModel()), c.req.InjectsUsage()
	if n := c.native.nativeFor(adapter); n != nil {
		path, send, injected = n.api.path(), n.api.forward(n.body, c.target.GetServedModel()), false
		c.meter = n.api.meter()
		for k, v := range n.header {
			h[k] = v
		}
	}
	// A stream's headers come before generation starts, a whole answer's
	// only when it ends: each has its bound, and without headers by then
	// the attempt fails as if it could not connect.
	wait := c.g.cfg.UpstreamResponseTimeout
	if c.req.Stream {
		wait = c.g.cfg.UpstreamHeaderTimeout
	}
	var stopTimer func() bool
	if wait > 0 {
		t := time.AfterFunc(wait, func() { cancel(errHeaderTimeout) })
		stopTimer = t.Stop
	}
	resp, err := adapter.RoundTrip(ctx, t, upstream.Request{Path: path, Body: send, Header: h})
	if stopTimer != nil {
		stopTimer()
	}
	if err != nil {
		if r.Context().Err() != nil {
			c.g.metrics.attempts.WithLabelValues(ep, outcomeCanceled).Inc()
			c.completed(ep, sent, endClient, 0)
			c.status, c.errType = statusClientClosed, errClientClosed.Type
			return nil
		}
		timeout := errors.Is(context.Cause(ctx), errHeaderTimeout)
		outcome := outcomeConnectError
		if timeout {
			outcome, err = outcomeHeaderTimeout, errHeaderTimeout
		}
		c.g.metrics.attempts.WithLabelValues(ep, outcome).Inc()
		c.completed(ep, sent, endUpstream, 0)
		c.log.Warn().Str("endpoint", ep).Err(err).Msg("upstream attempt failed")
		return &failure{err: err, timeout: timeout, endpoint: ep}
	}
	defer resp.Body.Close()
	// A 5xx, or a 429 (the upstream's own limit: a provider's quota, a
	// worker's queue), before anything reached the client: another
	// target may serve it.
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		errBody, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		outcome := outcomeStatus5xx
		if resp.StatusCode == http.StatusTooManyRequests {
			outcome = outcomeStatus429
		}
		c.g.metrics.attempts.WithLabelValues(ep, outcome).Inc()
		c.completed(ep, sent, endUpstream, 0)
		c.log.Warn().Str("endpoint", ep).Int("status", resp.StatusCode).Str("retry_after", resp.Header.Get("Retry-After")).Msg("upstream refused the attempt")
		return &failure{status: resp.StatusCode, header: resp.Header, body: errBody, endpoint: ep, native: c.meter != nil}
	}

	if c.meter != nil {
		c.native.passThrough()
	}
	c.committed = true
	c.status = resp.StatusCode
	copyHeaders(w.Header(), resp.Header)
	// From here on the response is the client's: an upstream that goes
	// silent (frozen, or its host gone without a FIN) is cut after the idle
	// timeout, or sooner once the router says the endpoint is unhealthy.
	lv := c.g.live.add(ep, cancel)
	defer c.g.live.remove(ep, lv)
	idle := time.AfterFunc(c.g.cfg.StreamIdleTimeout, func() { cancel(errStreamIdle) })
	defer idle.Stop()
	src := &watchedBody{r: resp.Body, idle: idle, timeout: c.g.cfg.StreamIdleTimeout, live: lv}
	var relayErr error
	if isEventStream(resp.Header) && resp.StatusCode < 300 {
		c.streamed = true
		w.Header().Del("Content-Length")
		w.WriteHeader(resp.StatusCode)
		relayErr = c.relayStream(w, src, injected, sent)
	} else {
		w.WriteHeader(resp.StatusCode)
		relayErr = c.relayBody(w, src, resp.StatusCode < 300)
	}
	var attemptTTFT time.Duration
	if !c.first.IsZero() {
		attemptTTFT = c.first.Sub(sent)
	}
	switch {
	case relayErr == nil:
		c.g.metrics.attempts.WithLabelValues(ep, outcomeOK).Inc()
		c.completed(ep, sent, endOf(resp.StatusCode), attemptTTFT)
		if resp.StatusCode >= 400 {
			c.errType = openaiapi.ErrTypeInvalidRequest
		}
	case r.Context().Err() != nil || errors.Is(relayErr, errClientWrite):
		c.g.metrics.attempts.WithLabelValues(ep, outcomeCanceled).Inc()
		c.completed(ep, sent, endClient, attemptTTFT)
		c.status, c.errType = statusClientClosed, errClientClosed.Type
		c.abort = errors.Is(relayErr, errClientWrite) && r.Context().Err() == nil
	default:
		apiErr := errUpstreamBroken
		c.outcome = bus.UsageOutcomeUpstreamBroken
		metric := outcomeBroken
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, errStreamIdle):
			apiErr, c.outcome, metric = errUpstreamStalled(c.g.cfg.StreamIdleTimeout), bus.UsageOutcomeUpstreamStalled, outcomeStalled
		case errors.Is(cause, errEndpointUnhealthy):
			apiErr, c.outcome, metric = errUpstreamUnhealthy, bus.UsageOutcomeEndpointUnhealthy, outcomeUnhealthy
		}
		c.g.metrics.attempts.WithLabelValues(ep, metric).Inc()
		c.completed(ep, sent, endUpstream, attemptTTFT)
		c.log.Warn().Str("endpoint", ep).Err(relayErr).Str("outcome", c.outcome).Msg("upstream response broke off")
		c.errType = apiErr.Type
		if c.streamed {
			c.streamError(w, apiErr)
		}
		// The connection is cut as well, so a client that does not read
		// error events still sees a truncated response, not a clean end.
		c.abort = true
	}
	return nil
}

// streamError ends a stream whose 200 was sent with an error event, the
// way OpenAI's API reports an error mid-stream (a data event holding the
// error envelope, which the OpenAI SDKs raise as an error).
func (c *call) streamError(w http.ResponseWriter, e *openaiapi.APIError) {
	payload, err := json.Marshal(e.Body())
	if err != nil {
		return
	}
	rc := http.NewResponseController(w)
	ev := make([]byte, 0, len(payload)+16)
	ev = append(append(append(ev, "data: "...), payload...), "\n\n"...)
	if c.write(rc, w, ev) == nil {
		_ = rc.Flush()
	}
	_ = rc.SetWriteDeadline(time.Time{})
}

// watchedBody is an upstream body whose every read re-arms the idle timer
// and records when data last came, for the endpoint health check.
type watchedBody struct {
	r       io.Reader
	idle    *time.Timer
	timeout time.Duration
	live    *liveResponse
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 {
		b.idle.Reset(b.timeout)
		b.live.touch()
	}
	return n, err
}

// relayStream forwards an SSE response event by event, flushing after each
// read, and watches the events go by: the first data event is the first
// token (TTFT), the gaps between reads that carry data events are
// inter-token latency, and the usage chunk gives the token counts. When the
// gateway injected include_usage, the usage-only chunk the client did not ask
// for is dropped (a whole event, by byte range, never re-encoded).
func (c *call) relayStream(w http.ResponseWriter, body io.Reader, injected bool, sent time.Time) error {
	rc := http.NewResponseController(w)
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	if err := rc.Flush(); err != nil {
		return fmt.Errorf("%w: flush headers: %w", errClientWrite, err)
	}
	bp := relayBufs.Get().(*[]byte)
	defer relayBufs.Put(bp)
	buf := *bp
	itl := c.g.metrics.itl.WithLabelValues(c.req.Model)
	var sp sse.Splitter
	var lastRead time.Time
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			now := time.Now()
			sp.Feed(buf[:n])
			wrote, data := false, false
			for {
				ev, ok := sp.Next()
				if !ok {
					break
				}
				drop, tokens := c.inspect(ev, injected)
				if drop {
					continue
				}
				data = data || tokens
				if err := c.write(rc, w, ev); err != nil {
					return err
				}
				wrote = true
				if c.done {
					// Nothing follows [DONE] in the OpenAI protocol: the
					// response is complete, whatever the client or the
					// upstream connection does next.
					break
				}
			}
			if data {
				if c.target.GetKind() == routerv1.TargetKind_TARGET_KIND_LOCAL {
					c.g.steps.Tick(c.target.GetId(), now)
				}
				if c.first.IsZero() {
					c.first = now
					c.ttft = now.Sub(c.start)
				} else if !lastRead.IsZero() {
					itl.Observe(now.Sub(lastRead).Seconds())
				}
				lastRead, c.last = now, now
			}
			if wrote {
				if err := rc.Flush(); err != nil {
					return fmt.Errorf("%w: flush: %w", errClientWrite, err)
				}
			}
			if c.done {
				return c.upstreamFailed
			}
		}
		if rerr == io.EOF {
			if rest := sp.Rest(); len(rest) > 0 {
				if err := c.write(rc, w, rest); err != nil {
					return err
				}
				_ = rc.Flush()
			}
			return nil
		}
		if rerr != nil {
			return fmt.Errorf("read upstream stream: %w", rerr)
		}
	}
}

// inspect reads one event: it keeps the usage it carries and reports
// whether the event must be dropped and whether it carries tokens (a data
// event that is neither [DONE] nor the usage-only chunk).
func (c *call) inspect(ev []byte, injected bool) (drop, tokens bool) {
	data, ok := sse.Data(ev)
	if !ok {
		return false, false
	}
	if c.meter != nil {
		done, tokens := c.meter.event(data)
		c.usage, c.hasUsage = c.meter.usage()
		c.done = c.done || done
		if c.meter.failed() {
			c.upstreamFailed = errUpstreamStreamError
		}
		if tokens {
			c.events++
		}
		return false, tokens
	}
	ch := apibody.InspectChunk(data)
	if ch.HasUsage {
		c.usage, c.hasUsage = ch.Usage, true
	}
	c.done = c.done || ch.Done
	if ch.Done || ch.UsageOnly {
		return injected && ch.UsageOnly, false
	}
	c.events++
	return false, true
}

func (c *call) write(rc *http.ResponseController, w http.ResponseWriter, p []byte) error {
	_ = rc.SetWriteDeadline(time.Now().Add(clientWriteTimeout))
	if _, err := w.Write(p); err != nil {
		return fmt.Errorf("%w: %w", errClientWrite, err)
	}
	return nil
}

// relayBody copies a non-streamed response, keeping a copy of a successful
// one to read its usage.
func (c *call) relayBody(w http.ResponseWriter, body io.Reader, success bool) error {
	var capture *capped
	if success {
		capture = &capped{max: maxUsageCapture}
		body = io.TeeReader(body, capture)
	}
	bp := relayBufs.Get().(*[]byte)
	defer relayBufs.Put(bp)
	if _, err := io.CopyBuffer(onlyWriter{w}, body, *bp); err != nil {
		return fmt.Errorf("relay body: %w", err)
	}
	switch {
	case capture == nil || capture.over:
	case c.meter != nil:
		c.meter.body(capture.buf)
		c.usage, c.hasUsage = c.meter.usage()
	default:
		c.usage, c.hasUsage = apibody.BodyUsage(capture.buf)
	}
	return nil
}

// onlyWriter hides ReadFrom so CopyBuffer uses the pooled buffer.
type onlyWriter struct{ w io.Writer }

func (o onlyWriter) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	if err != nil {
		err = fmt.Errorf("%w: %w", errClientWrite, err)
	}
	return n, err
}

// capped keeps the first max bytes written to it and notes when there were
// more.
type capped struct {
	buf  []byte
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if !c.over {
		if len(c.buf)+len(p) > c.max {
			c.over, c.buf = true, nil
		} else {
			c.buf = append(c.buf, p...)
		}
	}
	return len(p), nil
}

// replay tells the client about a failed last attempt: an upstream JSON
// error is passed through as is, anything else becomes a gateway error.
func (c *call) replay(w http.ResponseWriter, f *failure) {
	switch {
	case f.err == nil && isJSON(f.header):
		if f.native {
			c.native.passThrough() // the client's API already
		}
		c.status, c.errType = f.status, openaiapi.ErrTypeServer
		w.Header().Set("Content-Type", f.header.Get("Content-Type"))
		if ra := f.header.Get("Retry-After"); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		w.WriteHeader(f.status)
		_, _ = w.Write(f.body)
	case f.err == nil:
		c.fail(w, &openaiapi.APIError{
			Status:  http.StatusBadGateway,
			Type:    openaiapi.ErrTypeServer,
			Message: fmt.Sprintf("the model server answered HTTP %d", f.status),
			Code:    "upstream_error",
		})
	case f.timeout:
		c.fail(w, errUpstreamTimeout)
	default:
		c.fail(w, errUpstreamUnreachable)
	}
}

// fail writes e unless the client is gone.
func (c *call) fail(w http.ResponseWriter, e *openaiapi.APIError) {
	c.status, c.errType = e.Status, e.Type
	if e == errClientClosed {
		return
	}
	openaiapi.WriteError(w, e)
}

// completed publishes the end of one attempt so routers release the
// endpoint's in-flight slot and learn from its TTFT.
func (c *call) completed(endpoint string, sent time.Time, end attemptEnd, ttft time.Duration) {
	ev := &eventsv1.RouteCompletion{
		RequestId:      c.id,
		EndpointId:     endpoint,
		CompletedAt:    timestamppb.Now(),
		Success:        end == endOK,
		UpstreamFailed: end == endUpstream,
	}
	if ev.Success {
		ev.TtftSeconds = ttft.Seconds()
		prompt, cached, completion := c.tokens()
		ev.PromptTokens, ev.CachedTokens, ev.CompletionTokens = prompt, cached, completion
	}
	c.g.sink.RouteCompleted(ev)
}

// tokens are the reported usage or, when the upstream sent none (a stream
// the client cut short, an upstream that ignores include_usage), an
// estimate: the router's prompt count and one token per streamed event.
func (c *call) tokens() (prompt, cached, completion int64) {
	if c.hasUsage {
		return c.usage.PromptTokens, c.usage.CachedTokens, c.usage.CompletionTokens
	}
	if !c.committed {
		return 0, 0, 0
	}
	return c.decision.GetPromptTokens(), c.decision.GetCachedTokens(), c.events
}

// finish records metrics and publishes the usage event.
func (c *call) finish() {
	end := time.Now()
	if c.unclaim != nil {
		c.unclaim()
	}
	if c.g.flow != nil && c.target != nil {
		// A routed request's end frees a slot: the queue's head may go.
		c.g.flow.Kick()
	}
	if c.reserved != nil {
		// Off the response's path: the client need not wait for Redis.
		// Bounded by --ratelimit-redis-timeout.
		prompt, _, completion := c.tokens()
		c.g.settling.Add(1)
		go func(r *ratelimit.Reservation) {
			defer c.g.settling.Add(-1)
			c.g.ratelimit.Settle(context.Background(), r, prompt, completion)
		}(c.reserved)
	}
	e2e := end.Sub(c.start)
	model := unknownModel
	if c.modelKnown {
		model = c.req.Model
	}
	m := c.g.metrics
	m.requests.WithLabelValues(model, statusLabel(c.status)).Inc()
	ok := c.status >= 200 && c.status < 300 && !c.abort
	if ok {
		m.e2e.WithLabelValues(model).Observe(e2e.Seconds())
		if c.streamed && c.ttft > 0 {
			m.ttft.WithLabelValues(model).Observe(c.ttft.Seconds())
		}
	}
	var itlMean float64
	prompt, cached, completion := c.tokens()
	if c.streamed && completion > 1 && !c.first.IsZero() {
		itlMean = c.last.Sub(c.first).Seconds() / float64(completion-1)
	}

	lvl := zerolog.DebugLevel
	if c.status >= 500 || c.abort {
		lvl = zerolog.WarnLevel
	}
	c.log.WithLevel(lvl).Str("model", c.req.Model).Int("status", c.status).Str("endpoint", c.target.GetId()).
		Int("attempts", c.attempts).Dur("ttft", c.ttft).Dur("e2e", e2e).Int64("completion_tokens", completion).Msg("request done")

	// Every request has its event, refused ones included (an
	// unauthenticated one with no tenant, one refused before its body was
	// read with no model): what was refused, and why, is usage too.
	ev := &eventsv1.UsageEvent{
		RequestId:          c.id,
		Tenant:             c.tenant,
		Model:              c.req.Model,
		ServedModel:        c.target.GetServedModel(),
		EndpointId:         c.target.GetId(),
		Provider:           c.target.GetProvider(),
		Api:                c.apiName,
		Stream:             c.req.Stream,
		PromptTokens:       prompt,
		CachedPromptTokens: cached,
		CompletionTokens:   completion,
		TtftSeconds:        c.ttft.Seconds(),
		E2ESeconds:         e2e.Seconds(),
		ItlMeanSeconds:     itlMean,
		StatusCode:         int32(c.status),
		Attempts:           int32(c.attempts),
		StartedAt:          timestamppb.New(c.start),
		FinishedAt:         timestamppb.New(end),
		Tags:               c.tags,
		QueueSeconds:       c.queued.Seconds(),
		TargetType:         c.target.GetType(),
		ReasoningTokens:    c.reasoning(),
		Policy:             c.decision.GetPolicy(),
		Rule:               c.decision.GetRule(),
	}
	if c.status >= 400 || c.abort {
		ev.ErrorType = c.errType
	}
	ev.Outcome = c.outcome
	if ev.Outcome == "" {
		switch {
		case c.status == statusClientClosed:
			ev.Outcome = bus.UsageOutcomeClientClosed
		case c.status >= 400 || c.abort:
			ev.Outcome = bus.UsageOutcomeError
		default:
			ev.Outcome = bus.UsageOutcomeOK
		}
	}
	if ev.ServedModel == "" && c.target != nil {
		ev.ServedModel = c.req.Model
	}
	switch c.target.GetKind() {
	case routerv1.TargetKind_TARGET_KIND_LOCAL:
		ev.TargetKind = "local"
	case routerv1.TargetKind_TARGET_KIND_PROVIDER:
		ev.TargetKind = "provider"
	}
	c.g.sink.RequestFinished(c.tenant, ev)
}

// reasoning is the reported reasoning tokens, 0 without usage.
func (c *call) reasoning() int64 {
	if c.hasUsage {
		return c.usage.ReasoningTokens
	}
	return 0
}

func apiName(a apibody.API) string {
	if a == apibody.Completions {
		return "completions"
	}
	return "chat.completions"
}

func statusLabel(code int) string { return strconv.Itoa(code) }

var hopHeaders = map[string]bool{
	"Connection": true, "Proxy-Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true,
	"Proxy-Authorization": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
}

// copyHeaders copies end-to-end response headers; the request id stays the
// gateway's.
func copyHeaders(dst, src http.Header) {
	var connTokens []string
	for _, v := range src.Values("Connection") {
		for t := range strings.SplitSeq(v, ",") {
			connTokens = append(connTokens, http.CanonicalHeaderKey(strings.TrimSpace(t)))
		}
	}
	for k, vv := range src {
		if hopHeaders[k] || k == RequestIDHeader {
			continue
		}
		skip := false
		for _, t := range connTokens {
			skip = skip || t == k
		}
		if !skip {
			dst[k] = append([]string(nil), vv...)
		}
	}
}

func isEventStream(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "text/event-stream"
}

func isJSON(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "application/json"
}
