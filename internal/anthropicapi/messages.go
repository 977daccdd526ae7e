package anthropicapi

import (
	"errors"
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/switchyard-dev/switchyard/internal/jsonscan"
)

// Limits on what one request may hold. They are far above what a real
// conversation needs and keep a hostile body from costing more than its
// size: the translation is linear in the body, and these bound the number
// of objects it allocates.
const (
	MaxModelLen      = 256
	MaxMessages      = 100_000
	MaxBlocks        = 100_000 // content blocks across the request
	MaxTools         = 1024
	MaxStopSequences = 16
)

// MessagesRequest is a POST /v1/messages (or /v1/messages/count_tokens)
// body, as far as Switchyard reads it. Other members (metadata,
// service_tier, a block's cache_control: vLLM's prefix cache needs no
// marking) are not translated, and reach only a provider that takes the
// client's body natively (WithModel); the ones that would change the answer
// and that a worker cannot honour (extended thinking, MCP servers, server
// tools) are refused.
type MessagesRequest struct {
	Model         string         `json:"model"`
	MaxTokens     *int64         `json:"max_tokens"`
	Messages      []Message      `json:"messages"`
	System        jsontext.Value `json:"system"` // a string or text blocks
	StopSequences []string       `json:"stop_sequences"`
	Stream        *bool          `json:"stream"`
	Temperature   *float64       `json:"temperature"`
	TopP          *float64       `json:"top_p"`
	TopK          *int64         `json:"top_k"`
	Tools         []Tool         `json:"tools"`
	ToolChoice    *ToolChoice    `json:"tool_choice"`
	// Refused when set: a worker has no equivalent.
	Thinking   *Thinking      `json:"thinking"`
	MCPServers jsontext.Value `json:"mcp_servers"`

	// system and each message's content, read by Parse.
	system   []Block
	contents [][]Block
}

// Message is one turn of the conversation.
type Message struct {
	Role    string         `json:"role"`
	Content jsontext.Value `json:"content"` // a string or blocks
}

// Block is one content block; which members count depends on Type.
type Block struct {
	Type string `json:"type"`
	// text
	Text string `json:"text,omitzero"`
	// image
	Source *ImageSource `json:"source,omitzero"`
	// tool_use
	ID    string         `json:"id,omitzero"`
	Name  string         `json:"name,omitzero"`
	Input jsontext.Value `json:"input,omitzero"`
	// tool_result: content is a string or text (and image) blocks.
	ToolUseID string         `json:"tool_use_id,omitzero"`
	Content   jsontext.Value `json:"content,omitzero"`
	IsError   bool           `json:"is_error,omitzero"`
}

// ImageSource is an image block's source: base64 data or a URL.
type ImageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
}

// Tool is a client tool definition. Anthropic's server tools (a type such
// as web_search_20250305) have no equivalent on a worker and are refused.
type Tool struct {
	Type        string         `json:"type"`
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema jsontext.Value `json:"input_schema"`
}

// Thinking is the extended thinking setting: enabled or disabled.
type Thinking struct {
	Type string `json:"type"`
}

// ToolChoice is auto, any, tool (with name) or none.
type ToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

// IsStream reports whether the client asked for a stream.
func (r *MessagesRequest) IsStream() bool { return r.Stream != nil && *r.Stream }

// InvalidRequest is a 400 invalid_request_error.
func InvalidRequest(msg string) *APIError {
	return &APIError{Status: http.StatusBadRequest, Type: ErrTypeInvalidRequest, Message: msg}
}

// Parse reads a Messages API body. countOnly is the count_tokens endpoint,
// where max_tokens is not asked for. Keys follow jsonscan's rule (exact, the
// last of a repeated key counts), so what is read here is what a worker
// would read. Errors are client-facing 400s that name the member.
func Parse(body []byte, countOnly bool) (*MessagesRequest, *APIError) {
	if len(body) == 0 {
		return nil, InvalidRequest("request body is empty: expected a JSON object")
	}
	doc, err := jsonscan.LastWins(body)
	if err != nil {
		var se *jsonscan.SyntaxError
		if errors.As(err, &se) {
			return nil, InvalidRequest("could not parse the JSON body of the request: " + se.Error())
		}
		return nil, InvalidRequest("could not parse the JSON body of the request")
	}
	if k := jsontext.Value(doc).Kind(); k != '{' {
		return nil, InvalidRequest("the request body must be a JSON object")
	}
	req := &MessagesRequest{}
	if err := json.Unmarshal(doc, req); err != nil {
		return nil, InvalidRequest("invalid request body: " + describe(err))
	}
	return req, req.check(countOnly)
}

// describe turns a json error into a message naming the member.
func describe(err error) string {
	var se *json.SemanticError
	if errors.As(err, &se) {
		where := string(se.JSONPointer)
		if where == "" {
			where = "the body"
		}
		msg := where + ": "
		switch {
		case se.JSONKind != 0 && se.GoType != nil:
			msg += fmt.Sprintf("unexpected JSON %s", KindName(se.JSONKind))
		case se.Err != nil:
			msg += se.Err.Error()
		default:
			msg += "invalid value"
		}
		return msg
	}
	return err.Error()
}

// KindName names a JSON kind as error messages say it ("string", "object").
func KindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 'f', 't':
		return "boolean"
	case '"':
		return "string"
	case '0':
		return "number"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "value"
}

func (r *MessagesRequest) check(countOnly bool) *APIError {
	switch {
	case r.Model == "":
		return InvalidRequest("model: Field required")
	case len(r.Model) > MaxModelLen:
		return InvalidRequest(fmt.Sprintf("model: too long: %d bytes, at most %d", len(r.Model), MaxModelLen))
	case !utf8.ValidString(r.Model):
		return InvalidRequest("model: not valid UTF-8")
	}
	if !countOnly {
		if r.MaxTokens == nil {
			return InvalidRequest("max_tokens: Field required")
		}
		if *r.MaxTokens < 1 {
			return InvalidRequest("max_tokens: must be at least 1")
		}
	}
	if len(r.Messages) == 0 {
		return InvalidRequest("messages: at least one message is required")
	}
	if len(r.Messages) > MaxMessages {
		return InvalidRequest(fmt.Sprintf("messages: more than %d messages", MaxMessages))
	}
	if len(r.StopSequences) > MaxStopSequences {
		return InvalidRequest(fmt.Sprintf("stop_sequences: more than %d", MaxStopSequences))
	}
	if len(r.Tools) > MaxTools {
		return InvalidRequest(fmt.Sprintf("tools: more than %d tools", MaxTools))
	}
	if r.Thinking != nil && r.Thinking.Type != "" && r.Thinking.Type != "disabled" {
		return InvalidRequest("thinking: extended thinking is not available on this gateway")
	}
	if len(r.MCPServers) > 0 && r.MCPServers.Kind() == '[' && string(r.MCPServers) != "[]" {
		return InvalidRequest("mcp_servers: MCP servers are not available on this gateway")
	}
	budget := MaxBlocks
	var err *APIError
	if len(r.System) > 0 && r.System.Kind() != 'n' {
		if r.system, err = blocks(r.System, "system", &budget); err != nil {
			return err
		}
		for i, b := range r.system {
			if b.Type != "text" {
				return InvalidRequest(fmt.Sprintf("system.%d.type: only text blocks are allowed in the system prompt, got %q", i, b.Type))
			}
		}
	}
	r.contents = make([][]Block, len(r.Messages))
	for i, m := range r.Messages {
		at := fmt.Sprintf("messages.%d", i)
		if m.Role != "user" && m.Role != "assistant" {
			return InvalidRequest(fmt.Sprintf("%s.role: must be \"user\" or \"assistant\", got %q", at, m.Role))
		}
		if len(m.Content) == 0 || m.Content.Kind() == 'n' {
			return InvalidRequest(at + ".content: Field required")
		}
		if r.contents[i], err = blocks(m.Content, at+".content", &budget); err != nil {
			return err
		}
		for j, b := range r.contents[i] {
			if err := checkBlock(b, m.Role, fmt.Sprintf("%s.content.%d", at, j)); err != nil {
				return err
			}
		}
	}
	for i, t := range r.Tools {
		at := fmt.Sprintf("tools.%d", i)
		if t.Type != "" && t.Type != "custom" {
			return InvalidRequest(fmt.Sprintf("%s.type: server tool %q is not available on this gateway; define the tool with a name and an input_schema", at, t.Type))
		}
		if t.Name == "" {
			return InvalidRequest(at + ".name: Field required")
		}
		if len(t.InputSchema) == 0 || t.InputSchema.Kind() != '{' {
			return InvalidRequest(at + ".input_schema: an object is required")
		}
	}
	if tc := r.ToolChoice; tc != nil {
		switch tc.Type {
		case "auto", "any", "none":
		case "tool":
			if tc.Name == "" {
				return InvalidRequest("tool_choice.name: Field required for type \"tool\"")
			}
		default:
			return InvalidRequest(fmt.Sprintf("tool_choice.type: must be auto, any, tool or none, got %q", tc.Type))
		}
	}
	return nil
}

func checkBlock(b Block, role, at string) *APIError {
	switch b.Type {
	case "text":
	case "image":
		if role != "user" {
			return InvalidRequest(at + ": image blocks are only allowed in user messages")
		}
		if err := checkImage(b.Source, at); err != nil {
			return err
		}
	case "tool_use":
		if role != "assistant" {
			return InvalidRequest(at + ": tool_use blocks are only allowed in assistant messages")
		}
		if b.ID == "" || b.Name == "" {
			return InvalidRequest(at + ": tool_use needs an id and a name")
		}
		if len(b.Input) > 0 && b.Input.Kind() != '{' && b.Input.Kind() != 'n' {
			return InvalidRequest(at + ".input: an object is required")
		}
	case "tool_result":
		if role != "user" {
			return InvalidRequest(at + ": tool_result blocks are only allowed in user messages")
		}
		if b.ToolUseID == "" {
			return InvalidRequest(at + ".tool_use_id: Field required")
		}
		switch b.Content.Kind() {
		case 0, 'n', '"':
		case '[':
			var bs []Block
			if err := json.Unmarshal(b.Content, &bs); err != nil {
				return InvalidRequest(at + ".content: " + describe(err))
			}
			for i, c := range bs {
				if c.Type != "text" && c.Type != "image" {
					return InvalidRequest(fmt.Sprintf("%s.content.%d.type: a tool result holds text or image blocks, got %q", at, i, c.Type))
				}
			}
		default:
			return InvalidRequest(at + ".content: expected a string or an array of content blocks")
		}
	case "thinking", "redacted_thinking":
		// A model's earlier reasoning: not part of the prompt a worker
		// renders for the next turn, so dropped.
	default:
		return InvalidRequest(fmt.Sprintf("%s.type: block type %q is not supported (text, image, tool_use, tool_result)", at, b.Type))
	}
	return nil
}

func checkImage(s *ImageSource, at string) *APIError {
	if s == nil {
		return InvalidRequest(at + ".source: Field required")
	}
	switch s.Type {
	case "base64":
		if s.MediaType == "" || s.Data == "" {
			return InvalidRequest(at + ".source: base64 images need media_type and data")
		}
	case "url":
		if s.URL == "" {
			return InvalidRequest(at + ".source.url: Field required")
		}
	default:
		return InvalidRequest(fmt.Sprintf("%s.source.type: must be base64 or url, got %q", at, s.Type))
	}
	return nil
}

// blocks reads a content value: a string is one text block.
func blocks(v jsontext.Value, at string, budget *int) ([]Block, *APIError) {
	switch v.Kind() {
	case '"':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, InvalidRequest(at + ": invalid string")
		}
		*budget--
		return []Block{{Type: "text", Text: s}}, nil
	case '[':
		var bs []Block
		if err := json.Unmarshal(v, &bs); err != nil {
			return nil, InvalidRequest(at + ": " + describe(err))
		}
		if *budget -= len(bs); *budget < 0 {
			return nil, InvalidRequest(fmt.Sprintf("%s: more than %d content blocks in the request", at, MaxBlocks))
		}
		return bs, nil
	}
	return nil, InvalidRequest(at + ": expected a string or an array of content blocks")
}
