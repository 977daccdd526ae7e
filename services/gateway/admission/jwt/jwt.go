// Package jwt is the admission step that authenticates bearer JWTs from
// an enterprise's identity provider (IdP): "Authorization: Bearer <jwt>"
// whose token is not a Switchyard key ("sy-...") is verified here and
// names the request's tenant; an sy- key (or x-api-key) is left to the
// apikey step, which must come after this one in --admission.
//
// Where the IdP is configured, in order of precedence:
//
//   - the GatewayBackend's spec.auth.jwt, as policyd last sent it. With
//     auth.mode JWT every request must carry a valid token (an API key, or
//     nothing, is refused 401); with APIKey a token is accepted beside
//     keys. --jwt-* flags set as well are ignored, with a warning logged
//     when the gateway gets such a GatewayBackend.
//   - the --jwt-* flags, with a GatewayBackend of auth.mode APIKey that
//     names no IdP (tokens beside keys, as before GatewayBackends could
//     name one), or on a gateway without policyd: there every request
//     must carry a valid token, and its tenant claim is taken as it is
//     (it must be a valid tenant name), since no GatewayBackend lists the
//     tenants.
//   - none: with auth.mode None, or APIKey without an IdP, the step does
//     nothing.
//
// The step follows the program per request: what it derives from one
// (the settings, the key set) is cached by the program's pointer, so a
// request costs one pointer comparison, and a new program from policyd
// takes effect on the next request (the step also looks every second, so
// a new JWKS URL is fetched before the first token needs it). The key set
// is kept across programs while its URL and refresh interval stay the
// same, and replaced (fetched anew) when they change.
//
// Verification uses go-jose: the token's signature with a key of the
// issuer's JWKS chosen by the token's kid, with only asymmetric
// algorithms accepted (RS256, ES256, EdDSA): "none" and HS* are refused
// before any key is looked at, so a public key can never be used as an
// HMAC secret. Then the issuer, the audience (the token's aud must
// contain one of the accepted audiences) and exp/nbf/iat with the
// configured clock skew. The tenant is the configured string claim, and
// it must name a tenant of the GatewayBackend's spec.tenants: an IdP
// cannot create tenants.
//
// Keys come from a JWKS URL (fetched every refresh interval) or, with the
// flags only, a file (re-read when its modification time or size
// changes); a token whose kid is unknown triggers one early refresh, at
// most once per --jwt-min-refresh, so a key the IdP just rotated in is
// accepted without waiting and a flood of made-up kids costs at most one
// fetch per interval.
//
// Refusals are 401 in the client's API shape through the same path as the
// apikey step, counted in switchyard_gateway_auth_failures_total with the
// reasons jwt_missing (auth mode JWT and no bearer JWT, an API key
// instead), jwt_invalid (malformed, bad signature, bad alg), jwt_expired,
// jwt_claims (issuer, audience, not yet valid), jwt_unknown_kid and
// jwt_tenant (no tenant claim, or one not in spec.tenants); jwt_no_keys
// (the JWKS not loaded) and unavailable (no GatewayBackend from policyd
// yet) are 503s. The message never contains the token.
package jwt

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	josejwt "github.com/go-jose/go-jose/v4/jwt"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/services/gateway/admission"
)

// Name is the step's name in --admission.
const Name = "jwt"

// Failure reasons, the metric's label values.
const (
	ReasonMissing    = "jwt_missing"     // auth mode JWT, and no bearer JWT (nothing, or an API key)
	ReasonInvalid    = "jwt_invalid"     // not a JWS we accept: malformed, bad alg, bad signature
	ReasonExpired    = "jwt_expired"     // exp passed (beyond the skew)
	ReasonClaims     = "jwt_claims"      // wrong issuer or audience, or not valid yet
	ReasonUnknownKid = "jwt_unknown_kid" // no key of the JWKS has the token's kid
	ReasonTenant     = "jwt_tenant"      // no tenant claim, or a tenant not in spec.tenants
	ReasonNoKeys     = "jwt_no_keys"     // the JWKS could not be loaded yet
	// ReasonUnavailable is the apikey step's label for the same case: no
	// GatewayBackend from policyd yet, so what a request needs is unknown.
	ReasonUnavailable = "unavailable"
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
	// flags are the --jwt-* flags; flagKeys their key set, nil unless
	// they name an IdP.
	flags    Config
	flagKeys *keySet

	// bound is what the step derived from the program it last saw.
	bound atomic.Pointer[binding]
	// mu serialises rebinding; progKeys is the key set of the last
	// GatewayBackend's IdP, kept while its source stays; lastNote the
	// last precedence warning logged.
	mu       sync.Mutex
	progKeys *keySet
	lastNote string
	// runCtx is Run's context (nil before Run): a new key set's first
	// fetch ends with the step.
	runCtx context.Context
}

// binding is how the step treats requests under one program.
type binding struct {
	prog *policy.Program
	// v verifies tokens; nil: the step leaves every request to the next.
	v *verifier
	// required: a request without a valid bearer JWT is refused.
	required bool
	// unavailable: policyd has not sent the GatewayBackend yet.
	unavailable bool
}

// verifier is an IdP's settings and keys.
type verifier struct {
	issuer      string
	audiences   []string
	tenantClaim string
	clockSkew   time.Duration
	keys        *keySet
	// anyTenant: no GatewayBackend lists the tenants (no policyd), so the
	// claim is taken as it is.
	anyTenant bool
}

var (
	_ admission.Authenticator = (*Step)(nil)
	_ admission.Factory       = New
)

// New is the step's admission.Factory; the gateway Loads it with its
// flags before serving.
func New(deps admission.Deps) (admission.Step, error) {
	f, err := admission.AuthFailures(deps.Metrics)
	if err != nil {
		return nil, err
	}
	for _, r := range []string{ReasonMissing, ReasonInvalid, ReasonExpired, ReasonClaims, ReasonUnknownKid, ReasonTenant, ReasonNoKeys, ReasonUnavailable} {
		f.WithLabelValues(r)
	}
	return &Step{deps: deps, failures: f, flags: DefaultConfig()}, nil
}

// Authenticates implements admission.Authenticator: the step checks the
// bearer JWTs of auth mode JWT, and of APIKey with an IdP.
func (s *Step) Authenticates(mode string) bool { return mode == string(v1alpha1.AuthJWT) }

// Load takes the --jwt-* flags and, when they name an IdP, loads its
// JWKS, before serving. A URL that cannot be fetched yet is not fatal
// (tokens are refused with jwt_no_keys until it can); a file that cannot
// be read is.
func (s *Step) Load(ctx context.Context, cfg Config) error {
	s.flags = cfg
	if !cfg.Set() {
		return nil
	}
	s.flagKeys = newKeySet(jwksSource{File: cfg.JWKSFile, URL: cfg.JWKSURL, Refresh: cfg.Refresh, MinRefresh: cfg.MinRefresh}, s.deps.Log)
	if err := s.flagKeys.load(ctx); err != nil {
		if cfg.JWKSFile != "" {
			return fmt.Errorf("jwt-jwks-file: %w", err)
		}
		s.deps.Log.Warn().Err(err).Str("url", cfg.JWKSURL).Msg("JWKS not fetched yet; JWTs are refused until it is")
	}
	return nil
}

// tickEvery is how often Run looks at the program and the key sets'
// refresh times.
var tickEvery = time.Second

// Run keeps the key set in use fresh, and follows a new program's IdP
// before a request needs it, until ctx ends.
func (s *Step) Run(ctx context.Context) error {
	s.mu.Lock()
	s.runCtx = ctx
	s.mu.Unlock()
	t := time.NewTicker(tickEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			if b := s.bind(s.deps.CurrentProgram()); b.v != nil {
				b.v.keys.tick(ctx, now)
			}
		}
	}
}

// Probe is an error while the IdP in use has no key (its JWKS not
// fetched yet, or every fetch failed): tokens are then refused 503.
func (s *Step) Probe() error {
	b := s.bind(s.deps.CurrentProgram())
	if b.v == nil {
		return nil
	}
	if err := b.v.keys.state(); err != nil {
		return fmt.Errorf("no key of the identity provider %s (%w): bearer JWTs are refused", b.v.issuer, err)
	}
	return nil
}

// bind returns how requests are treated under p, derived once per
// program.
func (s *Step) bind(p *policy.Program) *binding {
	if b := s.bound.Load(); b != nil && b.prog == p {
		return b
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.bound.Load(); b != nil && b.prog == p {
		return b
	}
	b := &binding{prog: p}
	note := ""
	switch {
	case p == nil && s.deps.Program == nil:
		// No policyd: the flags alone say who may call.
		if s.flagKeys != nil {
			b.v, b.required = s.flagVerifier(), true
			b.v.anyTenant = true
		}
	case p == nil:
		b.unavailable = true
	case p.AuthMode == string(v1alpha1.AuthNone):
		if s.flagKeys != nil {
			note = fmt.Sprintf("--jwt-* flags set, but GatewayBackend %s has auth.mode None: no credentials are checked, bearer JWTs included", p.Name)
		}
	case p.JWT != nil && (p.AuthMode == string(v1alpha1.AuthJWT) || p.AuthMode == string(v1alpha1.AuthAPIKey)):
		b.v = s.programVerifier(p.JWT)
		b.required = p.AuthMode == string(v1alpha1.AuthJWT)
		if s.flagKeys != nil {
			note = fmt.Sprintf("--jwt-* flags ignored: GatewayBackend %s names its identity provider in spec.auth.jwt (issuer %s), which wins", p.Name, p.JWT.Issuer)
		}
	case p.AuthMode == string(v1alpha1.AuthJWT):
		// policyd never sends this (validation refuses it); refuse rather
		// than guess.
		b.v, b.required = nil, true
	case p.AuthMode == string(v1alpha1.AuthAPIKey) && s.flagKeys != nil:
		b.v = s.flagVerifier()
		note = fmt.Sprintf("--jwt-* flags name the identity provider of GatewayBackend %s, which names none: move them to its spec.auth.jwt, where every gateway gets them", p.Name)
	}
	if note != s.lastNote {
		if note != "" {
			s.deps.Log.Warn().Msg(note)
		}
		s.lastNote = note
	}
	s.bound.Store(b)
	return b
}

// flagVerifier is the flags' IdP.
func (s *Step) flagVerifier() *verifier {
	return &verifier{issuer: s.flags.Issuer, audiences: []string{s.flags.Audience}, tenantClaim: s.flags.TenantClaim, clockSkew: s.flags.ClockSkew, keys: s.flagKeys}
}

// programVerifier is a GatewayBackend's IdP, with the key set of the one
// before when it comes from the same place (called with s.mu held).
func (s *Step) programVerifier(j *policy.JWTAuth) *verifier {
	src := jwksSource{URL: j.JWKSURL, Refresh: j.Refresh, MinRefresh: s.flags.MinRefresh}
	if s.progKeys == nil || s.progKeys.src != src {
		ks := newKeySet(src, s.deps.Log.With().Str("jwks_url", j.JWKSURL).Logger())
		ctx := s.runCtx
		if ctx == nil {
			ctx = context.Background() // bounded by the key set's client timeout all the same
		}
		go func() {
			if err := ks.load(ctx); err != nil {
				ks.log.Warn().Err(err).Msg("JWKS not fetched yet; JWTs are refused until it is")
			}
		}()
		s.progKeys = ks
	}
	return &verifier{issuer: j.Issuer, audiences: j.Audiences, tenantClaim: j.TenantClaim, clockSkew: j.ClockSkew, keys: s.progKeys}
}

// Admit verifies a bearer JWT and sets the tenant it names; it leaves
// requests without one (API keys, no credentials) to the next steps,
// unless only JWTs are accepted.
func (s *Step) Admit(ctx context.Context, r *admission.Request) error {
	b := s.bind(s.deps.CurrentProgram())
	switch {
	case b.unavailable:
		return s.refuse(ReasonUnavailable, "")
	case !b.required && b.v == nil:
		return nil // no IdP: None, or API keys only
	}
	h := r.HTTP.Header
	token, ok := Bearer(h)
	xKey := len(h.Values("X-Api-Key")) > 0
	switch {
	case !ok && !b.required:
		return nil // an API key, or nothing: the apikey step's
	case !ok && (xKey || len(h.Values("Authorization")) > 0):
		return s.refuse(ReasonMissing, "this gateway accepts only bearer JWTs of its identity provider (\"Authorization: Bearer <jwt>\"); API keys are refused")
	case !ok:
		return s.refuse(ReasonMissing, "")
	case xKey:
		return s.refuse(ReasonInvalid, "send either a bearer JWT or an x-api-key, not both")
	case b.v == nil:
		return errors.New("jwt: auth mode JWT without an identity provider")
	}
	tenant, reason := s.verify(ctx, b.v, token, time.Now())
	switch {
	case reason != "":
		return s.refuse(reason, "")
	case b.v.anyTenant && !policy.ValidTenant(tenant):
		return s.refuse(ReasonTenant, "")
	case !b.v.anyTenant && !b.prog.IsAuthTenant(tenant):
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

// verify checks token at now against v and returns its tenant claim, or
// the failure reason.
func (s *Step) verify(ctx context.Context, v *verifier, token string, now time.Time) (tenant, reason string) {
	if len(token) > MaxTokenBytes {
		return "", ReasonInvalid
	}
	tok, err := josejwt.ParseSigned(token, algorithms)
	if err != nil || len(tok.Headers) != 1 {
		return "", ReasonInvalid
	}
	key, algOK, found := v.keys.key(ctx, tok.Headers[0].KeyID, tok.Headers[0].Algorithm)
	switch {
	case !found && v.keys.empty():
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
	err = std.ValidateWithLeeway(josejwt.Expected{Issuer: v.issuer, AnyAudience: josejwt.Audience(v.audiences), Time: now}, v.clockSkew)
	switch {
	case errors.Is(err, josejwt.ErrExpired):
		return "", ReasonExpired
	case err != nil:
		return "", ReasonClaims
	case std.Expiry == nil:
		return "", ReasonClaims // a token that never expires is not accepted
	}
	tenant, _ = extra[v.tenantClaim].(string)
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
	status, code := http.StatusUnauthorized, "invalid_token"
	switch reason {
	case ReasonNoKeys:
		status = http.StatusServiceUnavailable
	case ReasonUnavailable:
		status, code = http.StatusServiceUnavailable, "auth_unavailable"
	}
	return &admission.Refusal{Status: status, Code: code, Message: msg}
}

// messages are the answers by reason; none echoes the token.
var messages = map[string]string{
	ReasonMissing:     "no bearer JWT: send \"Authorization: Bearer <jwt>\" with a token of the gateway's identity provider",
	ReasonInvalid:     "the bearer token is not a valid JWT signed with RS256, ES256 or EdDSA by the identity provider",
	ReasonExpired:     "the bearer token has expired",
	ReasonClaims:      "the bearer token's issuer, audience or validity period is not accepted (or it has no exp)",
	ReasonUnknownKid:  "the bearer token is signed with a key the identity provider's JWKS does not have",
	ReasonTenant:      "the bearer token names no tenant of this gateway",
	ReasonNoKeys:      "the gateway has not loaded its identity provider's keys yet, please retry",
	ReasonUnavailable: "the gateway has not loaded its authentication settings yet, please retry",
}
