package gateway

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	josejwt "github.com/go-jose/go-jose/v4/jwt"
	"github.com/openai/openai-go/v3"

	"github.com/switchyard-dev/switchyard/internal/apikey"
)

// testIdP is an identity provider the test makes up: its signing keys by
// kid, and the JWKS file the gateway reads.
type testIdP struct {
	keys map[string]crypto.Signer
	algs map[string]jose.SignatureAlgorithm
	file string

	mu   sync.Mutex
	jwks []byte // what publish wrote, served by serve
}

func newTestIdP(t *testing.T) *testIdP {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, dk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	idp := &testIdP{
		keys: map[string]crypto.Signer{"rsa1": rk, "ec1": ek, "ed1": dk},
		algs: map[string]jose.SignatureAlgorithm{"rsa1": jose.RS256, "ec1": jose.ES256, "ed1": jose.EdDSA},
		file: filepath.Join(t.TempDir(), "jwks.json"),
	}
	idp.publish(t, "rsa1", "ec1", "ed1")
	return idp
}

// publish writes the JWKS file with the public keys of kids.
func (idp *testIdP) publish(t *testing.T, kids ...string) {
	t.Helper()
	var set jose.JSONWebKeySet
	for _, kid := range kids {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: idp.keys[kid].Public(), KeyID: kid, Algorithm: string(idp.algs[kid]), Use: "sig"})
	}
	data, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	idp.mu.Lock()
	idp.jwks = data
	idp.mu.Unlock()
	tmp := idp.file + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, idp.file); err != nil {
		t.Fatal(err)
	}
}

// serve serves the published JWKS over HTTP on loopback, as an IdP's
// jwks_uri, and returns its URL.
func (idp *testIdP) serve(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		idp.mu.Lock()
		data := idp.jwks
		idp.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(data)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/.well-known/jwks.json"
}

// sign makes a token with kid's key, under the header kid hdrKid.
func (idp *testIdP) sign(t *testing.T, kid, hdrKid string, claims map[string]any) string {
	t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: idp.algs[kid], Key: idp.keys[kid]}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", hdrKid))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := josejwt.Signed(sig).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func b64(v any) string {
	data, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(data)
}

// TestJWT: through a real gateway, policyd (files mode) and the official
// OpenAI client, bearer JWTs of a test IdP (RSA, ECDSA, Ed25519 keys)
// name the tenant; every bad token is a 401 with nothing forwarded and
// counted by reason; API keys keep working beside them; a key the IdP
// adds to its JWKS file is accepted without a restart.
func TestJWT(t *testing.T) {
	keyA := apikey.Generate()
	dir := t.TempDir()
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "gateway.yaml"), []byte(keyedCatalog(map[string]string{"team-a": keyA, "team-b": apikey.Generate()})), 0o600); err != nil {
		t.Fatal(err)
	}
	pdAddr := servePolicydFiles(t, dir)
	idp := newTestIdP(t)
	idp.keys["rsa2"], idp.algs["rsa2"] = other, jose.RS256 // signs, never published
	up := newVLLM(t, modeOK)
	e := newEnv(t, envOpts{noNATS: true, cfg: func(c *Config) {
		c.PolicydAddr, c.GatewayBackend = pdAddr, "keyed"
		c.Admission = "jwt,apikey,default-tenant"
		c.JWT.Issuer, c.JWT.Audience, c.JWT.JWKSFile = "https://idp.example", "switchyard", idp.file
		c.JWT.MinRefresh = time.Millisecond
	}})
	e.router.setTargets(testModel, up.target("w0"))
	e.eventually(t, "policy snapshot", func() bool { p := e.gw.catalog.program(); return p != nil && p.AuthKeys() == 2 })

	now := time.Now()
	claims := func(edit func(map[string]any)) map[string]any {
		c := map[string]any{"iss": "https://idp.example", "aud": []string{"other", "switchyard"}, "sub": "alice",
			"tenant": "team-b", "iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix()}
		if edit != nil {
			edit(c)
		}
		return c
	}

	for _, kid := range []string{"rsa1", "ec1", "ed1"} {
		t.Run("valid "+kid+" token: tenant from the claim", func(t *testing.T) {
			if err := e.chat(idp.sign(t, kid, kid, claims(nil))); err != nil {
				t.Fatal(err)
			}
			if got := e.router.lastTenant(); got != "team-b" {
				t.Errorf("router saw tenant %q, want team-b", got)
			}
		})
	}
	t.Run("within the clock skew", func(t *testing.T) {
		if err := e.chat(idp.sign(t, "ec1", "ec1", claims(func(c map[string]any) { c["exp"] = now.Add(-30 * time.Second).Unix() }))); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("API keys still work", func(t *testing.T) {
		if err := e.chat(keyA); err != nil || e.router.lastTenant() != "team-a" {
			t.Fatalf("API key: %v, tenant %q", err, e.router.lastTenant())
		}
	})

	rsaPub, err := x509.MarshalPKIXPublicKey(idp.keys["rsa1"].Public())
	if err != nil {
		t.Fatal(err)
	}
	hsInput := b64(map[string]string{"alg": "HS256", "kid": "rsa1", "typ": "JWT"}) + "." + b64(claims(nil))
	mac := hmac.New(sha256.New, rsaPub)
	mac.Write([]byte(hsInput))
	valid := idp.sign(t, "rsa1", "rsa1", claims(nil))
	parts := strings.Split(valid, ".")
	for _, c := range []struct{ name, token, reason string }{
		{"expired", idp.sign(t, "rsa1", "rsa1", claims(func(c map[string]any) { c["exp"] = now.Add(-2 * time.Minute).Unix() })), "jwt_expired"},
		{"wrong audience", idp.sign(t, "rsa1", "rsa1", claims(func(c map[string]any) { c["aud"] = "someone-else" })), "jwt_claims"},
		{"wrong issuer", idp.sign(t, "rsa1", "rsa1", claims(func(c map[string]any) { c["iss"] = "https://evil.example" })), "jwt_claims"},
		{"not yet valid", idp.sign(t, "rsa1", "rsa1", claims(func(c map[string]any) { c["nbf"] = now.Add(time.Hour).Unix() })), "jwt_claims"},
		{"no exp", idp.sign(t, "rsa1", "rsa1", claims(func(c map[string]any) { delete(c, "exp") })), "jwt_claims"},
		{"unknown kid", idp.sign(t, "rsa1", "rsa9", claims(nil)), "jwt_unknown_kid"},
		{"bad signature (another RSA key, same kid)", idp.sign(t, "rsa2", "rsa1", claims(nil)), "jwt_invalid"},
		{"another algorithm than the kid's key", idp.sign(t, "ec1", "rsa1", claims(nil)), "jwt_invalid"},
		{"tampered payload", parts[0] + "." + b64(claims(func(c map[string]any) { c["tenant"] = "team-a" })) + "." + parts[2], "jwt_invalid"},
		{"tenant not in spec.tenants", idp.sign(t, "rsa1", "rsa1", claims(func(c map[string]any) { c["tenant"] = "team-z" })), "jwt_tenant"},
		{"no tenant claim", idp.sign(t, "rsa1", "rsa1", claims(func(c map[string]any) { delete(c, "tenant") })), "jwt_tenant"},
		{"alg none", b64(map[string]string{"alg": "none", "kid": "rsa1"}) + "." + b64(claims(nil)) + ".", "jwt_invalid"},
		{"HS256 with the public key as secret", hsInput + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), "jwt_invalid"},
	} {
		t.Run(c.name, func(t *testing.T) {
			hits, calls := up.hits.Load(), len(e.router.calls())
			before := scrape(t, e.metricsURL)
			err := e.chat(c.token)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || apiErr.Code != "invalid_token" {
				t.Fatalf("error %v, want 401 invalid_token", err)
			}
			if strings.Contains(apiErr.Message, c.token) {
				t.Error("the refusal echoes the token")
			}
			if up.hits.Load() != hits || len(e.router.calls()) != calls {
				t.Error("a refused request reached the router or the worker")
			}
			if b, a := metricValue(before, c.reason), metricValue(scrape(t, e.metricsURL), c.reason); a != b+1 {
				t.Errorf("auth failures{reason=%q} went %d -> %d, want +1", c.reason, b, a)
			}
		})
	}

	t.Run("Anthropic's shape", func(t *testing.T) {
		body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, testModel)
		resp := e.post(t, "/v1/chat/completions", body, map[string]string{"Authorization": "Bearer " + idp.sign(t, "rsa1", "rsa1", claims(func(c map[string]any) { c["aud"] = "x" })), "anthropic-version": "2023-06-01"})
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(out), `"type":"authentication_error"`) {
			t.Fatalf("status %d %s, want 401 authentication_error", resp.StatusCode, out)
		}
		if err := e.chat(idp.sign(t, "ed1", "ed1", claims(nil))); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a key added to the JWKS file is accepted without a restart", func(t *testing.T) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		idp.keys["ec2"], idp.algs["ec2"] = k, jose.ES256
		tok := idp.sign(t, "ec2", "ec2", claims(nil))
		idp.publish(t, "rsa1", "ec2")
		e.eventually(t, "the new key accepted", func() bool { return e.chat(tok) == nil })
		if err := e.chat(idp.sign(t, "ec1", "ec1", claims(nil))); err == nil {
			t.Error("a key removed from the JWKS is still accepted")
		}
	})
}

// metricValue is switchyard_gateway_auth_failures_total{reason} in a
// scrape, 0 when absent.
func metricValue(scrape, reason string) int {
	prefix := fmt.Sprintf("switchyard_gateway_auth_failures_total{reason=%q} ", reason)
	for line := range strings.SplitSeq(scrape, "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			var n int
			fmt.Sscan(v, &n)
			return n
		}
	}
	return 0
}

// TestJWTConfig: the jwt step's flags are refused without it, checked
// when set (unset, the step takes its identity provider from the
// GatewayBackend), and the steps identifying the caller come in the one
// order that cannot let a request through unchecked.
func TestJWTConfig(t *testing.T) {
	if got := DefaultConfig().Admission; got != "jwt,apikey,default-tenant" {
		t.Errorf("default --admission %q: a GatewayBackend naming an identity provider would not work out of the box", got)
	}
	for _, c := range []struct {
		admission string
		set       bool
		want      string
	}{
		{"apikey,default-tenant", true, "does not name the jwt step"},
		{"apikey,jwt,default-tenant", true, "jwt must come before apikey"},
		{"jwt,apikey,default-tenant", false, ""},
		{"jwt,apikey,default-tenant", true, ""},
		{"jwt,default-tenant", false, ""},
		{"default-tenant,jwt,apikey", false, "default-tenant must come after jwt"},
		{"jwt,default-tenant,apikey", false, "default-tenant must come after apikey"},
		{"apikey,default-tenant,ratelimit,jwt", false, "ratelimit must come after jwt"},
	} {
		cfg := DefaultConfig()
		cfg.Admission = c.admission
		cfg.Redis.URL = "redis://127.0.0.1:6379"
		if c.set {
			cfg.JWT.Issuer, cfg.JWT.Audience, cfg.JWT.JWKSFile = "https://idp.example", "switchyard", "/jwks.json"
		}
		err := cfg.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("--admission %s (jwt flags %v): %v, want %q", c.admission, c.set, err, c.want)
		}
	}
	cfg := DefaultConfig()
	cfg.JWT.Issuer = "https://idp.example"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "jwt-audience") {
		t.Errorf("only --jwt-issuer set: %v, want the missing flags named", err)
	}
}

// jwtBackend is a GatewayBackend of auth mode mode naming the identity
// provider issuer with its keys at jwksURL; team-a has key (when not
// empty), team-b none.
func jwtBackend(mode, issuer, jwksURL, key string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: switchyard.dev/v1alpha1
kind: GatewayBackend
metadata: {name: idp, namespace: inference}
spec:
  auth:
    mode: %s
    jwt:
      issuer: %s
      audiences: [other, switchyard]
      jwksURL: %s
      refreshInterval: 10s
  tenants:
  - name: team-a
`, mode, issuer, jwksURL)
	if key != "" {
		fmt.Fprintf(&b, "    keyDigests: [%q]\n", apikey.Digest(key))
	}
	b.WriteString("  - name: team-b\n")
	return b.String()
}

// TestJWTFromGatewayBackend: through a real gateway with its default
// --admission and no --jwt-* flag, policyd (files mode) and an IdP serving
// its JWKS over HTTP: the GatewayBackend's spec.auth.jwt alone makes
// bearer JWTs work, for a tenant without any key; auth mode JWT refuses
// API keys (and nothing) with a 401 in the client's API shape; with mode
// APIKey keys and tokens both work; a new issuer, and a new JWKS URL,
// take effect without a restart.
func TestJWTFromGatewayBackend(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "gateway.yaml")
	write := func(yaml string) {
		t.Helper()
		if err := os.WriteFile(file+".tmp", []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(file+".tmp", file); err != nil {
			t.Fatal(err)
		}
	}
	idp := newTestIdP(t)
	jwksURL := idp.serve(t)
	write(jwtBackend("JWT", "https://idp.example", jwksURL, ""))
	pdAddr := servePolicydFiles(t, dir)
	up := newVLLM(t, modeOK)
	e := newEnv(t, envOpts{noNATS: true, cfg: func(c *Config) { c.PolicydAddr, c.GatewayBackend = pdAddr, "idp" }})
	e.router.setTargets(testModel, up.target("w0"))
	issuerIs := func(iss string) func() bool {
		return func() bool { p := e.gw.catalog.program(); return p != nil && p.JWT != nil && p.JWT.Issuer == iss }
	}
	e.eventually(t, "the GatewayBackend", issuerIs("https://idp.example"))

	now := time.Now()
	token := func(idp *testIdP, kid, iss, tenant string) string {
		return idp.sign(t, kid, kid, map[string]any{"iss": iss, "aud": "switchyard", "tenant": tenant,
			"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	}
	refused := func(t *testing.T, cred, reason string) {
		t.Helper()
		before := scrape(t, e.metricsURL)
		err := e.chat(cred)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || apiErr.Code != "invalid_token" {
			t.Fatalf("error %v, want 401 invalid_token", err)
		}
		if b, a := metricValue(before, reason), metricValue(scrape(t, e.metricsURL), reason); a != b+1 {
			t.Errorf("auth failures{reason=%q} went %d -> %d, want +1", reason, b, a)
		}
	}

	t.Run("a token for a tenant without keys", func(t *testing.T) {
		if err := e.chat(token(idp, "ec1", "https://idp.example", "team-b")); err != nil {
			t.Fatal(err)
		}
		if got := e.router.lastTenant(); got != "team-b" {
			t.Errorf("router saw tenant %q, want team-b", got)
		}
	})
	t.Run("readiness lists the identity provider's keys", func(t *testing.T) {
		resp, err := e.client.Get(e.url + "/readyz?verbose")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), "[+]jwks") {
			t.Errorf("readyz:\n%s", body)
		}
	})
	t.Run("mode JWT refuses API keys, and nothing, in OpenAI's shape", func(t *testing.T) {
		hits, calls := up.hits.Load(), len(e.router.calls())
		refused(t, apikey.Generate(), "jwt_missing")
		resp := e.post(t, "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, testModel), nil)
		d := decodeError(t, resp)
		if resp.StatusCode != http.StatusUnauthorized || d.Code == nil || *d.Code != "invalid_token" || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("no credentials: status %d %+v, want 401 invalid_token with WWW-Authenticate", resp.StatusCode, d)
		}
		if up.hits.Load() != hits || len(e.router.calls()) != calls {
			t.Error("a refused request reached the router or the worker")
		}
	})
	t.Run("mode JWT refuses API keys in Anthropic's shape on /v1/messages", func(t *testing.T) {
		body := fmt.Sprintf(`{"model":%q,"max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`, testModel)
		resp := e.post(t, "/v1/messages", body, map[string]string{"x-api-key": apikey.Generate(), "anthropic-version": "2023-06-01"})
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(out), `"type":"authentication_error"`) || !strings.Contains(string(out), "API keys are refused") {
			t.Fatalf("status %d %s, want 401 authentication_error saying API keys are refused", resp.StatusCode, out)
		}
	})
	t.Run("a tenant not in spec.tenants", func(t *testing.T) {
		refused(t, token(idp, "ec1", "https://idp.example", "team-z"), "jwt_tenant")
	})
	t.Run("a new issuer takes effect without a restart", func(t *testing.T) {
		write(jwtBackend("JWT", "https://idp2.example", jwksURL, ""))
		e.eventually(t, "the new GatewayBackend", issuerIs("https://idp2.example"))
		refused(t, token(idp, "rsa1", "https://idp.example", "team-a"), "jwt_claims")
		if err := e.chat(token(idp, "rsa1", "https://idp2.example", "team-a")); err != nil || e.router.lastTenant() != "team-a" {
			t.Fatalf("a token of the new issuer: %v, tenant %q", err, e.router.lastTenant())
		}
	})
	t.Run("a new JWKS URL takes effect without a restart", func(t *testing.T) {
		other := newTestIdP(t)
		write(jwtBackend("JWT", "https://idp2.example", other.serve(t), ""))
		e.eventually(t, "the new GatewayBackend", func() bool { p := e.gw.catalog.program(); return p != nil && p.JWT.JWKSURL != jwksURL })
		// Same kids, other keys: a stale key set would refuse the new
		// IdP's tokens and accept the old one's.
		if err := e.chat(token(other, "ed1", "https://idp2.example", "team-b")); err != nil {
			t.Fatalf("a token signed by the new JWKS's key: %v", err)
		}
		refused(t, token(idp, "ed1", "https://idp2.example", "team-b"), "jwt_invalid")
	})
	t.Run("mode APIKey with auth.jwt: keys and tokens both", func(t *testing.T) {
		key := apikey.Generate()
		write(jwtBackend("APIKey", "https://idp.example", jwksURL, key))
		e.eventually(t, "the new GatewayBackend", func() bool { p := e.gw.catalog.program(); return p != nil && p.AuthMode == "APIKey" })
		if err := e.chat(key); err != nil || e.router.lastTenant() != "team-a" {
			t.Fatalf("API key: %v, tenant %q", err, e.router.lastTenant())
		}
		if err := e.chat(token(idp, "rsa1", "https://idp.example", "team-b")); err != nil || e.router.lastTenant() != "team-b" {
			t.Fatalf("JWT of the keyless tenant: %v, tenant %q", err, e.router.lastTenant())
		}
		var apiErr *openai.Error
		if err := e.chat(apikey.Generate()); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || apiErr.Code != "invalid_api_key" {
			t.Fatalf("an unknown key: %v, want 401 invalid_api_key", err)
		}
	})
}

// TestJWTModeWithoutStep: a GatewayBackend accepting JWTs served by a
// chain without the jwt step refuses every request rather than serve it
// unauthenticated (mode JWT) or refuse the tokens it promises (APIKey).
func TestJWTModeWithoutStep(t *testing.T) {
	dir := t.TempDir()
	key := apikey.Generate()
	for _, mode := range []string{"JWT", "APIKey"} {
		t.Run(mode, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(dir, "gateway.yaml"), []byte(jwtBackend(mode, "https://idp.example", "https://idp.example/keys", map[string]string{"APIKey": key}[mode])), 0o600); err != nil {
				t.Fatal(err)
			}
			pdAddr := servePolicydFiles(t, dir)
			up := newVLLM(t, modeOK)
			e := newEnv(t, envOpts{noNATS: true, cfg: func(c *Config) { c.PolicydAddr, c.Admission = pdAddr, "apikey,default-tenant" }})
			e.router.setTargets(testModel, up.target("w0"))
			e.eventually(t, "policy snapshot", func() bool { return e.gw.catalog.program() != nil })
			resp := e.post(t, "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, testModel), map[string]string{"Authorization": "Bearer " + key})
			resp.Body.Close()
			if resp.StatusCode != http.StatusInternalServerError || up.hits.Load() != 0 {
				t.Fatalf("status %d, %d forwarded; want 500 and nothing forwarded", resp.StatusCode, up.hits.Load())
			}
		})
	}
}

// TestJWTFlagsWithoutPolicyd: a gateway without policyd takes its
// identity provider from the --jwt-* flags, and then every request needs
// a valid token; its tenant claim is the tenant (a valid tenant name).
func TestJWTFlagsWithoutPolicyd(t *testing.T) {
	idp := newTestIdP(t)
	up := newVLLM(t, modeOK)
	e := newEnv(t, envOpts{noNATS: true, cfg: func(c *Config) {
		c.JWT.Issuer, c.JWT.Audience, c.JWT.JWKSURL = "https://idp.example", "switchyard", idp.serve(t)
	}})
	e.router.setTargets(testModel, up.target("w0"))
	now := time.Now()
	for _, c := range []struct {
		name, auth, tenant string
		status             int
	}{
		{"no credentials", "", "", http.StatusUnauthorized},
		{"an API key", "Bearer " + apikey.Generate(), "", http.StatusUnauthorized},
		{"a token", "Bearer " + idp.sign(t, "ec1", "ec1", map[string]any{"iss": "https://idp.example", "aud": "switchyard", "tenant": "ml-research", "exp": now.Add(time.Hour).Unix()}), "ml-research", http.StatusOK},
		{"a token naming no valid tenant", "Bearer " + idp.sign(t, "ec1", "ec1", map[string]any{"iss": "https://idp.example", "aud": "switchyard", "tenant": "ML Research", "exp": now.Add(time.Hour).Unix()}), "", http.StatusUnauthorized},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls := len(e.router.calls())
			hdr := map[string]string{}
			if c.auth != "" {
				hdr["Authorization"] = c.auth
			}
			resp := e.post(t, "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, testModel), hdr)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.status)
			}
			if got := e.router.calls(); c.tenant != "" && (len(got) != calls+1 || got[len(got)-1].GetTenant() != c.tenant) {
				t.Errorf("router calls %d -> %d, want one with tenant %s", calls, len(got), c.tenant)
			} else if c.tenant == "" && len(got) != calls {
				t.Error("a refused request reached the router")
			}
		})
	}
}
