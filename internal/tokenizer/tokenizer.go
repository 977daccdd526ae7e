// Package tokenizer turns requests into token ids. The simulated worker and
// the router use the same code, so both see the same ids for the same
// request — which is what makes prefix-cache routing precise. Everything a
// worker does between an HTTP body and the engine's token ids (chat
// rendering, content flattening, tokenization) lives here.
//
// Two implementations exist: Simple, a small deterministic tokenizer the
// simulator uses by default, and hf (subpackage), a Hugging Face tokenizer
// with the model's Jinja chat template, for real models.
package tokenizer

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
)

// Tokenizer encodes text to token ids and renders chat conversations to the
// text a model is prompted with.
type Tokenizer interface {
	// Encode tokenizes text. Special-token strings in text (as a chat
	// template writes them) become their reserved ids.
	Encode(text string) []uint32
	// AppendEncode appends the ids of text to dst, like Encode.
	AppendEncode(dst []uint32, text string) []uint32
	// AppendEncodeContext is AppendEncode under ctx: it checks ctx at
	// least every CheckEvery bytes of text and returns ctx's error once
	// ctx is done (dst then holds part of the ids).
	AppendEncodeContext(ctx context.Context, dst []uint32, text string) ([]uint32, error)
	// Decode turns ids back into text.
	Decode(ids []uint32) string
	// ApplyChatTemplate renders a conversation as the model's prompt text.
	ApplyChatTemplate(c *Chat) (string, error)
	// ApplyChatTemplateContext is ApplyChatTemplate under ctx (checked
	// at bounded intervals, its error returned once ctx is done) and a
	// cap on the prompt it renders: beyond maxBytes (0: no cap) it stops
	// with an error wrapping ErrTooLarge.
	ApplyChatTemplateContext(ctx context.Context, c *Chat, maxBytes int) (string, error)
}

// CheckEvery is how much text (in bytes) a tokenizer works through between
// two looks at its context: a millisecond of work or so, so a request
// whose caller gave up stops at once, while the check costs nothing
// measurable.
const CheckEvery = 64 << 10

// ErrTooLarge is the error a rendering beyond its byte cap wraps.
var ErrTooLarge = errors.New("the rendered prompt exceeds its size limit")

// Chat is what a chat template is given for one request: what vLLM's
// OpenAI server hands to the template after parsing the request.
type Chat struct {
	Messages []Message
	// Tools is the request's tools array as sent (nil: none).
	Tools json.RawMessage
	// Kwargs is the request's chat_template_kwargs object (nil: none).
	Kwargs json.RawMessage
	// Documents is the request's documents array as sent (nil: none), for
	// RAG templates.
	Documents json.RawMessage
	// AddGenerationPrompt ends the prompt with the assistant turn opener.
	AddGenerationPrompt bool
	// ContinueFinalMessage ends the prompt inside the final message, so
	// the model continues it (vLLM's continue_final_message): see
	// ContinueFinal.
	ContinueFinalMessage bool
	// ReasoningEffort is the request's reasoning_effort, nil when absent.
	ReasoningEffort *string
}

// ChatRenderer renders a chat as a model's prompt text where the model's
// prompt is not its chat template's: vLLM builds gpt-oss prompts with the
// harmony library, not with the Jinja template the model ships. Errors and
// the byte cap behave as in Tokenizer.ApplyChatTemplateContext.
type ChatRenderer interface {
	RenderChat(ctx context.Context, c *Chat, maxBytes int) (string, error)
}

// Message is a chat message reduced to what a chat template reads. Content
// is flattened to text; the optional fields are empty when absent.
type Message struct {
	Role    string
	Content string
	// ToolCalls is an assistant message's tool_calls array as sent.
	ToolCalls json.RawMessage
	// ToolCallID is a tool message's tool_call_id.
	ToolCallID string
	// Name is the participant name.
	Name string
	// Reasoning is an assistant message's reasoning text, nil when absent.
	Reasoning *string
	// Source is the message as the request sent it (nil for a chat built
	// in code), for a ChatRenderer that reads it otherwise than vLLM hands
	// it to a chat template: harmony joins content parts differently and
	// reads reasoning but not reasoning_content.
	Source *openaiapi.ChatMessage
}
