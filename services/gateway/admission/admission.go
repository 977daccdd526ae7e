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
package admission

import (
	"context"
	"errors"
	"fmt"
	"net/http"

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
}

func (r *Refusal) Error() string { return fmt.Sprintf("%d %s: %s", r.Status, r.Code, r.Message) }

// Factory builds a step. Steps are built once, at start.
type Factory func() (Step, error)

// Steps is every step the gateway knows, by name.
var Steps = registry.New[Factory]("admission step")

// Chain is the steps of a gateway, in order.
type Chain []Step

// Build resolves a comma-separated list of step names into a chain.
func Build(names string) (Chain, error) {
	entries, err := Steps.List(names)
	if err != nil {
		return nil, err
	}
	var c Chain
	for _, e := range entries {
		s, err := e.New()
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
