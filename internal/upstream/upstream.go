// Package upstream is how the gateway talks to what serves a request: a
// vLLM worker, or an external provider of some type (OpenAI-compatible
// today; Anthropic, Bedrock and others are adapters to come).
//
// An Adapter has one method, RoundTrip: it sends one attempt of the
// client's request to a target and returns the response in the client's
// API. An adapter for a provider that speaks another API translates the
// request on the way out and the response (body or event stream) on the
// way back, so everything the gateway does with a response — relaying it
// chunk by chunk, timing the first token, reading the usage — is written
// once, for the client's API.
//
// Adapters are registered by provider type (InferenceProvider.spec.type)
// in Types; the router's target names the type, so the gateway never
// guesses, and policyd and `yardctl validate` refuse a provider whose type
// has no adapter. Adding a provider type is one package implementing
// Adapter plus one Register line in package builtin.
package upstream

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/switchyard-dev/switchyard/internal/registry"
)

// TypeWorker is the type of local workers (vLLM's OpenAI server).
const TypeWorker = "vLLM"

// Target is where one attempt goes.
type Target struct {
	// Type is the upstream's type: TypeWorker or a provider type.
	Type string
	// BaseURL is the worker's URL (http://host:port) or the provider's API
	// base, which ends in its API version (https://api.openai.com/v1).
	BaseURL string
	// APIKey is the provider's key; empty for workers. Adapters never log
	// it or put it in an error.
	APIKey string
}

// Request is the client's request, as the gateway forwards it.
type Request struct {
	// Path is the client's API path, e.g. /v1/chat/completions.
	Path string
	// Body is the client's body with the gateway's splices applied (the
	// served model name, stream_options.include_usage).
	Body []byte
	// Header holds the client headers the gateway passes on (Accept,
	// trace context) and its own (the request id).
	Header http.Header
}

// Adapter speaks one upstream API.
type Adapter interface {
	// RoundTrip sends one attempt. A transport error (nothing came back)
	// is returned as an error, and the gateway may retry elsewhere; any
	// HTTP answer, error statuses included, is a response in the client's
	// API.
	RoundTrip(ctx context.Context, t Target, r Request) (*http.Response, error)
}

// Factory builds a type's adapter over the gateway's shared transport.
type Factory func(rt http.RoundTripper) Adapter

// Types is every upstream type an adapter exists for.
var Types = registry.New[Factory]("provider type")

// ErrNoAdapter is returned for a target whose type has no adapter.
var ErrNoAdapter = errors.New("no adapter for this upstream type")

// Set is the adapters of every registered type, built once over one
// transport.
type Set struct {
	byType map[string]Adapter
}

// NewSet builds an adapter for every registered type.
func NewSet(rt http.RoundTripper) *Set {
	s := &Set{byType: map[string]Adapter{}}
	for _, name := range Types.Names() {
		f, _ := Types.Lookup(name)
		s.byType[name] = f(rt)
	}
	return s
}

// For returns the adapter of a type.
func (s *Set) For(typ string) (Adapter, error) {
	if a, ok := s.byType[typ]; ok {
		return a, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrNoAdapter, typ)
}
