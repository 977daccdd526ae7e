package bedrock

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
)

// The Converse response, as Bedrock's API reference documents it.
type converseResponse struct {
	Output struct {
		Message *struct {
			Role    string         `json:"role"`
			Content []cvOutputItem `json:"content"`
		} `json:"message"`
	} `json:"output"`
	StopReason string   `json:"stopReason"`
	Usage      *cvUsage `json:"usage"`
}

type cvOutputItem struct {
	Text    *string `json:"text"`
	ToolUse *struct {
		ToolUseID string          `json:"toolUseId"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
	} `json:"toolUse"`
}

type cvUsage struct {
	InputTokens           int `json:"inputTokens"`
	OutputTokens          int `json:"outputTokens"`
	TotalTokens           int `json:"totalTokens"`
	CacheReadInputTokens  int `json:"cacheReadInputTokens"`
	CacheWriteInputTokens int `json:"cacheWriteInputTokens"`
}

// openAI is the usage in OpenAI's terms: Bedrock's inputTokens are the
// uncached part of the prompt, so prompt_tokens adds the cache reads and
// writes back, and cached_tokens is the cache reads.
func (u *cvUsage) openAI() *openaiapi.Usage {
	if u == nil {
		return nil
	}
	prompt := u.InputTokens + u.CacheReadInputTokens + u.CacheWriteInputTokens
	out := &openaiapi.Usage{PromptTokens: prompt, CompletionTokens: u.OutputTokens, TotalTokens: prompt + u.OutputTokens}
	if u.CacheReadInputTokens > 0 {
		out.PromptTokensDetails = &openaiapi.PromptTokensDetails{CachedTokens: u.CacheReadInputTokens}
	}
	return out
}

// finishReason maps Converse's stopReason to OpenAI's finish_reason.
func finishReason(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return openaiapi.FinishLength
	case "tool_use":
		return "tool_calls"
	case "content_filtered", "guardrail_intervened":
		return "content_filter"
	default: // end_turn, stop_sequence
		return openaiapi.FinishStop
	}
}

// The OpenAI shapes written here carry tool calls, which openaiapi's
// response types leave out.
type chatCompletion struct {
	ID      string           `json:"id"`
	Object  string           `json:"object"`
	Created int64            `json:"created"`
	Model   string           `json:"model"`
	Choices []chatChoice     `json:"choices"`
	Usage   *openaiapi.Usage `json:"usage"`
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      respMessage `json:"message"`
	Logprobs     *struct{}   `json:"logprobs"`
	FinishReason string      `json:"finish_reason"`
}

type respMessage struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	ToolCalls []respToolCall `json:"tool_calls,omitempty"`
}

type respToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatChunk struct {
	ID      string           `json:"id"`
	Object  string           `json:"object"`
	Created int64            `json:"created"`
	Model   string           `json:"model"`
	Choices []chunkChoice    `json:"choices"`
	Usage   *openaiapi.Usage `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int        `json:"index"`
	Delta        chunkDelta `json:"delta"`
	Logprobs     *struct{}  `json:"logprobs"`
	FinishReason *string    `json:"finish_reason"`
}

type chunkDelta struct {
	Role      string         `json:"role,omitempty"`
	Content   *string        `json:"content,omitempty"`
	ToolCalls []respToolCall `json:"tool_calls,omitempty"`
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "chatcmpl-" + hex.EncodeToString(b[:])
}

// fromConverse turns a Converse response body into a chat.completion.
func fromConverse(body []byte, model string, now time.Time) ([]byte, error) {
	var r converseResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("bedrock: decode the Converse response: %w", err)
	}
	msg := respMessage{Role: "assistant"}
	var text strings.Builder
	hasText := false
	if m := r.Output.Message; m != nil {
		for _, c := range m.Content {
			switch {
			case c.Text != nil:
				text.WriteString(*c.Text)
				hasText = true
			case c.ToolUse != nil:
				var tc respToolCall
				tc.ID, tc.Type, tc.Function.Name = c.ToolUse.ToolUseID, "function", c.ToolUse.Name
				tc.Function.Arguments = string(c.ToolUse.Input)
				if tc.Function.Arguments == "" {
					tc.Function.Arguments = "{}"
				}
				msg.ToolCalls = append(msg.ToolCalls, tc)
			}
		}
	}
	if hasText {
		s := text.String()
		msg.Content = &s
	}
	out := chatCompletion{ID: newID(), Object: openaiapi.ObjectChatCompletion, Created: now.Unix(), Model: model,
		Choices: []chatChoice{{Message: msg, FinishReason: finishReason(r.StopReason)}}, Usage: r.Usage.openAI()}
	return json.Marshal(out)
}

// bedrockError is an error Bedrock answered, by its type (the
// x-amzn-ErrorType header, or the body's __type).
type bedrockError struct {
	status  int
	errType string
}

// errorKinds maps Bedrock's exceptions to the status and error type an
// OpenAI client gets.
var errorKinds = map[string]bedrockError{
	"ValidationException":           {http.StatusBadRequest, openaiapi.ErrTypeInvalidRequest},
	"AccessDeniedException":         {http.StatusForbidden, "permission_error"},
	"UnrecognizedClientException":   {http.StatusForbidden, "permission_error"},
	"InvalidSignatureException":     {http.StatusForbidden, "permission_error"},
	"ExpiredTokenException":         {http.StatusForbidden, "permission_error"},
	"ResourceNotFoundException":     {http.StatusNotFound, openaiapi.ErrTypeNotFound},
	"ThrottlingException":           {http.StatusTooManyRequests, openaiapi.ErrTypeRateLimit},
	"ServiceQuotaExceededException": {http.StatusTooManyRequests, openaiapi.ErrTypeRateLimit},
	"ServiceUnavailableException":   {http.StatusServiceUnavailable, openaiapi.ErrTypeUnavailable},
	"ModelNotReadyException":        {http.StatusServiceUnavailable, openaiapi.ErrTypeUnavailable},
	"ModelTimeoutException":         {http.StatusGatewayTimeout, openaiapi.ErrTypeTimeout},
	"InternalServerException":       {http.StatusInternalServerError, openaiapi.ErrTypeServer},
	"ModelErrorException":           {http.StatusBadGateway, openaiapi.ErrTypeServer},
	"ModelStreamErrorException":     {http.StatusBadGateway, openaiapi.ErrTypeServer},
}

// errorType is the exception's name from x-amzn-ErrorType
// ("ValidationException:http://internal.amazon.com/...") or the body's
// __type ("com.amazon.coral.service#ValidationException").
func errorType(header string, body []byte) string {
	t := header
	if t == "" {
		var b struct {
			Type string `json:"__type"`
		}
		_ = json.Unmarshal(body, &b)
		t = b.Type
	}
	t, _, _ = strings.Cut(t, ":")
	if i := strings.LastIndexByte(t, '#'); i >= 0 {
		t = t[i+1:]
	}
	return strings.TrimSpace(t)
}

// translateError turns a Bedrock error answer into OpenAI's error. A
// refusal of the gateway's own credentials says so without Bedrock's
// message, which can name the principal.
func translateError(status int, header string, body []byte) *openaiapi.APIError {
	t := errorType(header, body)
	kind, ok := errorKinds[t]
	if !ok {
		kind = bedrockError{status, openaiapi.ErrTypeServer}
		if status >= 400 && status < 500 {
			kind.errType = openaiapi.ErrTypeInvalidRequest
		}
	}
	var b struct {
		Message  string `json:"message"`
		Message2 string `json:"Message"`
	}
	_ = json.Unmarshal(body, &b)
	msg := b.Message
	if msg == "" {
		msg = b.Message2
	}
	if len(msg) > 2048 {
		msg = msg[:2048]
	}
	switch {
	case kind.status == http.StatusForbidden:
		msg = "Amazon Bedrock refused the gateway's AWS credentials (" + t + ")"
	case msg == "":
		msg = fmt.Sprintf("Amazon Bedrock answered %d", status)
	default:
		msg = "Amazon Bedrock: " + msg
	}
	if t == "" {
		t = "bedrock_error"
	}
	return &openaiapi.APIError{Status: kind.status, Type: kind.errType, Message: msg, Code: t}
}
