package anthropic

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
)

// The Messages API response (and message_start's message), as read here.
type messageResponse struct {
	ID           string          `json:"id"`
	Type         string          `json:"type"`
	Model        string          `json:"model"`
	Content      []responseBlock `json:"content"`
	StopReason   *string         `json:"stop_reason"`
	StopSequence *string         `json:"stop_sequence"`
	Usage        *usage          `json:"usage"`
}

type responseBlock struct {
	Type  string         `json:"type"`
	Text  string         `json:"text"`
	ID    string         `json:"id"`
	Name  string         `json:"name"`
	Input jsontext.Value `json:"input"`
}

// usage is Anthropic's accounting. input_tokens is the part of the prompt
// neither read from nor written to the cache; the prompt is the sum of the
// three input counts. A stream's message_delta repeats the counts that
// changed, so members absent there keep message_start's value.
type usage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
}

func (u *usage) merge(v *usage) {
	if v == nil {
		return
	}
	for _, f := range []struct{ dst, src **int64 }{
		{&u.InputTokens, &v.InputTokens}, {&u.OutputTokens, &v.OutputTokens},
		{&u.CacheCreationInputTokens, &v.CacheCreationInputTokens}, {&u.CacheReadInputTokens, &v.CacheReadInputTokens},
	} {
		if *f.src != nil {
			n := max(**f.src, 0)
			*f.dst = &n
		}
	}
}

func val(p *int64) int64 {
	if p == nil {
		return 0
	}
	return max(*p, 0)
}

// chatUsage is OpenAI's usage object.
type chatUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (u *usage) chat() *chatUsage {
	c := &chatUsage{
		PromptTokens:     val(u.InputTokens) + val(u.CacheReadInputTokens) + val(u.CacheCreationInputTokens),
		CompletionTokens: val(u.OutputTokens),
	}
	c.PromptTokensDetails.CachedTokens = val(u.CacheReadInputTokens)
	c.TotalTokens = c.PromptTokens + c.CompletionTokens
	return c
}

// finishReason maps a stop_reason to OpenAI's finish_reason.
func finishReason(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	}
	return "stop" // end_turn, stop_sequence, pause_turn
}

// chatID is the completion id for a message id: msg_X becomes chatcmpl-X,
// which the gateway's Anthropic client path turns back into msg_X.
func chatID(id string) string {
	return "chatcmpl-" + strings.TrimPrefix(id, "msg_")
}

type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *chatUsage   `json:"usage"`
}

type chatChoice struct {
	Index        int       `json:"index"`
	Message      chatOut   `json:"message"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type chatOut struct {
	Role      string        `json:"role"`
	Content   *string       `json:"content"`
	ToolCalls []toolCallOut `json:"tool_calls,omitzero"`
}

type toolCallOut struct {
	Index    *int   `json:"index,omitzero"` // streams only
	ID       string `json:"id,omitzero"`
	Type     string `json:"type,omitzero"`
	Function struct {
		Name      string `json:"name,omitzero"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// errUnreadable is the answer for a 2xx body that is not a message.
var errUnreadable = &openaiapi.APIError{Status: http.StatusBadGateway, Type: openaiapi.ErrTypeServer,
	Message: "the provider's answer could not be read", Code: "upstream_error"}

// fromMessage translates a Messages response into a chat completion.
func fromMessage(body []byte, created int64) ([]byte, *openaiapi.APIError) {
	var m messageResponse
	if err := json.Unmarshal(body, &m); err != nil || m.Type != "message" {
		return nil, errUnreadable
	}
	out := chatOut{Role: "assistant"}
	var text strings.Builder
	hasText := false
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
			hasText = true
		case "tool_use":
			tc := toolCallOut{ID: b.ID, Type: "function"}
			tc.Function.Name = b.Name
			tc.Function.Arguments = arguments(b.Input)
			out.ToolCalls = append(out.ToolCalls, tc)
		}
		// thinking and server tool blocks have no chat equivalent.
	}
	if s := text.String(); hasText || len(out.ToolCalls) == 0 {
		out.Content = &s
	}
	finish := "stop"
	if m.StopReason != nil {
		finish = finishReason(*m.StopReason)
	}
	u := m.Usage
	if u == nil {
		u = &usage{}
	}
	cc := chatCompletion{ID: chatID(m.ID), Object: openaiapi.ObjectChatCompletion, Created: created, Model: m.Model,
		Choices: []chatChoice{{Message: out, FinishReason: &finish}}, Usage: u.chat()}
	b, err := json.Marshal(&cc)
	if err != nil {
		return nil, errUnreadable
	}
	return b, nil
}

// arguments is a tool_use input as a function call's JSON arguments.
func arguments(input jsontext.Value) string {
	if len(input) == 0 || input.Kind() == 'n' {
		return "{}"
	}
	c := input.Clone()
	if c.Compact() != nil {
		return "{}"
	}
	return string(c)
}

// The Anthropic error envelope: {"type": "error", "error": {"type", "message"}}.
type errorEnvelope struct {
	Type  string `json:"type"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// StatusOverloaded is Anthropic's "overloaded" status.
const StatusOverloaded = 529

// fromError maps an Anthropic error answer to OpenAI's error: the message
// is kept (with the key, should it ever appear, cut out), error.code says
// Anthropic's error type, and the status is one an OpenAI client and the
// gateway's retries understand: 529 overloaded is 503; 401 and 403 are the
// gateway's own credentials refused, a 502 and not the client's fault.
func fromError(status int, body []byte, key string) *openaiapi.APIError {
	var env errorEnvelope
	typ, msg := "", ""
	if json.Unmarshal(body, &env) == nil && env.Error != nil {
		typ, msg = env.Error.Type, env.Error.Message
	}
	e := &openaiapi.APIError{Status: status, Code: typ}
	switch {
	case status == StatusOverloaded || typ == "overloaded_error":
		e.Status, e.Type = http.StatusServiceUnavailable, openaiapi.ErrTypeUnavailable
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		e.Status, e.Type = http.StatusBadGateway, openaiapi.ErrTypeServer
		msg = fmt.Sprintf("the provider refused the gateway's credentials (HTTP %d): %s", status, msg)
	case status == http.StatusTooManyRequests:
		e.Type = openaiapi.ErrTypeRateLimit
	case status == http.StatusNotFound:
		e.Type = openaiapi.ErrTypeNotFound
	case status == http.StatusGatewayTimeout || typ == "timeout_error":
		e.Type = openaiapi.ErrTypeTimeout
	case status >= 500:
		e.Type = openaiapi.ErrTypeServer
	case status >= 400:
		e.Type = openaiapi.ErrTypeInvalidRequest
	default: // a 1xx or 3xx the transport did not follow
		e.Status, e.Type = http.StatusBadGateway, openaiapi.ErrTypeServer
	}
	if strings.TrimSpace(msg) == "" || strings.HasSuffix(msg, ": ") {
		msg += fmt.Sprintf("the provider answered HTTP %d", status)
	}
	e.Message = scrub(msg, key)
	if e.Code == "" {
		e.Code = "upstream_error"
	}
	return e
}

// scrub bounds a provider's message and removes the key from it.
func scrub(msg, key string) string {
	if len(msg) > maxMessageLen {
		msg = msg[:maxMessageLen]
	}
	msg = strings.ToValidUTF8(msg, string(utf8.RuneError))
	if key != "" {
		msg = strings.ReplaceAll(msg, key, "[redacted]")
	}
	return msg
}

// errorBody encodes e as OpenAI's error envelope.
func errorBody(e *openaiapi.APIError) []byte {
	var b bytes.Buffer
	_ = json.MarshalWrite(&b, e.Body())
	b.WriteByte('\n')
	return b.Bytes()
}
