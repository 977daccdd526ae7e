// Package bedrocktest is a local fake of Amazon Bedrock's runtime, for
// tests and for `switchyard dev`, which serves its example Bedrock
// provider with it so that the gateway's real Bedrock adapter runs
// without an AWS account. It speaks the runtime's documented wire
// protocol: POST /model/{modelId}/converse with the Converse API's JSON,
// and /model/{modelId}/converse-stream answered with a real binary event
// stream (the AWS SDK's eventstream encoder), each message split across
// two writes so a reader must reassemble them. Every request's SigV4
// signature is verified against the credentials and region the fake is
// given (recomputed with the SDK's signer; a mismatch is refused with 403
// InvalidSignatureException, as Bedrock does), and errors carry
// Bedrock's x-amzn-ErrorType header and {"message"} body.
package bedrocktest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Test credentials. They are fake; tests grep logs for SecretAccessKey.
const (
	AccessKeyID     = "AKIAFAKEBEDROCKTEST1"
	SecretAccessKey = "fakeSecretKey/DoNotLog+bedrocktest0000000"
	Region          = "us-east-1"
)

// Credentials are the credentials the fake accepts by default.
func Credentials() aws.Credentials {
	return aws.Credentials{AccessKeyID: AccessKeyID, SecretAccessKey: SecretAccessKey}
}

// ToolUse is a tool call the fake answers with.
type ToolUse struct {
	ID, Name string
	// Input is the call's arguments, a JSON object; streamed in two
	// pieces.
	Input string
}

// Usage is the token counts the fake reports.
type Usage struct{ Input, Output, CacheRead int }

// Reply is what the fake answers one request with.
type Reply struct {
	// Status and ErrorType make an error answer (x-amzn-ErrorType and a
	// {"message"} body).
	Status       int
	ErrorType    string
	ErrorMessage string
	// Text is the answer's text, streamed one element per delta.
	Text       []string
	ToolUses   []ToolUse
	StopReason string // default end_turn (tool_use with ToolUses)
	Usage      Usage
	// Exception is sent as an exception event after the text of a stream
	// (e.g. ThrottlingException), which ends it.
	Exception string
	// Pause is slept between stream messages.
	Pause time.Duration
}

// Request is one request the fake received.
type Request struct {
	ModelID string // path-unescaped
	RawPath string
	Stream  bool
	Body    []byte
	Header  http.Header
	// SignatureError is why the request's signature was refused; "" for
	// a request signed correctly.
	SignatureError string
}

// Options configure a fake started with Start.
type Options struct {
	// Addr is the address to listen on, e.g. 127.0.0.1:8100; empty picks
	// a free port on 127.0.0.1.
	Addr string
	// Region is the region signatures must be scoped to; default Region.
	Region string
	// Credentials are what signatures are checked against; default
	// Credentials().
	Credentials aws.Credentials
	// Keep bounds the requests Requests returns to the most recent Keep;
	// 0 keeps every one, as a test wants. A long-running fake sets it;
	// Counts counts them all either way.
	Keep int
}

// Counts are how many requests a fake received.
type Counts struct {
	// Requests is every request, Refused those whose signature did not
	// verify.
	Requests, Refused int
}

// Server is the fake runtime.
type Server struct {
	// URL is its base URL, http://host:port: a provider's baseURL.
	URL string
	// Region is what signatures are checked against.
	Region string

	srv  *http.Server
	done chan struct{}
	keep int

	mu     sync.Mutex
	creds  aws.Credentials
	reply  func(Request) Reply
	reqs   []Request
	counts Counts
}

// New starts a fake on a free loopback port that accepts Credentials()
// for Region and echoes the last user text. It panics when it cannot
// listen, as httptest.NewServer does.
func New() *Server {
	s, err := Start(Options{})
	if err != nil {
		panic(err)
	}
	return s
}

// Start starts a fake as o says; it answers with Echo until SetReply.
// Close stops it.
func Start(o Options) (*Server, error) {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.Region == "" {
		o.Region = Region
	}
	if o.Credentials.AccessKeyID == "" {
		o.Credentials = Credentials()
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("bedrocktest: listen: %w", err)
	}
	s := &Server{URL: "http://" + ln.Addr().String(), Region: o.Region, creds: o.Credentials, reply: Echo, keep: o.Keep, done: make(chan struct{})}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// Close stops the fake, ending the requests in flight.
func (s *Server) Close() {
	_ = s.srv.Close()
	<-s.done
}

// SetCredentials changes the credentials signatures are checked against.
func (s *Server) SetCredentials(c aws.Credentials) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.creds = c
}

// SetReply sets how the fake answers.
func (s *Server) SetReply(f func(Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reply = f
}

// Requests are the requests received so far (signed correctly or not;
// the most recent Options.Keep of them when that is set).
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Counts are the requests received so far.
func (s *Server) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts
}

// Echo answers "echo: " and the last user message's text.
func Echo(r Request) Reply {
	var body struct {
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Text *string `json:"text"`
			} `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(r.Body, &body)
	last := ""
	for _, m := range body.Messages {
		if m.Role != "user" {
			continue
		}
		for _, c := range m.Content {
			if c.Text != nil {
				last = *c.Text
			}
		}
	}
	return Reply{Text: []string{"echo: ", last}, Usage: Usage{Input: 7, Output: 3}}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	raw := r.URL.EscapedPath()
	rest, ok := strings.CutPrefix(raw, "/model/")
	var modelRaw, op string
	if ok {
		modelRaw, op, ok = strings.Cut(rest, "/")
	}
	if !ok || r.Method != http.MethodPost || (op != "converse" && op != "converse-stream") {
		writeError(w, http.StatusNotFound, "UnknownOperationException", "")
		return
	}
	model, err := url.PathUnescape(modelRaw)
	if err != nil {
		writeError(w, http.StatusBadRequest, "ValidationException", "bad model id")
		return
	}
	req := Request{ModelID: model, RawPath: raw, Stream: op == "converse-stream", Body: body, Header: r.Header.Clone()}
	s.mu.Lock()
	creds, reply := s.creds, s.reply
	s.mu.Unlock()
	req.SignatureError = s.verify(r, body, creds)
	s.record(req)
	if req.SignatureError != "" {
		writeError(w, http.StatusForbidden, "InvalidSignatureException", req.SignatureError)
		return
	}
	if !json.Valid(body) {
		writeError(w, http.StatusBadRequest, "ValidationException", "the request body is not JSON")
		return
	}
	rep := reply(req)
	if rep.Status != 0 {
		writeError(w, rep.Status, rep.ErrorType, rep.ErrorMessage)
		return
	}
	if rep.StopReason == "" {
		rep.StopReason = "end_turn"
		if len(rep.ToolUses) > 0 {
			rep.StopReason = "tool_use"
		}
	}
	w.Header().Set("X-Amzn-Requestid", "fake-request-id")
	if req.Stream {
		s.stream(w, rep)
		return
	}
	writeConverse(w, rep)
}

func (s *Server) record(req Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts.Requests++
	if req.SignatureError != "" {
		s.counts.Refused++
	}
	s.reqs = append(s.reqs, req)
	if s.keep > 0 && len(s.reqs) > s.keep {
		s.reqs = append(s.reqs[:0], s.reqs[len(s.reqs)-s.keep:]...)
	}
}

// verify recomputes the request's signature from the headers it says it
// signed; "" when it matches.
func (s *Server) verify(r *http.Request, body []byte, creds aws.Credentials) string {
	auth := r.Header.Get("Authorization")
	algo, params, ok := strings.Cut(auth, " ")
	if !ok || algo != "AWS4-HMAC-SHA256" {
		return "missing or unsupported Authorization"
	}
	fields := map[string]string{}
	for _, p := range strings.Split(params, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
		fields[k] = v
	}
	scope := strings.Split(fields["Credential"], "/")
	if len(scope) != 5 || scope[0] != creds.AccessKeyID || scope[2] != s.Region || scope[3] != "bedrock" || scope[4] != "aws4_request" {
		return "The security token included in the request is invalid."
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return "missing X-Amz-Date"
	}
	if d := time.Since(at); d > 5*time.Minute || d < -5*time.Minute {
		return "Signature expired"
	}
	check, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
	if err != nil {
		return "bad request URI"
	}
	for _, h := range strings.Split(fields["SignedHeaders"], ";") {
		switch h {
		case "host":
		case "content-length":
			check.ContentLength = r.ContentLength
		default:
			check.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, check, hex.EncodeToString(sum[:]), "bedrock", s.Region, at); err != nil {
		return "cannot sign: " + err.Error()
	}
	if check.Header.Get("Authorization") != auth {
		return "The request signature we calculated does not match the signature you provided."
	}
	return ""
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	if msg == "" {
		msg = typ
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-Errortype", typ+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
}

func usageJSON(u Usage) map[string]int {
	m := map[string]int{"inputTokens": u.Input, "outputTokens": u.Output, "totalTokens": u.Input + u.Output + u.CacheRead}
	if u.CacheRead > 0 {
		m["cacheReadInputTokens"] = u.CacheRead
	}
	return m
}

func writeConverse(w http.ResponseWriter, rep Reply) {
	var content []any
	if len(rep.Text) > 0 {
		content = append(content, map[string]string{"text": strings.Join(rep.Text, "")})
	}
	for _, tu := range rep.ToolUses {
		content = append(content, map[string]any{"toolUse": map[string]any{"toolUseId": tu.ID, "name": tu.Name, "input": json.RawMessage(tu.Input)}})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"output":     map[string]any{"message": map[string]any{"role": "assistant", "content": content}},
		"stopReason": rep.StopReason,
		"usage":      usageJSON(rep.Usage),
		"metrics":    map[string]int{"latencyMs": 42},
	})
}

// Event is one ConverseStream message: an event or, with Exception set,
// an exception.
type Event struct {
	Type      string // messageStart, contentBlockDelta, ...
	Exception string
	Payload   any
}

// Events are the stream a reply makes.
func Events(rep Reply) []Event {
	evs := []Event{{Type: "messageStart", Payload: map[string]string{"role": "assistant"}}}
	block := 0
	if len(rep.Text) > 0 {
		for _, t := range rep.Text {
			evs = append(evs, Event{Type: "contentBlockDelta", Payload: map[string]any{"contentBlockIndex": block, "delta": map[string]string{"text": t}}})
		}
		if rep.Exception != "" {
			return append(evs, Event{Exception: rep.Exception, Payload: map[string]string{"message": "fake " + rep.Exception}})
		}
		evs = append(evs, Event{Type: "contentBlockStop", Payload: map[string]int{"contentBlockIndex": block}})
		block++
	}
	for _, tu := range rep.ToolUses {
		evs = append(evs, Event{Type: "contentBlockStart", Payload: map[string]any{"contentBlockIndex": block,
			"start": map[string]any{"toolUse": map[string]string{"toolUseId": tu.ID, "name": tu.Name}}}})
		half := len(tu.Input) / 2
		for _, piece := range []string{tu.Input[:half], tu.Input[half:]} {
			evs = append(evs, Event{Type: "contentBlockDelta", Payload: map[string]any{"contentBlockIndex": block, "delta": map[string]any{"toolUse": map[string]string{"input": piece}}}})
		}
		evs = append(evs, Event{Type: "contentBlockStop", Payload: map[string]int{"contentBlockIndex": block}})
		block++
	}
	if rep.Exception != "" {
		return append(evs, Event{Exception: rep.Exception, Payload: map[string]string{"message": "fake " + rep.Exception}})
	}
	return append(evs,
		Event{Type: "messageStop", Payload: map[string]string{"stopReason": rep.StopReason}},
		Event{Type: "metadata", Payload: map[string]any{"usage": usageJSON(rep.Usage), "metrics": map[string]int{"latencyMs": 42}}})
}

// Encode writes one event as an event stream message.
func Encode(w io.Writer, ev Event) error {
	payload, err := json.Marshal(ev.Payload)
	if err != nil {
		return err
	}
	var m eventstream.Message
	if ev.Exception != "" {
		m.Headers.Set(":message-type", eventstream.StringValue("exception"))
		m.Headers.Set(":exception-type", eventstream.StringValue(ev.Exception))
	} else {
		m.Headers.Set(":message-type", eventstream.StringValue("event"))
		m.Headers.Set(":event-type", eventstream.StringValue(ev.Type))
	}
	m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
	m.Payload = payload
	return eventstream.NewEncoder().Encode(w, m)
}

func (s *Server) stream(w http.ResponseWriter, rep Reply) {
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	for _, ev := range Events(rep) {
		var buf bytes.Buffer
		if err := Encode(&buf, ev); err != nil {
			panic(fmt.Sprintf("bedrocktest: encode: %v", err))
		}
		b := buf.Bytes()
		half := len(b) / 2
		for _, piece := range [][]byte{b[:half], b[half:]} {
			if _, err := w.Write(piece); err != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
		}
		if rep.Pause > 0 {
			time.Sleep(rep.Pause)
		}
	}
}
