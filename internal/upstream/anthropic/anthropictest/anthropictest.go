// Package anthropictest is a local fake of Anthropic's Messages API for
// tests: POST /v1/messages checked as Anthropic checks it (x-api-key,
// anthropic-version, a JSON body with model, max_tokens and messages),
// errors in Anthropic's envelope and statuses, and streams framed as
// Anthropic frames them (event: and data: lines, ping events), each event
// its own TCP write, optionally split in two, optionally held at a gate so
// a test can see what reached the client before the rest is sent.
package anthropictest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Server is the fake. URL is its API base, as an InferenceProvider's
// baseURL names it (http://127.0.0.1:PORT/v1).
type Server struct {
	URL string
	Key string
	srv *httptest.Server

	mu      sync.Mutex
	replies []Reply
	reqs    []Request
}

// Request is what reached the fake.
type Request struct {
	Path   string
	Header http.Header
	Body   []byte
}

// Event is one server-sent event.
type Event struct {
	Name string // the event: line
	Data string // the data: line, JSON
}

// Reply is one scripted answer: a JSON body with a status, or a stream.
type Reply struct {
	Status int // 0: 200
	Header http.Header
	Body   string // JSON (a message or an error envelope)
	Events []Event
	// Split writes each event in two TCP writes, cut in its data line.
	Split bool
	// HoldAfter and Gate: after HoldAfter events, the stream waits for
	// Gate to close before sending the rest.
	HoldAfter int
	Gate      <-chan struct{}
	// Cut ends the stream's connection after the events, without a clean
	// end of the chunked body.
	Cut bool
}

// New starts a fake that takes key as its only valid API key.
func New(t testing.TB, key string) *Server {
	s := &Server{Key: key}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	s.URL = s.srv.URL + "/v1"
	return s
}

// Enqueue scripts the next answers, in order. With none left, a request
// gets a text message saying "Hello!".
func (s *Server) Enqueue(r ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies = append(s.replies, r...)
}

// Requests returns what reached the fake so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Last returns the last request; it fails the test when there was none.
func (s *Server) Last(t testing.TB) Request {
	t.Helper()
	r := s.Requests()
	if len(r) == 0 {
		t.Fatal("the fake Anthropic API got no request")
	}
	return r[len(r)-1]
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	s.mu.Lock()
	s.reqs = append(s.reqs, Request{Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	var rep *Reply
	if len(s.replies) > 0 {
		rep = &s.replies[0]
		s.replies = s.replies[1:]
	}
	s.mu.Unlock()
	switch {
	case r.Method != http.MethodPost || r.URL.Path != "/v1/messages":
		writeError(w, http.StatusNotFound, "not_found_error", "Not Found")
		return
	case r.Header.Get("X-Api-Key") == "":
		writeError(w, http.StatusUnauthorized, "authentication_error", "x-api-key header is required")
		return
	case r.Header.Get("X-Api-Key") != s.Key:
		writeError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		return
	case r.Header.Get("Anthropic-Version") == "":
		writeError(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required")
		return
	}
	var req struct {
		Model     string            `json:"model"`
		MaxTokens *int              `json:"max_tokens"`
		Messages  []json.RawMessage `json:"messages"`
		Stream    bool              `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "There was an issue with the format or content of your request.")
		return
	}
	switch {
	case req.Model == "":
		writeError(w, http.StatusBadRequest, "invalid_request_error", "model: Field required")
		return
	case req.MaxTokens == nil:
		writeError(w, http.StatusBadRequest, "invalid_request_error", "max_tokens: Field required")
		return
	case len(req.Messages) == 0:
		writeError(w, http.StatusBadRequest, "invalid_request_error", "messages: Field required")
		return
	}
	if rep == nil {
		if req.Stream {
			rep = &Reply{Events: TextStream(req.Model, "Hello", "!")}
		} else {
			rep = &Reply{Body: TextMessage(req.Model, "Hello!")}
		}
	}
	for k, v := range rep.Header {
		w.Header()[k] = v
	}
	w.Header().Set("Request-Id", "req_fake0123")
	if rep.Events == nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(cmp(rep.Status, http.StatusOK))
		_, _ = io.WriteString(w, rep.Body)
		return
	}
	s.stream(w, rep)
}

func (s *Server) stream(w http.ResponseWriter, rep *Reply) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(cmp(rep.Status, http.StatusOK))
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	for i, ev := range rep.Events {
		if rep.Gate != nil && i == rep.HoldAfter {
			<-rep.Gate
		}
		frame := "event: " + ev.Name + "\ndata: " + ev.Data + "\n\n"
		if rep.Split {
			cut := len("event: "+ev.Name+"\ndata: ") + len(ev.Data)/2
			_, _ = io.WriteString(w, frame[:cut])
			_ = rc.Flush()
			frame = frame[cut:]
		}
		if _, err := io.WriteString(w, frame); err != nil {
			return
		}
		if rc.Flush() != nil {
			return
		}
	}
	if rep.Cut {
		if conn, _, err := rc.Hijack(); err == nil {
			conn.Close()
		}
	}
}

func cmp(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// ErrorBody is Anthropic's error envelope.
func ErrorBody(typ, msg string) string {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
	return string(b)
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_fake0123")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, ErrorBody(typ, msg))
}

// Error is a scripted error answer; a 429 or 529 carries retry-after.
func Error(status int, typ, msg string) Reply {
	r := Reply{Status: status, Body: ErrorBody(typ, msg)}
	if status == http.StatusTooManyRequests || status == 529 {
		r.Header = http.Header{"Retry-After": {"7"}}
	}
	return r
}

// Usage is the usage the fake reports: 11 input tokens not cached, 5 read
// from the cache, 2 written to it; output as counted.
const (
	InputTokens         = 11
	CacheReadTokens     = 5
	CacheCreationTokens = 2
)

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TextMessage is a message answering text.
func TextMessage(model, text string) string {
	return fmt.Sprintf(`{"id":"msg_01Fake","type":"message","role":"assistant","model":%s,"content":[{"type":"text","text":%s}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":%d}}`,
		jsonString(model), jsonString(text), InputTokens, CacheCreationTokens, CacheReadTokens, 3)
}

// ToolUseMessage is a message with some text and one tool_use block.
func ToolUseMessage(model, text, id, name, input string) string {
	return fmt.Sprintf(`{"id":"msg_01FakeTool","type":"message","role":"assistant","model":%s,"content":[{"type":"text","text":%s},{"type":"tool_use","id":%s,"name":%s,"input":%s}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":%d}}`,
		jsonString(model), jsonString(text), jsonString(id), jsonString(name), input, InputTokens, CacheCreationTokens, CacheReadTokens, 9)
}

func messageStart(model, id string) Event {
	return Event{"message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":%s,"type":"message","role":"assistant","model":%s,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":1}}}`,
		jsonString(id), jsonString(model), InputTokens, CacheCreationTokens, CacheReadTokens)}
}

func messageEnd(stop string, output int) []Event {
	return []Event{
		{"message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%s,"stop_sequence":null},"usage":{"output_tokens":%d}}`, jsonString(stop), output)},
		{"message_stop", `{"type":"message_stop"}`},
	}
}

// TextStream is a streamed message whose text comes in the given deltas,
// with a ping after message_start as Anthropic sends.
func TextStream(model string, deltas ...string) []Event {
	evs := []Event{
		messageStart(model, "msg_01FakeStream"),
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
		{"ping", `{"type": "ping"}`},
	}
	for _, d := range deltas {
		evs = append(evs, Event{"content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%s}}`, jsonString(d))})
	}
	evs = append(evs, Event{"content_block_stop", `{"type":"content_block_stop","index":0}`})
	return append(evs, messageEnd("end_turn", len(deltas))...)
}

// ToolUseStream is a streamed message with text, then one tool_use block
// whose input JSON comes in the given pieces.
func ToolUseStream(model, text, id, name string, input ...string) []Event {
	evs := []Event{
		messageStart(model, "msg_01FakeToolStream"),
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
		{"ping", `{"type": "ping"}`},
		{"content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%s}}`, jsonString(text))},
		{"content_block_stop", `{"type":"content_block_stop","index":0}`},
		{"content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":%s,"name":%s,"input":{}}}`, jsonString(id), jsonString(name))},
	}
	for _, p := range input {
		evs = append(evs, Event{"content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":%s}}`, jsonString(p))})
	}
	evs = append(evs, Event{"content_block_stop", `{"type":"content_block_stop","index":1}`})
	return append(evs, messageEnd("tool_use", 9)...)
}

// StreamError is the error event Anthropic sends mid-stream.
func StreamError(typ, msg string) Event {
	return Event{"error", ErrorBody(typ, msg)}
}

// Lines joins an event's fields as Anthropic writes them, for tests that
// write the framing themselves.
func (e Event) String() string {
	return strings.Join([]string{"event: " + e.Name, "data: " + e.Data, "", ""}, "\n")
}
