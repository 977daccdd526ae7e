package gateway

import (
	"context"
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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	josejwt "github.com/go-jose/go-jose/v4/jwt"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/switchyard-dev/switchyard/internal/apikey"
)

// testIdP is an identity provider the test makes up: its signing keys by
// kid, and the JWKS file the gateway reads.
type testIdP struct {
	keys map[string]crypto.Signer
	algs map[string]jose.SignatureAlgorithm
	file string
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
	tmp := idp.file + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, idp.file); err != nil {
		t.Fatal(err)
	}
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

	chat := func(token string) error {
		client := openai.NewClient(option.WithBaseURL(e.url+"/v1"), option.WithAPIKey(token), option.WithMaxRetries(0))
		_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model:    testModel,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		return err
	}
	lastTenant := func() string {
		calls := e.router.calls()
		if len(calls) == 0 {
			return ""
		}
		return calls[len(calls)-1].GetTenant()
	}
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
			if err := chat(idp.sign(t, kid, kid, claims(nil))); err != nil {
				t.Fatal(err)
			}
			if got := lastTenant(); got != "team-b" {
				t.Errorf("router saw tenant %q, want team-b", got)
			}
		})
	}
	t.Run("within the clock skew", func(t *testing.T) {
		if err := chat(idp.sign(t, "ec1", "ec1", claims(func(c map[string]any) { c["exp"] = now.Add(-30 * time.Second).Unix() }))); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("API keys still work", func(t *testing.T) {
		if err := chat(keyA); err != nil || lastTenant() != "team-a" {
			t.Fatalf("API key: %v, tenant %q", err, lastTenant())
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
			err := chat(c.token)
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
		if err := chat(idp.sign(t, "ed1", "ed1", claims(nil))); err != nil {
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
		e.eventually(t, "the new key accepted", func() bool { return chat(tok) == nil })
		if err := chat(idp.sign(t, "ec1", "ec1", claims(nil))); err == nil {
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

// TestJWTConfig: the jwt step's flags are required with it, refused
// without it, and it must come before apikey.
func TestJWTConfig(t *testing.T) {
	for _, c := range []struct {
		admission string
		set       bool
		want      string
	}{
		{"apikey,default-tenant", true, "does not name the jwt step"},
		{"apikey,jwt,default-tenant", true, "jwt must come before apikey"},
		{"jwt,apikey,default-tenant", false, "jwt-issuer"},
		{"jwt,apikey,default-tenant", true, ""},
	} {
		cfg := DefaultConfig()
		cfg.Admission = c.admission
		if c.set {
			cfg.JWT.Issuer, cfg.JWT.Audience, cfg.JWT.JWKSFile = "https://idp.example", "switchyard", "/jwks.json"
		}
		err := cfg.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("--admission %s (jwt flags %v): %v, want %q", c.admission, c.set, err, c.want)
		}
	}
}
