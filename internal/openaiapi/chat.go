package openaiapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/switchyard-dev/switchyard/internal/jsonscan"
)

// Chat message roles accepted in requests.
const (
	RoleSystem    = "system"
	RoleDeveloper = "developer"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
	RoleFunction  = "function"
)

// ContentPartText is the content part type that carries text.
const ContentPartText = "text"

// ChatCompletionRequest is the body of POST /v1/chat/completions. Fields the
// servers do not act on (sampling parameters, tools...) are kept as raw JSON
// or omitted: unknown fields are accepted and ignored, as vLLM does.
type ChatCompletionRequest struct {
	Model               string         `json:"model"`
	Messages            []ChatMessage  `json:"messages"`
	MaxTokens           *int           `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int           `json:"max_completion_tokens,omitempty"`
	N                   *int           `json:"n,omitempty"`
	Stream              bool           `json:"stream,omitempty"`
	StreamOptions       *StreamOptions `json:"stream_options,omitempty"`
	Seed                *int64         `json:"seed,omitempty"`
	Temperature         *float64       `json:"temperature,omitempty"`
	TopP                *float64       `json:"top_p,omitempty"`
	User                string         `json:"user,omitempty"`
	// Tools are the function definitions offered to the model; chat
	// templates render them into the prompt.
	Tools json.RawMessage `json:"tools,omitempty"`
	// AddGenerationPrompt is a vLLM extension (default true).
	AddGenerationPrompt *bool `json:"add_generation_prompt,omitempty"`
	// ChatTemplateKwargs (vLLM) are extra chat template variables, e.g.
	// enable_thinking.
	ChatTemplateKwargs json.RawMessage `json:"chat_template_kwargs,omitempty"`
	// Documents (vLLM) are the documents a RAG chat template renders into
	// the prompt: objects of strings, e.g. {"title": ..., "text": ...}.
	Documents json.RawMessage `json:"documents,omitempty"`
	// ChatTemplate (vLLM) replaces the model's chat template for this
	// request.
	ChatTemplate *string `json:"chat_template,omitempty"`
	// ContinueFinalMessage (vLLM) continues the last message instead of
	// opening a new one.
	ContinueFinalMessage *bool `json:"continue_final_message,omitempty"`
	// ReasoningEffort is how hard a reasoning model thinks ("low",
	// "medium", "high"); gpt-oss's harmony prompt states it.
	ReasoningEffort *string `json:"reasoning_effort,omitempty"`
}

// OutputLimit is the requested completion length: max_completion_tokens,
// else max_tokens, else 0 (server default).
func (r *ChatCompletionRequest) OutputLimit() int {
	if r.MaxCompletionTokens != nil {
		return *r.MaxCompletionTokens
	}
	if r.MaxTokens != nil {
		return *r.MaxTokens
	}
	return 0
}

// WantsGenerationPrompt reports add_generation_prompt, defaulting to true.
func (r *ChatCompletionRequest) WantsGenerationPrompt() bool {
	return r.AddGenerationPrompt == nil || *r.AddGenerationPrompt
}

// ChatMessage is one element of messages.
type ChatMessage struct {
	Role       string          `json:"role"`
	Content    MessageContent  `json:"content"`
	Name       string          `json:"name,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	ToolCalls  json.RawMessage `json:"tool_calls,omitempty"`
	// Reasoning is an assistant message's reasoning (vLLM's field; older
	// clients send it as reasoning_content).
	Reasoning        *string `json:"reasoning,omitempty"`
	ReasoningContent *string `json:"reasoning_content,omitempty"`
}

// MessageContent is a message's content: a string, an array of content
// parts, or null (an assistant message carrying only tool calls).
type MessageContent struct {
	Text  *string // set when content was a JSON string
	Parts []ContentPart
}

// UnmarshalJSONFrom accepts a string, an array of parts or null. Request
// bodies in the shapes clients send never get here: decodeChatFast reads
// their content in the same pass as the rest of the body. The parts are
// read with the decoder's options, so with decodeBody's key rule.
func (c *MessageContent) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	*c = MessageContent{}
	switch dec.PeekKind() {
	case 'n':
		_, err := dec.ReadToken()
		return err
	case '"':
		var s string
		if err := jsonv2.UnmarshalDecode(dec, &s); err != nil {
			return err
		}
		c.Text = &s
		return nil
	case '[':
		var parts []ContentPart
		if err := jsonv2.UnmarshalDecode(dec, &parts); err != nil {
			return err
		}
		c.setParts(parts)
		return nil
	}
	if _, err := dec.ReadValue(); err != nil {
		return err
	}
	return errContentType
}

// UnmarshalJSON is UnmarshalJSONFrom for encoding/json's callers, with
// decodeBody's key rule (not encoding/json's folding of names).
func (c *MessageContent) UnmarshalJSON(b []byte) error {
	doc, err := jsonscan.LastWins(b)
	if err != nil {
		return err
	}
	return jsonv2.Unmarshal(doc, c, bodyOptions)
}

// errContentType is the error for content of any other JSON kind.
var errContentType = errors.New("content must be a string, an array of content parts or null")

// setParts keeps an empty array distinct from no parts.
func (c *MessageContent) setParts(parts []ContentPart) {
	if parts == nil {
		parts = []ContentPart{}
	}
	c.Parts = parts
}

// MarshalJSON writes the form that was read.
func (c MessageContent) MarshalJSON() ([]byte, error) {
	switch {
	case c.Text != nil:
		return json.Marshal(*c.Text)
	case c.Parts != nil:
		return json.Marshal(c.Parts)
	}
	return []byte("null"), nil
}

// ContentPart is one element of an array content. Only text parts carry
// text; other kinds (image_url, input_audio, file...) are kept raw.
type ContentPart struct {
	Type       string          `json:"type"`
	Text       *string         `json:"text,omitempty"`
	Refusal    *string         `json:"refusal,omitempty"`
	ImageURL   json.RawMessage `json:"image_url,omitempty"`
	InputAudio json.RawMessage `json:"input_audio,omitempty"`
}

// ChatCompletion is the non-streaming response.
type ChatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []ChatChoice `json:"choices"`
	Usage   *Usage       `json:"usage"`
}

// ChatChoice is one choice of a ChatCompletion.
type ChatChoice struct {
	Index        int                 `json:"index"`
	Message      ChatResponseMessage `json:"message"`
	Logprobs     json.RawMessage     `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
}

// ChatResponseMessage is the assistant message of a choice.
type ChatResponseMessage struct {
	Role    string  `json:"role"`
	Content *string `json:"content"`
}

// ChatCompletionChunk is one server-sent event of a streaming response.
type ChatCompletionChunk struct {
	ID      string            `json:"id"`
	Object  string            `json:"object"`
	Created int64             `json:"created"`
	Model   string            `json:"model"`
	Choices []ChatChunkChoice `json:"choices"`
	Usage   *Usage            `json:"usage,omitempty"`
}

// ChatChunkChoice is one choice of a chunk.
type ChatChunkChoice struct {
	Index        int             `json:"index"`
	Delta        ChatDelta       `json:"delta"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

// ChatDelta is the increment a chunk carries.
type ChatDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

var validRoles = map[string]bool{
	RoleSystem: true, RoleDeveloper: true, RoleUser: true,
	RoleAssistant: true, RoleTool: true, RoleFunction: true,
}

// ParseChatCompletionRequest decodes and validates a chat completions body.
// It checks what the OpenAI schema requires; what a particular server
// supports (n > 1, image parts) is the server's decision.
func ParseChatCompletionRequest(body []byte) (*ChatCompletionRequest, *APIError) {
	var req ChatCompletionRequest
	if !decodeChatFast(body, &req) {
		req = ChatCompletionRequest{}
		if apiErr := decodeBody(body, &req); apiErr != nil {
			return nil, apiErr
		}
	}
	if len(req.Messages) == 0 {
		return nil, InvalidRequest("messages", "messages must be a non-empty array")
	}
	for i, m := range req.Messages {
		if !validRoles[m.Role] {
			return nil, InvalidRequest(fmt.Sprintf("messages[%d].role", i),
				fmt.Sprintf("unsupported role %q: want system, developer, user, assistant or tool", m.Role))
		}
		for j, p := range m.Content.Parts {
			param := fmt.Sprintf("messages[%d].content[%d]", i, j)
			if p.Type == "" {
				return nil, InvalidRequest(param+".type", "content part type is required")
			}
			if p.Type == ContentPartText && p.Text == nil {
				return nil, InvalidRequest(param+".text", "text content part needs a text field")
			}
		}
	}
	if apiErr := validateCommon(req.N, req.Stream, req.StreamOptions); apiErr != nil {
		return nil, apiErr
	}
	if apiErr := validateLimit("max_tokens", req.MaxTokens); apiErr != nil {
		return nil, apiErr
	}
	if apiErr := validateLimit("max_completion_tokens", req.MaxCompletionTokens); apiErr != nil {
		return nil, apiErr
	}
	return &req, nil
}

// bodyOptions are encoding/json's semantics on the faster v2 decoder (bodies
// are read on every request by the router, where encoding/json's separate
// validation pass alone cost more than rendering the prompt), with
// jsonscan's key rule instead of encoding/json's: a name matches a field
// exactly, never by case-folding.
var bodyOptions = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsonv2.MatchCaseInsensitiveNames(false))

// decodeBody is the general decoder: it unmarshals a JSON object the way
// vLLM reads it, turning decoding errors into 400s that say where (line,
// column and member of a syntax error; the field of a type error). Repeated
// keys are resolved first (jsonscan.LastWins: the last value counts, the
// earlier ones are never looked at, so they cannot fail the request), as
// the decoder itself would merge them.
func decodeBody(body []byte, v any) *APIError {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return InvalidRequest("", "request body must be a JSON object")
	}
	doc, err := jsonscan.LastWins(body)
	if err != nil {
		return InvalidRequest("", "invalid JSON body: "+err.Error())
	}
	if err := jsonv2.Unmarshal(doc, v, bodyOptions); err != nil {
		var te *jsonv1.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return InvalidRequest(te.Field, fmt.Sprintf("invalid type for %s: expected %s", te.Field, te.Type))
		}
		return InvalidRequest("", "invalid JSON body: "+err.Error())
	}
	return nil
}

func validateCommon(n *int, stream bool, so *StreamOptions) *APIError {
	if n != nil && *n < 1 {
		return InvalidRequest("n", "n must be at least 1")
	}
	if so != nil && !stream {
		return InvalidRequest("stream_options", "stream_options can only be set when stream is true")
	}
	return nil
}

func validateLimit(param string, v *int) *APIError {
	if v != nil && *v < 1 {
		return InvalidRequest(param, param+" must be at least 1")
	}
	return nil
}
