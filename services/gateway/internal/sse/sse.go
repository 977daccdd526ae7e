// Package sse cuts a server-sent event stream into events as bytes arrive,
// so a proxy can forward each event untouched the moment it is complete and
// still look inside it.
package sse

import "bytes"

// Splitter finds event boundaries (a blank line, with LF, CRLF or CR line
// ends) in a stream fed in arbitrary pieces. Events are returned as slices of
// its buffer, valid until the next Feed; concatenating every event and the
// final Rest gives back exactly the bytes fed.
type Splitter struct {
	buf []byte
	// start is where the next event begins; scan is how far boundaries
	// have been searched; lineStart is where the line being scanned began.
	start, scan, lineStart int
}

// Feed appends p to the stream.
func (s *Splitter) Feed(p []byte) {
	if s.start > 0 {
		// Drop returned events so the buffer holds at most one partial
		// event plus the new bytes.
		n := copy(s.buf, s.buf[s.start:])
		s.buf = s.buf[:n]
		s.scan -= s.start
		s.lineStart -= s.start
		s.start = 0
	}
	s.buf = append(s.buf, p...)
}

// Next returns the next complete event, including the blank line that ends
// it, or false when no complete event is buffered.
func (s *Splitter) Next() ([]byte, bool) {
	for s.scan < len(s.buf) {
		c := s.buf[s.scan]
		if c != '\n' && c != '\r' {
			s.scan++
			continue
		}
		end := s.scan + 1
		if c == '\r' {
			if end == len(s.buf) {
				// A CR may be the first half of a CRLF still in flight.
				return nil, false
			}
			if s.buf[end] == '\n' {
				end++
			}
		}
		empty := s.scan == s.lineStart
		s.scan, s.lineStart = end, end
		if empty {
			ev := s.buf[s.start:end]
			s.start = end
			return ev, true
		}
	}
	return nil, false
}

// Rest returns the bytes after the last complete event (an unterminated
// event at end of stream) and forgets them.
func (s *Splitter) Rest() []byte {
	r := s.buf[s.start:]
	s.start, s.scan, s.lineStart = len(s.buf), len(s.buf), len(s.buf)
	return r
}

// Data returns the event's data: the values of its data fields joined with
// "\n", and whether it has any data field. A single data line, the shape
// vLLM and OpenAI send, is returned without copying.
func Data(event []byte) ([]byte, bool) {
	var out []byte
	var first []byte
	n := 0
	for len(event) > 0 {
		line := event
		next := len(event)
		if i := bytes.IndexAny(event, "\r\n"); i >= 0 {
			line = event[:i]
			next = i + 1
			if event[i] == '\r' && i+1 < len(event) && event[i+1] == '\n' {
				next++
			}
		}
		event = event[next:]
		value, ok := dataValue(line)
		if !ok {
			continue
		}
		switch n {
		case 0:
			first = value
		case 1:
			out = append(append(append(out, first...), '\n'), value...)
		default:
			out = append(append(out, '\n'), value...)
		}
		n++
	}
	switch n {
	case 0:
		return nil, false
	case 1:
		return first, true
	}
	return out, true
}

var dataField = []byte("data")

// dataValue returns the value of a "data" field line.
func dataValue(line []byte) ([]byte, bool) {
	if !bytes.HasPrefix(line, dataField) {
		return nil, false
	}
	rest := line[len(dataField):]
	if len(rest) == 0 {
		return rest, true
	}
	if rest[0] != ':' {
		return nil, false
	}
	rest = rest[1:]
	if len(rest) > 0 && rest[0] == ' ' {
		rest = rest[1:]
	}
	return rest, true
}

var eventField = []byte("event")

// Name returns the value of the event's event field (the last one, as a
// browser reads it), and whether it has one: Anthropic names every event
// it sends, OpenAI none.
func Name(event []byte) ([]byte, bool) {
	var name []byte
	found := false
	for len(event) > 0 {
		line := event
		next := len(event)
		if i := bytes.IndexAny(event, "\r\n"); i >= 0 {
			line, next = event[:i], i+1
		}
		event = event[next:]
		if !bytes.HasPrefix(line, eventField) {
			continue
		}
		rest := line[len(eventField):]
		switch {
		case len(rest) == 0:
		case rest[0] == ':':
			rest = rest[1:]
			if len(rest) > 0 && rest[0] == ' ' {
				rest = rest[1:]
			}
		default:
			continue // a field whose name only starts with "event"
		}
		name, found = rest, true
	}
	return name, found
}
