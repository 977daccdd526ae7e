// Package chattext gives the built-in content classifiers (pii,
// complexity) the text of a request's prompt: what the client wrote, as
// the worker will read it, without the chat template's markup.
//
// The source is the body itself, parsed with internal/openaiapi (the fast
// one-pass path the router's prompt reader uses; vLLM's key rule). The
// router's prompt.Prompt is no substitute: with a tokenizer it holds token
// ids, and without one only the messages' contents, not their tool calls,
// reasoning or the request's documents. Parsing again costs one pass over
// the body (about 25 µs for an 8k-token chat on the reference machine),
// and the classifiers only pay it when a policy reads their tags.
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
		dst = appendRaw(dst, req.Documents)
		return dst, nil
	case routerv1.ApiKind_API_KIND_COMPLETIONS:
		req, apiErr := openaiapi.ParseCompletionRequest(body)
		if apiErr != nil || len(req.Prompt.Texts) == 0 {
			return dst, ErrUnreadable
		}
		// Every prompt of a batch goes to the same target.
		for _, t := range req.Prompt.Texts {
			dst = append(dst, Segment{User, t})
		}
		return dst, nil
	}
	return dst, ErrUnreadable
}

func appendRaw(dst []Segment, raw []byte) []Segment {
	if len(raw) == 0 || string(raw) == "null" {
		return dst
	}
	return append(dst, Segment{Other, string(raw)})
}
