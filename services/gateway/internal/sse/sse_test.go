package sse

import (
	"bytes"
	"slices"
	"testing"
)

func TestSplitter(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		events []string
		rest   string
	}{
		{"lf", "data: a\n\ndata: b\n\n", []string{"data: a\n\n", "data: b\n\n"}, ""},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"data: a\r\n\r\n", "data: b\r\n\r\n"}, ""},
		{"cr", "data: a\r\rdata: b\r\r", []string{"data: a\r\r"}, "data: b\r\r"}, // trailing CR may precede LF
		{"multi-line event", "event: x\ndata: 1\ndata: 2\n\n", []string{"event: x\ndata: 1\ndata: 2\n\n"}, ""},
		{"comment event", ": ping\n\ndata: a\n\n", []string{": ping\n\n", "data: a\n\n"}, ""},
		{"leading blank line", "\ndata: a\n\n", []string{"\n", "data: a\n\n"}, ""},
		{"unterminated tail", "data: a\n\ndata: [DONE]", []string{"data: a\n\n"}, "data: [DONE]"},
		{"mixed terminators", "data: a\r\n\ndata: b\n\r\n", []string{"data: a\r\n\n", "data: b\n\r\n"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Every split of the stream into two feeds gives the same events.
			for cut := 0; cut <= len(tc.stream); cut++ {
				var s Splitter
				var got []string
				for _, part := range []string{tc.stream[:cut], tc.stream[cut:]} {
					s.Feed([]byte(part))
					for {
						ev, ok := s.Next()
						if !ok {
							break
						}
						got = append(got, string(ev))
					}
				}
				rest := string(s.Rest())
				if !slices.Equal(got, tc.events) || rest != tc.rest {
					t.Fatalf("cut %d: events %q rest %q, want %q rest %q", cut, got, rest, tc.events, tc.rest)
				}
			}
		})
	}
}

func TestData(t *testing.T) {
	tests := []struct {
		event string
		data  string
		ok    bool
	}{
		{"data: {\"a\":1}\n\n", `{"a":1}`, true},
		{"data:{\"a\":1}\r\n\r\n", `{"a":1}`, true},
		{"data:  two spaces\n\n", " two spaces", true},
		{"data: 1\ndata: 2\ndata: 3\n\n", "1\n2\n3", true},
		{"data\n\n", "", true},
		{": comment\n\n", "", false},
		{"event: ping\nid: 4\n\n", "", false},
		{"database: x\n\n", "", false},
		{"data: [DONE]", "[DONE]", true},
	}
	for _, tc := range tests {
		got, ok := Data([]byte(tc.event))
		if string(got) != tc.data || ok != tc.ok {
			t.Errorf("Data(%q) = %q, %v; want %q, %v", tc.event, got, ok, tc.data, tc.ok)
		}
	}
}

func TestName(t *testing.T) {
	tests := []struct {
		event string
		name  string
		ok    bool
	}{
		{"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", "message_stop", true},
		{"data: {}\r\nevent:ping\r\n\r\n", "ping", true},
		{"event: a\nevent: b\n\n", "b", true},
		{"event\n\n", "", true},
		{"data: {\"error\":{}}\n\n", "", false},
		{"events: x\n\n", "", false},
	}
	for _, tc := range tests {
		got, ok := Name([]byte(tc.event))
		if string(got) != tc.name || ok != tc.ok {
			t.Errorf("Name(%q) = %q, %v; want %q, %v", tc.event, got, ok, tc.name, tc.ok)
		}
	}
}

// FuzzSplitter feeds a stream in arbitrary pieces: the events plus the rest
// must reproduce the stream byte for byte, and every event must end with a
// blank line.
func FuzzSplitter(f *testing.F) {
	f.Add([]byte("data: a\n\ndata: b\r\n\r\n: c\r\rdata: [DONE]\n\n"), uint8(3))
	f.Add([]byte("\r\n\r\r\n\n"), uint8(1))
	f.Fuzz(func(t *testing.T, stream []byte, step uint8) {
		n := int(step%16) + 1
		var s Splitter
		var out []byte
		for i := 0; i < len(stream); i += n {
			s.Feed(stream[i:min(i+n, len(stream))])
			for {
				ev, ok := s.Next()
				if !ok {
					break
				}
				if !bytes.HasSuffix(ev, []byte("\n\n")) && !bytes.HasSuffix(ev, []byte("\r\n")) && !bytes.HasSuffix(ev, []byte("\r")) && !bytes.Equal(ev, []byte("\n")) {
					t.Fatalf("event %q does not end with a line terminator", ev)
				}
				_, _ = Data(ev)
				out = append(out, ev...)
			}
		}
		out = append(out, s.Rest()...)
		if !bytes.Equal(out, stream) {
			t.Fatalf("reassembled %q, want %q", out, stream)
		}
	})
}
