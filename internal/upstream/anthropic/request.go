package anthropic

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/switchyard-dev/switchyard/internal/anthropicapi"
	"github.com/switchyard-dev/switchyard/internal/jsonscan"
	"github.com/switchyard-dev/switchyard/internal/openaiapi"
)

// The chat completions request, as far as the translation reads it. Keys
// follow jsonscan's rule (exact, the last of a repeated key counts), as
// everywhere a client body is read.
type chatRequest struct {
	Model               string         `json:"model"`
	Messages            []chatMessage  `json:"messages"`
	MaxTokens           *int64         `json:"max_tokens"`
	MaxCompletionTokens *int64         `json:"max_completion_tokens"`
	Stop                jsontext.Value `json:"stop"`
	Temperature         *float64       `json:"temperature"`
	TopP                *float64       `json:"top_p"`
	TopK                *int64         `json:"top_k"` // vLLM's extension; Anthropic has it too
	Stream              *bool          `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage *bool `json:"include_usage"`
	} `json:"stream_options"`
	Tools             []chatTool     `json:"tools"`
	ToolChoice        jsontext.Value `json:"tool_choice"`
	ParallelToolCalls *bool          `json:"parallel_tool_calls"`
	User              string         `json:"user"`

	// Refused when they ask for something Messages cannot do.
	N              *int64         `json:"n"`
	Logprobs       *bool          `json:"logprobs"`
	TopLogprobs    *int64         `json:"top_logprobs"`
	LogitBias      jsontext.Value `json:"logit_bias"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
	Audio            jsontext.Value `json:"audio"`
	Modalities       []string       `json:"modalities"`
	Prediction       jsontext.Value `json:"prediction"`
	WebSearchOptions jsontext.Value `json:"web_search_options"`
	ReasoningEffort  jsontext.Value `json:"reasoning_effort"`
	Functions        jsontext.Value `json:"functions"`
	FunctionCall     jsontext.Value `json:"function_call"`
}

type chatMessage struct {
	Role       string         `json:"role"`
	Content    jsontext.Value `json:"content"` // a string, parts or null
	ToolCalls  []chatToolCall `json:"tool_calls"`
	ToolCallID string         `json:"tool_call_id"`
}

type chatPart struct {
	Type     string         `json:"type"`
	Text     *string        `json:"text"`
	ImageURL jsontext.Value `json:"image_url"` // {"url": ...} (or a bare string)
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		Parameters  jsontext.Value `json:"parameters"`
	} `json:"function"`
}

// The Messages API request Anthropic is sent.
type messagesRequest struct {
	Model         string      `json:"model"`
	MaxTokens     int64       `json:"max_tokens"`
	System        []block     `json:"system,omitzero"`
	Messages      []message   `json:"messages"`
	StopSequences []string    `json:"stop_sequences,omitzero"`
	Temperature   *float64    `json:"temperature,omitzero"`
	TopP          *float64    `json:"top_p,omitzero"`
	TopK          *int64      `json:"top_k,omitzero"`
	Stream        bool        `json:"stream,omitzero"`
	Tools         []tool      `json:"tools,omitzero"`
	ToolChoice    *toolChoice `json:"tool_choice,omitzero"`
	Metadata      *metadata   `json:"metadata,omitzero"`
}

type message struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

type block struct {
	Type      string         `json:"type"`
	Text      string         `json:"text,omitzero"`
	Source    *imageSource   `json:"source,omitzero"`
	ID        string         `json:"id,omitzero"`
	Name      string         `json:"name,omitzero"`
	Input     jsontext.Value `json:"input,omitzero"`
	ToolUseID string         `json:"tool_use_id,omitzero"`
	Content   []block        `json:"content,omitzero"`
}

type imageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitzero"`
	Data      string `json:"data,omitzero"`
	URL       string `json:"url,omitzero"`
}

type tool struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitzero"`
	InputSchema jsontext.Value `json:"input_schema"`
}

type toolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitzero"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitzero"`
}

type metadata struct {
	UserID string `json:"user_id"`
}

// translated is a request ready to send, and what the answer's translation
// needs from it.
type translated struct {
	body         []byte
	stream       bool
	includeUsage bool
}

func invalid(param, msg string) *openaiapi.APIError {
	return openaiapi.InvalidRequest(param, msg)
}

func unsupported(param, what string) *openaiapi.APIError {
	e := invalid(param, what+" is not supported by this model's provider (Anthropic's Messages API)")
	e.Code = "unsupported_parameter"
	return e
}

// toMessages translates a chat completions body into a Messages request.
// Errors are client-facing 400s in OpenAI's shape that name the member.
func toMessages(body []byte) (*translated, *openaiapi.APIError) {
	if len(body) > MaxRequestBytes {
		return nil, &openaiapi.APIError{Status: http.StatusRequestEntityTooLarge, Type: openaiapi.ErrTypeInvalidRequest,
			Message: fmt.Sprintf("request body is larger than %d bytes", MaxRequestBytes)}
	}
	doc, err := jsonscan.LastWins(body)
	if err != nil {
		var se *jsonscan.SyntaxError
		if errors.As(err, &se) {
			return nil, invalid("", "could not parse the JSON body of the request: "+se.Error())
		}
		return nil, invalid("", "could not parse the JSON body of the request")
	}
	if jsontext.Value(doc).Kind() != '{' {
		return nil, invalid("", "request body must be a JSON object")
	}
	var cr chatRequest
	if err := json.Unmarshal(doc, &cr); err != nil {
		return nil, typeError(err)
	}
	if apiErr := cr.check(); apiErr != nil {
		return nil, apiErr
	}
	mr := messagesRequest{Model: cr.Model, MaxTokens: DefaultMaxTokens, Temperature: cr.Temperature, TopP: cr.TopP, TopK: cr.TopK}
	switch {
	case cr.MaxCompletionTokens != nil:
		mr.MaxTokens = *cr.MaxCompletionTokens
	case cr.MaxTokens != nil:
		mr.MaxTokens = *cr.MaxTokens
	}
	if cr.User != "" {
		mr.Metadata = &metadata{UserID: cr.User}
	}
	t := &translated{}
	if cr.Stream != nil && *cr.Stream {
		mr.Stream, t.stream = true, true
		t.includeUsage = cr.StreamOptions != nil && cr.StreamOptions.IncludeUsage != nil && *cr.StreamOptions.IncludeUsage
	}
	var apiErr *openaiapi.APIError
	if mr.StopSequences, apiErr = stops(cr.Stop); apiErr != nil {
		return nil, apiErr
	}
	if mr.System, mr.Messages, apiErr = conversation(cr.Messages); apiErr != nil {
		return nil, apiErr
	}
	if mr.Tools, mr.ToolChoice, apiErr = tools(&cr); apiErr != nil {
		return nil, apiErr
	}
	if t.body, err = json.Marshal(&mr); err != nil {
		return nil, invalid("", "the request could not be encoded for the provider")
	}
	return t, nil
}

func typeError(err error) *openaiapi.APIError {
	var se *json.SemanticError
	if errors.As(err, &se) {
		where := strings.ReplaceAll(strings.TrimPrefix(string(se.JSONPointer), "/"), "/", ".")
		msg := "invalid value"
		if se.JSONKind != 0 && se.GoType != nil {
			msg = fmt.Sprintf("invalid type: unexpected JSON %s", anthropicapi.KindName(se.JSONKind))
		}
		if where == "" {
			return invalid("", "invalid request body: "+msg)
		}
		return invalid(where, "invalid type for "+where+": "+msg)
	}
	return invalid("", "invalid JSON body")
}

func present(v jsontext.Value) bool { return len(v) > 0 && v.Kind() != 'n' }

func (cr *chatRequest) check() *openaiapi.APIError {
	switch {
	case cr.Model == "":
		return invalid("model", "model is required")
	case len(cr.Messages) == 0:
		return invalid("messages", "messages must be a non-empty array")
	case len(cr.Messages) > anthropicapi.MaxMessages:
		return invalid("messages", fmt.Sprintf("more than %d messages", anthropicapi.MaxMessages))
	case len(cr.Tools) > anthropicapi.MaxTools:
		return invalid("tools", fmt.Sprintf("more than %d tools", anthropicapi.MaxTools))
	case cr.N != nil && *cr.N != 1:
		return unsupported("n", "n other than 1")
	case cr.Logprobs != nil && *cr.Logprobs:
		return unsupported("logprobs", "logprobs")
	case cr.TopLogprobs != nil && *cr.TopLogprobs > 0:
		return unsupported("top_logprobs", "top_logprobs")
	case present(cr.LogitBias) && string(cr.LogitBias) != "{}":
		return unsupported("logit_bias", "logit_bias")
	case cr.ResponseFormat != nil && cr.ResponseFormat.Type != "" && cr.ResponseFormat.Type != "text":
		return unsupported("response_format", "response_format "+cr.ResponseFormat.Type)
	case present(cr.Audio):
		return unsupported("audio", "audio output")
	case present(cr.Prediction):
		return unsupported("prediction", "prediction")
	case present(cr.WebSearchOptions):
		return unsupported("web_search_options", "web_search_options")
	case present(cr.ReasoningEffort):
		return unsupported("reasoning_effort", "reasoning_effort")
	case present(cr.Functions) || present(cr.FunctionCall):
		return unsupported("functions", "the deprecated functions and function_call (use tools and tool_choice)")
	}
	for _, m := range cr.Modalities {
		if m != "text" {
			return unsupported("modalities", "the output modality "+m)
		}
	}
	for _, p := range []struct {
		name string
		v    *int64
	}{{"max_completion_tokens", cr.MaxCompletionTokens}, {"max_tokens", cr.MaxTokens}} {
		if p.v != nil && *p.v < 1 {
			return invalid(p.name, p.name+" must be at least 1")
		}
	}
	if cr.StreamOptions != nil && (cr.Stream == nil || !*cr.Stream) {
		return invalid("stream_options", "stream_options can only be set when stream is true")
	}
	return nil
}

func stops(v jsontext.Value) ([]string, *openaiapi.APIError) {
	switch v.Kind() {
	case 0, 'n':
		return nil, nil
	case '"':
		var s string
		if json.Unmarshal(v, &s) != nil {
			return nil, invalid("stop", "invalid string")
		}
		return []string{s}, nil
	case '[':
		var ss []string
		if json.Unmarshal(v, &ss) != nil {
			return nil, invalid("stop", "stop must be a string or an array of strings")
		}
		if len(ss) > anthropicapi.MaxStopSequences {
			return nil, invalid("stop", fmt.Sprintf("more than %d stop sequences", anthropicapi.MaxStopSequences))
		}
		return ss, nil
	}
	return nil, invalid("stop", "stop must be a string or an array of strings")
}

// conversation translates the messages: system (and developer) messages,
// wherever they are, become the system prompt in order; the others become
// turns, consecutive turns of one role (a run of tool results, a user
// message after them) merged into one, as Anthropic requires the roles to
// alternate.
func conversation(msgs []chatMessage) ([]block, []message, *openaiapi.APIError) {
	var system []block
	var out []message
	budget := anthropicapi.MaxBlocks
	for i, m := range msgs {
		at := fmt.Sprintf("messages[%d]", i)
		var role string
		var bs []block
		switch m.Role {
		case openaiapi.RoleSystem, openaiapi.RoleDeveloper:
			texts, err := textParts(m.Content, at+".content", &budget)
			if err != nil {
				return nil, nil, err
			}
			system = append(system, texts...)
			continue
		case openaiapi.RoleUser:
			role = "user"
			var err *openaiapi.APIError
			if bs, err = contentBlocks(m.Content, at+".content", true, &budget); err != nil {
				return nil, nil, err
			}
			if len(bs) == 0 {
				return nil, nil, invalid(at+".content", "a user message needs non-empty content")
			}
		case openaiapi.RoleAssistant:
			role = "assistant"
			var err *openaiapi.APIError
			if bs, err = contentBlocks(m.Content, at+".content", false, &budget); err != nil {
				return nil, nil, err
			}
			for j, tc := range m.ToolCalls {
				tat := fmt.Sprintf("%s.tool_calls[%d]", at, j)
				if tc.Type != "" && tc.Type != "function" {
					return nil, nil, invalid(tat+".type", fmt.Sprintf("tool call type %q is not supported (function)", tc.Type))
				}
				if tc.ID == "" || tc.Function.Name == "" {
					return nil, nil, invalid(tat, "a tool call needs an id and a function name")
				}
				input := jsontext.Value(strings.TrimSpace(tc.Function.Arguments))
				if len(input) == 0 {
					input = jsontext.Value("{}")
				}
				if input.Kind() != '{' || !input.IsValid() {
					return nil, nil, invalid(tat+".function.arguments", "arguments must be a JSON object (Anthropic's tool_use input)")
				}
				bs = append(bs, block{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: input})
			}
			if budget -= len(m.ToolCalls); budget < 0 {
				return nil, nil, invalid(at, fmt.Sprintf("more than %d content parts in the request", anthropicapi.MaxBlocks))
			}
			if len(bs) == 0 {
				continue // an empty assistant turn says nothing
			}
		case openaiapi.RoleTool:
			role = "user"
			if m.ToolCallID == "" {
				return nil, nil, invalid(at+".tool_call_id", "tool_call_id is required on a tool message")
			}
			content, err := contentBlocks(m.Content, at+".content", true, &budget)
			if err != nil {
				return nil, nil, err
			}
			bs = []block{{Type: "tool_result", ToolUseID: m.ToolCallID, Content: content}}
		default:
			return nil, nil, invalid(at+".role", fmt.Sprintf("unsupported role %q: want system, developer, user, assistant or tool", m.Role))
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, bs...)
		} else {
			out = append(out, message{Role: role, Content: bs})
		}
	}
	if len(out) == 0 {
		return nil, nil, invalid("messages", "messages need at least one user or assistant message besides the system prompt")
	}
	return system, out, nil
}

// parts reads a content value: a string is one text part, null none.
func parts(v jsontext.Value, at string, budget *int) ([]chatPart, *openaiapi.APIError) {
	switch v.Kind() {
	case 0, 'n':
		return nil, nil
	case '"':
		var s string
		if json.Unmarshal(v, &s) != nil {
			return nil, invalid(at, "invalid string")
		}
		*budget--
		return []chatPart{{Type: "text", Text: &s}}, nil
	case '[':
		var ps []chatPart
		if err := json.Unmarshal(v, &ps); err != nil {
			var se *json.SemanticError
			if errors.As(err, &se) {
				return nil, invalid(at, at+string(se.JSONPointer)+": invalid content part")
			}
			return nil, invalid(at, "invalid content parts")
		}
		if *budget -= len(ps); *budget < 0 {
			return nil, invalid(at, fmt.Sprintf("more than %d content parts in the request", anthropicapi.MaxBlocks))
		}
		return ps, nil
	}
	return nil, invalid(at, "content must be a string, an array of content parts or null")
}

func textParts(v jsontext.Value, at string, budget *int) ([]block, *openaiapi.APIError) {
	ps, err := parts(v, at, budget)
	if err != nil {
		return nil, err
	}
	var out []block
	for j, p := range ps {
		if p.Type != "text" {
			return nil, invalid(fmt.Sprintf("%s[%d].type", at, j), fmt.Sprintf("a system message holds text parts only, got %q", p.Type))
		}
		if p.Text != nil && *p.Text != "" {
			out = append(out, block{Type: "text", Text: *p.Text})
		}
	}
	return out, nil
}

// contentBlocks translates a message's content; empty text is dropped
// (Anthropic refuses empty text blocks).
func contentBlocks(v jsontext.Value, at string, images bool, budget *int) ([]block, *openaiapi.APIError) {
	ps, err := parts(v, at, budget)
	if err != nil {
		return nil, err
	}
	var out []block
	for j, p := range ps {
		pat := fmt.Sprintf("%s[%d]", at, j)
		switch p.Type {
		case "text":
			if p.Text == nil {
				return nil, invalid(pat+".text", "text content part needs a text field")
			}
			if *p.Text != "" {
				out = append(out, block{Type: "text", Text: *p.Text})
			}
		case "image_url":
			if !images {
				return nil, invalid(pat+".type", "image parts are only allowed in user and tool messages")
			}
			src, err := image(p.ImageURL, pat+".image_url")
			if err != nil {
				return nil, err
			}
			out = append(out, block{Type: "image", Source: src})
		case "refusal":
			// An assistant's refusal is text it said.
			if p.Text != nil && *p.Text != "" {
				out = append(out, block{Type: "text", Text: *p.Text})
			}
		case "":
			return nil, invalid(pat+".type", "content part type is required")
		default:
			return nil, unsupported(pat+".type", fmt.Sprintf("content part type %q", p.Type))
		}
	}
	return out, nil
}

// image translates an image_url: a data: URL becomes a base64 source, an
// http(s) URL a url source.
func image(v jsontext.Value, at string) (*imageSource, *openaiapi.APIError) {
	var url string
	switch v.Kind() {
	case '"':
		_ = json.Unmarshal(v, &url)
	case '{':
		var o struct {
			URL string `json:"url"`
		}
		if json.Unmarshal(v, &o) != nil {
			return nil, invalid(at, "image_url must be an object with a url")
		}
		url = o.URL
	}
	switch {
	case url == "":
		return nil, invalid(at+".url", "image_url.url is required")
	case strings.HasPrefix(url, "data:"):
		meta, data, ok := strings.Cut(strings.TrimPrefix(url, "data:"), ",")
		mediaType, enc, _ := strings.Cut(meta, ";")
		if !ok || enc != "base64" || mediaType == "" || data == "" {
			return nil, invalid(at+".url", "a data URL image must be data:<media type>;base64,<data>")
		}
		return &imageSource{Type: "base64", MediaType: mediaType, Data: data}, nil
	case strings.HasPrefix(url, "https://"), strings.HasPrefix(url, "http://"):
		return &imageSource{Type: "url", URL: url}, nil
	}
	return nil, invalid(at+".url", "an image URL must be http(s) or a base64 data URL")
}

// tools translates the function tools and the tool choice.
func tools(cr *chatRequest) ([]tool, *toolChoice, *openaiapi.APIError) {
	var out []tool
	for i, t := range cr.Tools {
		at := fmt.Sprintf("tools[%d]", i)
		if t.Type != "function" {
			return nil, nil, unsupported(at+".type", fmt.Sprintf("tool type %q", t.Type))
		}
		if t.Function.Name == "" {
			return nil, nil, invalid(at+".function.name", "a function tool needs a name")
		}
		schema := t.Function.Parameters
		switch schema.Kind() {
		case 0, 'n':
			schema = jsontext.Value(`{"type":"object","properties":{}}`)
		case '{':
		default:
			return nil, nil, invalid(at+".function.parameters", "parameters must be a JSON Schema object")
		}
		out = append(out, tool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: schema})
	}
	var tc *toolChoice
	switch v := cr.ToolChoice; v.Kind() {
	case 0, 'n':
	case '"':
		var s string
		_ = json.Unmarshal(v, &s)
		switch s {
		case "auto":
			tc = &toolChoice{Type: "auto"}
		case "none":
			tc = &toolChoice{Type: "none"}
		case "required":
			tc = &toolChoice{Type: "any"}
		default:
			return nil, nil, invalid("tool_choice", fmt.Sprintf("tool_choice must be auto, none, required or a function, got %q", s))
		}
	case '{':
		var o struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if json.Unmarshal(v, &o) != nil || o.Type != "function" || o.Function.Name == "" {
			return nil, nil, invalid("tool_choice", `a tool_choice object must be {"type": "function", "function": {"name": ...}}`)
		}
		tc = &toolChoice{Type: "tool", Name: o.Function.Name}
	default:
		return nil, nil, invalid("tool_choice", "tool_choice must be a string or an object")
	}
	if len(out) == 0 {
		if tc != nil && tc.Type != "none" && tc.Type != "auto" {
			return nil, nil, invalid("tool_choice", "tool_choice needs tools")
		}
		return nil, nil, nil
	}
	if cr.ParallelToolCalls != nil && !*cr.ParallelToolCalls {
		if tc == nil {
			tc = &toolChoice{Type: "auto"}
		}
		if tc.Type != "none" {
			tc.DisableParallelToolUse = true
		}
	}
	return out, tc, nil
}
