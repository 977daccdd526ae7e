// Package azuretest is a fake Azure OpenAI resource for tests: it serves
// POST /openai/deployments/{deployment}/chat/completions and /completions,
// requires the api-version query and the api-key header as Azure does
// (a missing api-version is Azure's 404 "Resource not found", a wrong key
// its 401, an unknown deployment DeploymentNotFound), and answers in
// Azure's shape: OpenAI's, with prompt_filter_results and
// content_filter_results, a stream that starts with a chunk of
// prompt_filter_results only, and Azure's error envelope.
package azuretest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// Key is the api-key the fake accepts unless SetKey changes it.
const Key = "0123456789abcdef0123456789abcdef"

// APIVersion is the api-version the fake accepts.
const APIVersion = "2024-10-21"

// Request is what the fake saw.
type Request struct {
	Deployment, Op, APIVersion string
	APIKey, Authorization      string
	Body                       []byte
}

// Reply says how the fake answers.
type Reply struct {
	// Text is the answer, in parts (one chunk each when streamed).
	Text []string
	// FinishReason defaults to stop.
	FinishReason string
	// Status, with ErrorBody, answers with an error instead.
	Status    int
	ErrorBody string
	Header    http.Header
	// PromptTokens and CompletionTokens are the usage.
	PromptTokens, CompletionTokens int
}

// Fake is the fake resource.
type Fake struct {
	*httptest.Server
	mu          sync.Mutex
	key         string
	deployments map[string]string // deployment: model
	reply       func(Request) Reply
	reqs        []Request
}

// New starts a fake with the given deployments.
func New(deployments ...string) *Fake {
	f := &Fake{key: Key, deployments: map[string]string{}, reply: Echo}
	for _, d := range deployments {
		f.deployments[d] = "gpt-4o-2024-08-06"
	}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

// Echo answers "echo: <the last message's text>".
func Echo(r Request) Reply {
	var b struct {
		Messages []struct {
			Content any `json:"content"`
		} `json:"messages"`
		Prompt any `json:"prompt"`
	}
	_ = json.Unmarshal(r.Body, &b)
	text := fmt.Sprint(b.Prompt)
	if n := len(b.Messages); n > 0 {
		text = fmt.Sprint(b.Messages[n-1].Content)
	}
	return Reply{Text: []string{"echo: ", text}, PromptTokens: 9, CompletionTokens: 3}
}

// SetReply sets how the fake answers.
func (f *Fake) SetReply(r func(Request) Reply) { f.mu.Lock(); f.reply = r; f.mu.Unlock() }

// SetKey sets the api-key the fake accepts.
func (f *Fake) SetKey(k string) { f.mu.Lock(); f.key = k; f.mu.Unlock() }

// Requests are the requests the fake saw, in order.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.reqs...)
}

func azureError(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/openai/deployments/")
	dep, op, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || r.Method != http.MethodPost || (op != "chat/completions" && op != "completions") {
		azureError(w, 404, `{"error":{"code":"404","message":"Resource not found"}}`)
		return
	}
	body, _ := io.ReadAll(r.Body)
	req := Request{Deployment: dep, Op: op, APIVersion: r.URL.Query().Get("api-version"), APIKey: r.Header.Get("Api-Key"),
		Authorization: r.Header.Get("Authorization"), Body: body}
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	key, model, known, reply := f.key, f.deployments[dep], f.deployments[dep] != "", f.reply
	f.mu.Unlock()
	switch {
	case req.APIVersion == "":
		azureError(w, 404, `{"error":{"code":"404","message":"Resource not found"}}`)
		return
	case req.APIVersion != APIVersion:
		azureError(w, 400, `{"error":{"code":"BadRequest","message":"API version not supported"}}`)
		return
	case req.APIKey != key:
		azureError(w, 401, `{"error":{"code":"401","message":"Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."}}`)
		return
	case !known:
		azureError(w, 404, `{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again."}}`)
		return
	}
	rep := reply(req)
	for k, v := range rep.Header {
		w.Header()[k] = v
	}
	if rep.Status != 0 {
		azureError(w, rep.Status, rep.ErrorBody)
		return
	}
	var in struct {
		Stream        bool `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	_ = json.Unmarshal(body, &in)
	finish := rep.FinishReason
	if finish == "" {
		finish = "stop"
	}
	chat := op == "chat/completions"
	filterResults := map[string]any{"hate": map[string]any{"filtered": false, "severity": "safe"}, "violence": map[string]any{"filtered": false, "severity": "safe"}}
	usage := map[string]any{"prompt_tokens": rep.PromptTokens, "completion_tokens": rep.CompletionTokens, "total_tokens": rep.PromptTokens + rep.CompletionTokens}
	if !in.Stream {
		text := strings.Join(rep.Text, "")
		choice := map[string]any{"index": 0, "finish_reason": finish, "logprobs": nil, "content_filter_results": filterResults}
		object := "text_completion"
		if chat {
			choice["message"], object = map[string]any{"role": "assistant", "content": text}, "chat.completion"
		} else {
			choice["text"] = text
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-azure-1", "object": object, "created": 1733000000, "model": model,
			"choices": []any{choice}, "usage": usage, "system_fingerprint": "fp_azure",
			"prompt_filter_results": []any{map[string]any{"prompt_index": 0, "content_filter_results": filterResults}}})
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
	object := "chat.completion.chunk"
	if !chat {
		object = "text_completion"
	}
	// Azure's first chunk: the prompt's filter results, no choices.
	event(map[string]any{"choices": []any{}, "created": 0, "id": "", "model": "", "object": "",
		"prompt_filter_results": []any{map[string]any{"prompt_index": 0, "content_filter_results": filterResults}}})
	chunk := func(delta map[string]any, finish any) map[string]any {
		c := map[string]any{"index": 0, "finish_reason": finish, "logprobs": nil, "content_filter_results": filterResults}
		if chat {
			c["delta"] = delta
		} else {
			c["text"] = delta["content"]
		}
		return map[string]any{"id": "chatcmpl-azure-2", "object": object, "created": 1733000000, "model": model, "system_fingerprint": "fp_azure", "choices": []any{c}}
	}
	for i, p := range rep.Text {
		d := map[string]any{"content": p}
		if i == 0 {
			d["role"] = "assistant"
		}
		event(chunk(d, nil))
	}
	event(chunk(map[string]any{}, finish))
	if in.StreamOptions.IncludeUsage {
		event(map[string]any{"id": "chatcmpl-azure-2", "object": object, "created": 1733000000, "model": model, "choices": []any{}, "usage": usage})
	}
	io.WriteString(w, "data: [DONE]\n\n")
}
