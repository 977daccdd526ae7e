package clientcred

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	id     = "11111111-2222-3333-4444-555555555555"
	secret = "s3cr3t~value.0123456789"
	scope  = "https://cognitiveservices.azure.com/.default"
)

// endpoint is a token endpoint that checks the grant as RFC 6749 section
// 4.4 has it and counts what it issues.
type endpoint struct {
	*httptest.Server
	mu     sync.Mutex
	issued int
	ttl    int
	status int    // with body, answers with it instead
	body   string // the answer's body when status is set
	delay  time.Duration
}

func newEndpoint(t *testing.T, basic bool) *endpoint {
	e := &endpoint{ttl: 3599}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		delay, status, body := e.delay, e.status, e.body
		e.mu.Unlock()
		time.Sleep(delay)
		if ct := r.Header.Get("Content-Type"); r.Method != http.MethodPost || ct != "application/x-www-form-urlencoded" {
			t.Errorf("token request %s %s", r.Method, ct)
		}
		if err := r.ParseForm(); err != nil {
			t.Error(err)
		}
		gotID, gotSecret := r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		if u, p, ok := r.BasicAuth(); basic {
			if !ok || gotID != "" || gotSecret != "" {
				t.Errorf("basic auth wanted, got form id %q", gotID)
			}
			gotID, gotSecret = u, p
		}
		if r.PostForm.Get("grant_type") != "client_credentials" || r.PostForm.Get("scope") != scope || gotID != id {
			t.Errorf("token request form %v", r.PostForm)
		}
		w.Header().Set("Content-Type", "application/json")
		if status != 0 {
			w.WriteHeader(status)
			fmt.Fprint(w, body)
			return
		}
		if gotSecret != secret {
			w.WriteHeader(401)
			fmt.Fprint(w, `{"error":"invalid_client","error_description":"AADSTS7000215: Invalid client secret provided.","error_codes":[7000215]}`)
			return
		}
		e.mu.Lock()
		e.issued++
		n, ttl := e.issued, e.ttl
		e.mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"token_type": "Bearer", "expires_in": ttl, "ext_expires_in": ttl, "access_token": fmt.Sprintf("token-%d", n)})
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *endpoint) count() int { e.mu.Lock(); defer e.mu.Unlock(); return e.issued }

func (e *endpoint) set(f func(*endpoint)) { e.mu.Lock(); f(e); e.mu.Unlock() }

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func token(t *testing.T, c *Cache, cl Client, stale string) string {
	t.Helper()
	tok, err := c.Token(context.Background(), cl, stale)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestCache: one fetch for many callers, concurrent ones included; a new
// token RefreshBefore before expiry, at half the life of a short one, for
// a rotated secret and in place of a stale one.
func TestCache(t *testing.T) {
	for _, basic := range []bool{false, true} {
		t.Run(fmt.Sprintf("basic auth %v", basic), func(t *testing.T) {
			e := newEndpoint(t, basic)
			clk := &clock{now: time.Now()}
			c := New(http.DefaultTransport, clk.Now)
			cl := Client{TokenURL: e.URL + "/tenant/oauth2/v2.0/token", ID: id, Secret: secret, Scope: scope, BasicAuth: basic}

			e.set(func(e *endpoint) { e.delay = 50 * time.Millisecond })
			var wg sync.WaitGroup
			got := make([]string, 16)
			for i := range got {
				wg.Add(1)
				go func() { defer wg.Done(); got[i] = token(t, c, cl, "") }()
			}
			wg.Wait()
			e.set(func(e *endpoint) { e.delay = 0 })
			if n := e.count(); n != 1 || got[0] != "token-1" || got[15] != "token-1" {
				t.Fatalf("%d fetches for 16 concurrent callers (tokens %q, %q), want 1", n, got[0], got[15])
			}

			clk.advance(3599*time.Second - RefreshBefore - time.Second)
			if tok := token(t, c, cl, ""); tok != "token-1" {
				t.Fatalf("renewed %s before the refresh margin: %s", time.Second, tok)
			}
			clk.advance(2 * time.Second)
			if tok := token(t, c, cl, ""); tok != "token-2" {
				t.Fatalf("not renewed within %s of expiry: %s", RefreshBefore, tok)
			}
			if tok := token(t, c, cl, "token-2"); tok != "token-3" {
				t.Fatalf("the stale token came back: %s", tok)
			}

			e.set(func(e *endpoint) { e.ttl = 60 })
			token(t, c, cl, "token-3") // a 60s token, renewed after 30s
			clk.advance(29 * time.Second)
			token(t, c, cl, "")
			clk.advance(2 * time.Second)
			token(t, c, cl, "")
			if n := e.count(); n != 5 {
				t.Fatalf("%d fetches, want 5: a 60s token lives 30s in the cache", n)
			}

			rotated := cl
			rotated.Secret = "another-secret"
			if _, err := c.Token(context.Background(), rotated, ""); err == nil {
				t.Fatal("the token got with the old secret was used for a new one")
			}
		})
	}
}

// TestErrors: a refusal is *Refused with the endpoint's codes and neither
// its description nor the secret; the rest are plain errors.
func TestErrors(t *testing.T) {
	e := newEndpoint(t, false)
	c := New(http.DefaultTransport, nil)
	cl := Client{TokenURL: e.URL + "/t/oauth2/v2.0/token", ID: id, Secret: "wrong-" + secret, Scope: scope}
	_, err := c.Token(context.Background(), cl, "")
	var refused *Refused
	if !errors.As(err, &refused) || refused.Status != 401 || refused.Code != "invalid_client" || len(refused.Codes) != 1 || refused.Codes[0] != 7000215 {
		t.Fatalf("wrong secret: %#v", err)
	}
	if strings.Contains(err.Error(), cl.Secret) || strings.Contains(err.Error(), "AADSTS") {
		t.Fatalf("error text %q has the secret or the description", err)
	}

	cl.Secret = secret
	for _, c2 := range []struct {
		name   string
		status int
		body   string
	}{
		{"5xx", 503, `{"error":"temporarily_unavailable"}`},
		{"no token", 200, `{"token_type":"Bearer","expires_in":3599}`},
		{"no expiry", 200, `{"token_type":"Bearer","access_token":"x"}`},
		{"not bearer", 200, `{"token_type":"pop","expires_in":3599,"access_token":"x"}`},
		{"not JSON", 400, `<html>bad</html>`},
	} {
		e.set(func(e *endpoint) { e.status, e.body = c2.status, c2.body })
		_, err := c.Token(context.Background(), cl, "")
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("%s: %v", c2.name, err)
		}
		if got := errors.As(err, &refused); got != (c2.status == 400) {
			t.Errorf("%s: refused %v", c2.name, got)
		}
	}
	e.set(func(e *endpoint) { e.status = 0 })

	down := Client{TokenURL: "http://127.0.0.1:1/t/oauth2/v2.0/token", ID: id, Secret: secret, Scope: scope}
	if _, err := c.Token(context.Background(), down, ""); err == nil || errors.As(err, &refused) || strings.Contains(err.Error(), secret) {
		t.Fatalf("endpoint down: %v", err)
	}
	if _, err := c.Token(context.Background(), Client{TokenURL: e.URL, ID: id}, ""); err == nil {
		t.Fatal("no secret: no error")
	}
}
