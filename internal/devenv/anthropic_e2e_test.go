package devenv_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"

	"github.com/switchyard-dev/switchyard/internal/devenv"
)

func anthropicClient(s *devenv.Stack) anthropic.Client {
	return anthropic.NewClient(
		aoption.WithBaseURL(s.GatewayURL()),
		aoption.WithAPIKey("unused"),
		aoption.WithMaxRetries(0),
	)
}

// TestEndToEndWithAnthropicClient drives the gateway's Messages API with
// Anthropic's own Go SDK, through a real router to simulated workers.
func TestEndToEndWithAnthropicClient(t *testing.T) {
	s := startStack(t)
	c := anthropicClient(s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	t.Run("non-streaming", func(t *testing.T) {
		msg, err := c.Messages.New(ctx, anthropic.MessageNewParams{
			Model:     model,
			MaxTokens: 12,
			System:    []anthropic.TextBlockParam{{Text: "You are terse."}},
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Name three rivers."))},
		})
		if err != nil {
			t.Fatalf("messages: %v", err)
		}
		if !strings.HasPrefix(msg.ID, "msg_") || msg.Role != "assistant" || string(msg.Model) != model {
			t.Errorf("id %q role %q model %q", msg.ID, msg.Role, msg.Model)
		}
		if len(msg.Content) != 1 || msg.Content[0].Type != "text" || strings.TrimSpace(msg.Content[0].Text) == "" {
			t.Fatalf("content = %+v", msg.Content)
		}
		if msg.StopReason != anthropic.StopReasonMaxTokens {
			t.Errorf("stop_reason = %q, want max_tokens", msg.StopReason)
		}
		if msg.Usage.OutputTokens != 12 || msg.Usage.InputTokens+msg.Usage.CacheReadInputTokens <= 0 {
			t.Errorf("usage = %+v", msg.Usage)
		}
	})

	t.Run("streaming accumulates into a message", func(t *testing.T) {
		stream := c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
			Model:     model,
			MaxTokens: 40,
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Tell me a long story."))},
		})
		defer stream.Close()
		var acc anthropic.Message
		var types []string
		for stream.Next() {
			ev := stream.Current()
			if len(types) == 0 || types[len(types)-1] != ev.Type {
				types = append(types, ev.Type)
			}
			if err := acc.Accumulate(ev); err != nil {
				t.Fatalf("accumulate %s: %v", ev.Type, err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		want := []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
		if strings.Join(types, ",") != strings.Join(want, ",") {
			t.Errorf("event types = %v, want %v (ping is not surfaced by the SDK)", types, want)
		}
		if len(acc.Content) != 1 || acc.Content[0].Text == "" {
			t.Fatalf("content = %+v", acc.Content)
		}
		if acc.StopReason != anthropic.StopReasonMaxTokens || acc.Usage.OutputTokens != 40 || acc.Usage.InputTokens <= 0 {
			t.Errorf("stop_reason %q usage %+v", acc.StopReason, acc.Usage)
		}
	})

	t.Run("tool definitions and a tool_result turn", func(t *testing.T) {
		msg, err := c.Messages.New(ctx, anthropic.MessageNewParams{
			Model:     model,
			MaxTokens: 8,
			Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
				Name:        "get_weather",
				Description: anthropic.String("Weather by city"),
				InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}},
			}}},
			Messages: []anthropic.MessageParam{
				anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Oslo?")),
				anthropic.NewAssistantMessage(anthropic.NewToolUseBlock("toolu_1", map[string]any{"city": "Oslo"}, "get_weather")),
				anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_1", "-3 C, snow", false)),
			},
		})
		if err != nil {
			t.Fatalf("messages: %v", err)
		}
		if msg.Usage.OutputTokens != 8 || len(msg.Content) == 0 {
			t.Errorf("usage %+v content %+v", msg.Usage, msg.Content)
		}
	})

	t.Run("count_tokens is the prompt the worker sees", func(t *testing.T) {
		params := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Count me, " + strings.Repeat("word ", 30)))}
		n, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: model, Messages: params})
		if err != nil {
			t.Fatalf("count_tokens: %v", err)
		}
		msg, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: model, MaxTokens: 1, Messages: params})
		if err != nil {
			t.Fatalf("messages: %v", err)
		}
		if got := msg.Usage.InputTokens + msg.Usage.CacheReadInputTokens; n.InputTokens != got || got <= 0 {
			t.Errorf("count_tokens = %d, the worker's prompt = %d", n.InputTokens, got)
		}
	})

	t.Run("unknown model is a 404 the SDK understands", func(t *testing.T) {
		for name, call := range map[string]func() error{
			"messages": func() error {
				_, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: "no-such-model", MaxTokens: 4,
					Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
				return err
			},
			"count_tokens": func() error {
				_, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "no-such-model",
					Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
				return err
			},
		} {
			var apiErr *anthropic.Error
			if err := call(); !errors.As(err, &apiErr) {
				t.Fatalf("%s: err = %v, want *anthropic.Error", name, err)
			}
			if apiErr.StatusCode != http.StatusNotFound || !strings.Contains(apiErr.RawJSON(), `"not_found_error"`) {
				t.Errorf("%s: status %d body %s", name, apiErr.StatusCode, apiErr.RawJSON())
			}
		}
	})

	t.Run("malformed bodies are 400 invalid_request_error", func(t *testing.T) {
		_, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: model, MaxTokens: 0,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.RawJSON(), "max_tokens") {
			t.Errorf("max_tokens 0: err = %v", err)
		}
		for _, body := range []string{`{"model":"` + model + `","max_tokens":4,"messages":[{"role":"user","content":"hi"}`, `[1]`, `{"model":"` + model + `","max_tokens":4,"messages":[{"role":"robot","content":"hi"}]}`} {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.GatewayURL()+"/v1/messages", strings.NewReader(body))
			req.Header.Set("anthropic-version", "2023-06-01")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var e struct {
				Type  string `json:"type"`
				Error struct{ Type, Message string }
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(raw, &e) != nil || e.Type != "error" || e.Error.Type != "invalid_request_error" || e.Error.Message == "" {
				t.Errorf("%s: %d %s", body, resp.StatusCode, raw)
			}
		}
	})

	t.Run("one conversation through both APIs shares the worker's cache", func(t *testing.T) {
		system := "You are a careful assistant. " + strings.Repeat("Answer precisely and cite the rule you apply. ", 30)
		user := "Which river is longest?"
		oc := client(s)
		first, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:     model,
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system), openai.UserMessage(user)},
			MaxTokens: openai.Int(2),
		})
		if err != nil {
			t.Fatalf("chat: %v", err)
		}
		msg, err := c.Messages.New(ctx, anthropic.MessageNewParams{
			Model:     model,
			MaxTokens: 2,
			System:    []anthropic.TextBlockParam{{Text: system}},
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(user))},
		})
		if err != nil {
			t.Fatalf("messages: %v", err)
		}
		u := msg.Usage
		if u.InputTokens+u.CacheReadInputTokens != first.Usage.PromptTokens {
			t.Errorf("the Messages prompt is %d+%d tokens, the chat prompt %d: the two APIs rendered different prompts",
				u.InputTokens, u.CacheReadInputTokens, first.Usage.PromptTokens)
		}
		if u.CacheReadInputTokens <= 0 {
			t.Errorf("cache_read_input_tokens = %d: the Messages request did not land on the worker caching the chat request's prompt", u.CacheReadInputTokens)
		}
	})
}
