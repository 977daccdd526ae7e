package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/switchyard-dev/switchyard/services/gateway/admission"
)

// Name is the step's name in --admission. It goes after the step that
// sets the tenant.
const Name = "ratelimit"

// Step enforces the tenants' limits in two phases: Admit, before the body
// is read, takes one request from the tenant's requests per minute (and
// refuses a tenant whose tokens or budget are already spent); once the
// router has counted the prompt, ReserveTokens reserves its input and
// output tokens (and the request on the model's limits); when the request
// ends, Settle corrects the reservation with the real usage.
type Step struct {
	deps   admission.Deps
	lim    *Limiter
	defMax int64
	limits atomic.Pointer[map[string]TenantLimits]
}

var _ admission.Step = (*Step)(nil)

// New is the step's admission.Factory; the gateway Starts it.
func New(deps admission.Deps) (admission.Step, error) { return &Step{deps: deps}, nil }

// Start gives the step its limiter and limits; until then it fails every
// request.
func (s *Step) Start(lim *Limiter, cfg Config, limits map[string]TenantLimits) {
	s.defMax = cfg.DefaultMaxTokens
	s.SetLimits(limits)
	s.lim = lim
}

// SetLimits replaces the tenants' limits (a new snapshot); safe while
// requests run.
func (s *Step) SetLimits(limits map[string]TenantLimits) { s.limits.Store(&limits) }

// tenant is name's limits: its GatewayBackend tenant entry's, from
// policyd's snapshot, else the limits file's.
func (s *Step) tenant(name string) (TenantLimits, bool) {
	if t, ok := s.deps.CurrentProgram().TenantLimits(name); ok {
		return t, true
	}
	m := s.limits.Load()
	if m == nil {
		return TenantLimits{}, false
	}
	t, ok := (*m)[name]
	return t, ok
}

var errNotStarted = errors.New("ratelimit step used before the gateway started it")

// Admit takes one request from the tenant's requests per minute.
func (s *Step) Admit(ctx context.Context, r *admission.Request) error {
	if s.lim == nil {
		return errNotStarted
	}
	if r.Tenant == "" {
		return errors.New("ratelimit step: no tenant yet (put it after the step that identifies the tenant)")
	}
	t, ok := s.tenant(r.Tenant)
	if !ok || t.IsZero() {
		return nil
	}
	d, err := s.lim.Reserve(ctx, r.Tenant, []Scope{{Limits: t.Limits}}, Cost{Requests: 1})
	if err := refusal(d, err, IsAnthropic(r.HTTP)); err != nil {
		return err
	}
	r.AddHeader(headers(d, IsAnthropic(r.HTTP)))
	return nil
}

// IsAnthropic reports whether r is on Anthropic's Messages API, whose
// clients read anthropic-ratelimit-* headers.
func IsAnthropic(r *http.Request) bool {
	return r != nil && (r.URL.Path == "/v1/messages" || strings.HasPrefix(r.URL.Path, "/v1/messages/"))
}

// ReserveTokens reserves a routed request's tokens: prompt (the router's
// count) and maxTokens (its max_tokens or max_completion_tokens; 0 takes
// the configured default), against the tenant's token limits and budgets
// and all of its model's limits. A refusal is an *admission.Refusal; a
// nil Reservation with a nil error means nothing to correct. Admitted, the
// header is the token limits' state for the answer.
func (s *Step) ReserveTokens(ctx context.Context, tenant, model string, anthropic bool, prompt, maxTokens int64) (*Reservation, http.Header, error) {
	if s.lim == nil {
		return nil, nil, errNotStarted
	}
	t, ok := s.tenant(tenant)
	if !ok {
		return nil, nil, nil
	}
	if maxTokens <= 0 {
		maxTokens = s.defMax
	}
	tl := t.Limits
	tl.RequestsPerMinute = 0 // taken by Admit
	scopes := []Scope{{Limits: tl}}
	if ml, ok := t.Models[model]; ok {
		scopes = append(scopes, Scope{Model: model, Limits: ml})
	}
	d, err := s.lim.Reserve(ctx, tenant, scopes, Cost{Requests: 1, Input: prompt, Output: maxTokens})
	if err := refusal(d, err, anthropic); err != nil {
		return nil, nil, err
	}
	return d.Reservation, headers(d, anthropic), nil
}

// Settle corrects r with the tokens the request really used (zero for a
// request that never reached a model).
func (s *Step) Settle(ctx context.Context, r *Reservation, prompt, completion int64) {
	if s.lim == nil || r == nil {
		return
	}
	s.lim.Correct(ctx, r, Cost{Requests: r.reserved.Requests, Input: prompt, Output: completion})
}

// CodeTooLarge is the error code of a request no limit could ever admit.
const CodeTooLarge = "request_exceeds_rate_limit"

// refusal turns a decision into the client's answer: nil when allowed.
func refusal(d Decision, err error, anthropic bool) error {
	switch {
	case errors.Is(err, ErrUnavailable):
		h := http.Header{}
		h.Set("Retry-After", "1")
		return &admission.Refusal{Status: http.StatusServiceUnavailable, Code: "rate_limiter_unavailable",
			Message: "rate limits cannot be checked right now, please retry", Header: h}
	case errors.Is(err, ErrTooLarge):
		return &admission.Refusal{Status: http.StatusBadRequest, Code: CodeTooLarge,
			Message: "the request can never be admitted: " + strings.TrimPrefix(err.Error(), ErrTooLarge.Error()+": ") + "; lower max_tokens or the prompt", Header: headers(d, anthropic)}
	case err != nil:
		return err
	case d.Allowed:
		return nil
	}
	h := headers(d, anthropic)
	h.Set("Retry-After", strconv.FormatInt(max(1, int64(math.Ceil(d.RetryAfter.Seconds()))), 10))
	ref := &admission.Refusal{Status: http.StatusTooManyRequests, Code: "rate_limit_exceeded", Header: h}
	var lim int64
	for _, st := range d.States {
		if st.Dim == d.Denied {
			lim = st.Limit
		}
	}
	switch d.Denied {
	case TokensPerDay, TokensPerMonth:
		period := map[Dim]string{TokensPerDay: "day (UTC)", TokensPerMonth: "month (UTC)"}[d.Denied]
		ref.Code = "insufficient_quota"
		ref.Message = fmt.Sprintf("token budget exhausted: %d tokens per %s; it renews in %s", lim, period, d.RetryAfter.Round(time.Second))
	default:
		ref.Message = fmt.Sprintf("rate limit reached: %d %s per minute; retry in %s", lim, strings.ReplaceAll(d.Denied.String(), "_", " "), d.RetryAfter.Round(time.Millisecond))
	}
	return ref
}

// headers are the rate-limit headers of a decision, on a refusal and on
// an admitted request's answer alike: OpenAI's
// x-ratelimit-{limit,remaining,reset}-{requests,tokens}, where "tokens"
// is the token limit that refused, or else the input tokens' (the output
// tokens' without one); or Anthropic's
// anthropic-ratelimit-{requests,input-tokens,output-tokens}-{limit,remaining,reset}
// (reset an RFC 3339 time). Budgets have none: their refusal says when
// they renew.
func headers(d Decision, anthropic bool) http.Header {
	h := http.Header{}
	var in, out *State
	for i := range d.States {
		st := &d.States[i]
		if anthropic {
			name := map[Dim]string{Requests: "requests", InputTokens: "input-tokens", OutputTokens: "output-tokens"}[st.Dim]
			if name == "" {
				continue
			}
			h.Set("anthropic-ratelimit-"+name+"-limit", strconv.FormatInt(st.Limit, 10))
			h.Set("anthropic-ratelimit-"+name+"-remaining", strconv.FormatInt(st.Remaining, 10))
			h.Set("anthropic-ratelimit-"+name+"-reset", time.Now().Add(st.Reset).UTC().Format(time.RFC3339))
			continue
		}
		switch st.Dim {
		case Requests:
			setOpenAI(h, "requests", st)
		case InputTokens:
			in = st
		case OutputTokens:
			out = st
		}
	}
	tokens := in
	if out != nil && (in == nil || !d.Allowed && d.Denied == OutputTokens) {
		tokens = out
	}
	if tokens != nil {
		setOpenAI(h, "tokens", tokens)
	}
	return h
}

func setOpenAI(h http.Header, what string, st *State) {
	h.Set("x-ratelimit-limit-"+what, strconv.FormatInt(st.Limit, 10))
	h.Set("x-ratelimit-remaining-"+what, strconv.FormatInt(st.Remaining, 10))
	h.Set("x-ratelimit-reset-"+what, st.Reset.Round(time.Millisecond).String())
}
