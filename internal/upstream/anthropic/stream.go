package anthropic

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-json-experiment/json"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
)

// StreamError is a stream that Anthropic ended with an error event after
// its 200 (overloaded_error mid-response, say). The body's read fails with
// it, which is how the gateway detects a broken upstream: it meters the
// response as broken, logs this error, and ends the client's stream with
// its own OpenAI error event (upstream_broken) and a cut connection. The
// provider's error goes ahead as an SSE comment, which clients ignore and
// a person reading the wire sees. Were it an error event of its own, a
// client raising it could hang up before the gateway has judged the
// stream, and the usage event would say client_closed.
type StreamError struct {
	Type, Message string
}

func (e *StreamError) Error() string {
	return fmt.Sprintf("the provider ended the stream with %s: %s", e.Type, e.Message)
}

// errTruncated is a stream that ended without message_stop.
var errTruncated = errors.New("the provider's stream ended before message_stop")

// errEventTooLarge is an event over maxEventBytes.
var errEventTooLarge = fmt.Errorf("the provider sent a stream event over %d bytes", maxEventBytes)

// streamBody translates a Messages event stream into a chat completions
// stream as it is read: each Read returns the chunks of the events that
// have arrived complete, nothing is held back for later ones.
type streamBody struct {
	src io.ReadCloser
	tr  *streamTranslator
	buf []byte // read buffer
	out []byte // translated, not yet read
	off int
	err error // returned once out is drained
}

func newStreamBody(src io.ReadCloser, tr *streamTranslator) *streamBody {
	return &streamBody{src: src, tr: tr, buf: make([]byte, 32<<10)}
}

func (s *streamBody) Read(p []byte) (int, error) {
	for s.off == len(s.out) {
		s.out, s.off = s.out[:0], 0
		if s.err != nil {
			return 0, s.err
		}
		n, err := s.src.Read(s.buf)
		if n > 0 {
			s.out, s.err = s.tr.feed(s.out, s.buf[:n])
		}
		if err != nil && s.err == nil {
			switch {
			case err != io.EOF:
				s.err = err
			case s.tr.done:
				s.err = io.EOF
			default:
				s.out, s.err = s.tr.finish(s.out)
			}
		}
	}
	n := copy(p, s.out[s.off:])
	s.off += n
	if s.off == len(s.out) && s.err != nil {
		// The last bytes come with the end, in one Read.
		return n, s.err
	}
	return n, nil
}

func (s *streamBody) Close() error { return s.src.Close() }

// streamTranslator is the state of one stream's translation: the SSE
// framing (lines ended by LF, CRLF or CR; an event ends at a blank line;
// event:, data: and comment lines) and the Messages events' meaning.
type streamTranslator struct {
	created      int64
	includeUsage bool
	key          string

	// framing
	line  []byte // the partial line carried over
	cr    bool   // the last byte fed was a CR ending a line
	name  []byte
	data  []byte
	nData int

	// the message
	id, model string
	started   bool
	done      bool
	finishStr string
	usage     usage
	tools     map[int]int // content block index → tool call index
}

func newStreamTranslator(created int64, includeUsage bool, key string) *streamTranslator {
	return &streamTranslator{created: created, includeUsage: includeUsage, key: key, tools: map[int]int{}}
}

// feed takes the next bytes of the stream and appends the chunks of the
// events they complete to dst. An error event, or framing past the
// bounds, ends the stream with an error.
func (t *streamTranslator) feed(dst, p []byte) ([]byte, error) {
	for len(p) > 0 && !t.done {
		if t.cr {
			t.cr = false
			if p[0] == '\n' {
				p = p[1:]
				continue
			}
		}
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			if len(t.line)+len(p) > maxEventBytes {
				return dst, errEventTooLarge
			}
			t.line = append(t.line, p...)
			return dst, nil
		}
		var ln []byte
		if len(t.line) > 0 {
			if len(t.line)+i > maxEventBytes {
				return dst, errEventTooLarge
			}
			t.line = append(t.line, p[:i]...)
			ln = t.line
		} else {
			ln = p[:i]
		}
		t.cr = p[i] == '\r'
		p = p[i+1:]
		var err error
		dst, err = t.lineDone(dst, ln)
		t.line = t.line[:0]
		if err != nil {
			return dst, err
		}
	}
	return dst, nil
}

func (t *streamTranslator) lineDone(dst, ln []byte) ([]byte, error) {
	if len(ln) == 0 {
		return t.dispatch(dst)
	}
	if ln[0] == ':' {
		return dst, nil // a comment
	}
	field, value, _ := bytes.Cut(ln, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(field) {
	case "event":
		t.name = append(t.name[:0], value...)
	case "data":
		if len(t.data)+len(value)+1 > maxEventBytes {
			return dst, errEventTooLarge
		}
		if t.nData > 0 {
			t.data = append(t.data, '\n')
		}
		t.data = append(t.data, value...)
		t.nData++
	}
	return dst, nil
}

// Messages stream events, as far as read here.
type streamEvent struct {
	Type         string           `json:"type"`
	Message      *messageResponse `json:"message"`
	Index        int              `json:"index"`
	ContentBlock *responseBlock   `json:"content_block"`
	Delta        *struct {
		Type        string  `json:"type"`
		Text        string  `json:"text"`
		PartialJSON string  `json:"partial_json"`
		StopReason  *string `json:"stop_reason"`
	} `json:"delta"`
	Usage *usage `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func (t *streamTranslator) dispatch(dst []byte) ([]byte, error) {
	name, data := string(t.name), t.data
	defer func() { t.name, t.data, t.nData = t.name[:0], t.data[:0], 0 }()
	if t.nData == 0 {
		return dst, nil
	}
	var ev streamEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return dst, fmt.Errorf("the provider sent an unreadable %q event", truncate(name, 64))
	}
	if ev.Type == "" {
		ev.Type = name
	}
	switch ev.Type {
	case "ping":
		// Kept as a comment: the client's connection, and the gateway's
		// idle timer, see the provider is alive.
		return append(dst, ": ping\n\n"...), nil
	case "message_start":
		if ev.Message != nil {
			t.id, t.model = ev.Message.ID, ev.Message.Model
			t.usage.merge(ev.Message.Usage)
		}
		empty := ""
		return t.chunk(dst, delta{Role: "assistant", Content: &empty}, nil), nil
	case "content_block_start":
		dst = t.start(dst)
		b := ev.ContentBlock
		if b == nil {
			return dst, nil
		}
		switch b.Type {
		case "text":
			if b.Text != "" {
				return t.chunk(dst, delta{Content: &b.Text}, nil), nil
			}
		case "tool_use":
			k := len(t.tools)
			t.tools[ev.Index] = k
			tc := toolCallOut{Index: &k, ID: b.ID, Type: "function"}
			tc.Function.Name = b.Name
			return t.chunk(dst, delta{ToolCalls: []toolCallOut{tc}}, nil), nil
		}
	case "content_block_delta":
		dst = t.start(dst)
		d := ev.Delta
		if d == nil {
			return dst, nil
		}
		switch d.Type {
		case "text_delta":
			if d.Text != "" {
				return t.chunk(dst, delta{Content: &d.Text}, nil), nil
			}
		case "input_json_delta":
			k, ok := t.tools[ev.Index]
			if ok && d.PartialJSON != "" {
				tc := toolCallOut{Index: &k}
				tc.Function.Arguments = d.PartialJSON
				return t.chunk(dst, delta{ToolCalls: []toolCallOut{tc}}, nil), nil
			}
		}
		// thinking_delta, signature_delta, citations_delta: no chat
		// equivalent.
	case "message_delta":
		dst = t.start(dst)
		t.usage.merge(ev.Usage)
		if ev.Delta != nil && ev.Delta.StopReason != nil {
			t.finishStr = finishReason(*ev.Delta.StopReason)
			f := t.finishStr
			return t.chunk(dst, delta{}, &f), nil
		}
	case "message_stop":
		return t.end(dst), nil
	case "error":
		e := &StreamError{Type: "api_error", Message: "the provider's stream failed"}
		if ev.Error != nil {
			e.Type, e.Message = ev.Error.Type, scrub(ev.Error.Message, t.key)
		}
		dst = t.errorEvent(dst, e)
		t.done = true
		return dst, e
	}
	// content_block_stop, and event types added after this was written.
	return dst, nil
}

// start makes sure a chunk with the role went first, for a stream whose
// message_start was lost.
func (t *streamTranslator) start(dst []byte) []byte {
	if t.started {
		return dst
	}
	empty := ""
	return t.chunk(dst, delta{Role: "assistant", Content: &empty}, nil)
}

func (t *streamTranslator) end(dst []byte) []byte {
	dst = t.start(dst)
	if t.finishStr == "" {
		f := "stop"
		dst = t.chunk(dst, delta{}, &f)
	}
	if t.includeUsage {
		c := chunk{ID: chatID(t.id), Object: openaiapi.ObjectChatCompletionChunk, Created: t.created, Model: t.model,
			Choices: []chunkChoice{}, Usage: t.usage.chat()}
		dst = appendData(dst, &c)
	}
	t.done = true
	return append(dst, "data: [DONE]\n\n"...)
}

// finish ends a stream whose connection closed: cleanly only after
// message_stop.
func (t *streamTranslator) finish(dst []byte) ([]byte, error) {
	if t.done {
		return dst, io.EOF
	}
	return dst, errTruncated
}

// errorEvent is the provider's error as an SSE comment (one line).
func (t *streamTranslator) errorEvent(dst []byte, e *StreamError) []byte {
	line := strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, e.Type+": "+e.Message)
	dst = append(dst, ": error: "...)
	dst = append(dst, line...)
	return append(dst, "\n\n"...)
}

type chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *chatUsage    `json:"usage,omitzero"`
}

type chunkChoice struct {
	Index        int       `json:"index"`
	Delta        delta     `json:"delta"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type delta struct {
	Role      string        `json:"role,omitzero"`
	Content   *string       `json:"content,omitzero"`
	ToolCalls []toolCallOut `json:"tool_calls,omitzero"`
}

func (t *streamTranslator) chunk(dst []byte, d delta, finish *string) []byte {
	t.started = true
	c := chunk{ID: chatID(t.id), Object: openaiapi.ObjectChatCompletionChunk, Created: t.created, Model: t.model,
		Choices: []chunkChoice{{Delta: d, FinishReason: finish}}}
	return appendData(dst, &c)
}

func appendData(dst []byte, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return dst
	}
	dst = append(dst, "data: "...)
	dst = append(dst, b...)
	return append(dst, "\n\n"...)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
