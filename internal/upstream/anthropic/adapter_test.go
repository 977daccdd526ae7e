package anthropic_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/upstream"
	"github.com/switchyard-dev/switchyard/internal/upstream/anthropic"
	"github.com/switchyard-dev/switchyard/internal/upstream/anthropic/anthropictest"
	_ "github.com/switchyard-dev/switchyard/internal/upstream/builtin"
)

const key = "sk-ant-api03-test-0123456789"

func roundTrip(t *testing.T, fake *anthropictest.Server, path, body string) *http.Response {
	t.Helper()
	a, err := upstream.NewSet(http.DefaultTransport).For("Anthropic")
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"X-Request-Id": {"req-1"}, "Accept": {"*/*"}, "Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
	resp, err := a.RoundTrip(context.Background(), upstream.Target{Type: "Anthropic", BaseURL: fake.URL + "/", APIKey: key}, upstream.Request{Path: path, Body: []byte(body), Header: h})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func decode[T any](t *testing.T, r io.Reader) T {
	t.Helper()
	var v T
	if err := json.NewDecoder(r).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

type openAIError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func TestRoundTripMessage(t *testing.T) {
	fake := anthropictest.New(t, key)
	fake.Enqueue(anthropictest.Reply{Body: anthropictest.ToolUseMessage("claude-x", "Checking.", "toolu_1", "get_weather", `{"city":"Paris"}`)})
	resp := roundTrip(t, fake, "/v1/chat/completions", `{"model":"claude-x","messages":[{"role":"user","content":"weather?"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}`)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	got := fake.Last(t)
	if got.Path != "/v1/messages" || got.Header.Get("X-Api-Key") != key || got.Header.Get("Anthropic-Version") != anthropic.APIVersion ||
		got.Header.Get("Content-Type") != "application/json" || got.Header.Get("Authorization") != "" ||
		got.Header.Get("X-Request-Id") != "req-1" || got.Header.Get("Traceparent") == "" || got.Header.Get("Accept") != "application/json" {
		t.Errorf("the provider got %s %v", got.Path, got.Header)
	}
	if resp.Header.Get("Request-Id") != "req_fake0123" {
		t.Errorf("the provider's request-id header was not kept: %v", resp.Header)
	}
	cc := decode[struct {
		Object  string
		Choices []struct {
			Message struct {
				Content   *string
				ToolCalls []struct {
					ID       string
					Type     string
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			PromptTokens        int `json:"prompt_tokens"`
			CompletionTokens    int `json:"completion_tokens"`
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		}
	}](t, resp.Body)
	if cc.Object != "chat.completion" || len(cc.Choices) != 1 {
		t.Fatalf("got %+v", cc)
	}
	ch := cc.Choices[0]
	if ch.Message.Content == nil || *ch.Message.Content != "Checking." || ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 ||
		ch.Message.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` || ch.Message.ToolCalls[0].ID != "toolu_1" {
		t.Errorf("choice %+v", ch)
	}
	wantPrompt := anthropictest.InputTokens + anthropictest.CacheReadTokens + anthropictest.CacheCreationTokens
	if cc.Usage.PromptTokens != wantPrompt || cc.Usage.PromptTokensDetails.CachedTokens != anthropictest.CacheReadTokens || cc.Usage.CompletionTokens != 9 {
		t.Errorf("usage %+v, want prompt %d cached %d completion 9", cc.Usage, wantPrompt, anthropictest.CacheReadTokens)
	}
}

// TestRoundTripStreamChunkByChunk: the client's first chunks arrive while
// the provider is still holding back the rest of its stream.
func TestRoundTripStreamChunkByChunk(t *testing.T) {
	fake := anthropictest.New(t, key)
	gate := make(chan struct{})
	fake.Enqueue(anthropictest.Reply{Events: anthropictest.TextStream("claude-x", "Hel", "lo", "!"), Split: true, HoldAfter: 4, Gate: gate})
	resp := roundTrip(t, fake, "/v1/chat/completions", `{"model":"claude-x","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if got := fake.Last(t).Header.Get("Accept"); got != "text/event-stream" {
		t.Errorf("Accept %q", got)
	}
	br := bufio.NewReader(resp.Body)
	next := func() string {
		t.Helper()
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if line = strings.TrimSpace(line); line != "" {
				return line
			}
		}
	}
	timer := time.AfterFunc(5*time.Second, func() { close(gate) })
	// message_start, content_block_start, ping, the first delta: sent before the gate.
	if l := next(); !strings.Contains(l, `"role":"assistant"`) {
		t.Errorf("first chunk %s", l)
	}
	if l := next(); l != ": ping" {
		t.Errorf("second event %s, want the ping", l)
	}
	if l := next(); !strings.Contains(l, `"content":"Hel"`) {
		t.Errorf("third chunk %s", l)
	}
	if !timer.Stop() {
		t.Fatal("the first chunks came only after the provider sent the rest: the stream was buffered")
	}
	close(gate)
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"content":"lo"`, `"content":"!"`, `"finish_reason":"stop"`, `"choices":[],"usage":{"prompt_tokens":18,"completion_tokens":3`, "data: [DONE]"} {
		if !strings.Contains(string(rest), want) {
			t.Errorf("the rest lacks %s:\n%s", want, rest)
		}
	}
}

func TestRoundTripStreamError(t *testing.T) {
	fake := anthropictest.New(t, key)
	evs := anthropictest.TextStream("claude-x", "Par", "is")
	fake.Enqueue(anthropictest.Reply{Events: append(evs[:4:4], anthropictest.StreamError("overloaded_error", "Overloaded"))})
	resp := roundTrip(t, fake, "/v1/chat/completions", `{"model":"claude-x","messages":[{"role":"user","content":"hi"}],"stream":true}`)
	out, err := io.ReadAll(resp.Body)
	var se *anthropic.StreamError
	if !errors.As(err, &se) {
		t.Fatalf("read ended with %v, want a *StreamError", err)
	}
	if !strings.Contains(string(out), `"content":"Par"`) || !strings.HasSuffix(string(out), "\n\n: error: overloaded_error: Overloaded\n\n") {
		t.Errorf("stream before the error:\n%s", out)
	}
}

func TestRoundTripStreamCut(t *testing.T) {
	fake := anthropictest.New(t, key)
	fake.Enqueue(anthropictest.Reply{Events: anthropictest.TextStream("claude-x", "Par", "is")[:4], Cut: true})
	resp := roundTrip(t, fake, "/v1/chat/completions", `{"model":"claude-x","messages":[{"role":"user","content":"hi"}],"stream":true}`)
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Fatal("a stream cut before message_stop read as complete")
	}
}

func TestRoundTripErrors(t *testing.T) {
	tests := []struct {
		name       string
		reply      *anthropictest.Reply
		key        string
		path, body string
		wantStatus int
		wantType   string
		wantCode   string
		retryAfter string
	}{
		{name: "invalid request", reply: ptr(anthropictest.Error(400, "invalid_request_error", "temperature: range: 0..1")), wantStatus: 400, wantType: "invalid_request_error", wantCode: "invalid_request_error"},
		{name: "bad key", key: "sk-ant-wrong-key", wantStatus: 502, wantType: "server_error", wantCode: "authentication_error"},
		{name: "permission", reply: ptr(anthropictest.Error(403, "permission_error", "no")), wantStatus: 502, wantType: "server_error", wantCode: "permission_error"},
		{name: "not found", reply: ptr(anthropictest.Error(404, "not_found_error", "model: claude-nope")), wantStatus: 404, wantType: "not_found_error", wantCode: "not_found_error"},
		{name: "too large", reply: ptr(anthropictest.Error(413, "request_too_large", "too big")), wantStatus: 413, wantType: "invalid_request_error", wantCode: "request_too_large"},
		{name: "rate limited", reply: ptr(anthropictest.Error(429, "rate_limit_error", "slow down")), wantStatus: 429, wantType: "rate_limit_error", wantCode: "rate_limit_error", retryAfter: "7"},
		{name: "api error", reply: ptr(anthropictest.Error(500, "api_error", "oops")), wantStatus: 500, wantType: "server_error", wantCode: "api_error"},
		{name: "overloaded", reply: ptr(anthropictest.Error(529, "overloaded_error", "Overloaded")), wantStatus: 503, wantType: "service_unavailable_error", wantCode: "overloaded_error", retryAfter: "7"},
		{name: "overloaded stream", reply: ptr(anthropictest.Error(529, "overloaded_error", "Overloaded")), body: `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`, wantStatus: 503, wantType: "service_unavailable_error", wantCode: "overloaded_error", retryAfter: "7"},
		{name: "unreadable message", reply: &anthropictest.Reply{Body: `{"type":"message","content":"x"}`}, wantStatus: 502, wantType: "server_error", wantCode: "upstream_error"},
		{name: "completions", path: "/v1/completions", body: `{"model":"m","prompt":"hi"}`, wantStatus: 400, wantType: "invalid_request_error", wantCode: "unsupported_endpoint"},
		{name: "embeddings", path: "/v1/embeddings", body: `{"model":"m","input":"hi"}`, wantStatus: 404, wantType: "not_found_error", wantCode: "unsupported_endpoint"},
		{name: "refused by the translation", body: `{"model":"m","n":3,"messages":[{"role":"user","content":"hi"}]}`, wantStatus: 400, wantType: "invalid_request_error", wantCode: "unsupported_parameter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := anthropictest.New(t, cmp(tt.key, key)) // another key: ours is refused
			if tt.reply != nil {
				fake.Enqueue(*tt.reply)
			}
			path, body := cmp(tt.path, "/v1/chat/completions"), cmp(tt.body, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
			resp := roundTrip(t, fake, path, body)
			if resp.StatusCode != tt.wantStatus || resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("status %d %q, want %d JSON", resp.StatusCode, resp.Header.Get("Content-Type"), tt.wantStatus)
			}
			raw, _ := io.ReadAll(resp.Body)
			var e openAIError
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatalf("%v: %s", err, raw)
			}
			if e.Error.Type != tt.wantType || e.Error.Code == nil || *e.Error.Code != tt.wantCode || e.Error.Message == "" {
				t.Errorf("error %s, want type %s code %s", raw, tt.wantType, tt.wantCode)
			}
			if got := resp.Header.Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tt.retryAfter)
			}
			if strings.Contains(string(raw), key) {
				t.Errorf("the key is in the answer")
			}
			if (tt.path != "" || strings.Contains(body, `"n":3`)) && len(fake.Requests()) != 0 {
				t.Errorf("a refused request reached the provider")
			}
		})
	}
}

func TestRoundTripTransportError(t *testing.T) {
	a, _ := upstream.NewSet(http.DefaultTransport).For("Anthropic")
	_, err := a.RoundTrip(context.Background(), upstream.Target{Type: "Anthropic", BaseURL: "http://127.0.0.1:1/v1", APIKey: key},
		upstream.Request{Path: "/v1/chat/completions", Body: []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)})
	if err == nil {
		t.Fatal("no error from a closed port")
	}
	if strings.Contains(err.Error(), key) {
		t.Errorf("the key is in the error: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

func cmp(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
