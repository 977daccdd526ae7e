package bedrock

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	jsonv1 "github.com/go-json-experiment/json/v1"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/switchyard-dev/switchyard/internal/jsonscan"
	"github.com/switchyard-dev/switchyard/internal/openaiapi"
)

// Bounds on what one request may hold, beyond the gateway's body limit.
const (
	maxMessages      = 10000
	maxBlocks        = 100000 // content blocks across all messages
	maxTools         = 1000
	maxStopSequences = 16
	// maxImageBytes is Bedrock's limit on one image (3.75 MB decoded).
	maxImageBytes = 3_932_160
)

// chatRequest is what the adapter reads of an OpenAI chat completions body.
type chatRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	Stop                json.RawMessage `json:"stop"`
	N                   *int            `json:"n"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Tools      []chatTool      `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []chatToolCall  `json:"tool_calls"`
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
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

type contentPart struct {
	Type     string  `json:"type"`
	Text     *string `json:"text"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

// The Converse request, as Bedrock's API reference documents it.
type converseRequest struct {
	Messages        []cvMessage        `json:"messages"`
	System          []cvSystem         `json:"system,omitempty"`
	InferenceConfig *cvInferenceConfig `json:"inferenceConfig,omitempty"`
	ToolConfig      *cvToolConfig      `json:"toolConfig,omitempty"`
}

type cvMessage struct {
	Role    string    `json:"role"`
	Content []cvBlock `json:"content"`
}

type cvSystem struct {
	Text string `json:"text"`
}

// cvBlock is one content block: exactly one member is set.
type cvBlock struct {
	Text       *string       `json:"text,omitempty"`
	Image      *cvImage      `json:"image,omitempty"`
	ToolUse    *cvToolUse    `json:"toolUse,omitempty"`
	ToolResult *cvToolResult `json:"toolResult,omitempty"`
}

type cvImage struct {
	Format string `json:"format"`
	Source struct {
		Bytes []byte `json:"bytes"` // base64 in JSON, as Bedrock's blobs
	} `json:"source"`
}

type cvToolUse struct {
	ToolUseID string          `json:"toolUseId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type cvToolResult struct {
	ToolUseID string    `json:"toolUseId"`
	Content   []cvBlock `json:"content"`
}

type cvInferenceConfig struct {
	MaxTokens     *int     `json:"maxTokens,omitempty"`
	Temperature   *float64 `json:"temperature,omitempty"`
	TopP          *float64 `json:"topP,omitempty"`
	StopSequences []string `json:"stopSequences,omitempty"`
}

type cvToolConfig struct {
	Tools      []cvTool      `json:"tools"`
	ToolChoice *cvToolChoice `json:"toolChoice,omitempty"`
}

type cvTool struct {
	ToolSpec struct {
		Name        string `json:"name"`
		Description string `json:"description,omitempty"`
		InputSchema struct {
			JSON json.RawMessage `json:"json"`
		} `json:"inputSchema"`
	} `json:"toolSpec"`
}

type cvToolChoice struct {
	Auto *struct{} `json:"auto,omitempty"`
	Any  *struct{} `json:"any,omitempty"`
	Tool *struct {
		Name string `json:"name"`
	} `json:"tool,omitempty"`
}

// bodyOptions read a body as openaiapi does: encoding/json's semantics,
// names matched exactly (jsonscan's key rule).
var bodyOptions = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsonv2.MatchCaseInsensitiveNames(false))

// translated is a chat request in Converse's terms.
type translated struct {
	ModelID      string
	Stream       bool
	IncludeUsage bool
	Body         []byte
}

// toConverse reads an OpenAI chat completions body and writes the
// Converse request for it. Errors are 400s in OpenAI's shape.
func toConverse(body []byte) (*translated, *openaiapi.APIError) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, openaiapi.InvalidRequest("", "request body must be a JSON object")
	}
	doc, err := jsonscan.LastWins(body)
	if err != nil {
		return nil, openaiapi.InvalidRequest("", "invalid JSON body: "+err.Error())
	}
	var req chatRequest
	if err := jsonv2.Unmarshal(doc, &req, bodyOptions); err != nil {
		var te *jsonv1.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, openaiapi.InvalidRequest(te.Field, fmt.Sprintf("invalid type for %s: expected %s", te.Field, te.Type))
		}
		return nil, openaiapi.InvalidRequest("", "invalid JSON body: "+err.Error())
	}
	if req.Model == "" {
		return nil, openaiapi.InvalidRequest("model", "model is required")
	}
	if len(req.Messages) == 0 {
		return nil, openaiapi.InvalidRequest("messages", "messages must be a non-empty array")
	}
	if len(req.Messages) > maxMessages {
		return nil, openaiapi.InvalidRequest("messages", fmt.Sprintf("at most %d messages", maxMessages))
	}
	if req.N != nil && *req.N != 1 {
		return nil, openaiapi.InvalidRequest("n", "Amazon Bedrock returns one choice: n must be 1")
	}
	out := converseRequest{Messages: []cvMessage{}}
	blocks := 0
	add := func(role string, bs ...cvBlock) {
		if len(bs) == 0 {
			return
		}
		blocks += len(bs)
		// Converse wants the roles to alternate: consecutive messages of
		// one role (a turn's tool results, a user message after them) are
		// one message.
		if n := len(out.Messages); n > 0 && out.Messages[n-1].Role == role {
			out.Messages[n-1].Content = append(out.Messages[n-1].Content, bs...)
			return
		}
		out.Messages = append(out.Messages, cvMessage{Role: role, Content: bs})
	}
	for i, m := range req.Messages {
		param := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case openaiapi.RoleSystem, openaiapi.RoleDeveloper:
			bs, apiErr := contentBlocks(param, m.Content, false)
			if apiErr != nil {
				return nil, apiErr
			}
			for _, b := range bs {
				out.System = append(out.System, cvSystem{Text: *b.Text})
			}
		case openaiapi.RoleUser:
			bs, apiErr := contentBlocks(param, m.Content, true)
			if apiErr != nil {
				return nil, apiErr
			}
			add("user", bs...)
		case openaiapi.RoleAssistant:
			bs, apiErr := contentBlocks(param, m.Content, false)
			if apiErr != nil {
				return nil, apiErr
			}
			for j, tc := range m.ToolCalls {
				p := fmt.Sprintf("%s.tool_calls[%d]", param, j)
				if tc.ID == "" || tc.Function.Name == "" {
					return nil, openaiapi.InvalidRequest(p, "a tool call needs an id and a function name")
				}
				input := json.RawMessage(strings.TrimSpace(tc.Function.Arguments))
				if len(input) == 0 {
					input = json.RawMessage("{}")
				}
				if !json.Valid(input) || input[0] != '{' {
					return nil, openaiapi.InvalidRequest(p+".function.arguments", "arguments must be a JSON object")
				}
				bs = append(bs, cvBlock{ToolUse: &cvToolUse{ToolUseID: tc.ID, Name: tc.Function.Name, Input: input}})
			}
			add("assistant", bs...)
		case openaiapi.RoleTool:
			if m.ToolCallID == "" {
				return nil, openaiapi.InvalidRequest(param+".tool_call_id", "a tool message needs the tool_call_id it answers")
			}
			bs, apiErr := contentBlocks(param, m.Content, false)
			if apiErr != nil {
				return nil, apiErr
			}
			if bs == nil {
				bs = []cvBlock{}
			}
			add("user", cvBlock{ToolResult: &cvToolResult{ToolUseID: m.ToolCallID, Content: bs}})
		default:
			return nil, openaiapi.InvalidRequest(param+".role", fmt.Sprintf("unsupported role %q: want system, developer, user, assistant or tool", m.Role))
		}
		if blocks > maxBlocks {
			return nil, openaiapi.InvalidRequest("messages", fmt.Sprintf("at most %d content blocks", maxBlocks))
		}
	}
	if len(out.Messages) == 0 {
		return nil, openaiapi.InvalidRequest("messages", "Amazon Bedrock needs at least one user or assistant message")
	}
	ic := cvInferenceConfig{MaxTokens: req.MaxCompletionTokens, Temperature: req.Temperature, TopP: req.TopP}
	if ic.MaxTokens == nil {
		ic.MaxTokens = req.MaxTokens
	}
	if ic.MaxTokens != nil && *ic.MaxTokens < 1 {
		return nil, openaiapi.InvalidRequest("max_tokens", "max_tokens must be at least 1")
	}
	stops, apiErr := stopSequences(req.Stop)
	if apiErr != nil {
		return nil, apiErr
	}
	ic.StopSequences = stops
	if ic.MaxTokens != nil || ic.Temperature != nil || ic.TopP != nil || len(ic.StopSequences) > 0 {
		out.InferenceConfig = &ic
	}
	if out.ToolConfig, apiErr = toolConfig(req.Tools, req.ToolChoice); apiErr != nil {
		return nil, apiErr
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, openaiapi.InvalidRequest("", "cannot encode the Bedrock request: "+err.Error())
	}
	return &translated{ModelID: req.Model, Stream: req.Stream, IncludeUsage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage, Body: b}, nil
}

// contentBlocks reads a message's content: a string, an array of parts,
// or null. Images are allowed only where Converse takes them (a user's
// message).
func contentBlocks(param string, raw json.RawMessage, images bool) ([]cvBlock, *openaiapi.APIError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, openaiapi.InvalidRequest(param+".content", "invalid string")
		}
		if s == "" {
			return nil, nil // Converse refuses blank text blocks
		}
		return []cvBlock{{Text: &s}}, nil
	}
	var parts []contentPart
	if err := jsonv2.Unmarshal(raw, &parts, bodyOptions); err != nil {
		return nil, openaiapi.InvalidRequest(param+".content", "content must be a string, an array of content parts or null")
	}
	var out []cvBlock
	for j, p := range parts {
		pp := fmt.Sprintf("%s.content[%d]", param, j)
		switch p.Type {
		case openaiapi.ContentPartText:
			if p.Text == nil {
				return nil, openaiapi.InvalidRequest(pp+".text", "text content part needs a text field")
			}
			if *p.Text != "" {
				out = append(out, cvBlock{Text: p.Text})
			}
		case "image_url":
			if !images {
				return nil, openaiapi.InvalidRequest(pp, "images are only accepted in user messages")
			}
			if p.ImageURL == nil {
				return nil, openaiapi.InvalidRequest(pp+".image_url", "image_url part needs an image_url.url")
			}
			img, apiErr := dataImage(pp+".image_url.url", p.ImageURL.URL)
			if apiErr != nil {
				return nil, apiErr
			}
			out = append(out, cvBlock{Image: img})
		default:
			return nil, openaiapi.InvalidRequest(pp+".type", fmt.Sprintf("content part type %q is not supported by Amazon Bedrock (want text or image_url)", p.Type))
		}
	}
	return out, nil
}

// dataImage decodes a data: URL (data:image/png;base64,...) into an image
// block; Bedrock takes images as bytes, never fetching a URL.
func dataImage(param, u string) (*cvImage, *openaiapi.APIError) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return nil, openaiapi.InvalidRequest(param, "Amazon Bedrock takes images as data: URLs (data:image/png;base64,...), not links")
	}
	meta, data, ok := strings.Cut(rest, ",")
	mediaType, enc, _ := strings.Cut(meta, ";")
	if !ok || enc != "base64" {
		return nil, openaiapi.InvalidRequest(param, "an image data: URL must be base64 (data:image/png;base64,...)")
	}
	format, ok := map[string]string{"image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg", "image/gif": "gif", "image/webp": "webp"}[strings.ToLower(mediaType)]
	if !ok {
		return nil, openaiapi.InvalidRequest(param, fmt.Sprintf("image type %q is not supported by Amazon Bedrock (want png, jpeg, gif or webp)", mediaType))
	}
	if base64.StdEncoding.DecodedLen(len(data)) > maxImageBytes+3 {
		return nil, openaiapi.InvalidRequest(param, fmt.Sprintf("image larger than %d bytes", maxImageBytes))
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return nil, openaiapi.InvalidRequest(param, "invalid base64 in the image data: URL")
	}
	img := &cvImage{Format: format}
	img.Source.Bytes = b
	return img, nil
}

func stopSequences(raw json.RawMessage) ([]string, *openaiapi.APIError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, openaiapi.InvalidRequest("stop", "stop must be a string or an array of strings")
	}
	if len(many) > maxStopSequences {
		return nil, openaiapi.InvalidRequest("stop", fmt.Sprintf("at most %d stop sequences", maxStopSequences))
	}
	return many, nil
}

func toolConfig(tools []chatTool, choice json.RawMessage) (*cvToolConfig, *openaiapi.APIError) {
	choice = bytes.TrimSpace(choice)
	if len(tools) == 0 {
		return nil, nil
	}
	if len(tools) > maxTools {
		return nil, openaiapi.InvalidRequest("tools", fmt.Sprintf("at most %d tools", maxTools))
	}
	tc := &cvToolConfig{}
	for i, t := range tools {
		if t.Type != "function" || t.Function.Name == "" {
			return nil, openaiapi.InvalidRequest(fmt.Sprintf("tools[%d]", i), "a tool must be a function with a name")
		}
		var ct cvTool
		ct.ToolSpec.Name, ct.ToolSpec.Description = t.Function.Name, t.Function.Description
		ct.ToolSpec.InputSchema.JSON = t.Function.Parameters
		if len(bytes.TrimSpace(ct.ToolSpec.InputSchema.JSON)) == 0 {
			ct.ToolSpec.InputSchema.JSON = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		tc.Tools = append(tc.Tools, ct)
	}
	if len(choice) == 0 || string(choice) == "null" {
		return tc, nil
	}
	var s string
	if json.Unmarshal(choice, &s) == nil {
		switch s {
		case "auto":
			tc.ToolChoice = &cvToolChoice{Auto: &struct{}{}}
		case "required":
			tc.ToolChoice = &cvToolChoice{Any: &struct{}{}}
		case "none":
			return nil, openaiapi.InvalidRequest("tool_choice", `tool_choice "none" is not supported by Amazon Bedrock: send the request without tools`)
		default:
			return nil, openaiapi.InvalidRequest("tool_choice", fmt.Sprintf("unknown tool_choice %q (want auto, required or a function)", s))
		}
		return tc, nil
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(choice, &named); err != nil || named.Type != "function" || named.Function.Name == "" {
		return nil, openaiapi.InvalidRequest("tool_choice", `tool_choice must be "auto", "required" or {"type":"function","function":{"name":...}}`)
	}
	tc.ToolChoice = &cvToolChoice{Tool: &struct {
		Name string `json:"name"`
	}{Name: named.Function.Name}}
	return tc, nil
}
