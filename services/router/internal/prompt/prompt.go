// Package prompt reads the prompt out of a client's request body the way
// the worker will: the same request parsing (internal/openaiapi, whose key
// rule is vLLM's: "Messages" is not "messages", and the last of a repeated
// key counts) and the same chat rendering and tokenization
// (internal/tokenizer), so the token ids, and therefore the KV block hashes,
// are the ones the worker's cache holds. A model without a tokenizer gets the rendered prompt text instead,
// for the router's approximate index.
//
// Bodies are client input. The gateway has validated them already, but the
// router never trusts that: any body yields a Prompt or an error, never a
// panic, and an unreadable prompt only costs the request its cache-aware
// placement. What a request may cost is bounded twice: by Limits (messages,
// prompt bytes, rendered bytes), over which the request is refused with a
// *LimitError, and by the caller's context, which rendering and
// tokenization check as they go — every step is linear in the prompt, so
// the limits bound the time too.
package prompt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/switchyard-dev/switchyard/internal/jsonscan"
	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	"github.com/switchyard-dev/switchyard/internal/tokenizer"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

// Kind says what a Prompt carries.
type Kind int

const (
	// None: nothing usable (no body, or an API the router cannot read yet).
	None Kind = iota
	// Tokens: the exact token ids the worker will see.
	Tokens
	// Text: the prompt text, for a model without a tokenizer.
	Text
)

func (k Kind) String() string {
	switch k {
	case Tokens:
		return "tokens"
	case Text:
		return "text"
	}
	return "none"
}

// Prompt is what the router knows of a request's prompt.
type Prompt struct {
	Kind   Kind
	Tokens []uint32
	Text   string
	// Chat or Completion is the body as parsed to read the prompt (the
	// other nil), whatever the Kind, so that the classifiers read the
	// request's text without parsing the body again; nil when the body
	// could not be parsed.
	Chat       *openaiapi.ChatCompletionRequest
	Completion *openaiapi.CompletionRequest
}

// BytesPerToken is the rule of thumb behind Len for text prompts (English
// with a BPE vocabulary).
const BytesPerToken = 4

// Len is the prompt length in tokens: exact for Tokens, estimated for Text.
func (p Prompt) Len() int {
	switch p.Kind {
	case Tokens:
		return len(p.Tokens)
	case Text:
		return (len(p.Text) + BytesPerToken - 1) / BytesPerToken
	}
	return 0
}

// ErrUnsupportedAPI is returned for an API whose body the router does not
// read yet.
var ErrUnsupportedAPI = errors.New("prompt of this api is not read by the router")

// Limits bound the work one request's prompt may cost the router; 0 leaves
// a bound off.
type Limits struct {
	// MaxMessages bounds a chat request's messages.
	MaxMessages int
	// MaxPromptBytes bounds the prompt text a request carries: a chat
	// request's message contents, reasoning, tool calls, names, tools,
	// documents and template arguments; a completions request's prompt
	// texts.
	MaxPromptBytes int
	// MaxTemplateBytes bounds a chat prompt rendered by the model's chat
	// template (markup included).
	MaxTemplateBytes int
}

// Limit names one of the Limits.
type Limit int

const (
	LimitMessages Limit = iota
	LimitPromptBytes
	LimitTemplateBytes
)

// LimitError is a request over one of its Limits.
type LimitError struct {
	Limit Limit
	Max   int
	// Got is the request's value, 0 when rendering stopped at the limit.
	Got int
}

func (e *LimitError) Error() string {
	switch e.Limit {
	case LimitMessages:
		return fmt.Sprintf("the request has %d messages, more than the limit of %d", e.Got, e.Max)
	case LimitPromptBytes:
		return fmt.Sprintf("the request's prompt text is %d bytes, more than the limit of %d", e.Got, e.Max)
	}
	return fmt.Sprintf("the prompt rendered by the model's chat template exceeds the limit of %d bytes", e.Max)
}

// Read extracts the prompt of body for api under ctx and lim. tok is the
// model's tokenizer; nil asks for the prompt text. A chat prompt's token
// ids are appended to buf[:0] (nil: a new slice), so a caller can reuse
// one buffer across requests; the Prompt's Tokens may then alias it. An
// empty body is not an error: the Prompt is then None. For a batch of
// completion prompts only the first counts: each is a request of its own
// to the worker, and they usually share their prefix anyway.
//
// The error is a *LimitError for a request over lim, ctx's error when ctx
// ended first, and otherwise says why the prompt could not be read.
func Read(ctx context.Context, buf []uint32, api routerv1.ApiKind, body []byte, tok tokenizer.Tokenizer, lim Limits) (Prompt, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return Prompt{}, nil
	}
	if api == routerv1.ApiKind_API_KIND_UNSPECIFIED {
		api = sniff(body)
	}
	switch api {
	case routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS:
		return readChat(ctx, buf, body, tok, lim)
	case routerv1.ApiKind_API_KIND_COMPLETIONS:
		return readCompletion(ctx, body, tok, lim)
	}
	return Prompt{}, fmt.Errorf("api %s: %w", api, ErrUnsupportedAPI)
}

// sniff tells chat from completions by the presence of "messages" (by the
// key rule: "Messages" is no chat), for callers that do not say which API
// they serve.
func sniff(body []byte) routerv1.ApiKind {
	if _, found, _ := jsonscan.Last(body, "messages"); found {
		return routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS
	}
	return routerv1.ApiKind_API_KIND_COMPLETIONS
}

func readChat(ctx context.Context, buf []uint32, body []byte, tok tokenizer.Tokenizer, lim Limits) (Prompt, error) {
	req, apiErr := openaiapi.ParseChatCompletionRequest(body)
	if apiErr != nil {
		return Prompt{}, fmt.Errorf("read chat body: %s", apiErr.Message)
	}
	if n := len(req.Messages); lim.MaxMessages > 0 && n > lim.MaxMessages {
		return Prompt{}, &LimitError{Limit: LimitMessages, Max: lim.MaxMessages, Got: n}
	}
	if tok == nil {
		// No template: the messages alone (what a template would refuse,
		// such as a per-request template, is no matter here).
		msgs, err := tokenizer.ChatMessages(req)
		if err != nil {
			return Prompt{Chat: req}, fmt.Errorf("read chat messages: %w", err)
		}
		c := &tokenizer.Chat{Messages: msgs, Tools: req.Tools, Documents: req.Documents, Kwargs: req.ChatTemplateKwargs}
		if n := chatBytes(c); lim.MaxPromptBytes > 0 && n > lim.MaxPromptBytes {
			return Prompt{}, &LimitError{Limit: LimitPromptBytes, Max: lim.MaxPromptBytes, Got: n}
		}
		return Prompt{Kind: Text, Text: renderText(msgs), Chat: req}, nil
	}
	c, err := tokenizer.ChatOf(req)
	if err != nil {
		return Prompt{Chat: req}, fmt.Errorf("read chat messages: %w", err)
	}
	if n := chatBytes(c); lim.MaxPromptBytes > 0 && n > lim.MaxPromptBytes {
		return Prompt{}, &LimitError{Limit: LimitPromptBytes, Max: lim.MaxPromptBytes, Got: n}
	}
	text, err := tokenizer.RenderChatContext(ctx, tok, c, lim.MaxTemplateBytes)
	if errors.Is(err, tokenizer.ErrTooLarge) {
		return Prompt{}, &LimitError{Limit: LimitTemplateBytes, Max: lim.MaxTemplateBytes}
	}
	if err != nil {
		return Prompt{Chat: req}, fmt.Errorf("render chat: %w", err)
	}
	if buf != nil {
		buf = buf[:0]
	} else {
		buf = make([]uint32, 0, len(text)/3+8)
	}
	ids, err := tok.AppendEncodeContext(ctx, buf, text)
	if err != nil {
		return Prompt{Chat: req}, fmt.Errorf("tokenize chat: %w", err)
	}
	return Prompt{Kind: Tokens, Tokens: ids, Chat: req}, nil
}

// chatBytes is the prompt text a chat request carries (Limits.MaxPromptBytes).
func chatBytes(c *tokenizer.Chat) int {
	n := len(c.Tools) + len(c.Documents) + len(c.Kwargs)
	for _, m := range c.Messages {
		n += len(m.Role) + len(m.Content) + len(m.ToolCalls) + len(m.ToolCallID) + len(m.Name)
		if m.Reasoning != nil {
			n += len(*m.Reasoning)
		}
	}
	return n
}

// renderText is a stand-in for a chat template when the model's is
// unknown: what matters to the approximate index is only that equal
// conversation prefixes render to equal text prefixes.
func renderText(msgs []tokenizer.Message) string {
	n := 0
	for _, m := range msgs {
		n += len(m.Role) + len(m.Content) + 2
	}
	var b strings.Builder
	b.Grow(n)
	for _, m := range msgs {
		b.WriteString(m.Role)
		b.WriteByte('\n')
		b.WriteString(m.Content)
		b.WriteByte(0)
	}
	return b.String()
}

func readCompletion(ctx context.Context, body []byte, tok tokenizer.Tokenizer, lim Limits) (Prompt, error) {
	req, apiErr := openaiapi.ParseCompletionRequest(body)
	if apiErr != nil {
		return Prompt{}, fmt.Errorf("read completions body: %s", apiErr.Message)
	}
	n := 0
	for _, t := range req.Prompt.Texts {
		n += len(t)
	}
	if lim.MaxPromptBytes > 0 && n > lim.MaxPromptBytes {
		return Prompt{}, &LimitError{Limit: LimitPromptBytes, Max: lim.MaxPromptBytes, Got: n}
	}
	switch {
	case len(req.Prompt.TokenIDs) > 0:
		// Token ids are what the worker caches, tokenizer or not.
		return Prompt{Kind: Tokens, Tokens: req.Prompt.TokenIDs[0], Completion: req}, nil
	case len(req.Prompt.Texts) == 0:
		return Prompt{Completion: req}, nil
	case tok == nil:
		return Prompt{Kind: Text, Text: req.Prompt.Texts[0], Completion: req}, nil
	}
	// The worker's own encoding (special tokens and all), of the first
	// prompt only.
	ids, err := tokenizer.CompletionPromptContext(ctx, tok, req.Prompt.Texts[0])
	if err != nil {
		return Prompt{Completion: req}, fmt.Errorf("tokenize completions prompt: %w", err)
	}
	return Prompt{Kind: Tokens, Tokens: ids, Completion: req}, nil
}
