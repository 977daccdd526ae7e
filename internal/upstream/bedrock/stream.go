package bedrock

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
)

// ErrStreamException is a ConverseStream that ended with an exception
// event (a throttle, a model error) or an error message after the
// response's headers. The response body's Read returns it, which the
// gateway reports as a broken stream: an error event in the client's API,
// then the connection cut.
var ErrStreamException = errors.New("bedrock stream exception")

// maxEventBytes bounds one event stream message. The SDK's decoder takes
// a message's length from its prelude and reads that much, so the prelude
// is checked first: Bedrock's events are small (a text or tool input
// delta, usage).
const maxEventBytes = 1 << 20

// errStreamTruncated is a stream that ended before its messageStop.
var errStreamTruncated = errors.New("bedrock stream ended before messageStop")

// stream translates ConverseStream's event stream into chat.completion.chunk
// server-sent events, one upstream event at a time: each Read decodes
// events until one produces output, so nothing is buffered beyond one
// event.
type stream struct {
	src     io.ReadCloser
	br      *bufio.Reader
	dec     *eventstream.Decoder
	payload []byte
	out     bytes.Buffer
	err     error // returned once out is drained

	id, model    string
	created      int64
	includeUsage bool
	stopped      bool        // messageStop seen
	tools        map[int]int // content block index → tool call index
	nextTool     int
}

func newStream(src io.ReadCloser, model string, includeUsage bool, now time.Time) *stream {
	return &stream{src: src, br: bufio.NewReaderSize(src, 16<<10), dec: eventstream.NewDecoder(), payload: make([]byte, 0, 4096),
		id: newID(), model: model, created: now.Unix(), includeUsage: includeUsage, tools: map[int]int{}}
}

func (s *stream) Read(p []byte) (int, error) {
	for s.out.Len() == 0 {
		if s.err != nil {
			return 0, s.err
		}
		s.step()
	}
	return s.out.Read(p)
}

func (s *stream) Close() error { return s.src.Close() }

// step decodes one message and writes what it means.
func (s *stream) step() {
	prelude, err := s.br.Peek(8)
	if err == nil {
		total, headers := binary.BigEndian.Uint32(prelude), binary.BigEndian.Uint32(prelude[4:])
		if total > maxEventBytes || total < 16 || headers > total-16 {
			s.err = fmt.Errorf("bedrock stream: a message of %d bytes (%d of headers): want at most %d", total, headers, maxEventBytes)
			return
		}
	} else if len(prelude) > 0 && errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	var m eventstream.Message
	if err == nil {
		m, err = s.dec.Decode(io.LimitReader(s.br, int64(binary.BigEndian.Uint32(prelude))), s.payload[:0])
	}
	if err != nil {
		switch {
		case (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) && s.stopped:
			// The answer is whole once messageStop came: a stream cut in
			// the metadata after it loses only the usage.
			s.done()
		case errors.Is(err, io.EOF):
			s.err = errStreamTruncated
		default:
			s.err = fmt.Errorf("bedrock stream: decode: %w", err)
		}
		return
	}
	if cap(m.Payload) > cap(s.payload) && cap(m.Payload) <= 1<<20 {
		s.payload = m.Payload[:0]
	}
	if err := s.event(m); err != nil {
		s.err = err
	}
}

// done ends the stream with [DONE].
func (s *stream) done() {
	s.out.WriteString("data: [DONE]\n\n")
	s.err = io.EOF
}

func header(m eventstream.Message, name string) string {
	if v := m.Headers.Get(name); v != nil {
		return v.String()
	}
	return ""
}

type streamEvent struct {
	ContentBlockIndex int `json:"contentBlockIndex"`
	Start             *struct {
		ToolUse *struct {
			ToolUseID string `json:"toolUseId"`
			Name      string `json:"name"`
		} `json:"toolUse"`
	} `json:"start"`
	Delta *struct {
		Text    *string `json:"text"`
		ToolUse *struct {
			Input string `json:"input"`
		} `json:"toolUse"`
	} `json:"delta"`
	StopReason string   `json:"stopReason"`
	Usage      *cvUsage `json:"usage"`
	Message    string   `json:"message"`
}

func (s *stream) event(m eventstream.Message) error {
	switch mt := header(m, ":message-type"); mt {
	case "exception":
		t := header(m, ":exception-type")
		var ev streamEvent
		_ = json.Unmarshal(m.Payload, &ev)
		return fmt.Errorf("%w: %s: %s", ErrStreamException, t, clip(ev.Message))
	case "error":
		return fmt.Errorf("%w: %s: %s", ErrStreamException, header(m, ":error-code"), clip(header(m, ":error-message")))
	case "event":
	default:
		return fmt.Errorf("bedrock stream: unknown message type %q", clip(mt))
	}
	var ev streamEvent
	if err := json.Unmarshal(m.Payload, &ev); err != nil {
		return fmt.Errorf("bedrock stream: %s event: %w", clip(header(m, ":event-type")), err)
	}
	switch header(m, ":event-type") {
	case "messageStart":
		empty := ""
		return s.chunk(chunkDelta{Role: "assistant", Content: &empty}, nil)
	case "contentBlockStart":
		if ev.Start == nil || ev.Start.ToolUse == nil {
			return nil
		}
		i := s.nextTool
		s.nextTool++
		s.tools[ev.ContentBlockIndex] = i
		tc := respToolCall{Index: &i, ID: ev.Start.ToolUse.ToolUseID, Type: "function"}
		tc.Function.Name = ev.Start.ToolUse.Name
		return s.chunk(chunkDelta{ToolCalls: []respToolCall{tc}}, nil)
	case "contentBlockDelta":
		switch d := ev.Delta; {
		case d == nil:
		case d.Text != nil:
			if *d.Text == "" {
				return nil
			}
			return s.chunk(chunkDelta{Content: d.Text}, nil)
		case d.ToolUse != nil:
			i, ok := s.tools[ev.ContentBlockIndex]
			if !ok {
				return fmt.Errorf("bedrock stream: tool input for block %d, which did not start a tool use", ev.ContentBlockIndex)
			}
			tc := respToolCall{Index: &i}
			tc.Function.Arguments = d.ToolUse.Input
			return s.chunk(chunkDelta{ToolCalls: []respToolCall{tc}}, nil)
		}
		return nil
	case "messageStop":
		s.stopped = true
		fr := finishReason(ev.StopReason)
		return s.chunk(chunkDelta{}, &fr)
	case "metadata":
		if s.includeUsage && ev.Usage != nil {
			b, err := json.Marshal(chatChunk{ID: s.id, Object: openaiapi.ObjectChatCompletionChunk, Created: s.created, Model: s.model,
				Choices: []chunkChoice{}, Usage: ev.Usage.openAI()})
			if err != nil {
				return err
			}
			s.sse(b)
		}
		if s.stopped {
			s.done()
			return s.err
		}
		return nil
	}
	return nil // contentBlockStop, and events added later
}

func (s *stream) chunk(d chunkDelta, finish *string) error {
	b, err := json.Marshal(chatChunk{ID: s.id, Object: openaiapi.ObjectChatCompletionChunk, Created: s.created, Model: s.model,
		Choices: []chunkChoice{{Delta: d, FinishReason: finish}}})
	if err != nil {
		return err
	}
	s.sse(b)
	return nil
}

func (s *stream) sse(data []byte) {
	s.out.WriteString("data: ")
	s.out.Write(data)
	s.out.WriteString("\n\n")
}

// clip bounds a message taken from upstream for an error.
func clip(s string) string {
	if len(s) > 512 {
		return s[:512] + "..."
	}
	return s
}
