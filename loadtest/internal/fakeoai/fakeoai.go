// Package fakeoai is a scripted OpenAI-compatible streaming server for the
// load generator's tests: each request's answer (status, chunks, usage,
// errors) comes from a function of the request, so tests know exactly what
// the client should measure.
package fakeoai

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Request is what the server saw.
type Request struct {
	// Key is the bearer token of the Authorization header; empty
	// without one.
	Key string `json:"-"`
	// Priority is the X-Switchyard-Priority header.
	Priority string `json:"-"`
	// Refused is the status the server refused the request with (see
	// Server.Refuse); 0 when it was answered by the script.
	Refused   int    `json:"-"`
	Model     string `json:"model"`
	MaxTokens int    `json:"max_tokens"`
	Stream    bool   `json:"stream"`
	Messages  []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// PromptChars is the total length of the request's message contents.
func (r *Request) PromptChars() int {
	n := 0
	for _, m := range r.Messages {
		n += len(m.Content)
	}
	return n
}

// Script is one answer.
type Script struct {
	// Status other than 200 answers with an OpenAI error body.
	Status int
	// Chunks are the text pieces streamed, one event each (after an
	// opening role chunk with empty content, as vLLM sends).
	Chunks []string
	// Gap is slept between chunks (real time).
	Gap time.Duration
	// PromptTokens and CachedTokens go in the usage chunk.
	PromptTokens, CachedTokens int
	// ErrorAfter sends an error event after that many chunks; 0 for none.
	ErrorAfter int
	// NoDone ends the stream without [DONE].
	NoDone bool
	// SimTTFT, when positive, is sent as sim_timing on the last chunk,
	// with SimWorker as its worker.
	SimTTFT   float64
	SimWorker int
}

// Refusal is how the server refuses the requests of one API key, as
// Switchyard's gateway refuses a tenant over its share.
type Refusal struct {
	// Status is the answer's status; 0 means 429.
	Status int
	// Reasons are sent in turn as X-Switchyard-Shed-Reason, one per
	// refused request; none sends no such header.
	Reasons []string
	// RetryAfter is the Retry-After header; empty for none.
	RetryAfter string
	// Times refuses only the key's first Times requests and lets the
	// rest through to the script; 0 refuses them all.
	Times int
}

// Server is a running fake.
type Server struct {
	*httptest.Server
	mu      sync.Mutex
	seen    []Request
	refuse  map[string]Refusal
	refused map[string]int // refusals sent, by key
	// Estimate, when set, answers POST /sim/v1/estimate.
	Estimate func(Request) float64
	// Metrics, when set, is served as /metrics.
	Metrics func() string
}

// New starts a server answering chat completions with script(request).
// Close it when done.
func New(script func(Request) Script) *Server {
	s := &Server{refuse: map[string]Refusal{}, refused: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var req Request
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
			return
		}
		req.Key, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		req.Priority = r.Header.Get("X-Switchyard-Priority")
		s.mu.Lock()
		ref, refuse := s.refuse[req.Key]
		n := s.refused[req.Key]
		refuse = refuse && (ref.Times == 0 || n < ref.Times)
		if refuse {
			s.refused[req.Key] = n + 1
			req.Refused = cmp.Or(ref.Status, http.StatusTooManyRequests)
		}
		s.seen = append(s.seen, req)
		s.mu.Unlock()
		if refuse {
			if len(ref.Reasons) > 0 {
				w.Header().Set("X-Switchyard-Shed-Reason", ref.Reasons[n%len(ref.Reasons)])
			}
			if ref.RetryAfter != "" {
				w.Header().Set("Retry-After", ref.RetryAfter)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(req.Refused)
			fmt.Fprintf(w, `{"error":{"message":"over your share","type":"requests","code":"rate_limit_exceeded"}}`)
			return
		}
		serve(w, script(req))
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"fake-model","object":"model"}]}`)
	})
	mux.HandleFunc("POST /sim/v1/estimate", func(w http.ResponseWriter, r *http.Request) {
		var req Request
		body, _ := io.ReadAll(r.Body)
		if s.Estimate == nil || json.Unmarshal(body, &req) != nil {
			http.Error(w, "no estimate", http.StatusNotFound)
			return
		}
		fmt.Fprintf(w, `{"ttft_seconds":%g,"cached_tokens":0,"prompt_tokens":1}`, s.Estimate(req))
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		if s.Metrics == nil {
			http.NotFound(w, nil)
			return
		}
		_, _ = io.WriteString(w, s.Metrics())
	})
	s.Server = httptest.NewServer(mux)
	return s
}

// Refuse makes the server refuse requests bearing key as r says, before
// they reach the script.
func (s *Server) Refuse(key string, r Refusal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse[key] = r
}

// Seen returns the requests received so far.
func (s *Server) Seen() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.seen...)
}

// Echo is a script that streams max_tokens chunks "t0 ", "t1 ", … and
// reports a quarter of the prompt's characters as prompt tokens.
func Echo(req Request) Script {
	n := max(req.MaxTokens, 1)
	sc := Script{PromptTokens: req.PromptChars() / 4}
	for i := range n {
		sc.Chunks = append(sc.Chunks, fmt.Sprintf("t%d ", i))
	}
	return sc
}

func serve(w http.ResponseWriter, sc Script) {
	if sc.Status != 0 && sc.Status != http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(sc.Status)
		fmt.Fprintf(w, `{"error":{"message":"scripted status %d","type":"scripted"}}`, sc.Status)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	event := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		_ = rc.Flush()
	}
	type delta struct {
		Role    string  `json:"role,omitempty"`
		Content *string `json:"content"`
	}
	type choice struct {
		Index int   `json:"index"`
		Delta delta `json:"delta"`
	}
	empty := ""
	event(map[string]any{"object": "chat.completion.chunk", "choices": []choice{{Delta: delta{Role: "assistant", Content: &empty}}}})
	for i, c := range sc.Chunks {
		if i > 0 && sc.Gap > 0 {
			time.Sleep(sc.Gap)
		}
		if sc.ErrorAfter > 0 && i == sc.ErrorAfter {
			event(map[string]any{"error": map[string]any{"message": "scripted failure", "type": "scripted"}})
			return
		}
		ch := map[string]any{"object": "chat.completion.chunk", "choices": []choice{{Delta: delta{Content: &c}}}}
		if i == len(sc.Chunks)-1 && sc.SimTTFT > 0 {
			ch["sim_timing"] = map[string]any{"ttft_seconds": sc.SimTTFT, "worker": sc.SimWorker}
		}
		event(ch)
	}
	event(map[string]any{"object": "chat.completion.chunk", "choices": []choice{}, "usage": map[string]any{
		"prompt_tokens": sc.PromptTokens, "completion_tokens": len(sc.Chunks), "total_tokens": sc.PromptTokens + len(sc.Chunks),
		"prompt_tokens_details": map[string]any{"cached_tokens": sc.CachedTokens},
	}})
	if !sc.NoDone {
		fmt.Fprint(w, "data: [DONE]\n\n")
		_ = rc.Flush()
	}
}
