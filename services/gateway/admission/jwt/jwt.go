// Package jwt is the admission step that authenticates bearer JWTs from
// an enterprise's identity provider, as a second method beside API keys:
// "Authorization: Bearer <jwt>" whose token is not a Switchyard key
// ("sy-...") is verified here and names the request's tenant; an sy- key
// (or x-api-key) is left to the apikey step, which must come after this
// one in --admission. The step works when the GatewayBackend's auth mode
// is APIKey (with None every request is tenant "default").
//
// Verification uses go-jose: the token's signature with a key of the
// issuer's JWKS chosen by the token's kid, with only asymmetric
// algorithms accepted (RS256, ES256, EdDSA): "none" and HS* are refused
// before any key is looked at, so a public key can never be used as an
// HMAC secret. Then the issuer, the audience (the token's aud must
// contain it) and exp/nbf/iat with the configured clock skew. The tenant
// is the string claim --jwt-tenant-claim, and it must name a tenant of
// the GatewayBackend's spec.tenants: an IdP cannot create tenants.
//
// Keys come from a JWKS file (re-read when its modification time or size
// changes, checked every --jwt-refresh) or URL (fetched every
// --jwt-refresh); a token whose kid is unknown triggers one early
// refresh, at most once per --jwt-min-refresh, so a key the IdP just
// rotated in is accepted without waiting and a flood of made-up kids
// costs at most one fetch per interval.
//
// Refusals are 401 in the client's API shape through the same path as the
// apikey step, counted in switchyard_gateway_auth_failures_total with the
// reasons jwt_invalid (malformed, bad signature, bad alg), jwt_expired,
// jwt_claims (issuer, audience, not yet valid), jwt_unknown_kid and
// jwt_tenant (no tenant claim, or one not in spec.tenants). The message
// never contains the token.
package jwt

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	josejwt "github.com/go-jose/go-jose/v4/jwt"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
	"github.com/switchyard-dev/switchyard/services/gateway/admission"
)

// Name is the step's name in --admission.
const Name = "jwt"

// Failure reasons, the metric's label values.
const (
	ReasonInvalid    = "jwt_invalid"     // not a JWS we accept: malformed, bad alg, bad signature
	ReasonExpired    = "jwt_expired"     // exp passed (beyond the skew)
	ReasonClaims     = "jwt_claims"      // wrong issuer or audience, or not valid yet
	ReasonUnknownKid = "jwt_unknown_kid" // no key of the JWKS has the token's kid
	ReasonTenant     = "jwt_tenant"      // no tenant claim, or a tenant not in spec.tenants
	ReasonNoKeys     = "jwt_no_keys"     // the JWKS could not be loaded yet
)

// MaxTokenBytes bounds the tokens the step parses; an IdP's access token
// is a few KB.
const MaxTokenBytes = 16 << 10

// algorithms are the only signature algorithms accepted.
var algorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA}

// Step verifies bearer JWTs.
type Step struct {
	deps     admission.Deps
	failures *prometheus.CounterVec
	cfg      Config
	keys     *keySet
}

var (
	_ admission.Step    = (*Step)(nil)
	_ admission.Factory = New
)

// New is the step's admission.Factory; the gateway Starts it with its
// configuration before serving.
func New(deps admission.Deps) (admission.Step, error) {
	f, err := admission.AuthFailures(deps.Metrics)
	if err != nil {
		return nil, err
	}
	for _, r := range []string{ReasonInvalid, ReasonExpired, ReasonClaims, ReasonUnknownKid, ReasonTenant, ReasonNoKeys} {
		f.WithLabelValues(r)
	}
	return &Step{deps: deps, failures: f}, nil
}

// Load configures the step and loads the JWKS, before serving. A URL
// that cannot be fetched yet is not fatal (tokens are refused with
// jwt_no_keys until it can); a file that cannot be read is.
func (s *Step) Load(ctx context.Context, cfg Config) error {
	s.cfg = cfg
	s.keys = newKeySet(cfg, s.deps.Log)
	if err := s.keys.refresh(ctx); err != nil {
		if cfg.JWKSFile != "" {
			return fmt.Errorf("jwt-jwks-file: %w", err)
		}
		s.deps.Log.Warn().Err(err).Str("url", cfg.JWKSURL).Msg("JWKS not fetched yet; JWTs are refused until it is")
	}
	return nil
}

// Run keeps the JWKS fresh until ctx ends.
func (s *Step) Run(ctx context.Context) error {
	if s.keys != nil {
		s.keys.run(ctx)
	}
	return nil
}

// Admit verifies a bearer JWT and sets the tenant it names; it leaves
// requests without one (API keys, no credentials) to the next steps.
func (s *Step) Admit(ctx context.Context, r *admission.Request) error {
	p := s.deps.CurrentProgram()
	if p == nil || p.AuthMode != string(v1alpha1.AuthAPIKey) {
		return nil // the apikey step answers "unavailable"; None needs no credentials
	}
	token, ok := Bearer(r.HTTP.Header)
	if !ok {
		return nil
	}
	if len(r.HTTP.Header.Values("X-Api-Key")) > 0 {
		return s.refuse(ReasonInvalid, "send either a bearer JWT or an x-api-key, not both")
	}
	if s.keys == nil {
		return s.refuse(ReasonNoKeys, "")
	}
	tenant, reason := s.verify(ctx, token, time.Now())
	if reason != "" {
		return s.refuse(reason, "")
	}
	known := false
	for _, t := range p.AuthTenants {
		known = known || t.Name == tenant
	}
	if !known {
		return s.refuse(ReasonTenant, "")
	}
	r.Tenant = tenant
	return nil
}

// Bearer returns the token of a single "Authorization: Bearer <token>"
// header when it is not a Switchyard API key; anything else is the
// apikey step's (which refuses what is malformed).
func Bearer(h http.Header) (string, bool) {
	auth := h.Values("Authorization")
	if len(auth) != 1 {
		return "", false
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(auth[0]), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimLeft(token, " ")
	if token == "" || strings.HasPrefix(token, "sy-") || strings.Count(token, ".") != 2 {
		return "", false
	}
	return token, true
}

// verify checks token at now and returns its tenant claim, or the
// failure reason.
func (s *Step) verify(ctx context.Context, token string, now time.Time) (tenant, reason string) {
	if len(token) > MaxTokenBytes {
		return "", ReasonInvalid
	}
	tok, err := josejwt.ParseSigned(token, algorithms)
	if err != nil || len(tok.Headers) != 1 {
		return "", ReasonInvalid
	}
	key, algOK, found := s.keys.key(ctx, tok.Headers[0].KeyID, tok.Headers[0].Algorithm)
	switch {
	case !found && s.keys.empty():
		return "", ReasonNoKeys
	case !found:
		return "", ReasonUnknownKid
	case !algOK:
		return "", ReasonInvalid // the kid's key is for another algorithm
	}
	var std josejwt.Claims
	var extra map[string]any
	if err := tok.Claims(key, &std, &extra); err != nil {
		return "", ReasonInvalid
	}
	err = std.ValidateWithLeeway(josejwt.Expected{Issuer: s.cfg.Issuer, AnyAudience: josejwt.Audience{s.cfg.Audience}, Time: now}, s.cfg.ClockSkew)
	switch {
	case errors.Is(err, josejwt.ErrExpired):
		return "", ReasonExpired
	case err != nil:
		return "", ReasonClaims
	case std.Expiry == nil:
		return "", ReasonClaims // a token that never expires is not accepted
	}
	tenant, _ = extra[s.cfg.TenantClaim].(string)
	if tenant == "" {
		return "", ReasonTenant
	}
	return tenant, ""
}

func (s *Step) refuse(reason, msg string) error {
	s.failures.WithLabelValues(reason).Inc()
	if msg == "" {
		msg = messages[reason]
	}
	status := http.StatusUnauthorized
	if reason == ReasonNoKeys {
		status = http.StatusServiceUnavailable
	}
	return &admission.Refusal{Status: status, Code: "invalid_token", Message: msg}
}

// messages are the answers by reason; none echoes the token.
var messages = map[string]string{
	ReasonInvalid:    "the bearer token is not a valid JWT signed with RS256, ES256 or EdDSA by the identity provider",
	ReasonExpired:    "the bearer token has expired",
	ReasonClaims:     "the bearer token's issuer, audience or validity period is not accepted (or it has no exp)",
	ReasonUnknownKid: "the bearer token is signed with a key the identity provider's JWKS does not have",
	ReasonTenant:     "the bearer token names no tenant of this gateway",
	ReasonNoKeys:     "the gateway has not loaded its identity provider's keys yet, please retry",
}
