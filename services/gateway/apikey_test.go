package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/apikey"
	"github.com/switchyard-dev/switchyard/services/policyd"
)

// keyedCatalog is a GatewayBackend asking for API keys: team-a and team-b
// with one key each, in files mode (inline digests).
func keyedCatalog(keys map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: switchyard.dev/v1alpha1
kind: GatewayBackend
metadata: {name: keyed, namespace: inference}
spec:
  auth: {mode: APIKey}
  tenants:
`)
	for _, tenant := range []string{"team-a", "team-b"} {
		if k, ok := keys[tenant]; ok {
			fmt.Fprintf(&b, "  - name: %s\n    keyDigests: [%q]\n", tenant, apikey.Digest(k))
		}
	}
	return b.String()
}

// servePolicydFiles serves dir with a short poll interval, so an edit is
// served within a poll.
func servePolicydFiles(t *testing.T, dir string) string {
	t.Helper()
	cfg := policyd.DefaultConfig()
	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Paths, cfg.PollInterval = []string{dir}, 50*time.Millisecond
	pd, err := policyd.New(cfg, zerolog.Nop())
	if err != nil {
		t.Fatalf("policyd.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pd.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return pd.GRPCAddr()
}

// TestAPIKeys: through a real gateway, policyd (files mode) and the
// official OpenAI client: a tenant's key is accepted and names the tenant
// the router sees; a wrong key is a 401 in the client's API shape with
// nothing forwarded; no header chooses the tenant; a key removed from the
// file is refused from the next request after policyd serves the change.
func TestAPIKeys(t *testing.T) {
	keyA, keyB := apikey.Generate(), apikey.Generate()
	dir := t.TempDir()
	file := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(file, []byte(keyedCatalog(map[string]string{"team-a": keyA, "team-b": keyB})), 0o600); err != nil {
		t.Fatal(err)
	}
	pdAddr := servePolicydFiles(t, dir)
	up := newVLLM(t, modeOK)
	e := newEnv(t, envOpts{noNATS: true, cfg: func(c *Config) { c.PolicydAddr, c.GatewayBackend = pdAddr, "keyed" }})
	e.router.setTargets(testModel, up.target("w0"))
	e.eventually(t, "policy snapshot", func() bool { p := e.gw.catalog.program(); return p != nil && p.AuthKeys() == 2 })

	t.Run("key accepted, tenant from the key", func(t *testing.T) {
		if err := e.chat(keyA); err != nil {
			t.Fatal(err)
		}
		if got := e.router.lastTenant(); got != "team-a" {
			t.Errorf("router saw tenant %q, want team-a", got)
		}
	})
	t.Run("a header cannot choose the tenant", func(t *testing.T) {
		if err := e.chat(keyA, option.WithHeader("X-Switchyard-Tenant", "team-b"), option.WithHeader("X-Tenant", "team-b")); err != nil {
			t.Fatal(err)
		}
		if got := e.router.lastTenant(); got != "team-a" {
			t.Errorf("router saw tenant %q, want team-a", got)
		}
	})
	t.Run("wrong key: 401 in OpenAI's shape, nothing forwarded", func(t *testing.T) {
		hits, calls := up.hits.Load(), len(e.router.calls())
		err := e.chat(apikey.Generate())
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || apiErr.Code != "invalid_api_key" || apiErr.Type != "invalid_request_error" {
			t.Fatalf("error %v, want 401 invalid_api_key", err)
		}
		if up.hits.Load() != hits || len(e.router.calls()) != calls {
			t.Error("a request with a wrong key reached the router or the worker")
		}
	})
	t.Run("x-api-key and Anthropic's shape", func(t *testing.T) {
		body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, testModel)
		resp := e.post(t, "/v1/chat/completions", body, map[string]string{"x-api-key": keyB})
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || e.router.lastTenant() != "team-b" {
			t.Fatalf("x-api-key: status %d tenant %q, want 200 team-b", resp.StatusCode, e.router.lastTenant())
		}
		resp = e.post(t, "/v1/chat/completions", body, map[string]string{"x-api-key": "sy-" + strings.Repeat("x", 43), "anthropic-version": "2023-06-01"})
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(out), `"type":"authentication_error"`) || !strings.Contains(string(out), `"type":"error"`) {
			t.Fatalf("status %d %s, want 401 authentication_error", resp.StatusCode, out)
		}
	})
	t.Run("no key, malformed, conflicting", func(t *testing.T) {
		body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, testModel)
		for _, hdr := range []map[string]string{
			nil,
			{"Authorization": "Basic dXNlcjpwYXNz"},
			{"Authorization": "Bearer " + keyA, "x-api-key": keyB},
		} {
			resp := e.post(t, "/v1/chat/completions", body, hdr)
			d := decodeError(t, resp)
			if resp.StatusCode != http.StatusUnauthorized || d.Code == nil || *d.Code != "invalid_api_key" || strings.Contains(d.Message, keyA) {
				t.Errorf("headers %v: status %d %+v", hdr, resp.StatusCode, d)
			}
		}
	})
	t.Run("a 1 MB Authorization header is refused by the server's limit", func(t *testing.T) {
		hits := up.hits.Load()
		resp := e.post(t, "/v1/chat/completions", "{}", map[string]string{"Authorization": "Bearer sy-" + strings.Repeat("a", 1<<20)})
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || up.hits.Load() != hits {
			t.Errorf("status %d, want 431 and nothing forwarded", resp.StatusCode)
		}
	})
	t.Run("revoked key: 401 from the next request after the update", func(t *testing.T) {
		if err := e.chat(keyB); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(keyedCatalog(map[string]string{"team-a": keyA})), 0o600); err != nil {
			t.Fatal(err)
		}
		e.eventually(t, "the revocation served", func() bool { return e.gw.catalog.program().AuthKeys() == 1 })
		var apiErr *openai.Error
		if err := e.chat(keyB); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized {
			t.Fatalf("revoked key: %v, want 401", err)
		}
		if err := e.chat(keyA); err != nil {
			t.Fatalf("the other tenant's key: %v", err)
		}
	})
	metrics := scrape(t, e.metricsURL)
	for _, want := range []string{`switchyard_gateway_auth_failures_total{reason="unknown"} 3`, `switchyard_gateway_auth_failures_total{reason="missing"} 1`,
		`switchyard_gateway_auth_failures_total{reason="malformed"} 1`, `switchyard_gateway_auth_failures_total{reason="conflicting"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(metrics, "auth_failures"))
		}
	}
	if strings.Contains(metrics, keyA) || strings.Contains(metrics, "team-a") && strings.Contains(grepLines(metrics, "auth_failures"), "team") {
		t.Error("auth metrics carry a key or a tenant")
	}
}

// TestAPIKeyModeWithoutStep: a GatewayBackend asking for keys served by a
// chain without the apikey step refuses every request rather than serve
// it unauthenticated.
func TestAPIKeyModeWithoutStep(t *testing.T) {
	dir := t.TempDir()
	key := apikey.Generate()
	if err := os.WriteFile(filepath.Join(dir, "gateway.yaml"), []byte(keyedCatalog(map[string]string{"team-a": key})), 0o600); err != nil {
		t.Fatal(err)
	}
	pdAddr := servePolicydFiles(t, dir)
	up := newVLLM(t, modeOK)
	e := newEnv(t, envOpts{noNATS: true, cfg: func(c *Config) { c.PolicydAddr, c.Admission = pdAddr, "default-tenant" }})
	e.router.setTargets(testModel, up.target("w0"))
	e.eventually(t, "policy snapshot", func() bool { return e.gw.catalog.program() != nil })
	resp := e.post(t, "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, testModel), map[string]string{"Authorization": "Bearer " + key})
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || up.hits.Load() != 0 {
		t.Fatalf("status %d, %d forwarded; want 500 and nothing forwarded", resp.StatusCode, up.hits.Load())
	}
}

// TestAPIKeyBeforePolicy: until policyd has sent the GatewayBackend, the
// gateway cannot know whether requests need keys: it is not ready (the
// policy check names why) and refuses requests 503, never serving them
// unauthenticated.
func TestAPIKeyBeforePolicy(t *testing.T) {
	up := newVLLM(t, modeOK)
	e := newEnv(t, envOpts{noNATS: true, cfg: func(c *Config) { c.PolicydAddr, c.GatewayBackend = closedAddr(t), "keyed" }})
	e.router.setTargets(testModel, up.target("w0"))
	resp, err := e.client.Get(e.url + "/readyz?verbose")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `[-]policy: no GatewayBackend "keyed" from policyd yet`) {
		t.Errorf("readyz %d:\n%s", resp.StatusCode, body)
	}
	resp = e.post(t, "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, testModel), nil)
	d := decodeError(t, resp)
	if resp.StatusCode != http.StatusServiceUnavailable || d.Code == nil || *d.Code != "auth_unavailable" || up.hits.Load() != 0 {
		t.Errorf("status %d %+v, %d forwarded; want 503 auth_unavailable, nothing forwarded", resp.StatusCode, d, up.hits.Load())
	}
}
