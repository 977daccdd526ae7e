// Package apikey is the admission step that authenticates API keys and
// sets the request's tenant from the key, when the GatewayBackend's
// auth mode is APIKey (with None it does nothing and a later step,
// default-tenant, claims the request).
//
// Keys (format in internal/apikey). A key is "sy-" and 43 base64url
// characters (32 random bytes, as `yardctl keys create` makes them); only
// its SHA-256 digest is stored, in a Kubernetes Secret or the
// GatewayBackend file, and policyd sends the gateway the digests with the
// policy snapshot.
//
// Checking. The client sends the key as "Authorization: Bearer sy-..."
// (OpenAI clients) or "x-api-key: sy-..." (Anthropic clients); both, if
// present, must agree. The key's shape is checked before anything else,
// so oversized or malformed values are refused without hashing (and the
// HTTP server's header limit refuses huge headers before any step runs).
// The key is hashed and its digest looked up in the program's map; the
// stored digest is then compared in constant time. The tenant comes from
// the key only: no header names it.
//
// Every read of the program is the latest policyd sent, so a key removed
// from its Secret or file is refused from the next request after policyd
// serves the change (seconds), without a restart.
//
// A refusal is 401 with a message that never contains the key; failures
// are counted by reason in switchyard_gateway_auth_failures_total, with
// no tenant label (an unauthenticated request has none, and a label from
// client input would be unbounded).
package apikey

import (
	"context"
	"crypto/sha256"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
	keys "github.com/switchyard-dev/switchyard/internal/apikey"
	"github.com/switchyard-dev/switchyard/services/gateway/admission"
)

// Name is the step's name in --admission.
const Name = "apikey"

// Failure reasons, the metric's label values.
const (
	ReasonMissing     = "missing"     // no credentials sent
	ReasonMalformed   = "malformed"   // not a Switchyard key's shape
	ReasonConflicting = "conflicting" // several credentials that disagree
	ReasonUnknown     = "unknown"     // a well-formed key no tenant has (never issued, or revoked)
	ReasonUnavailable = "unavailable" // the gateway has no policy yet: auth mode unknown
)

// Step checks API keys.
type Step struct {
	deps     admission.Deps
	failures *prometheus.CounterVec
}

var (
	_ admission.Authenticator = (*Step)(nil)
	_ admission.Factory       = New
)

// New is the step's admission.Factory. Its metric is registered on
// deps.Metrics when set.
func New(deps admission.Deps) (admission.Step, error) {
	f, err := admission.AuthFailures(deps.Metrics)
	if err != nil {
		return nil, err
	}
	s := &Step{deps: deps, failures: f}
	for _, r := range []string{ReasonMissing, ReasonMalformed, ReasonConflicting, ReasonUnknown, ReasonUnavailable} {
		s.failures.WithLabelValues(r)
	}
	return s, nil
}

// Authenticates implements admission.Authenticator.
func (s *Step) Authenticates(mode string) bool { return mode == string(v1alpha1.AuthAPIKey) }

// Admit sets the tenant of a request whose key belongs to one; it refuses
// any other request when the auth mode is APIKey.
func (s *Step) Admit(_ context.Context, r *admission.Request) error {
	if s.deps.Program == nil {
		return nil // no policyd: no auth mode but None
	}
	p := s.deps.Program()
	if p == nil {
		return s.refuse(ReasonUnavailable)
	}
	if p.AuthMode != string(v1alpha1.AuthAPIKey) || r.Tenant != "" {
		return nil // None, or an earlier step (jwt) authenticated the request
	}
	key, reason := Parse(r.HTTP.Header)
	if reason != "" {
		return s.refuse(reason)
	}
	tenant, ok := p.KeyTenant(sha256.Sum256([]byte(key)))
	if !ok {
		return s.refuse(ReasonUnknown)
	}
	r.Tenant = tenant
	return nil
}

func (s *Step) refuse(reason string) error {
	s.failures.WithLabelValues(reason).Inc()
	return refusals[reason]
}

// refusals are the answers by reason; none echoes what the client sent.
var refusals = map[string]*admission.Refusal{
	ReasonMissing: {Status: http.StatusUnauthorized, Code: "invalid_api_key",
		Message: "no API key: send it as \"Authorization: Bearer sy-...\" or \"x-api-key: sy-...\""},
	ReasonMalformed: {Status: http.StatusUnauthorized, Code: "invalid_api_key",
		Message: "the API key is malformed: Switchyard keys are \"sy-\" and base64url characters"},
	ReasonConflicting: {Status: http.StatusUnauthorized, Code: "invalid_api_key",
		Message: "several different API keys were sent (Authorization and x-api-key, or a header twice): send one"},
	ReasonUnknown: {Status: http.StatusUnauthorized, Code: "invalid_api_key",
		Message: "incorrect API key provided (unknown or revoked)"},
	ReasonUnavailable: {Status: http.StatusServiceUnavailable, Code: "auth_unavailable",
		Message: "the gateway has not loaded its authentication settings yet, please retry"},
}

// Parse extracts the API key from a request's headers: the bearer token of
// Authorization or the value of x-api-key. It returns the key and "" or,
// when there is no acceptable key, "" and the failure reason. It never
// hashes and never copies more than a key's length.
func Parse(h http.Header) (key, reason string) {
	auth, xkey := h.Values("Authorization"), h.Values("X-Api-Key")
	if len(auth) > 1 || len(xkey) > 1 {
		return "", ReasonConflicting
	}
	var fromAuth, fromX string
	if len(auth) == 1 {
		scheme, token, ok := strings.Cut(strings.TrimSpace(auth[0]), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return "", ReasonMalformed
		}
		fromAuth = strings.TrimLeft(token, " ")
		if fromAuth == "" {
			return "", ReasonMalformed
		}
	}
	if len(xkey) == 1 {
		fromX = strings.TrimSpace(xkey[0])
		if fromX == "" {
			return "", ReasonMalformed
		}
	}
	switch {
	case fromAuth == "" && fromX == "":
		return "", ReasonMissing
	case fromAuth != "" && fromX != "" && fromAuth != fromX:
		return "", ReasonConflicting
	case fromAuth != "":
		key = fromAuth
	default:
		key = fromX
	}
	if !keys.WellFormed(key) {
		return "", ReasonMalformed
	}
	return key, ""
}
