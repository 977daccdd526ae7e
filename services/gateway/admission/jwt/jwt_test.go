package jwt

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
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
	if tenant, reason := s.verify(ctx, token(t, k1, "k1"), time.Now()); tenant != "t" || reason != "" {
		t.Fatalf("k1: %q %q", tenant, reason)
	}
	mu.Lock()
	served["k2"] = k2
	mu.Unlock()
	if tenant, reason := s.verify(ctx, token(t, k2, "k2"), time.Now()); tenant != "t" || reason != "" {
		t.Fatalf("k2 after rotation: %q %q, want fetched on the unknown kid", tenant, reason)
	}
	before := fetches.Load()
	for range 100 {
		if _, reason := s.verify(ctx, token(t, k2, "made-up"), time.Now()); reason != ReasonUnknownKid {
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
	cfg := DefaultConfig()
	cfg.Issuer, cfg.Audience, cfg.MinRefresh = "iss", "aud", time.Hour
	s := &Step{cfg: cfg, keys: newKeySet(cfg, zerolog.Nop())}
	set, err := parseJWKS(jwks(f, map[string]*ecdsa.PrivateKey{"k1": k}))
	if err != nil {
		f.Fatal(err)
	}
	s.keys.set, s.keys.lastTry = set, time.Now()
	f.Fuzz(func(t *testing.T, auth string) {
		tok, ok := Bearer(http.Header{"Authorization": {auth}})
		if !ok {
			return
		}
		if strings.HasPrefix(tok, "sy-") || strings.Count(tok, ".") != 2 {
			t.Fatalf("Bearer(%q) took %q", auth, tok)
		}
		if tenant, reason := s.verify(context.Background(), tok, time.Now()); reason == "" && tenant != "t" {
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
	cfg := DefaultConfig()
	cfg.Issuer, cfg.Audience = "iss", "aud"
	s := &Step{cfg: cfg, keys: newKeySet(cfg, zerolog.Nop())}
	set, err := parseJWKS(jwks(b, map[string]*ecdsa.PrivateKey{"k1": k}))
	if err != nil {
		b.Fatal(err)
	}
	s.keys.set = set
	ctx := context.Background()
	for b.Loop() {
		if _, reason := s.verify(ctx, tok, time.Now()); reason != "" {
			b.Fatal(reason)
		}
	}
}
