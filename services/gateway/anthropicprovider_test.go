package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/upstream/anthropic/anthropictest"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

const (
	anthropicKey    = "sk-ant-api03-gateway-test-5c1e0d2b"
	anthropicServed = "claude-sonnet-4-5"
)

// anthropicEnv is a gateway with policyd serving an InferenceProvider of
// type Anthropic pointing at the fake Messages API, the router picking it,
// and the gateway's logs kept.
type anthropicEnv struct {
	*env
	fake *anthropictest.Server
	logs *capturedLog
}

func newAnthropicEnv(t *testing.T) *anthropicEnv {
	t.Helper()
	t.Setenv("GATEWAY_TEST_ANTHROPIC_KEY", anthropicKey)
	fake := anthropictest.New(t, anthropicKey)
	catalog := fmt.Sprintf(`apiVersion: switchyard.dev/v1alpha1
kind: InferenceProvider
metadata: {name: claude, namespace: inference}
spec:
  type: Anthropic
  baseURL: %[1]s
  credentials: {env: GATEWAY_TEST_ANTHROPIC_KEY}
  models:
  - {name: %[2]s, servedName: %[3]s}
`, fake.URL, testModel, anthropicServed)
	e, logs := providerGateway(t, catalog, "")
	e.router.setTargets(testModel, &routerv1.Target{Id: "provider/claude", Url: fake.URL,
		Kind: routerv1.TargetKind_TARGET_KIND_PROVIDER, Provider: "claude", ServedModel: anthropicServed, Type: "Anthropic"})
	ae := &anthropicEnv{env: e, fake: fake, logs: logs}
	t.Cleanup(func() {
		if logs.String() == "" {
			t.Errorf("the gateway logged nothing: the key check below would prove nothing")
		}
		if strings.Contains(logs.String(), anthropicKey) {
			t.Errorf("the Anthropic key reached the gateway's logs")
		}
	})
	return ae
}

func (ae *anthropicEnv) openai() *openai.Client {
	c := openai.NewClient(option.WithBaseURL(ae.url+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	return &c
}

var weatherTool = openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
	Name:        "get_weather",
	Description: openai.String("Current weather in a city"),
	Parameters:  shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
})

// sentMessages is what the fake got, decoded.
type sentMessages struct {
	Model     string `json:"model"`
	MaxTokens int    `json:"max_tokens"`
	Stream    bool   `json:"stream"`
	System    []struct {
		Text string `json:"text"`
	} `json:"system"`
	Messages []struct {
		Role    string            `json:"role"`
		Content []json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name        string         `json:"name"`
		InputSchema map[string]any `json:"input_schema"`
	} `json:"tools"`
}

func (ae *anthropicEnv) sent(t *testing.T) (anthropictest.Request, sentMessages) {
	t.Helper()
	r := ae.fake.Last(t)
	var m sentMessages
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("the fake got %s: %v", r.Body, err)
	}
	if r.Header.Get("X-Api-Key") != anthropicKey || r.Header.Get("Anthropic-Version") == "" || r.Header.Get("Authorization") != "" {
		t.Errorf("the provider got headers %v", r.Header)
	}
	if m.Model != anthropicServed {
		t.Errorf("the provider got model %q, want the served name %q", m.Model, anthropicServed)
	}
	return r, m
}

// TestAnthropicProviderChat: an OpenAI client's chat completion with a
// tool, served by an Anthropic provider: the Messages request carries the
// system prompt, the tool and the provider's key, the tool call comes back
// as tool_calls, and the usage is metered with the cache reads.
func TestAnthropicProviderChat(t *testing.T) {
	ae := newAnthropicEnv(t)
	ae.fake.Enqueue(anthropictest.Reply{Body: anthropictest.ToolUseMessage(anthropicServed, "Let me look.", "toolu_01", "get_weather", `{"city":"Oslo"}`)})
	var raw *http.Response
	resp, err := ae.openai().Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model: testModel,
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("Be brief."),
			openai.UserMessage("Weather in Oslo?"),
		},
		Tools:     []openai.ChatCompletionToolUnionParam{weatherTool},
		MaxTokens: openai.Int(50),
	}, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	_, m := ae.sent(t)
	if len(m.System) != 1 || m.System[0].Text != "Be brief." || len(m.Messages) != 1 || m.Messages[0].Role != "user" ||
		len(m.Tools) != 1 || m.Tools[0].Name != "get_weather" || m.Tools[0].InputSchema["type"] != "object" || m.MaxTokens != 50 || m.Stream {
		t.Errorf("the provider got %+v", m)
	}
	ch := resp.Choices[0]
	if ch.FinishReason != "tool_calls" || ch.Message.Content != "Let me look." || len(ch.Message.ToolCalls) != 1 {
		t.Fatalf("choice %+v", ch)
	}
	tc := ch.Message.ToolCalls[0]
	if tc.ID != "toolu_01" || tc.Function.Name != "get_weather" || tc.Function.Arguments != `{"city":"Oslo"}` {
		t.Errorf("tool call %+v", tc)
	}
	wantPrompt := int64(anthropictest.InputTokens + anthropictest.CacheReadTokens + anthropictest.CacheCreationTokens)
	if resp.Usage.PromptTokens != wantPrompt || resp.Usage.PromptTokensDetails.CachedTokens != anthropictest.CacheReadTokens || resp.Usage.CompletionTokens != 9 {
		t.Errorf("usage %+v", resp.Usage)
	}
	ev := ae.usageEvent(t, raw.Header.Get(RequestIDHeader))
	if ev.GetOutcome() != bus.UsageOutcomeOK || ev.GetPromptTokens() != wantPrompt || ev.GetCachedPromptTokens() != anthropictest.CacheReadTokens ||
		ev.GetCompletionTokens() != 9 || ev.GetTargetType() != "Anthropic" || ev.GetProvider() != "claude" {
		t.Errorf("usage event %v", ev)
	}

	// The next turn: the tool call and its result go back as tool_use and
	// tool_result blocks.
	ae.fake.Enqueue(anthropictest.Reply{Body: anthropictest.TextMessage(anthropicServed, "Snowing.")})
	resp, err = ae.openai().Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model: testModel,
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage("Weather in Oslo?"),
			resp.Choices[0].Message.ToParam(),
			openai.ToolMessage("-3C, snow", tc.ID),
		},
		Tools: []openai.ChatCompletionToolUnionParam{weatherTool},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content != "Snowing." || resp.Choices[0].FinishReason != "stop" {
		t.Errorf("choice %+v", resp.Choices[0])
	}
	_, m = ae.sent(t)
	if len(m.Messages) != 3 || m.Messages[1].Role != "assistant" || m.Messages[2].Role != "user" || m.MaxTokens <= 0 {
		t.Fatalf("the provider got %+v", m)
	}
	if got := string(m.Messages[1].Content[len(m.Messages[1].Content)-1]); !strings.Contains(got, `"type":"tool_use"`) || !strings.Contains(got, `"id":"toolu_01"`) {
		t.Errorf("assistant turn ends with %s, want the tool_use", got)
	}
	if got := string(m.Messages[2].Content[0]); !strings.Contains(got, `"type":"tool_result"`) || !strings.Contains(got, `"tool_use_id":"toolu_01"`) {
		t.Errorf("user turn starts with %s, want the tool_result", got)
	}
}

// TestAnthropicProviderStream: a streamed chat completion with a tool call,
// split across TCP writes by the fake, accumulated by the OpenAI SDK; the
// usage chunk the gateway asked for is metered and not shown to a client
// that did not ask for it.
func TestAnthropicProviderStream(t *testing.T) {
	ae := newAnthropicEnv(t)
	ae.fake.Enqueue(anthropictest.Reply{Events: anthropictest.ToolUseStream(anthropicServed, "Checking.", "toolu_02", "get_weather", `{"ci`, `ty": "Oslo"}`), Split: true})
	var raw *http.Response
	stream := ae.openai().Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
		Model:    testModel,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Oslo?")},
		Tools:    []openai.ChatCompletionToolUnionParam{weatherTool},
	}, option.WithResponseInto(&raw))
	var acc openai.ChatCompletionAccumulator
	chunks, usageChunks := 0, 0
	for stream.Next() {
		c := stream.Current()
		chunks++
		if c.Usage.PromptTokens > 0 {
			usageChunks++
		}
		if !acc.AddChunk(c) {
			t.Fatalf("the accumulator refused chunk %d: %s", chunks, c.RawJSON())
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	_ = stream.Close()
	_, m := ae.sent(t)
	if !m.Stream || len(m.Tools) != 1 {
		t.Errorf("the provider got %+v", m)
	}
	if len(acc.Choices) != 1 {
		t.Fatalf("accumulated %+v", acc.ChatCompletion)
	}
	ch := acc.Choices[0]
	if ch.Message.Content != "Checking." || ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 {
		t.Fatalf("accumulated choice %+v", ch)
	}
	if tc := ch.Message.ToolCalls[0]; tc.ID != "toolu_02" || tc.Function.Name != "get_weather" || tc.Function.Arguments != `{"city": "Oslo"}` {
		t.Errorf("tool call %+v", tc)
	}
	if usageChunks != 0 {
		t.Errorf("the client got %d usage chunks it did not ask for", usageChunks)
	}
	wantPrompt := int64(anthropictest.InputTokens + anthropictest.CacheReadTokens + anthropictest.CacheCreationTokens)
	ev := ae.usageEvent(t, raw.Header.Get(RequestIDHeader))
	if ev.GetOutcome() != bus.UsageOutcomeOK || !ev.GetStream() || ev.GetPromptTokens() != wantPrompt ||
		ev.GetCachedPromptTokens() != anthropictest.CacheReadTokens || ev.GetCompletionTokens() != 9 || ev.GetTtftSeconds() <= 0 {
		t.Errorf("usage event %v", ev)
	}

	// A client that asks for the usage gets it in the last chunk.
	ae.fake.Enqueue(anthropictest.Reply{Events: anthropictest.TextStream(anthropicServed, "Hel", "lo")})
	stream = ae.openai().Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
		Model:         testModel,
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	acc = openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	_ = stream.Close()
	if acc.Choices[0].Message.Content != "Hello" || acc.Usage.PromptTokens != wantPrompt || acc.Usage.CompletionTokens != 2 {
		t.Errorf("accumulated %q usage %+v", acc.Choices[0].Message.Content, acc.Usage)
	}
}

// TestAnthropicProviderErrors: Anthropic's errors reach the OpenAI client
// in OpenAI's shape; a mid-stream error event is a broken upstream, metered
// so and ended with the gateway's error event, which the SDK raises; requests Messages cannot serve
// are refused before the provider is called.
func TestAnthropicProviderErrors(t *testing.T) {
	ae := newAnthropicEnv(t)
	chat := func(params openai.ChatCompletionNewParams) error {
		_, err := ae.openai().Chat.Completions.New(t.Context(), params)
		return err
	}
	hi := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}

	t.Run("a refused key is the gateway's problem", func(t *testing.T) {
		t.Setenv("GATEWAY_TEST_ANTHROPIC_KEY", anthropicKey+"-rotated")
		var apiErr *openai.Error
		if err := chat(openai.ChatCompletionNewParams{Model: testModel, Messages: hi}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadGateway ||
			apiErr.Code != "authentication_error" || strings.Contains(apiErr.Error(), anthropicKey) {
			t.Fatalf("error %v, want a 502 authentication_error without the key", err)
		}
	})
	t.Run("n is refused", func(t *testing.T) {
		n := len(ae.fake.Requests())
		var apiErr *openai.Error
		if err := chat(openai.ChatCompletionNewParams{Model: testModel, Messages: hi, N: openai.Int(2)}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "n" {
			t.Fatalf("error %v, want a 400 about n", err)
		}
		if len(ae.fake.Requests()) != n {
			t.Errorf("the refused request reached the provider")
		}
	})
	t.Run("completions is refused", func(t *testing.T) {
		_, err := ae.openai().Completions.New(t.Context(), openai.CompletionNewParams{
			Model: openai.CompletionNewParamsModel(testModel), Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hi")},
		})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Code != "unsupported_endpoint" {
			t.Fatalf("error %v, want the 400 unsupported_endpoint", err)
		}
	})
	t.Run("mid-stream error", func(t *testing.T) {
		evs := anthropictest.TextStream(anthropicServed, "Par", "is")
		ae.fake.Enqueue(anthropictest.Reply{Events: append(evs[:4:4], anthropictest.StreamError("overloaded_error", "Overloaded"))})
		var raw *http.Response
		stream := ae.openai().Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{Model: testModel, Messages: hi}, option.WithResponseInto(&raw))
		var text strings.Builder
		for stream.Next() {
			for _, ch := range stream.Current().Choices {
				text.WriteString(ch.Delta.Content)
			}
		}
		err := stream.Err()
		_ = stream.Close()
		if err == nil || !strings.Contains(err.Error(), "upstream_broken") {
			t.Fatalf("stream error %v, want the gateway's upstream_broken error event", err)
		}
		if text.String() != "Par" {
			t.Errorf("text before the error %q", text.String())
		}
		ev := ae.usageEvent(t, raw.Header.Get(RequestIDHeader))
		if ev.GetOutcome() != bus.UsageOutcomeUpstreamBroken {
			t.Errorf("usage outcome %q, want %q", ev.GetOutcome(), bus.UsageOutcomeUpstreamBroken)
		}
	})
	// An answer with a Retry-After keeps the provider out for that long
	// (services/gateway/cooldown.go), so these two get gateways of their own.
	t.Run("overloaded is a 503", func(t *testing.T) {
		ae := newAnthropicEnv(t)
		chat := func(params openai.ChatCompletionNewParams) error {
			_, err := ae.openai().Chat.Completions.New(t.Context(), params)
			return err
		}
		ae.fake.Enqueue(anthropictest.Error(529, "overloaded_error", "Overloaded"))
		var apiErr *openai.Error
		if err := chat(openai.ChatCompletionNewParams{Model: testModel, Messages: hi}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable ||
			apiErr.Code != "overloaded_error" || apiErr.Message != "Overloaded" {
			t.Fatalf("error %v, want the 503 overloaded_error", err)
		}
		if got := apiErr.Response.Header.Get("Retry-After"); got != "7" {
			t.Errorf("Retry-After %q", got)
		}
	})
	t.Run("rate limited is a 429 with retry-after", func(t *testing.T) {
		ae := newAnthropicEnv(t)
		chat := func(params openai.ChatCompletionNewParams) error {
			_, err := ae.openai().Chat.Completions.New(t.Context(), params)
			return err
		}
		ae.fake.Enqueue(anthropictest.Error(429, "rate_limit_error", "rate limited"))
		var apiErr *openai.Error
		if err := chat(openai.ChatCompletionNewParams{Model: testModel, Messages: hi}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Type != "rate_limit_error" {
			t.Fatalf("error %v", err)
		}
		if got := apiErr.Response.Header.Get("Retry-After"); got != "7" {
			t.Errorf("Retry-After %q", got)
		}
	})
}
