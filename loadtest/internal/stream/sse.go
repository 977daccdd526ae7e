// Package stream sends streaming OpenAI chat completion requests and times
// them the way a user sees them: time to the first content token (TTFT),
// every gap between content chunks (inter-token latency), end to end, with
// the token counts the server reports in its usage chunk.
package stream

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// maxEventBytes bounds one server-sent event; a chunk of a chat completion
// stream is a few hundred bytes, so anything near this is not a stream this
// client understands.
const maxEventBytes = 1 << 20

// ErrEventTooLarge is returned for an event over maxEventBytes.
var ErrEventTooLarge = errors.New("server-sent event too large")

// EventReader reads the data of server-sent events (the text/event-stream
// format): "data:" lines are joined with newlines, a blank line ends an
// event, comment lines (":") and other fields are skipped, and an event cut
// off by the end of the stream is dropped, as the format says.
type EventReader struct {
	br   *bufio.Reader
	data []byte
	has  bool
}

// NewEventReader reads events from r.
func NewEventReader(r io.Reader) *EventReader {
	return &EventReader{br: bufio.NewReaderSize(r, 16<<10)}
}

// Next returns the next event's data, valid until the following call; io.EOF
// when the stream ends.
func (e *EventReader) Next() ([]byte, error) {
	e.data, e.has = e.data[:0], false
	var line []byte
	for {
		var err error
		line, err = e.readLine(line[:0])
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, io.EOF
			}
			return nil, err
		}
		if len(line) == 0 {
			if e.has {
				return e.data, nil
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, found := bytes.Cut(line, []byte{':'})
		if !bytes.Equal(field, []byte("data")) {
			continue
		}
		if found && len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		if e.has {
			e.data = append(e.data, '\n')
		}
		if len(e.data)+len(value) > maxEventBytes {
			return nil, ErrEventTooLarge
		}
		e.data, e.has = append(e.data, value...), true
	}
}

// readLine appends the next line without its terminator (\n or \r\n) to
// buf. A last line without a terminator counts as cut off: io.EOF.
func (e *EventReader) readLine(buf []byte) ([]byte, error) {
	for {
		frag, err := e.br.ReadSlice('\n')
		if len(buf)+len(frag) > maxEventBytes+2 {
			return nil, ErrEventTooLarge
		}
		buf = append(buf, frag...)
		switch {
		case err == nil:
			buf = buf[:len(buf)-1]
			if n := len(buf); n > 0 && buf[n-1] == '\r' {
				buf = buf[:n-1]
			}
			return buf, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return nil, io.EOF
		default:
			return nil, fmt.Errorf("read event stream: %w", err)
		}
	}
}
