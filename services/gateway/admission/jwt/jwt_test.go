package jwt

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	josejwt "github.com/go-jose/go-jose/v4/jwt"
	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/services/gateway/admission"
)

func ecKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func jwks(t testing.TB, keys map[string]*ecdsa.PrivateKey) []byte {
	var set jose.JSONWebKeySet
	for kid, k := range keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.Public(), KeyID: kid, Algorithm: "ES256", Use: "sig"})
	}
	data, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func token(t testing.TB, k *ecdsa.PrivateKey, kid string) string {
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := josejwt.Signed(sig).Claims(map[string]any{"iss": "iss", "aud": "aud", "tenant": "t", "exp": now.Add(time.Hour).Unix()}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// loadedVerifier verifies tokens of issuer "iss" for audience "aud" with
// keys, loaded already, and no refresh within minRefresh.
func loadedVerifier(t testing.TB, keys map[string]*ecdsa.PrivateKey, minRefresh time.Duration) *verifier {
	ks := newKeySet(jwksSource{URL: "https://idp.invalid/keys", Refresh: time.Hour, MinRefresh: minRefresh}, zerolog.Nop())
	set, err := parseJWKS(jwks(t, keys))
	if err != nil {
		t.Fatal(err)
	}
	ks.set, ks.lastTry = set, time.Now()
	close(ks.loaded)
	return &verifier{issuer: "iss", audiences: []string{"aud"}, tenantClaim: "tenant", clockSkew: time.Minute, keys: ks}
}

// TestJWKSURL: keys fetched from a URL; an unknown kid triggers one
// fetch, and a flood of unknown kids at most one per --jwt-min-refresh.
func TestJWKSURL(t *testing.T) {
	k1, k2 := ecKey(t), ecKey(t)
	var mu sync.Mutex
	served := map[string]*ecdsa.PrivateKey{"k1": k1}
	var fetches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetches.Add(1)
		mu.Lock()
		defer mu.Unlock()
		_, _ = w.Write(jwks(t, served))
	}))
	defer srv.Close()
	cfg := DefaultConfig()
	cfg.Issuer, cfg.Audience, cfg.JWKSURL, cfg.MinRefresh = "iss", "aud", srv.URL, time.Hour
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	st, err := New(admission.Deps{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	s := st.(*Step)
	ctx := context.Background()
	if err := s.Load(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if tenant, reason := s.verify(ctx, s.flagVerifier(), token(t, k1, "k1"), time.Now()); tenant != "t" || reason != "" {
		t.Fatalf("k1: %q %q", tenant, reason)
	}
	mu.Lock()
	served["k2"] = k2
	mu.Unlock()
	if tenant, reason := s.verify(ctx, s.flagVerifier(), token(t, k2, "k2"), time.Now()); tenant != "t" || reason != "" {
		t.Fatalf("k2 after rotation: %q %q, want fetched on the unknown kid", tenant, reason)
	}
	before := fetches.Load()
	for range 100 {
		if _, reason := s.verify(ctx, s.flagVerifier(), token(t, k2, "made-up"), time.Now()); reason != ReasonUnknownKid {
			t.Fatalf("made-up kid: %q", reason)
		}
	}
	if got := fetches.Load() - before; got > 1 {
		t.Errorf("100 unknown kids fetched the JWKS %d times, want at most 1 per min-refresh", got)
	}
}

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	c.JWKSURL, c.JWKSFile, c.ClockSkew = "ftp://x", "/f", time.Hour
	err := c.Validate()
	for _, want := range []string{"jwt-issuer", "jwt-audience", "exactly one", "jwt-clock-skew"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to name %s", err, want)
		}
	}
	c = DefaultConfig()
	c.Issuer, c.Audience, c.JWKSURL = "i", "a", "ftp://x"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "jwt-jwks-url") {
		t.Errorf("Validate() = %v, want jwt-jwks-url refused", err)
	}
}

func TestParseJWKSRefusesPrivateAndEmpty(t *testing.T) {
	k := ecKey(t)
	priv, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: k, KeyID: "p", Algorithm: "ES256"}}})
	for _, data := range []string{string(priv), `{"keys":[]}`, `{`, strings.Repeat(" ", maxJWKSBytes+1)} {
		if _, err := parseJWKS([]byte(data)); err == nil {
			t.Errorf("parseJWKS(%.40q) accepted", data)
		}
	}
}

// FuzzVerify: any Authorization header and any token is refused or
// accepted without a panic, and an accepted token carries the claims the
// test signed.
func FuzzVerify(f *testing.F) {
	k := ecKey(f)
	good := token(f, k, "k1")
	f.Add("Bearer " + good)
	f.Add("Bearer eyJhbGciOiJub25lIn0.e30.")
	f.Add("bearer a.b.c")
	f.Add("Bearer sy-abc")
	f.Add("Bearer " + strings.Repeat("A", MaxTokenBytes) + ".x.y")
	v := loadedVerifier(f, map[string]*ecdsa.PrivateKey{"k1": k}, time.Hour)
	s := &Step{}
	f.Fuzz(func(t *testing.T, auth string) {
		tok, ok := Bearer(http.Header{"Authorization": {auth}})
		if !ok {
			return
		}
		if strings.HasPrefix(tok, "sy-") || strings.Count(tok, ".") != 2 {
			t.Fatalf("Bearer(%q) took %q", auth, tok)
		}
		if tenant, reason := s.verify(context.Background(), v, tok, time.Now()); reason == "" && tenant != "t" {
			t.Fatalf("accepted %q with tenant %q, not the signed claims", tok, tenant)
		}
	})
}

func FuzzParseJWKS(f *testing.F) {
	f.Add(jwks(f, map[string]*ecdsa.PrivateKey{"k": ecKey(f)}))
	f.Add([]byte(`{"keys":[{"kty":"RSA","n":"","e":""}]}`))
	f.Fuzz(func(t *testing.T, data []byte) { _, _ = parseJWKS(data) })
}

// BenchmarkVerify is the step's cost per request for an ES256 token
// (signature check, claims, no refresh).
func BenchmarkVerify(b *testing.B) {
	k := ecKey(b)
	tok := token(b, k, "k1")
	v := loadedVerifier(b, map[string]*ecdsa.PrivateKey{"k1": k}, time.Hour)
	s := &Step{}
	ctx := context.Background()
	for b.Loop() {
		if _, reason := s.verify(ctx, v, tok, time.Now()); reason != "" {
			b.Fatal(reason)
		}
	}
}

// testProgram compiles a GatewayBackend of mode with the identity
// provider issuer (audience "aud") at jwksURL and the tenant "t".
func testProgram(t *testing.T, mode v1alpha1.AuthMode, issuer, jwksURL string) *policy.Program {
	t.Helper()
	gw, err := policy.ObjectOf(&v1alpha1.GatewayBackend{Spec: v1alpha1.GatewayBackendSpec{
		Auth:    &v1alpha1.AuthSpec{Mode: mode, JWT: &v1alpha1.JWTAuth{Issuer: issuer, Audiences: []string{"aud"}, JWKSURL: jwksURL}},
		Tenants: []v1alpha1.Tenant{{Name: "t"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	gw.Namespace, gw.Name = "ns", "gw"
	gw.Backend.Namespace, gw.Backend.Name = "ns", "gw"
	snap, diags := policy.Compile([]*policy.Object{gw})
	if snap == nil {
		t.Fatalf("compile: %v", diags)
	}
	return snap.Program("gw")
}

// TestProgramBinding: the step follows the program policyd sends: its
// issuer at once, its JWKS URL with a new key set (fetched once, not per
// request), the same key set while the URL stays; auth mode JWT refuses
// requests without a token, and a gateway with policyd refuses every
// request until the first program; flags set beside a GatewayBackend's
// identity provider are ignored with a warning.
func TestProgramBinding(t *testing.T) {
	idp := func(k *ecdsa.PrivateKey) (string, *atomic.Int32) {
		var fetches atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fetches.Add(1)
			_, _ = w.Write(jwks(t, map[string]*ecdsa.PrivateKey{"k1": k}))
		}))
		t.Cleanup(srv.Close)
		return srv.URL, &fetches
	}
	kA, kB := ecKey(t), ecKey(t)
	urlA, fetchesA := idp(kA)
	urlB, _ := idp(kB)
	sign := func(k *ecdsa.PrivateKey, iss string) string {
		sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
		if err != nil {
			t.Fatal(err)
		}
		tok, err := josejwt.Signed(sig).Claims(map[string]any{"iss": iss, "aud": "aud", "tenant": "t", "exp": time.Now().Add(time.Hour).Unix()}).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	var cur atomic.Pointer[policy.Program]
	logs := &syncWriter{}
	st, err := New(admission.Deps{Program: cur.Load, Log: zerolog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	s := st.(*Step)
	flags := DefaultConfig()
	flags.Issuer, flags.Audience, flags.JWKSURL = "flag-iss", "aud", urlA
	if err := s.Load(context.Background(), flags); err != nil {
		t.Fatal(err)
	}
	admit := func(hdr map[string]string) (string, error) {
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		ar := &admission.Request{HTTP: r}
		err := s.Admit(context.Background(), ar)
		return ar.Tenant, err
	}
	refusal := func(err error) string {
		var ref *admission.Refusal
		if !errors.As(err, &ref) {
			return fmt.Sprint(err)
		}
		return fmt.Sprintf("%d %s", ref.Status, ref.Code)
	}

	if _, err := admit(map[string]string{"Authorization": "Bearer " + sign(kA, "iss")}); refusal(err) != "503 auth_unavailable" {
		t.Errorf("before the first program: %v, want 503 auth_unavailable", err)
	}
	cur.Store(testProgram(t, v1alpha1.AuthJWT, "iss", urlA))
	if tenant, err := admit(map[string]string{"Authorization": "Bearer " + sign(kA, "iss")}); err != nil || tenant != "t" {
		t.Fatalf("a token of the program's IdP: %q %v", tenant, err)
	}
	if !strings.Contains(logs.String(), "--jwt-* flags ignored") {
		t.Errorf("no warning that the flags are ignored; log:\n%s", logs.String())
	}
	if _, err := admit(nil); refusal(err) != "401 invalid_token" {
		t.Errorf("mode JWT, no token: %v, want 401", err)
	}
	if _, err := admit(map[string]string{"X-Api-Key": "sy-" + strings.Repeat("k", 43)}); refusal(err) != "401 invalid_token" {
		t.Errorf("mode JWT, an API key: %v, want 401", err)
	}
	keys := s.bound.Load().v.keys

	cur.Store(testProgram(t, v1alpha1.AuthJWT, "iss2", urlA))
	before := fetchesA.Load()
	for range 50 {
		if _, err := admit(map[string]string{"Authorization": "Bearer " + sign(kA, "iss")}); refusal(err) != "401 invalid_token" {
			t.Fatalf("the old issuer after the change: %v, want 401", err)
		}
		if tenant, err := admit(map[string]string{"Authorization": "Bearer " + sign(kA, "iss2")}); err != nil || tenant != "t" {
			t.Fatalf("the new issuer: %q %v", tenant, err)
		}
	}
	if s.bound.Load().v.keys != keys || fetchesA.Load() != before {
		t.Errorf("same JWKS URL: key set rebuilt %v, %d fetches; want the same key set, no fetch", s.bound.Load().v.keys != keys, fetchesA.Load()-before)
	}

	cur.Store(testProgram(t, v1alpha1.AuthAPIKey, "iss2", urlB))
	if tenant, err := admit(map[string]string{"Authorization": "Bearer " + sign(kB, "iss2")}); err != nil || tenant != "t" {
		t.Fatalf("a token of the new JWKS URL's key: %q %v", tenant, err)
	}
	if _, err := admit(map[string]string{"Authorization": "Bearer " + sign(kA, "iss2")}); refusal(err) != "401 invalid_token" {
		t.Errorf("a token of the old URL's key: %v, want 401", err)
	}
	if tenant, err := admit(nil); err != nil || tenant != "" {
		t.Errorf("mode APIKey, no token: %q %v, want left to the apikey step", tenant, err)
	}
	if err := s.Probe(); err != nil {
		t.Errorf("Probe: %v", err)
	}

	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	cur.Store(testProgram(t, v1alpha1.AuthJWT, "iss2", dead.URL))
	if _, err := admit(map[string]string{"Authorization": "Bearer " + sign(kB, "iss2")}); refusal(err) != "503 invalid_token" {
		t.Errorf("a JWKS URL that cannot be fetched: %v, want 503 (jwt_no_keys)", err)
	}
	if err := s.Probe(); err == nil || !strings.Contains(err.Error(), "no key of the identity provider iss2") {
		t.Errorf("Probe with no keys: %v", err)
	}
}

// syncWriter serialises a logger's writes (the key set loads in the
// background).
type syncWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
