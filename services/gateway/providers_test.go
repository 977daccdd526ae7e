package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/rs/zerolog"

	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/policyd"
)

// providerUpstream is an OpenAI-compatible provider endpoint that records
// what reached it.
type providerUpstream struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []providerReq
}

type providerReq struct {
	path, auth string
	body       []byte
}

func newProviderUpstream(t testing.TB) *providerUpstream {
	p := &providerUpstream{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		p.reqs = append(p.reqs, providerReq{path: r.URL.Path, auth: r.Header.Get("Authorization"), body: body})
		p.mu.Unlock()
		if r.Header.Get("Authorization") == "" {
			http.Error(w, `{"error":{"message":"no key","type":"authentication_error"}}`, http.StatusUnauthorized)
			return
		}
		var req upstreamReq
		_ = json.Unmarshal(body, &req)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(nonStreamBody(req.Model, r.URL.Path == "/v1/chat/completions")))
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *providerUpstream) requests() []providerReq {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.reqs)
}

// twoProviders is a catalog of two providers of testModel, one keyed by
// an environment variable, one by a file.
func twoProviders(baseURL, keyFile string) string {
	return fmt.Sprintf(`apiVersion: switchyard.dev/v1alpha1
kind: InferenceProvider
metadata: {name: bedrock, namespace: inference}
spec:
  type: OpenAICompatible
  baseURL: %[1]s/v1
  credentials: {env: GATEWAY_TEST_BEDROCK_KEY}
  models:
  - {name: %[2]s, servedName: qwen.qwen3-6-27b-v1:0}
---
apiVersion: switchyard.dev/v1alpha1
kind: InferenceProvider
metadata: {name: filekeyed, namespace: inference}
spec:
  type: OpenAICompatible
  baseURL: %[1]s/v1
  credentials: {file: %[3]q}
  models:
  - {name: %[2]s}
`, baseURL, testModel, keyFile)
}

// writeCatalog writes yaml as a catalog directory of one file.
func writeCatalog(t *testing.T, yaml string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "catalog.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// servePolicyd serves the catalog files and directories at paths over
// real gRPC and returns its address.
func servePolicyd(t *testing.T, paths ...string) string {
	t.Helper()
	cfg := policyd.DefaultConfig()
	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Paths = paths
	pd, err := policyd.New(cfg, zerolog.Nop())
	if err != nil {
		t.Fatalf("policyd.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pd.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("policyd Serve: %v", err)
		}
	})
	return pd.GRPCAddr()
}

func TestForwardToProvider(t *testing.T) {
	const envKey, fileKey = "sk-env-0123456789", "sk-file-9876543210"
	t.Setenv("GATEWAY_TEST_BEDROCK_KEY", envKey)
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(fileKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	up := newProviderUpstream(t)
	e, logs := providerGateway(t, twoProviders(up.srv.URL, keyFile), "")

	tests := []struct {
		name, provider, served, wantAuth, path, apiPath string
	}{
		{name: "env key, provider's model name, chat", provider: "bedrock", served: "qwen.qwen3-6-27b-v1:0", wantAuth: "Bearer " + envKey,
			path: "/v1/chat/completions", apiPath: "/v1/chat/completions"},
		{name: "file key, completions", provider: "filekeyed", served: testModel, wantAuth: "Bearer " + fileKey,
			path: "/v1/completions", apiPath: "/v1/completions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, testModel)
			if tt.apiPath == "/v1/completions" {
				body = fmt.Sprintf(`{"model":%q,"prompt":"hi"}`, testModel)
			}
			e.router.setTargets(testModel, &routerv1.Target{Id: "provider/" + tt.provider, Url: up.srv.URL + "/v1",
				Kind: routerv1.TargetKind_TARGET_KIND_PROVIDER, Provider: tt.provider, ServedModel: tt.served, Type: "OpenAICompatible"})
			n := len(up.requests())
			resp := e.post(t, tt.apiPath, body, map[string]string{"x-team-tags": "pii-detected"})
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, out)
			}
			reqs := up.requests()
			if len(reqs) != n+1 {
				t.Fatalf("provider saw %d requests, want 1", len(reqs)-n)
			}
			got := reqs[n]
			if got.path != tt.path || got.auth != tt.wantAuth {
				t.Errorf("provider got path %q auth %q, want %q %q", got.path, got.auth, tt.path, tt.wantAuth)
			}
			var sent upstreamReq
			if err := json.Unmarshal(got.body, &sent); err != nil || sent.Model != tt.served {
				t.Errorf("provider got model %q (%v), want %q", sent.Model, err, tt.served)
			}
			calls := e.router.calls()
			if last := calls[len(calls)-1]; !slices.Equal(last.GetTags(), []string{"pii-detected"}) {
				t.Errorf("router got tags %v from the backend's header, want [pii-detected]", last.GetTags())
			}
		})
	}

	t.Run("missing key: no request without it, 502", func(t *testing.T) {
		t.Setenv("GATEWAY_TEST_BEDROCK_KEY", "")
		e.router.setTargets(testModel, &routerv1.Target{Id: "provider/bedrock", Url: up.srv.URL + "/v1",
			Kind: routerv1.TargetKind_TARGET_KIND_PROVIDER, Provider: "bedrock", ServedModel: testModel, Type: "OpenAICompatible"})
		n := len(up.requests())
		resp := e.post(t, "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, testModel), nil)
		resp.Body.Close()
		if resp.StatusCode < 500 {
			t.Errorf("status %d, want a 5xx", resp.StatusCode)
		}
		if len(up.requests()) != n {
			t.Errorf("the provider was called without a key")
		}
	})

	for _, k := range []string{envKey, fileKey} {
		if strings.Contains(logs.String(), k) {
			t.Errorf("an api key reached the logs")
		}
	}
}

// providerBackend is the GatewayBackend providerGateway serves: testModel,
// tags header x-team-tags.
var providerBackend = fmt.Sprintf(`---
apiVersion: switchyard.dev/v1alpha1
kind: GatewayBackend
metadata: {name: dev, namespace: inference}
spec:
  models: [{name: %s}]
  tags:
    header: x-team-tags
`, testModel)

// providerGateway is a gateway following a real policyd that serves the
// providers' catalog and providerBackend, reading provider Secrets under
// secretsDir ("" for the default), with its log captured so a test can
// look for secrets in it.
func providerGateway(t *testing.T, providers, secretsDir string) (*env, *capturedLog) {
	t.Helper()
	pdAddr := servePolicyd(t, writeCatalog(t, providers+providerBackend))
	e := newEnv(t, envOpts{cfg: func(c *Config) {
		c.PolicydAddr = pdAddr
		c.GatewayBackend = "dev"
		if secretsDir != "" {
			c.ProviderSecretsDir = secretsDir
		}
	}})
	logs := &capturedLog{}
	e.gw.log = zerolog.New(logs).Level(zerolog.DebugLevel)
	e.eventually(t, "policy snapshot", func() bool { return e.gw.catalog.tagsHeader() == "x-team-tags" })
	return e, logs
}

// capturedLog is a log written by the gateway's goroutines and read by
// the test.
type capturedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *capturedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *capturedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// streamedChat is a chat completion the official client streamed through
// the gateway, usage included: its text, its chunks, and the usage the
// accumulator read from them.
type streamedChat struct {
	text   string
	chunks []openai.ChatCompletionChunk
	usage  openai.CompletionUsage
}

// streamChat streams messages to testModel with usage asked for; an error
// of the stream fails the test.
func streamChat(t *testing.T, client openai.Client, messages []openai.ChatCompletionMessageParamUnion) streamedChat {
	t.Helper()
	stream := client.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
		Model: testModel, Messages: messages,
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var out streamedChat
	var text strings.Builder
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		ch := stream.Current()
		acc.AddChunk(ch)
		out.chunks = append(out.chunks, ch)
		for _, c := range ch.Choices {
			text.WriteString(c.Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	out.text, out.usage = text.String(), acc.Usage
	return out
}
