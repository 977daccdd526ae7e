package openaiapi

import (
	"encoding/json"

	"github.com/switchyard-dev/switchyard/internal/jsonscan"
)

// The fast path of ParseChatCompletionRequest. The router reads every chat
// body it routes, and an 8k-token conversation is 35–40 KB of message
// strings: through the general decoder that was a third of the router's
// CPU time per request. decodeChatFast reads the shapes clients send in
// one pass of a jsonscan.Decoder and gives up on anything else — values of
// an unexpected JSON kind, invalid UTF-8, numbers that are not plain —
// leaving those bodies to decodeBody. Keys follow jsonscan's rule: exact
// ("Messages" is skipped as an unknown field), and a repeated key's last
// value replaces the earlier one whole, so every reader below assigns its
// field in full, null included. Whenever it succeeds its result is
// decodeBody's (held to that by FuzzParseChatCompletionRequest), so the two
// paths cannot disagree on what a request says.

// decodeChatFast decodes body into r, which must be zero. On false r holds
// a partial result and must be reset before the general decoder runs.
func decodeChatFast(body []byte, r *ChatCompletionRequest) bool {
	d := jsonscan.NewDecoder(body)
	s := fast{&d}
	return d.Object(func(key []byte) bool {
		switch string(key) {
		case "model":
			return s.optString(&r.Model)
		case "messages":
			return s.messages(&r.Messages)
		case "max_tokens":
			return s.optInt(&r.MaxTokens)
		case "max_completion_tokens":
			return s.optInt(&r.MaxCompletionTokens)
		case "n":
			return s.optInt(&r.N)
		case "stream":
			return s.optBool(&r.Stream)
		case "stream_options":
			return s.streamOptions(&r.StreamOptions)
		case "seed":
			return s.optInt64(&r.Seed)
		case "temperature":
			return s.optFloat(&r.Temperature)
		case "top_p":
			return s.optFloat(&r.TopP)
		case "user":
			return s.optString(&r.User)
		case "tools":
			return s.rawField(&r.Tools)
		case "add_generation_prompt":
			return s.optBoolPtr(&r.AddGenerationPrompt)
		case "chat_template_kwargs":
			return s.rawField(&r.ChatTemplateKwargs)
		case "chat_template":
			return s.optStringPtr(&r.ChatTemplate)
		case "continue_final_message":
			return s.optBoolPtr(&r.ContinueFinalMessage)
		case "documents":
			return s.rawField(&r.Documents)
		case "reasoning_effort":
			return s.optStringPtr(&r.ReasoningEffort)
		}
		return d.Skip()
	}) && d.End()
}

var chatRequestFields = []string{
	"model", "messages", "max_tokens", "max_completion_tokens", "n", "stream",
	"stream_options", "seed", "temperature", "top_p", "user", "tools",
	"add_generation_prompt", "chat_template_kwargs", "chat_template",
	"continue_final_message", "documents", "reasoning_effort",
}

// fast holds the readers of the request's fields.
type fast struct{ d *jsonscan.Decoder }

// messages reads the messages array; an empty one is a non-nil empty
// slice, as the general decoder leaves it.
func (s fast) messages(dst *[]ChatMessage) bool {
	*dst = nil
	if s.d.Null() {
		return true
	}
	msgs := []ChatMessage{}
	ok := s.d.Array(func() bool {
		msgs = append(msgs, ChatMessage{})
		return s.message(&msgs[len(msgs)-1])
	})
	*dst = msgs
	return ok
}

func (s fast) message(m *ChatMessage) bool {
	return s.d.Object(func(key []byte) bool {
		switch string(key) {
		case "role":
			return s.role(&m.Role)
		case "content":
			return s.content(&m.Content)
		case "name":
			return s.optString(&m.Name)
		case "tool_call_id":
			return s.optString(&m.ToolCallID)
		case "tool_calls":
			return s.rawField(&m.ToolCalls)
		case "reasoning":
			return s.optStringPtr(&m.Reasoning)
		case "reasoning_content":
			return s.optStringPtr(&m.ReasoningContent)
		}
		return s.d.Skip()
	})
}

var chatMessageFields = []string{"role", "content", "name", "tool_call_id", "tool_calls", "reasoning", "reasoning_content"}

// role reads a role, sharing the known ones' strings rather than
// allocating one per message.
func (s fast) role(dst *string) bool {
	*dst = ""
	if s.d.Null() {
		return true
	}
	v, ok := s.d.StringBytes()
	if !ok {
		return false
	}
	switch string(v) {
	case RoleSystem:
		*dst = RoleSystem
	case RoleDeveloper:
		*dst = RoleDeveloper
	case RoleUser:
		*dst = RoleUser
	case RoleAssistant:
		*dst = RoleAssistant
	case RoleTool:
		*dst = RoleTool
	default:
		*dst = string(v)
	}
	return true
}

func (s fast) content(c *MessageContent) bool {
	*c = MessageContent{}
	switch s.d.Peek() {
	case 'n':
		return s.d.Null()
	case '"':
		v, ok := s.d.Str()
		c.Text = &v
		return ok
	case '[':
		parts := []ContentPart{}
		ok := s.d.Array(func() bool {
			parts = append(parts, ContentPart{})
			return s.contentPart(&parts[len(parts)-1])
		})
		c.Parts = parts
		return ok
	}
	return false
}

func (s fast) contentPart(p *ContentPart) bool {
	return s.d.Object(func(key []byte) bool {
		switch string(key) {
		case "type":
			return s.optString(&p.Type)
		case "text":
			return s.optStringPtr(&p.Text)
		case "refusal":
			return s.optStringPtr(&p.Refusal)
		case "image_url":
			return s.rawField(&p.ImageURL)
		case "input_audio":
			return s.rawField(&p.InputAudio)
		}
		return s.d.Skip()
	})
}

var contentPartFields = []string{"type", "text", "refusal", "image_url", "input_audio"}

func (s fast) streamOptions(dst **StreamOptions) bool {
	*dst = nil
	if s.d.Null() {
		return true
	}
	o := &StreamOptions{}
	*dst = o
	return s.d.Object(func(key []byte) bool {
		switch string(key) {
		case "include_usage":
			return s.optBool(&o.IncludeUsage)
		case "continuous_usage_stats":
			return s.optBool(&o.ContinuousUsageStats)
		}
		return s.d.Skip()
	})
}

var streamOptionsFields = []string{"include_usage", "continuous_usage_stats"}

// The opt* readers take a value of the field's kind or null, which zeroes
// the field: a repeated key's null replaces its earlier value.

func (s fast) optString(dst *string) bool {
	*dst = ""
	if s.d.Null() {
		return true
	}
	v, ok := s.d.Str()
	*dst = v
	return ok
}

func (s fast) optStringPtr(dst **string) bool {
	*dst = nil
	if s.d.Null() {
		return true
	}
	v, ok := s.d.Str()
	*dst = &v
	return ok
}

func (s fast) optBool(dst *bool) bool {
	*dst = false
	if s.d.Null() {
		return true
	}
	v, ok := s.d.Bool()
	*dst = v
	return ok
}

func (s fast) optBoolPtr(dst **bool) bool {
	*dst = nil
	if s.d.Null() {
		return true
	}
	v, ok := s.d.Bool()
	*dst = &v
	return ok
}

func (s fast) optInt(dst **int) bool {
	*dst = nil
	if s.d.Null() {
		return true
	}
	v, ok := s.d.Int()
	n := int(v)
	*dst = &n
	return ok && int64(n) == v
}

func (s fast) optInt64(dst **int64) bool {
	*dst = nil
	if s.d.Null() {
		return true
	}
	v, ok := s.d.Int()
	*dst = &v
	return ok
}

func (s fast) optFloat(dst **float64) bool {
	*dst = nil
	if s.d.Null() {
		return true
	}
	v, ok := s.d.Float()
	*dst = &v
	return ok
}

// rawField keeps an array or object as json.RawMessage does. Other kinds
// (null among them, which json.RawMessage keeps as the bytes "null") are
// rare enough to leave to the general decoder.
func (s fast) rawField(dst *json.RawMessage) bool {
	if c := s.d.Peek(); c != '[' && c != '{' {
		return false
	}
	v, ok := s.d.Raw()
	*dst = v
	return ok
}
