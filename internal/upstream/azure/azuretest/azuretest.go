// Package azuretest is a fake Azure OpenAI resource for tests: it serves
// POST /openai/deployments/{deployment}/chat/completions and /completions,
// requires the api-version query and the api-key header as Azure does
// (a missing api-version is Azure's 404 "Resource not found", a wrong key
// its 401, an unknown deployment DeploymentNotFound), and answers in
// Azure's shape: OpenAI's, with prompt_filter_results and
// content_filter_results, a stream that starts with a chunk of
// prompt_filter_results only, and Azure's error envelope.
//
// It is Microsoft Entra ID too, as the Microsoft identity platform
// documents its client-credentials grant: POST
// /{tenant}/oauth2/v2.0/token (its URL is the authority host), a
// form-encoded body with grant_type=client_credentials, client_id,
// client_secret and scope https://cognitiveservices.azure.com/.default,
// answered with {"token_type":"Bearer","expires_in":3599,
// "ext_expires_in":3599,"access_token":...}, or Entra's error body
// ({"error":"invalid_client","error_description":"AADSTS7000215: ...",
// "error_codes":[7000215],...}, 401 for a wrong secret, 400 for the rest).
// The resource takes a token it issued, unexpired and not revoked, as
// Authorization: Bearer in place of the api-key, and answers any other
// with Azure's 401.
package azuretest

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

// Key is the api-key the fake accepts unless SetKey changes it.
const Key = "0123456789abcdef0123456789abcdef"

// APIVersion is the api-version the fake accepts.
const APIVersion = "2024-10-21"

// The Entra ID application the fake issues tokens to.
const (
	TenantID     = "72f988bf-86f1-41af-91ab-2d7cd011db47"
	ClientID     = "0d6f7c1a-1111-4222-8333-944445555666"
	ClientSecret = "Qx8Q~entra.secret-0123456789abcdefABCDEF"
	// Scope is the scope the token endpoint requires.
	Scope = "https://cognitiveservices.azure.com/.default"
)

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

	secret    string               // the client secret the token endpoint takes
	tokens    map[string]time.Time // issued: expiry
	ttl       time.Duration
	issued    int
	tokenReqs int
}

// New starts a fake with the given deployments.
func New(deployments ...string) *Fake {
	f := &Fake{key: Key, deployments: map[string]string{}, reply: Echo, secret: ClientSecret, tokens: map[string]time.Time{}, ttl: 3599 * time.Second}
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

// SetClientSecret sets the client secret the token endpoint accepts (a
// rotated secret).
func (f *Fake) SetClientSecret(s string) { f.mu.Lock(); f.secret = s; f.mu.Unlock() }

// SetTokenTTL sets the life of the tokens issued next.
func (f *Fake) SetTokenTTL(d time.Duration) { f.mu.Lock(); f.ttl = d; f.mu.Unlock() }

// Revoke makes every issued token invalid.
func (f *Fake) Revoke() { f.mu.Lock(); clear(f.tokens); f.mu.Unlock() }

// TokenRequests is how many token requests the token endpoint got.
func (f *Fake) TokenRequests() int { f.mu.Lock(); defer f.mu.Unlock(); return f.tokenReqs }

// AuthorityHost is the fake Entra ID's authority host.
func (f *Fake) AuthorityHost() string { return f.URL }

// entraError is Entra ID's error body.
func entraError(w http.ResponseWriter, status int, code string, aadsts int, desc string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": code, "error_description": fmt.Sprintf("AADSTS%d: %s Trace ID: 0000aaaa-11bb-cccc-dd22-eeeeee333333 Correlation ID: aaaa0000-bb11-2222-33cc-444444dddddd Timestamp: 2026-01-01 00:00:00Z", aadsts, desc),
		"error_codes": []int{aadsts}, "timestamp": "2026-01-01 00:00:00Z", "trace_id": "0000aaaa-11bb-cccc-dd22-eeeeee333333",
		"correlation_id": "aaaa0000-bb11-2222-33cc-444444dddddd", "error_uri": "https://login.microsoftonline.com/error?code=" + fmt.Sprint(aadsts)})
}

// token is the token endpoint.
func (f *Fake) token(w http.ResponseWriter, r *http.Request, tenant string) {
	f.mu.Lock()
	f.tokenReqs++
	secret, ttl := f.secret, f.ttl
	f.mu.Unlock()
	if r.Method != http.MethodPost || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		entraError(w, 400, "invalid_request", 900144, "The request body must contain the following parameter: 'grant_type'.")
		return
	}
	if err := r.ParseForm(); err != nil {
		entraError(w, 400, "invalid_request", 900144, "The request body is not form-encoded.")
		return
	}
	form := r.PostForm
	switch {
	case tenant != TenantID:
		entraError(w, 400, "invalid_request", 90002, fmt.Sprintf("Tenant '%s' not found.", tenant))
	case form.Get("grant_type") != "client_credentials":
		entraError(w, 400, "unsupported_grant_type", 70003, "The app requested an unsupported grant type.")
	case form.Get("client_id") != ClientID:
		entraError(w, 400, "unauthorized_client", 700016, fmt.Sprintf("Application with identifier '%s' was not found in the directory.", form.Get("client_id")))
	case form.Get("scope") != Scope:
		entraError(w, 400, "invalid_scope", 1002012, fmt.Sprintf("The provided value for scope %s is not valid.", form.Get("scope")))
	case form.Get("client_secret") == "":
		entraError(w, 401, "invalid_client", 7000216, "'client_assertion', 'client_secret' or 'request' is required for the 'client_credentials' grant type.")
	case form.Get("client_secret") != secret:
		entraError(w, 401, "invalid_client", 7000215, fmt.Sprintf("Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID, for a secret added to app '%s'.", ClientID))
	default:
		f.mu.Lock()
		f.issued++
		// A JWT's shape, as Entra's are; unique per issue.
		tok := fmt.Sprintf("eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJodHRwczovL2NvZ25pdGl2ZXNlcnZpY2VzLmF6dXJlLmNvbSJ9.c2lnLTAw%04d", f.issued)
		f.tokens[tok] = time.Now().Add(ttl)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		secs := int(ttl / time.Second)
		json.NewEncoder(w).Encode(map[string]any{"token_type": "Bearer", "expires_in": secs, "ext_expires_in": secs, "access_token": tok})
	}
}

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
	if tenant, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/"), "/oauth2/v2.0/token"); ok {
		f.token(w, r, tenant)
		return
	}
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
	bearer, hasBearer := strings.CutPrefix(req.Authorization, "Bearer ")
	expires, issued := f.tokens[bearer]
	f.mu.Unlock()
	// Azure takes the api-key or an Entra ID token.
	authorized := req.APIKey == key || (req.APIKey == "" && hasBearer && issued && time.Now().Before(expires))
	switch {
	case req.APIVersion == "":
		azureError(w, 404, `{"error":{"code":"404","message":"Resource not found"}}`)
		return
	case req.APIVersion != APIVersion:
		azureError(w, 400, `{"error":{"code":"BadRequest","message":"API version not supported"}}`)
		return
	case !authorized && req.APIKey == "" && req.Authorization != "":
		azureError(w, 401, `{"error":{"code":"401","message":"Unauthorized. Access token is missing, invalid, audience is incorrect (https://cognitiveservices.azure.com), or have expired."}}`)
		return
	case !authorized:
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
