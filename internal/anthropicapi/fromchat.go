package anthropicapi

import (
	"bytes"
	"net/http"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// MessageResponse is a Messages API response (and message_start's message).
type MessageResponse struct {
	ID           string       `json:"id"`
	Type         string       `json:"type"`
	Role         string       `json:"role"`
	Model        string       `json:"model"`
	Content      []ContentOut `json:"content"`
	StopReason   *string      `json:"stop_reason"`
	StopSequence *string      `json:"stop_sequence"`
	Usage        Usage        `json:"usage"`
}

// ContentOut is a content block of a response.
type ContentOut struct {
	Type  string         `json:"type"`
	Text  *string        `json:"text,omitzero"`
	ID    string         `json:"id,omitzero"`
	Name  string         `json:"name,omitzero"`
	Input jsontext.Value `json:"input,omitzero"`
}

// Usage is Anthropic's token accounting. input_tokens counts the prompt
// tokens that were not read from the cache; cache_read_input_tokens the
// ones that were (vLLM's prefix cache hits), so their sum is the prompt.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
}

// The chat completion response and stream chunk, as far as read here.
type chatResponse struct {
	ID      string       `json:"id"`
	Choices []chatChoice `json:"choices"`
	Usage   *chatUsage   `json:"usage"`
	Error   *struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
}

type chatChoice struct {
	Message      *chatOut       `json:"message"`
	Delta        *chatOut       `json:"delta"`
	FinishReason *string        `json:"finish_reason"`
	StopReason   jsontext.Value `json:"stop_reason"` // vLLM: the stop string matched, or a token id
}

type chatOut struct {
	Content   *string `json:"content"`
	ToolCalls []struct {
		Index    int    `json:"index"`
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

type chatUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (u *chatUsage) usage() Usage {
	if u == nil {
		return Usage{}
	}
	var cached int64
	if u.PromptTokensDetails != nil {
		cached = min(max(u.PromptTokensDetails.CachedTokens, 0), u.PromptTokens)
	}
	return Usage{InputTokens: max(u.PromptTokens-cached, 0), CacheReadInputTokens: cached, OutputTokens: max(u.CompletionTokens, 0)}
}

// stopReason maps a chat finish_reason (and vLLM's stop_reason, the stop
// string that ended the text) to Anthropic's stop_reason and stop_sequence.
func stopReason(finish string, stop jsontext.Value, stops []string) (string, *string) {
	switch finish {
	case "length":
		return "max_tokens", nil
	case "tool_calls":
		return "tool_use", nil
	case "content_filter":
		return "refusal", nil
	}
	if stop.Kind() == '"' {
		var s string
		if json.Unmarshal(stop, &s) == nil && slices.Contains(stops, s) {
			return "stop_sequence", &s
		}
	}
	return "end_turn", nil
}

func messageID(chatID string) string {
	id := strings.TrimPrefix(strings.TrimPrefix(chatID, "chatcmpl-"), "cmpl-")
	if id == "" {
		id = "unknown"
	}
	return "msg_" + id
}

// FromChat translates a non-streamed chat completion into a Messages
// response for the model the client named.
func (r *MessagesRequest) FromChat(body []byte, model string) ([]byte, *APIError) {
	var cr chatResponse
	if err := json.Unmarshal(body, &cr); err != nil || len(cr.Choices) == 0 || cr.Choices[0].Message == nil {
		return nil, &APIError{Status: http.StatusBadGateway, Type: ErrTypeAPI, Message: "the model server's answer could not be read"}
	}
	ch := cr.Choices[0]
	m := MessageResponse{ID: messageID(cr.ID), Type: "message", Role: "assistant", Model: model, Content: []ContentOut{}, Usage: cr.Usage.usage()}
	if c := ch.Message.Content; c != nil && *c != "" {
		m.Content = append(m.Content, ContentOut{Type: "text", Text: c})
	}
	for _, tc := range ch.Message.ToolCalls {
		m.Content = append(m.Content, ContentOut{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: toolInput(tc.Function.Arguments)})
	}
	finish := ""
	if ch.FinishReason != nil {
		finish = *ch.FinishReason
	}
	reason, seq := stopReason(finish, ch.StopReason, r.StopSequences)
	m.StopReason, m.StopSequence = &reason, seq
	out, err := json.Marshal(m)
	if err != nil {
		return nil, &APIError{Status: http.StatusInternalServerError, Type: ErrTypeAPI, Message: "the answer could not be encoded"}
	}
	return out, nil
}

// toolInput is a tool call's arguments as the tool_use input object; a
// model that wrote something else gets it kept as a string member, so the
// client sees what came.
func toolInput(args string) jsontext.Value {
	v := jsontext.Value(strings.TrimSpace(args))
	if v.Kind() == '{' && v.IsValid() {
		return v
	}
	if args == "" {
		return jsontext.Value("{}")
	}
	b, _ := json.Marshal(map[string]string{"_raw_arguments": args})
	return b
}

// FromOpenAIError turns an OpenAI-shaped error (what the gateway and the
// workers answer) into Anthropic's, keeping the message. The statuses are
// Anthropic's: an overloaded or unavailable service is 529.
func FromOpenAIError(status int, body []byte) *APIError {
	var cr chatResponse
	msg := ""
	if json.Unmarshal(body, &cr) == nil && cr.Error != nil {
		msg = cr.Error.Message
	}
	if msg == "" {
		msg = strings.TrimSpace(string(bytes.ToValidUTF8(body, nil)))
		if len(msg) > 1024 {
			msg = msg[:1024]
		}
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return StatusError(status, msg)
}

// StatusError is the Anthropic error for an HTTP status.
func StatusError(status int, msg string) *APIError {
	e := &APIError{Status: status, Message: msg}
	switch {
	case status == http.StatusUnauthorized:
		e.Type = ErrTypeAuthentication
	case status == http.StatusForbidden:
		e.Type = ErrTypePermission
	case status == http.StatusNotFound:
		e.Type = ErrTypeNotFound
	case status == http.StatusRequestEntityTooLarge:
		e.Type = ErrTypeRequestTooLarge
	case status == http.StatusTooManyRequests:
		e.Type = ErrTypeRateLimit
	case status == http.StatusServiceUnavailable || status == StatusOverloaded:
		e.Status, e.Type = StatusOverloaded, ErrTypeOverloaded
	case status == http.StatusGatewayTimeout:
		e.Type = ErrTypeTimeout
	case status >= 500:
		e.Type = ErrTypeAPI
	default:
		e.Type = ErrTypeInvalidRequest
	}
	return e
}

// StatusOverloaded is Anthropic's "overloaded" status.
const StatusOverloaded = 529
