package anthropicapi

import (
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Stream translates a chat completions stream into Messages API events,
// one chat chunk at a time. The events come in Anthropic's order:
// message_start and a ping before anything else; each text run and each
// tool call is a content block (content_block_start, its deltas,
// content_block_stop); at the end message_delta with the stop reason and
// the usage, then message_stop. A chat stream's usage arrives only in its
// last chunk, so message_start's usage is zero and message_delta carries
// the counts (input, cache read and output), which the SDKs' accumulators
// take from it.
type Stream struct {
	req   *MessagesRequest
	model string

	started, stopped bool
	id               string
	open             string // "text", "tool_use" or ""
	index            int    // of the open block; the next one when none is open
	toolIdx          int    // the chat tool call index of the open tool_use block
	finish           string
	stop             jsontext.Value
	usage            Usage
}

// NewStream starts the translation of one response for the model the
// client named.
func (r *MessagesRequest) NewStream(model string) *Stream {
	return &Stream{req: r, model: model, toolIdx: -1}
}

// Stopped reports whether message_stop was written.
func (s *Stream) Stopped() bool { return s.stopped }

// Started reports whether message_start was written.
func (s *Stream) Started() bool { return s.started }

// Chunk translates one data payload of the chat stream, appending the
// events it makes to dst. A payload holding an error (the gateway's own
// mid-stream error event) becomes an error event.
func (s *Stream) Chunk(dst []byte, data []byte) []byte {
	if s.stopped {
		return dst
	}
	if string(trim(data)) == "[DONE]" {
		return s.end(dst)
	}
	var c chatResponse
	if err := json.Unmarshal(data, &c); err != nil {
		return dst
	}
	if c.Error != nil {
		return s.Error(dst, &APIError{Type: errType(c.Error.Type), Message: c.Error.Message})
	}
	dst = s.start(dst, c.ID)
	if c.Usage != nil {
		s.usage = c.Usage.usage()
	}
	for _, ch := range c.Choices {
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.finish, s.stop = *ch.FinishReason, ch.StopReason
		}
		d := ch.Delta
		if d == nil {
			continue
		}
		if d.Content != nil && *d.Content != "" {
			if s.open != "text" {
				dst = s.closeBlock(dst)
				empty := ""
				dst = s.event(dst, "content_block_start", contentBlockStart{Type: "content_block_start", Index: s.index, ContentBlock: ContentOut{Type: "text", Text: &empty}})
				s.open = "text"
			}
			dst = s.event(dst, "content_block_delta", blockDelta{Type: "content_block_delta", Index: s.index, Delta: delta{Type: "text_delta", Text: d.Content}})
		}
		for _, tc := range d.ToolCalls {
			if s.open != "tool_use" || tc.Index != s.toolIdx {
				dst = s.closeBlock(dst)
				dst = s.event(dst, "content_block_start", contentBlockStart{Type: "content_block_start", Index: s.index,
					ContentBlock: ContentOut{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: jsontext.Value("{}")}})
				s.open, s.toolIdx = "tool_use", tc.Index
			}
			if tc.Function.Arguments != "" {
				args := tc.Function.Arguments
				dst = s.event(dst, "content_block_delta", blockDelta{Type: "content_block_delta", Index: s.index, Delta: delta{Type: "input_json_delta", PartialJSON: &args}})
			}
		}
	}
	return dst
}

// Error ends the stream with an error event (a stream that broke after its
// 200 was sent).
func (s *Stream) Error(dst []byte, e *APIError) []byte {
	if s.stopped {
		return dst
	}
	s.stopped = true
	if e.Type == "" {
		e.Type = ErrTypeAPI
	}
	return s.event(dst, "error", e.Body())
}

func (s *Stream) start(dst []byte, chatID string) []byte {
	if s.started {
		return dst
	}
	s.started = true
	s.id = messageID(chatID)
	m := MessageResponse{ID: s.id, Type: "message", Role: "assistant", Model: s.model, Content: []ContentOut{}}
	dst = s.event(dst, "message_start", struct {
		Type    string          `json:"type"`
		Message MessageResponse `json:"message"`
	}{"message_start", m})
	return s.event(dst, "ping", struct {
		Type string `json:"type"`
	}{"ping"})
}

func (s *Stream) closeBlock(dst []byte) []byte {
	if s.open == "" {
		return dst
	}
	dst = s.event(dst, "content_block_stop", struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}{"content_block_stop", s.index})
	s.open, s.toolIdx = "", -1
	s.index++
	return dst
}

func (s *Stream) end(dst []byte) []byte {
	dst = s.start(dst, "")
	dst = s.closeBlock(dst)
	reason, seq := stopReason(s.finish, s.stop, s.req.StopSequences)
	dst = s.event(dst, "message_delta", struct {
		Type  string `json:"type"`
		Delta struct {
			StopReason   string  `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
		} `json:"delta"`
		Usage Usage `json:"usage"`
	}{Type: "message_delta", Delta: struct {
		StopReason   string  `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	}{reason, seq}, Usage: s.usage})
	dst = s.event(dst, "message_stop", struct {
		Type string `json:"type"`
	}{"message_stop"})
	s.stopped = true
	return dst
}

type contentBlockStart struct {
	Type         string     `json:"type"`
	Index        int        `json:"index"`
	ContentBlock ContentOut `json:"content_block"`
}

type blockDelta struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
	Delta delta  `json:"delta"`
}

type delta struct {
	Type        string  `json:"type"`
	Text        *string `json:"text,omitzero"`
	PartialJSON *string `json:"partial_json,omitzero"`
}

func (s *Stream) event(dst []byte, name string, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return dst
	}
	dst = append(dst, "event: "...)
	dst = append(dst, name...)
	dst = append(dst, "\ndata: "...)
	dst = append(dst, b...)
	return append(dst, "\n\n"...)
}

// errType maps an OpenAI error type to Anthropic's.
func errType(t string) string {
	switch t {
	case "timeout_error", "timeout":
		return ErrTypeTimeout
	case "invalid_request_error":
		return ErrTypeInvalidRequest
	case "rate_limit_error", "rate_limit_exceeded":
		return ErrTypeRateLimit
	case "service_unavailable_error", "overloaded_error":
		return ErrTypeOverloaded
	}
	return ErrTypeAPI
}

func trim(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\n' || b[0] == '\r' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}
