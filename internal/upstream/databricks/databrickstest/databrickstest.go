// Package databrickstest is a fake Databricks workspace for tests: Model
// Serving's OpenAI-compatible API at /serving-endpoints/chat/completions
// and /completions (the body's model names the serving endpoint), which
// requires a bearer token (a personal access token or one the fake's
// OAuth endpoint issued and has not expired or revoked), and the OAuth
// token endpoint /oidc/v1/token (client credentials with HTTP basic auth,
// scope all-apis). Errors are in Databricks' shape:
// {"error_code": ..., "message": ...}.
package databrickstest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Credentials the fake accepts.
const (
	PAT          = "dapi0123456789abcdef0123456789abcdef"
	ClientID     = "6f0b2c1e-0000-4000-8000-00000000c1d0"
	ClientSecret = "dose0123456789secretsecretsecret"
)

// Request is what the fake's serving API saw.
type Request struct {
	Path, Authorization string
	Body                []byte
}

// Reply says how the fake answers.
type Reply struct {
	Text      []string
	Status    int
	ErrorBody string
}

// Fake is the fake workspace.
type Fake struct {
	*httptest.Server
	mu        sync.Mutex
	endpoints map[string]bool
	tokens    map[string]time.Time // issued token: expiry
	ttl       time.Duration
	issued    int
	reply     func(Request) Reply
	reqs      []Request
	tokenReqs int
}

// New starts a fake serving the given endpoints.
func New(endpoints ...string) *Fake {
	f := &Fake{endpoints: map[string]bool{}, tokens: map[string]time.Time{}, ttl: time.Hour, reply: Echo}
	for _, e := range endpoints {
		f.endpoints[e] = true
	}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

// URL of the serving endpoints, the provider's base URL.
func (f *Fake) BaseURL() string { return f.URL + "/serving-endpoints" }

// Echo answers "echo: <the last message's text>".
func Echo(r Request) Reply {
	var b struct {
		Messages []struct {
			Content any `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(r.Body, &b)
	text := ""
	if n := len(b.Messages); n > 0 {
		text = fmt.Sprint(b.Messages[n-1].Content)
	}
	return Reply{Text: []string{"echo: ", text}}
}

// SetReply sets how the serving API answers.
func (f *Fake) SetReply(r func(Request) Reply) { f.mu.Lock(); f.reply = r; f.mu.Unlock() }

// SetTokenTTL sets the expires_in of the tokens issued from now on.
func (f *Fake) SetTokenTTL(d time.Duration) { f.mu.Lock(); f.ttl = d; f.mu.Unlock() }

// Revoke makes every issued token invalid.
func (f *Fake) Revoke() { f.mu.Lock(); clear(f.tokens); f.mu.Unlock() }

// Requests are the serving API's requests, in order.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.reqs...)
}

// TokenRequests is how many token requests succeeded.
func (f *Fake) TokenRequests() int { f.mu.Lock(); defer f.mu.Unlock(); return f.tokenReqs }

func dbError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error_code": code, "message": msg})
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/oidc/v1/token" {
		f.token(w, r)
		return
	}
	op, ok := strings.CutPrefix(r.URL.Path, "/serving-endpoints/")
	if !ok || r.Method != http.MethodPost || (op != "chat/completions" && op != "completions") {
		dbError(w, 404, "ENDPOINT_NOT_FOUND", "No API found for '"+r.Method+" "+r.URL.Path+"'")
		return
	}
	body, _ := io.ReadAll(r.Body)
	req := Request{Path: r.URL.Path, Authorization: r.Header.Get("Authorization"), Body: body}
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	tok, _ := strings.CutPrefix(req.Authorization, "Bearer ")
	exp, issued := f.tokens[tok]
	valid := tok == PAT || (issued && time.Now().Before(exp))
	reply := f.reply
	f.mu.Unlock()
	if !valid {
		dbError(w, 401, "401", "Credential was not sent or was of an unsupported type for this API.")
		return
	}
	var in struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	_ = json.Unmarshal(body, &in)
	f.mu.Lock()
	known := f.endpoints[in.Model]
	f.mu.Unlock()
	if !known {
		dbError(w, 404, "RESOURCE_DOES_NOT_EXIST", fmt.Sprintf("The given endpoint %q does not exist.", in.Model))
		return
	}
	rep := reply(req)
	if rep.Status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.Status)
		io.WriteString(w, rep.ErrorBody)
		return
	}
	usage := map[string]any{"prompt_tokens": 8, "completion_tokens": 2, "total_tokens": 10}
	if !in.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-dbx-1", "object": "chat.completion", "created": 1733000000, "model": in.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": strings.Join(rep.Text, "")}}},
			"usage":   usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	event := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "chatcmpl-dbx-2", "object": "chat.completion.chunk", "created": 1733000000, "model": in.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	for i, p := range rep.Text {
		d := map[string]any{"content": p}
		if i == 0 {
			d["role"] = "assistant"
		}
		event(chunk(d, nil))
	}
	event(chunk(map[string]any{}, "stop"))
	if in.StreamOptions.IncludeUsage {
		event(map[string]any{"id": "chatcmpl-dbx-2", "object": "chat.completion.chunk", "created": 1733000000, "model": in.Model, "choices": []any{}, "usage": usage})
	}
	io.WriteString(w, "data: [DONE]\n\n")
}

func (f *Fake) token(w http.ResponseWriter, r *http.Request) {
	oauthError := func(status int, code string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": "Client authentication failed"})
	}
	id, secret, ok := r.BasicAuth()
	if r.Method != http.MethodPost || !ok || id != ClientID || secret != ClientSecret {
		oauthError(401, "invalid_client")
		return
	}
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "client_credentials" || r.PostForm.Get("scope") != "all-apis" ||
		r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
		oauthError(400, "invalid_request")
		return
	}
	f.mu.Lock()
	f.issued++
	f.tokenReqs++
	tok := fmt.Sprintf("eyJhbGciOiJSUzI1NiJ9.fake-dbx-oauth-%d.sig", f.issued)
	ttl := f.ttl
	f.tokens[tok] = time.Now().Add(ttl)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "scope": "all-apis", "expires_in": int(ttl / time.Second)})
}
