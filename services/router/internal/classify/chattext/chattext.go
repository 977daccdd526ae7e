// Package chattext gives the built-in content classifiers (pii,
// complexity) the text of a request's prompt: what the client wrote, as
// the worker will read it, without the chat template's markup.
//
// The source is the body as internal/openaiapi parses it (the one-pass
// path, vLLM's key rule): the request the router's prompt reader already
// parsed (FromChat, FromCompletion), or the body parsed here (Segments)
// when the reader could not. The prompt reader's own result is no
// substitute: with a tokenizer it holds token ids, and without one only
// the messages' contents, not their tool calls, reasoning or the
// request's documents.
//
// Anthropic requests reach the router already translated to chat
// completions by the gateway, so chat and completions are all there is.
package chattext

import (
	"bytes"
	"errors"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

// Role of a Segment.
type Role uint8

const (
	// Other is a system, developer, assistant or tool message, a tool
	// definition or a document.
	Other Role = iota
	// User is a user message, or a completions prompt.
	User
)

// Segment is one piece of prompt text: a message's content, reasoning or
// tool calls, the tools, the documents, a completions prompt. Segments are
// independent: nothing a classifier finds spans two.
type Segment struct {
	Role Role
	Text string
}

// ErrUnreadable says the body holds no prompt text the classifiers can
// read (token ids, an API other than chat and completions, invalid JSON).
var ErrUnreadable = errors.New("chattext: no readable prompt text")

// Segments appends the prompt text of body (for api; unspecified: told
// apart by a "messages" member) to dst, in the order of the request.
// Raw JSON members (tool calls, tools, documents) are scanned as JSON
// text: their strings' escapes are not undone.
func Segments(api routerv1.ApiKind, body []byte, dst []Segment) ([]Segment, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return dst, ErrUnreadable
	}
	if api == routerv1.ApiKind_API_KIND_UNSPECIFIED {
		api = routerv1.ApiKind_API_KIND_COMPLETIONS
		if bytes.Contains(body, []byte(`"messages"`)) {
			api = routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS
		}
	}
	switch api {
	case routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS:
		req, apiErr := openaiapi.ParseChatCompletionRequest(body)
		if apiErr != nil {
			return dst, ErrUnreadable
		}
		return FromChat(req, dst), nil
	case routerv1.ApiKind_API_KIND_COMPLETIONS:
		req, apiErr := openaiapi.ParseCompletionRequest(body)
		if apiErr != nil {
			return dst, ErrUnreadable
		}
		return FromCompletion(req, dst)
	}
	return dst, ErrUnreadable
}

// FromChat appends the prompt text of a parsed chat request to dst.
func FromChat(req *openaiapi.ChatCompletionRequest, dst []Segment) []Segment {
	for _, m := range req.Messages {
		role := Other
		if m.Role == openaiapi.RoleUser {
			role = User
		}
		if t := m.Content.Text; t != nil {
			dst = append(dst, Segment{role, *t})
		}
		for _, p := range m.Content.Parts {
			if p.Text != nil {
				dst = append(dst, Segment{role, *p.Text})
			}
			if p.Refusal != nil {
				dst = append(dst, Segment{role, *p.Refusal})
			}
		}
		if m.Reasoning != nil {
			dst = append(dst, Segment{Other, *m.Reasoning})
		} else if m.ReasoningContent != nil {
			dst = append(dst, Segment{Other, *m.ReasoningContent})
		}
		dst = appendRaw(dst, m.ToolCalls)
	}
	dst = appendRaw(dst, req.Tools)
	return appendRaw(dst, req.Documents)
}

// FromCompletion appends the prompt texts of a parsed completions request
// to dst: ErrUnreadable when it has none (token ids).
func FromCompletion(req *openaiapi.CompletionRequest, dst []Segment) ([]Segment, error) {
	if len(req.Prompt.Texts) == 0 {
		return dst, ErrUnreadable
	}
	// Every prompt of a batch goes to the same target.
	for _, t := range req.Prompt.Texts {
		dst = append(dst, Segment{User, t})
	}
	return dst, nil
}

func appendRaw(dst []Segment, raw []byte) []Segment {
	if len(raw) == 0 || string(raw) == "null" {
		return dst
	}
	return append(dst, Segment{Other, string(raw)})
}
