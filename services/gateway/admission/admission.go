// Package admission is the gateway's seam for deciding, before a request
// is routed, who is calling and whether they may: a chain of steps run in
// order, each a one-method Step registered by name in Steps. Identifying
// the tenant (API keys, JWTs) and enforcing limits are steps; the
// gateway's --admission flag names the chain.
//
// A step that refuses returns a *Refusal: a status and a message the
// gateway writes in the caller's API shape (OpenAI or Anthropic). Any
// other error is the step's own failure, answered as a 500 without
// detail.
//
// Steps are built once, at start, by a Factory from Deps: what the
// gateway shares with every step (its GatewayBackend's compiled program
// as policyd last sent it, its metrics registry, its logger). A step
// reads the program on every request rather than copying it, so a
// policy change (a revoked key) applies to the next request. Deps grows
// by fields, so adding an input does not change every step's signature.
package admission

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/internal/registry"
)

// Request is what the steps know of a request and decide for it.
type Request struct {
	// HTTP is the client's request: headers, remote address. Its body is
	// not read yet.
	HTTP *http.Request
	// Tenant is who the request belongs to; a step sets it. A chain that
	// leaves it empty is a configuration error (the gateway refuses such
	// a chain at start).
	Tenant string
	// Header is what an admitted request's answer carries from the steps
	// (a rate limit's state, as OpenAI and Anthropic send on every
	// answer); the gateway sends it. Steps add to it with AddHeader.
	Header http.Header
}

// AddHeader adds h's fields to the answer's headers, replacing earlier
// values of the same field.
func (r *Request) AddHeader(h http.Header) {
	if len(h) == 0 {
		return
	}
	if r.Header == nil {
		r.Header = http.Header{}
	}
	for k, v := range h {
		r.Header[k] = v
	}
}

// Step is one admission step.
type Step interface {
	Admit(ctx context.Context, r *Request) error
}

// Refusal is a step's answer to the client.
type Refusal struct {
	// Status is the HTTP status: 401 unknown key, 403 not allowed, 429
	// over a limit.
	Status int
	// Code is a short machine-readable reason (invalid_api_key,
	// rate_limit_exceeded), Message the human one. Neither may carry a
	// secret.
	Code, Message string
	// Header is set on the response: Retry-After, rate-limit headers.
	Header http.Header
}

func (r *Refusal) Error() string { return fmt.Sprintf("%d %s: %s", r.Status, r.Code, r.Message) }

// Deps are the gateway's parts a step may use.
type Deps struct {
	// Program returns the gateway's GatewayBackend as policyd last sent
	// it; nil before the first snapshot, without policyd, or when the
	// snapshot lacks the GatewayBackend. Cheap; call it per request.
	Program func() *policy.Program
	// Metrics registers the step's metrics on the gateway's /metrics.
	Metrics prometheus.Registerer
	Log     zerolog.Logger
}

// CurrentProgram returns the program Deps.Program returns, or nil when
// Deps has no Program.
func (d Deps) CurrentProgram() *policy.Program {
	if d.Program == nil {
		return nil
	}
	return d.Program()
}

// Factory builds a step. Steps are built once, at start.
type Factory func(Deps) (Step, error)

// Steps is every step the gateway knows, by name.
var Steps = registry.New[Factory]("admission step")

// Chain is the steps of a gateway, in order.
type Chain []Step

// Authenticator is implemented by a step that checks credentials. The
// gateway refuses every request of a GatewayBackend whose auth mode asks
// for credentials when no step of its chain authenticates: accepted
// must mean enforced.
type Authenticator interface {
	Step
	// Authenticates reports whether the step checks the auth mode's
	// credentials (APIKey: keys; JWT: bearer JWTs).
	Authenticates(mode string) bool
}

// Authenticates reports whether some step checks mode's credentials.
func (c Chain) Authenticates(mode string) bool {
	for _, s := range c {
		if a, ok := s.(Authenticator); ok && a.Authenticates(mode) {
			return true
		}
	}
	return false
}

// Build resolves a comma-separated list of step names into a chain.
func Build(names string, deps Deps) (Chain, error) {
	entries, err := Steps.List(names)
	if err != nil {
		return nil, err
	}
	var c Chain
	for _, e := range entries {
		s, err := e.New(deps)
		if err != nil {
			return nil, fmt.Errorf("admission step %s: %w", e.Name, err)
		}
		c = append(c, s)
	}
	return c, nil
}

// ErrNoTenant is returned by a chain that admitted a request without
// saying whose it is.
var ErrNoTenant = errors.New("admission: no step set the tenant")

// Admit runs every step in order; the first refusal or failure ends it.
func (c Chain) Admit(ctx context.Context, r *Request) error {
	for _, s := range c {
		if err := s.Admit(ctx, r); err != nil {
			return err
		}
	}
	if r.Tenant == "" {
		return ErrNoTenant
	}
	return nil
}

// AuthFailures returns the counter every authenticating step counts its
// refusals in, registered once on reg (nil: unregistered).
func AuthFailures(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchyard_gateway_auth_failures_total",
		Help: "Requests refused by authentication (API keys, JWTs), by reason.",
	}, []string{"reason"})
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return existing, nil
			}
		}
		return nil, err
	}
	return c, nil
}
