package anthropicapi

import (
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// The chat completions request a Messages request becomes. Field order is
// the order of the encoded body.
type chatRequest struct {
	Model             string         `json:"model"`
	Messages          []chatMessage  `json:"messages"`
	MaxTokens         *int64         `json:"max_tokens,omitzero"`
	Stop              []string       `json:"stop,omitzero"`
	Temperature       *float64       `json:"temperature,omitzero"`
	TopP              *float64       `json:"top_p,omitzero"`
	TopK              *int64         `json:"top_k,omitzero"`
	Tools             []chatTool     `json:"tools,omitzero"`
	ToolChoice        any            `json:"tool_choice,omitzero"`
	ParallelToolCalls *bool          `json:"parallel_tool_calls,omitzero"`
	Stream            bool           `json:"stream,omitzero"`
	StreamOptions     *streamOptions `json:"stream_options,omitzero"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role       string         `json:"role"`
	Content    any            `json:"content,omitzero"` // string, []chatPart, or nil
	ToolCalls  []chatToolCall `json:"tool_calls,omitzero"`
	ToolCallID string         `json:"tool_call_id,omitzero"`
}

type chatPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitzero"`
	ImageURL *imageURL `json:"image_url,omitzero"`
}

type imageURL struct {
	URL string `json:"url"`
}

type chatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string       `json:"type"`
	Function chatToolFunc `json:"function"`
}

type chatToolFunc struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitzero"`
	Parameters  jsontext.Value `json:"parameters"`
}

// ToChat translates a parsed Messages request into the chat completions
// body a worker is sent and the router reads (the same bytes, so the
// router tokenizes the prompt the worker renders). A stream always asks
// for usage: the final message_delta carries it.
//
// The mapping: the system prompt is the first message, role system; a user
// turn's tool_result blocks become tool messages (in order, ahead of the
// turn's other content, as Anthropic requires them first); an assistant
// turn's tool_use blocks become tool_calls; text-only content becomes a
// plain string (text blocks joined by newlines, as vLLM joins text parts
// for a string-content template), so a conversation sent through either API
// renders to the same prompt and hits the same cached blocks; content with
// images stays a list of parts. Thinking blocks are dropped.
func (r *MessagesRequest) ToChat(model string) []byte {
	out := chatRequest{
		Model:       model,
		MaxTokens:   r.MaxTokens,
		Stop:        r.StopSequences,
		Temperature: r.Temperature,
		TopP:        r.TopP,
		TopK:        r.TopK,
	}
	if len(r.system) > 0 {
		out.Messages = append(out.Messages, chatMessage{Role: "system", Content: joinText(r.system)})
	}
	for i, m := range r.Messages {
		bs := r.contents[i]
		if m.Role == "assistant" {
			out.Messages = append(out.Messages, assistantMessage(bs))
			continue
		}
		var rest []Block
		for _, b := range bs {
			if b.Type == "tool_result" {
				out.Messages = append(out.Messages, chatMessage{Role: "tool", ToolCallID: b.ToolUseID, Content: toolResultText(b)})
			} else {
				rest = append(rest, b)
			}
		}
		if len(rest) > 0 || len(bs) == 0 {
			out.Messages = append(out.Messages, chatMessage{Role: "user", Content: userContent(rest)})
		}
	}
	for _, t := range r.Tools {
		out.Tools = append(out.Tools, chatTool{Type: "function", Function: chatToolFunc{Name: t.Name, Description: t.Description, Parameters: t.InputSchema}})
	}
	if tc := r.ToolChoice; tc != nil {
		switch tc.Type {
		case "auto", "none":
			out.ToolChoice = tc.Type
		case "any":
			out.ToolChoice = "required"
		case "tool":
			out.ToolChoice = map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}}
		}
		if tc.DisableParallelToolUse {
			f := false
			out.ParallelToolCalls = &f
		}
	}
	if r.IsStream() {
		out.Stream = true
		out.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	b, err := json.Marshal(out, json.Deterministic(true))
	if err != nil {
		// Everything in out was decoded from JSON a moment ago.
		panic("anthropicapi: encoding a chat request: " + err.Error())
	}
	return b
}

func joinText(bs []Block) string {
	var sb strings.Builder
	n := 0
	for _, b := range bs {
		if b.Type != "text" {
			continue
		}
		if n > 0 {
			sb.WriteByte('\n')
		}
		sb.WriteString(b.Text)
		n++
	}
	return sb.String()
}

func userContent(bs []Block) any {
	images := false
	for _, b := range bs {
		images = images || b.Type == "image"
	}
	if !images {
		return joinText(bs)
	}
	parts := make([]chatPart, 0, len(bs))
	for _, b := range bs {
		switch b.Type {
		case "text":
			parts = append(parts, chatPart{Type: "text", Text: b.Text})
		case "image":
			u := b.Source.URL
			if b.Source.Type == "base64" {
				u = "data:" + b.Source.MediaType + ";base64," + b.Source.Data
			}
			parts = append(parts, chatPart{Type: "image_url", ImageURL: &imageURL{URL: u}})
		}
	}
	return parts
}

func assistantMessage(bs []Block) chatMessage {
	m := chatMessage{Role: "assistant"}
	text := false
	for _, b := range bs {
		switch b.Type {
		case "text":
			text = true
		case "tool_use":
			args := "{}"
			if len(b.Input) > 0 && b.Input.Kind() == '{' {
				args = string(b.Input)
			}
			m.ToolCalls = append(m.ToolCalls, chatToolCall{ID: b.ID, Type: "function", Function: chatFunction{Name: b.Name, Arguments: args}})
		}
	}
	if text || len(m.ToolCalls) == 0 {
		m.Content = joinText(bs)
	}
	return m
}

// toolResultText is a tool_result's content as the tool message's text:
// chat templates render tool output as text.
func toolResultText(b Block) string {
	var s string
	switch b.Content.Kind() {
	case '"':
		_ = json.Unmarshal(b.Content, &s)
	case '[':
		var bs []Block
		_ = json.Unmarshal(b.Content, &bs)
		s = joinText(bs)
	}
	if b.IsError && s != "" {
		s = "Error: " + s
	}
	return s
}
