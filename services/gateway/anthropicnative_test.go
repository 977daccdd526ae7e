package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/switchyard-dev/switchyard/internal/anthropicapi"
	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/upstream/anthropic/anthropictest"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

// anthropicClientKey is the Anthropic client's own key, the gateway's to check,
// which must never reach a provider.
const anthropicClientKey = "sk-ant-client-own-key-0f3a"

// sentBodies records the bodies an SDK client sent the gateway.
type sentBodies struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (s *sentBodies) middleware(r *http.Request, next aoption.MiddlewareNext) (*http.Response, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.bodies = append(s.bodies, b)
	s.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(b))
	return next(r)
}

func (s *sentBodies) last(t *testing.T) []byte {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bodies) == 0 {
		t.Fatal("the client sent nothing")
	}
	return s.bodies[len(s.bodies)-1]
}

// nativeClient is an Anthropic SDK client of the gateway with its own key
// and a beta header, recording what it sends.
func (ae *anthropicEnv) nativeClient() (anthropic.Client, *sentBodies) {
	sent := &sentBodies{}
	return anthropic.NewClient(aoption.WithBaseURL(ae.url), aoption.WithAPIKey(anthropicClientKey), aoption.WithMaxRetries(0),
		aoption.WithHeader("anthropic-beta", "extended-cache-ttl-2025-04-11"), aoption.WithMiddleware(sent.middleware)), sent
}

// cachedParams is a request with cache_control on a system block and on a
// message block, and metadata: members the translation to chat completions
// drops.
func cachedParams() anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model: testModel, MaxTokens: 64,
		System: []anthropic.TextBlockParam{{Text: "You are a careful assistant. " + strings.Repeat("Context. ", 50),
			CacheControl: anthropic.NewCacheControlEphemeralParam()}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.ContentBlockParamUnion{OfText: &anthropic.TextBlockParam{
			Text: "Summarise the context.", CacheControl: anthropic.NewCacheControlEphemeralParam()}})},
		Metadata: anthropic.MetadataParam{UserID: anthropic.String("user-42")},
	}
}

// checkNative checks what reached the provider: the client's body as it
// sent it but for the served model name, on /v1/messages, with the
// provider's key and version and the client's beta header, and nothing of
// the client's credentials.
func (ae *anthropicEnv) checkNative(t *testing.T, sent []byte) {
	t.Helper()
	got := ae.fake.Last(t)
	if want := anthropicapi.WithModel(sent, anthropicServed); !bytes.Equal(got.Body, want) {
		t.Errorf("the provider got  %s\nwant the client's body %s", got.Body, want)
	}
	var m struct {
		Model  string `json:"model"`
		System []struct {
			CacheControl map[string]any `json:"cache_control"`
		} `json:"system"`
		Messages []struct {
			Content []struct {
				CacheControl map[string]any `json:"cache_control"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(got.Body, &m); err != nil {
		t.Fatal(err)
	}
	if m.Model != anthropicServed || len(m.System) != 1 || m.System[0].CacheControl["type"] != "ephemeral" ||
		len(m.Messages) != 1 || len(m.Messages[0].Content) != 1 || m.Messages[0].Content[0].CacheControl["type"] != "ephemeral" {
		t.Errorf("the provider got %s: want the served model and both cache_control marks", got.Body)
	}
	h := got.Header
	if got.Path != "/v1/messages" || h.Get("X-Api-Key") != anthropicKey || h.Get("Anthropic-Version") != "2023-06-01" ||
		h.Get("Anthropic-Beta") != "extended-cache-ttl-2025-04-11" || h.Get("Authorization") != "" {
		t.Errorf("the provider got %s with headers %v", got.Path, h)
	}
	for k, v := range h {
		if strings.Contains(strings.Join(v, ","), anthropicClientKey) {
			t.Errorf("the client's key reached the provider in %s", k)
		}
	}
}

// TestAnthropicNative: an Anthropic client's request to an Anthropic
// provider goes through natively, cache_control and all, and comes back
// as Anthropic sent it, metered with the cache reads and writes.
func TestAnthropicNative(t *testing.T) {
	const prompt = anthropictest.InputTokens + anthropictest.CacheReadTokens + anthropictest.CacheCreationTokens

	t.Run("message", func(t *testing.T) {
		ae := newAnthropicEnv(t)
		client, sent := ae.nativeClient()
		var raw *http.Response
		msg, err := client.Messages.New(t.Context(), cachedParams(), aoption.WithResponseInto(&raw))
		if err != nil {
			t.Fatal(err)
		}
		ae.checkNative(t, sent.last(t))
		if msg.ID != "msg_01Fake" || msg.Model != anthropicServed || len(msg.Content) != 1 || msg.Content[0].Text != "Hello!" {
			t.Errorf("message %+v", msg)
		}
		if u := msg.Usage; u.InputTokens != anthropictest.InputTokens || u.CacheReadInputTokens != anthropictest.CacheReadTokens ||
			u.CacheCreationInputTokens != anthropictest.CacheCreationTokens || u.OutputTokens != 3 {
			t.Errorf("usage %+v: want the provider's", u)
		}
		if raw.Header.Get("Request-Id") != "req_fake0123" {
			t.Errorf("the provider's request-id did not come back: %v", raw.Header)
		}
		ev := ae.usageEvent(t, raw.Header.Get(RequestIDHeader))
		if ev.GetApi() != "messages" || ev.GetTargetType() != "Anthropic" || ev.GetPromptTokens() != prompt ||
			ev.GetCachedPromptTokens() != anthropictest.CacheReadTokens || ev.GetCompletionTokens() != 3 || ev.GetStatusCode() != http.StatusOK {
			t.Errorf("usage event %v", ev)
		}
	})

	t.Run("stream", func(t *testing.T) {
		ae := newAnthropicEnv(t)
		client, sent := ae.nativeClient()
		ae.fake.Enqueue(anthropictest.Reply{Events: anthropictest.TextStream(anthropicServed, "Hel", "lo", "!"), Split: true})
		var raw *http.Response
		stream := client.Messages.NewStreaming(t.Context(), cachedParams(), aoption.WithResponseInto(&raw))
		var acc anthropic.Message
		for stream.Next() {
			if err := acc.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		stream.Close()
		ae.checkNative(t, sent.last(t))
		if acc.ID != "msg_01FakeStream" || len(acc.Content) != 1 || acc.Content[0].Text != "Hello!" || acc.StopReason != anthropic.StopReasonEndTurn {
			t.Errorf("message %+v", acc)
		}
		if u := acc.Usage; u.InputTokens != anthropictest.InputTokens || u.CacheReadInputTokens != anthropictest.CacheReadTokens ||
			u.CacheCreationInputTokens != anthropictest.CacheCreationTokens || u.OutputTokens != 3 {
			t.Errorf("usage %+v: want the provider's", u)
		}
		ev := ae.usageEvent(t, raw.Header.Get(RequestIDHeader))
		if !ev.GetStream() || ev.GetPromptTokens() != prompt || ev.GetCachedPromptTokens() != anthropictest.CacheReadTokens ||
			ev.GetCompletionTokens() != 3 || ev.GetOutcome() != "ok" || ev.GetTtftSeconds() <= 0 {
			t.Errorf("usage event %v", ev)
		}
	})

	t.Run("the stream's bytes are Anthropic's", func(t *testing.T) {
		ae := newAnthropicEnv(t)
		events := anthropictest.TextStream(anthropicServed, "a", "b")
		ae.fake.Enqueue(anthropictest.Reply{Events: events})
		body := `{"model":"` + testModel + `","max_tokens":8,"stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`
		resp := ae.post(t, "/v1/messages", body, map[string]string{"anthropic-version": "2023-06-01"})
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var want strings.Builder
		for _, ev := range events {
			want.WriteString(ev.String())
		}
		if resp.StatusCode != http.StatusOK || string(got) != want.String() {
			t.Errorf("status %d, stream\n%s\nwant\n%s", resp.StatusCode, got, want.String())
		}
		if sentBody := ae.fake.Last(t).Body; !bytes.Equal(sentBody, anthropicapi.WithModel([]byte(body), anthropicServed)) {
			t.Errorf("the provider got %s", sentBody)
		}
	})

	t.Run("a stream the provider fails", func(t *testing.T) {
		ae := newAnthropicEnv(t)
		events := anthropictest.TextStream(anthropicServed, "Hel", "lo")[:4]
		events = append(events, anthropictest.StreamError("overloaded_error", "Overloaded"))
		ae.fake.Enqueue(anthropictest.Reply{Events: events})
		body := `{"model":"` + testModel + `","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
		resp := ae.post(t, "/v1/messages", body, map[string]string{"anthropic-version": "2023-06-01"})
		got, _ := io.ReadAll(resp.Body) // the connection is cut after the error event
		resp.Body.Close()
		if n := strings.Count(string(got), "event: error\n"); n != 1 || !strings.HasSuffix(string(got), events[len(events)-1].String()) {
			t.Errorf("stream %s: want it to end with the provider's error event, once", got)
		}
		if ev := ae.usageEvent(t, resp.Header.Get(RequestIDHeader)); ev.GetOutcome() != bus.UsageOutcomeUpstreamBroken || ev.GetPromptTokens() != prompt {
			t.Errorf("usage event %v: want upstream_broken, with the input counted", ev)
		}
	})

	t.Run("errors are Anthropic's", func(t *testing.T) {
		ae := newAnthropicEnv(t)
		client, _ := ae.nativeClient()
		ae.fake.Enqueue(anthropictest.Error(http.StatusBadRequest, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"))
		var apiErr *anthropic.Error
		_, err := client.Messages.New(t.Context(), cachedParams())
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.RawJSON(), `"type":"invalid_request_error"`) ||
			!strings.Contains(apiErr.RawJSON(), "prompt is too long") {
			t.Errorf("error %v", err)
		}
		// The provider refusing the gateway's key is no fault of the
		// client's key: a 502, and the key is not quoted.
		ae.fake.Enqueue(anthropictest.Error(http.StatusUnauthorized, "authentication_error", "invalid x-api-key "+anthropicKey))
		_, err = client.Messages.New(t.Context(), cachedParams())
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadGateway || !strings.Contains(apiErr.RawJSON(), `"type":"api_error"`) ||
			strings.Contains(apiErr.RawJSON(), anthropicKey) {
			t.Errorf("error %v", err)
		}
	})
}

// TestAnthropicNativeFailover: a request may fail over between an
// Anthropic provider taking it natively and a worker taking its
// translation to chat completions, either way round; when every target
// fails, the client gets the first failure in its own API.
func TestAnthropicNativeFailover(t *testing.T) {
	provider := func(ae *anthropicEnv) *routerv1.Target {
		return &routerv1.Target{Id: "provider/claude", Url: ae.fake.URL, Kind: routerv1.TargetKind_TARGET_KIND_PROVIDER,
			Provider: "claude", ServedModel: anthropicServed, Type: "Anthropic"}
	}

	t.Run("native first, then translated", func(t *testing.T) {
		ae := newAnthropicEnv(t)
		worker := newVLLM(t, modeOK)
		ae.router.setTargets(testModel, provider(ae), worker.target("w"))
		ae.fake.Enqueue(anthropictest.Error(529, "overloaded_error", "Overloaded"))
		client, _ := ae.nativeClient()
		var raw *http.Response
		msg, err := client.Messages.New(t.Context(), cachedParams(), aoption.WithResponseInto(&raw))
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Content) != 1 || msg.Content[0].Text != "Hello world!" || msg.Model != testModel {
			t.Errorf("message %+v: want the worker's answer, translated", msg)
		}
		if len(ae.fake.Requests()) != 1 || worker.hits.Load() != 1 {
			t.Errorf("provider got %d requests, worker %d", len(ae.fake.Requests()), worker.hits.Load())
		}
		var chat struct {
			Model    string `json:"model"`
			Messages []any  `json:"messages"`
		}
		if err := json.Unmarshal(worker.lastBody(), &chat); err != nil || chat.Model != testModel || len(chat.Messages) != 2 {
			t.Errorf("the worker got %s: want the chat translation", worker.lastBody())
		}
		ev := ae.usageEvent(t, raw.Header.Get(RequestIDHeader))
		if ev.GetAttempts() != 2 || ev.GetEndpointId() != "w" || ev.GetPromptTokens() != promptTokens {
			t.Errorf("usage event %v", ev)
		}
		comps := ae.completions(t, raw.Header.Get(RequestIDHeader), 2)
		for _, c := range comps {
			if c.GetEndpointId() == "provider/claude" && !c.GetUpstreamFailed() {
				t.Errorf("the provider's 529 was not reported as its failure: %v", c)
			}
		}
	})

	t.Run("translated first, then native", func(t *testing.T) {
		ae := newAnthropicEnv(t)
		dead := newVLLM(t, modeFail500)
		ae.router.setTargets(testModel, dead.target("dead"), provider(ae))
		client, sent := ae.nativeClient()
		stream := client.Messages.NewStreaming(t.Context(), cachedParams())
		var acc anthropic.Message
		for stream.Next() {
			if err := acc.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		stream.Close()
		ae.checkNative(t, sent.last(t))
		if acc.ID != "msg_01FakeStream" || acc.Usage.CacheCreationInputTokens != anthropictest.CacheCreationTokens {
			t.Errorf("message %+v: want the provider's, untranslated", acc)
		}
	})

	t.Run("every target fails: the first failure, in Anthropic's shape", func(t *testing.T) {
		ae := newAnthropicEnv(t)
		dead := newVLLM(t, modeFail500)
		ae.router.setTargets(testModel, provider(ae), dead.target("dead"))
		ae.fake.Enqueue(anthropictest.Error(529, "overloaded_error", "Overloaded"))
		client, _ := ae.nativeClient()
		_, err := client.Messages.New(t.Context(), cachedParams())
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 529 || !strings.Contains(apiErr.RawJSON(), `"type":"overloaded_error"`) {
			t.Errorf("error %v: want the provider's 529 as it sent it", err)
		}

		// And the other way round: the worker's OpenAI error, translated.
		ae2 := newAnthropicEnv(t)
		dead2 := newVLLM(t, modeFail500)
		ae2.router.setTargets(testModel, dead2.target("dead"), provider(ae2))
		ae2.fake.Enqueue(anthropictest.Error(529, "overloaded_error", "Overloaded"))
		client2, _ := ae2.nativeClient()
		_, err = client2.Messages.New(t.Context(), cachedParams())
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusInternalServerError || !strings.Contains(apiErr.RawJSON(), `"type":"error"`) ||
			!strings.Contains(apiErr.RawJSON(), "engine dead") {
			t.Errorf("error %v: want the worker's 500 in Anthropic's envelope", err)
		}
	})
}
