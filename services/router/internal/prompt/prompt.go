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
// placement.
package prompt

import (
	"bytes"
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

// Read extracts the prompt of body for api. tok is the model's tokenizer;
// nil asks for the prompt text. A chat prompt's token ids are appended to
// buf[:0] (nil: a new slice), so a caller can reuse one buffer across
// requests; the Prompt's Tokens may then alias it. An empty body is not an
// error: the Prompt is then None. For a batch of completion prompts only
// the first counts: each is a request of its own to the worker, and they
// usually share their prefix anyway.
func Read(buf []uint32, api routerv1.ApiKind, body []byte, tok tokenizer.Tokenizer) (Prompt, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return Prompt{}, nil
	}
	if api == routerv1.ApiKind_API_KIND_UNSPECIFIED {
		api = sniff(body)
	}
	switch api {
	case routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS:
		return readChat(buf, body, tok)
	case routerv1.ApiKind_API_KIND_COMPLETIONS:
		return readCompletion(body, tok)
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

func readChat(buf []uint32, body []byte, tok tokenizer.Tokenizer) (Prompt, error) {
	req, apiErr := openaiapi.ParseChatCompletionRequest(body)
	if apiErr != nil {
		return Prompt{}, fmt.Errorf("read chat body: %s", apiErr.Message)
	}
	if tok != nil {
		if buf != nil {
			buf = buf[:0]
		}
		ids, err := tokenizer.AppendChatPrompt(buf, tok, req)
		if err != nil {
			return Prompt{}, fmt.Errorf("tokenize chat: %w", err)
		}
		return Prompt{Kind: Tokens, Tokens: ids}, nil
	}
	msgs, err := tokenizer.ChatMessages(req)
	if err != nil {
		return Prompt{}, fmt.Errorf("read chat messages: %w", err)
	}
	return Prompt{Kind: Text, Text: renderText(msgs)}, nil
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

func readCompletion(body []byte, tok tokenizer.Tokenizer) (Prompt, error) {
	req, apiErr := openaiapi.ParseCompletionRequest(body)
	if apiErr != nil {
		return Prompt{}, fmt.Errorf("read completions body: %s", apiErr.Message)
	}
	switch {
	case len(req.Prompt.TokenIDs) > 0:
		// Token ids are what the worker caches, tokenizer or not.
		return Prompt{Kind: Tokens, Tokens: req.Prompt.TokenIDs[0]}, nil
	case len(req.Prompt.Texts) == 0:
		return Prompt{}, nil
	case tok == nil:
		return Prompt{Kind: Text, Text: req.Prompt.Texts[0]}, nil
	}
	// The worker's own function (special tokens and all), on the first
	// prompt only.
	first := *req
	first.Prompt.Texts = req.Prompt.Texts[:1]
	ids, err := tokenizer.CompletionPrompts(tok, &first)
	if err != nil || len(ids) != 1 {
		return Prompt{}, fmt.Errorf("tokenize completions prompt: %v", err)
	}
	return Prompt{Kind: Tokens, Tokens: ids[0]}, nil
}
