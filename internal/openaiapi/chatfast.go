package openaiapi

import (
	"encoding/json"
	"unicode/utf8"
)

// The fast path of ParseChatCompletionRequest. The router reads every chat
// body it routes, and an 8k-token conversation is 35–40 KB of message
// strings: through the general decoder that was a third of the router's
// CPU time per request. decodeChatFast reads the shapes clients send in
// one pass and gives up on anything else — unknown spellings of known
// fields, duplicate fields, values of an unexpected JSON kind, invalid
// UTF-8, numbers that are not plain — leaving those bodies to decodeBody.
// Whenever it succeeds its result is the one encoding/json gives (held to
// that by FuzzParseChatCompletionRequest), so the two paths cannot
// disagree on what a request says.

// decodeChatFast decodes body into r, which must be zero. On false r holds
// a partial result and must be reset before the general decoder runs.
func decodeChatFast(body []byte, r *ChatCompletionRequest) bool {
	s := scanner{b: body}
	var seen fieldSet
	return s.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "model":
			ok = seen.first(0) && s.optString(&r.Model)
		case "messages":
			ok = seen.first(1) && s.messages(&r.Messages)
		case "max_tokens":
			ok = seen.first(2) && s.optInt(&r.MaxTokens)
		case "max_completion_tokens":
			ok = seen.first(3) && s.optInt(&r.MaxCompletionTokens)
		case "n":
			ok = seen.first(4) && s.optInt(&r.N)
		case "stream":
			ok = seen.first(5) && s.optBool(&r.Stream)
		case "stream_options":
			ok = seen.first(6) && (s.null() || s.streamOptions(&r.StreamOptions))
		case "seed":
			ok = seen.first(7) && (s.null() || s.int64Ptr(&r.Seed))
		case "temperature":
			ok = seen.first(8) && s.optFloat(&r.Temperature)
		case "top_p":
			ok = seen.first(9) && s.optFloat(&r.TopP)
		case "user":
			ok = seen.first(10) && s.optString(&r.User)
		case "tools":
			ok = seen.first(11) && s.rawField(&r.Tools)
		case "add_generation_prompt":
			ok = seen.first(12) && s.optBoolPtr(&r.AddGenerationPrompt)
		case "chat_template_kwargs":
			ok = seen.first(13) && s.rawField(&r.ChatTemplateKwargs)
		case "chat_template":
			ok = seen.first(14) && s.optStringPtr(&r.ChatTemplate)
		case "continue_final_message":
			ok = seen.first(15) && s.optBoolPtr(&r.ContinueFinalMessage)
		case "documents":
			ok = seen.first(16) && s.rawField(&r.Documents)
		default:
			ok = !foldsToAny(key, chatRequestFields) && s.skip(1)
		}
		return ok
	}) && s.end()
}

var chatRequestFields = []string{
	"model", "messages", "max_tokens", "max_completion_tokens", "n", "stream",
	"stream_options", "seed", "temperature", "top_p", "user", "tools",
	"add_generation_prompt", "chat_template_kwargs", "chat_template",
	"continue_final_message", "documents",
}

// messages reads the messages array; an empty one is a non-nil empty
// slice, as encoding/json leaves it.
func (s *scanner) messages(dst *[]ChatMessage) bool {
	if s.null() {
		return true
	}
	msgs := []ChatMessage{}
	ok := s.array(func() bool {
		msgs = append(msgs, ChatMessage{})
		return s.message(&msgs[len(msgs)-1])
	})
	*dst = msgs
	return ok
}

func (s *scanner) message(m *ChatMessage) bool {
	var seen fieldSet
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "role":
			return seen.first(0) && s.role(&m.Role)
		case "content":
			return seen.first(1) && s.content(&m.Content)
		case "name":
			return seen.first(2) && s.optString(&m.Name)
		case "tool_call_id":
			return seen.first(3) && s.optString(&m.ToolCallID)
		case "tool_calls":
			return seen.first(4) && s.rawField(&m.ToolCalls)
		case "reasoning":
			return seen.first(5) && s.optStringPtr(&m.Reasoning)
		case "reasoning_content":
			return seen.first(6) && s.optStringPtr(&m.ReasoningContent)
		}
		return !foldsToAny(key, chatMessageFields) && s.skip(1)
	})
}

var chatMessageFields = []string{"role", "content", "name", "tool_call_id", "tool_calls", "reasoning", "reasoning_content"}

// role reads a role, sharing the known ones' strings rather than
// allocating one per message.
func (s *scanner) role(dst *string) bool {
	if s.null() {
		return true
	}
	v, ok := s.stringBytes()
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

func (s *scanner) content(c *MessageContent) bool {
	switch s.peek() {
	case 'n':
		return s.literal("null")
	case '"':
		v, ok := s.str()
		c.Text = &v
		return ok
	case '[':
		parts := []ContentPart{}
		ok := s.array(func() bool {
			parts = append(parts, ContentPart{})
			return s.contentPart(&parts[len(parts)-1])
		})
		c.Parts = parts
		return ok
	}
	return false
}

func (s *scanner) contentPart(p *ContentPart) bool {
	var seen fieldSet
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "type":
			return seen.first(0) && s.optString(&p.Type)
		case "text":
			return seen.first(1) && s.optStringPtr(&p.Text)
		case "refusal":
			return seen.first(2) && s.optStringPtr(&p.Refusal)
		case "image_url":
			return seen.first(3) && s.rawField(&p.ImageURL)
		case "input_audio":
			return seen.first(4) && s.rawField(&p.InputAudio)
		}
		return !foldsToAny(key, contentPartFields) && s.skip(1)
	})
}

var contentPartFields = []string{"type", "text", "refusal", "image_url", "input_audio"}

func (s *scanner) streamOptions(dst **StreamOptions) bool {
	o := &StreamOptions{}
	*dst = o
	var seen fieldSet
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "include_usage":
			return seen.first(0) && s.optBool(&o.IncludeUsage)
		case "continuous_usage_stats":
			return seen.first(1) && s.optBool(&o.ContinuousUsageStats)
		}
		return !foldsToAny(key, streamOptionsFields) && s.skip(1)
	})
}

var streamOptionsFields = []string{"include_usage", "continuous_usage_stats"}

// The opt* readers take a value of the field's kind or null, which leaves
// a zero field as it is (encoding/json's rule).

func (s *scanner) optString(dst *string) bool {
	if s.null() {
		return true
	}
	v, ok := s.str()
	*dst = v
	return ok
}

func (s *scanner) optStringPtr(dst **string) bool {
	if s.null() {
		return true
	}
	v, ok := s.str()
	*dst = &v
	return ok
}

func (s *scanner) optBool(dst *bool) bool {
	if s.null() {
		return true
	}
	v, ok := s.boolean()
	*dst = v
	return ok
}

func (s *scanner) optBoolPtr(dst **bool) bool {
	if s.null() {
		return true
	}
	v, ok := s.boolean()
	*dst = &v
	return ok
}

func (s *scanner) optInt(dst **int) bool {
	if s.null() {
		return true
	}
	v, ok := s.integer()
	n := int(v)
	*dst = &n
	return ok && int64(n) == v
}

func (s *scanner) int64Ptr(dst **int64) bool {
	v, ok := s.integer()
	*dst = &v
	return ok
}

func (s *scanner) optFloat(dst **float64) bool {
	if s.null() {
		return true
	}
	v, ok := s.float()
	*dst = &v
	return ok
}

// rawField keeps an array or object as json.RawMessage does. Other kinds
// (null among them, which json.RawMessage keeps as the bytes "null") are
// rare enough to leave to the general decoder.
func (s *scanner) rawField(dst *json.RawMessage) bool {
	if c := s.peek(); c != '[' && c != '{' {
		return false
	}
	v, ok := s.raw()
	*dst = v
	return ok
}

// fieldSet records which fields of an object were seen: a repeated field
// gives up, since encoding/json merges the second value into the first
// in ways not worth copying.
type fieldSet uint32

func (f *fieldSet) first(i uint) bool {
	if *f&(1<<i) != 0 {
		return false
	}
	*f |= 1 << i
	return true
}

// foldsToAny reports whether an unknown key could still name one of the
// fields under a looser match than byte equality: encoding/json matches
// names case-insensitively (with Unicode folding, so any non-ASCII key
// counts), and go-json-experiment can be told to ignore '_' and '-'. Such
// a key is left to the general decoder.
func foldsToAny(key []byte, fields []string) bool {
	var buf [32]byte
	k := buf[:0]
	for _, c := range key {
		switch {
		case c >= utf8.RuneSelf:
			return true
		case c == '_' || c == '-':
			continue
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		if len(k) == len(buf) {
			return false // longer than any field name
		}
		k = append(k, c)
	}
	for _, f := range fields {
		if foldedEqual(string(k), f) {
			return true
		}
	}
	return false
}

// foldedEqual compares a folded key with a field name, skipping the
// name's delimiters.
func foldedEqual(k, name string) bool {
	j := 0
	for i := 0; i < len(name); i++ {
		if name[i] == '_' || name[i] == '-' {
			continue
		}
		if j >= len(k) || k[j] != name[i] {
			return false
		}
		j++
	}
	return j == len(k)
}
