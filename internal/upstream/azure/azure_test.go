package azure_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/switchyard-dev/switchyard/internal/upstream"
	"github.com/switchyard-dev/switchyard/internal/upstream/azure"
	"github.com/switchyard-dev/switchyard/internal/upstream/azure/azuretest"
)

func target(f *azuretest.Fake) upstream.Target {
	return upstream.Target{Type: "AzureOpenAI", BaseURL: f.URL + "/", APIKey: azuretest.Key, Provider: "inference/azure",
		Settings: upstream.Settings{AzureAPIVersion: azuretest.APIVersion}}
}

func send(t *testing.T, tg upstream.Target, path, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := azure.New(http.DefaultTransport).RoundTrip(context.Background(), tg, upstream.Request{Path: path, Body: []byte(body),
		Header: http.Header{"Authorization": {"Bearer client-key"}, "X-Request-Id": {"r1"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestRequest: the deployment's path, the api-version query, the api-key
// header (no Authorization: the client's key never leaves), the body as
// the client's.
func TestRequest(t *testing.T) {
	f := azuretest.New("gpt-4o-prod", "gpt-35-instruct")
	defer f.Close()
	body := `{"model":"gpt-4o-prod","messages":[{"role":"user","content":"hi"}]}`
	resp, b := send(t, target(f), "/v1/chat/completions", body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"content":"echo: hi"`) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	r := f.Requests()[0]
	if r.Deployment != "gpt-4o-prod" || r.Op != "chat/completions" || r.APIVersion != azuretest.APIVersion || r.APIKey != azuretest.Key || r.Authorization != "" || string(r.Body) != body {
		t.Fatalf("fake saw %+v", r)
	}
	resp, b = send(t, target(f), "/v1/completions", `{"model":"gpt-35-instruct","prompt":"say"}`)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"text":"echo: say"`) || f.Requests()[1].Op != "completions" {
		t.Fatalf("completions: %d %s", resp.StatusCode, b)
	}
	resp, _ = send(t, target(f), "/v1/embeddings", `{"model":"gpt-4o-prod"}`)
	if resp.StatusCode != 404 || len(f.Requests()) != 2 {
		t.Fatalf("embeddings: %d", resp.StatusCode)
	}
	resp, b = send(t, target(f), "/v1/chat/completions", `{"messages":[]}`)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "deployment") {
		t.Fatalf("no model: %d %s", resp.StatusCode, b)
	}
}

// TestRefused: no api-version is an error before sending; an Entra token
// for a key is refused before sending.
func TestRefused(t *testing.T) {
	f := azuretest.New("d")
	defer f.Close()
	a := azure.New(http.DefaultTransport)
	tg := target(f)
	tg.Settings.AzureAPIVersion = ""
	if _, err := a.RoundTrip(context.Background(), tg, upstream.Request{Path: "/v1/chat/completions", Body: []byte(`{"model":"d"}`)}); err == nil {
		t.Fatal("no api-version: sent")
	}
	const jwt = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJodHRwczovL2NvZ25pdGl2ZXNlcnZpY2VzLmF6dXJlLmNvbSJ9.c2lnbmF0dXJl"
	for _, k := range []string{jwt, "Bearer " + jwt} {
		tg := target(f)
		tg.APIKey = k
		_, err := a.RoundTrip(context.Background(), tg, upstream.Request{Path: "/v1/chat/completions", Body: []byte(`{"model":"d"}`)})
		if !errors.Is(err, azure.ErrEntraToken) || strings.Contains(err.Error(), jwt) {
			t.Fatalf("Entra token: %v", err)
		}
	}
	if len(f.Requests()) != 0 {
		t.Fatal("a refused request reached Azure")
	}
	if azure.IsEntraToken(azuretest.Key) || azure.IsEntraToken("A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0U1v2W3x4Y5z6A7b8C9d0E1f2G3h4I5j6K7l8M9n0O1p2Q3r4") {
		t.Fatal("an API key taken for a token")
	}
}

// TestStream: the chunk of prompt_filter_results only is dropped, the
// tokens and the usage chunk pass as Azure sent them, read byte by byte.
func TestStream(t *testing.T) {
	f := azuretest.New("d")
	defer f.Close()
	f.SetReply(func(azuretest.Request) azuretest.Reply {
		return azuretest.Reply{Text: []string{"Hel", "lo"}, PromptTokens: 4, CompletionTokens: 2}
	})
	resp, err := azure.New(http.DefaultTransport).RoundTrip(context.Background(), target(f), upstream.Request{Path: "/v1/chat/completions",
		Body: []byte(`{"model":"d","stream":true,"stream_options":{"include_usage":true},"messages":[]}`)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(iotest.OneByteReader(resp.Body))
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	events := strings.Split(strings.TrimSpace(string(b)), "\n\n")
	if len(events) != 5 || strings.Contains(string(b), "prompt_filter_results") || events[4] != "data: [DONE]" {
		t.Fatalf("%d events:\n%s", len(events), b)
	}
	if !strings.Contains(events[0], `"content":"Hel"`) || !strings.Contains(events[3], `"prompt_tokens":4`) || !strings.Contains(events[2], `"finish_reason":"stop"`) {
		t.Fatalf("events:\n%s", b)
	}
}

// TestErrors: Azure's envelope becomes OpenAI's: a type from the status,
// the code a string, the content filter's innererror kept, the key cut
// out, a body that is not JSON a message naming the status, and
// Retry-After passed on.
func TestErrors(t *testing.T) {
	f := azuretest.New("d")
	defer f.Close()
	type want struct {
		status              int
		typ, code, param    string
		msg, inner, retryIn string
	}
	for _, tc := range []struct {
		name  string
		reply azuretest.Reply
		key   string
		dep   string
		want  want
	}{
		{"wrong key", azuretest.Reply{}, "fedcba9876543210fedcba9876543210", "d", want{401, "authentication_error", "401", "", "Access denied", "", ""}},
		{"no deployment", azuretest.Reply{}, "", "other", want{404, "not_found_error", "DeploymentNotFound", "", "deployment for this resource does not exist", "", ""}},
		{"content filter", azuretest.Reply{Status: 400, ErrorBody: `{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy.","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"hate":{"filtered":true,"severity":"high"}}}}}`},
			"", "d", want{400, "invalid_request_error", "content_filter", "prompt", "content management policy", "ResponsibleAIPolicyViolation", ""}},
		{"rate limit", azuretest.Reply{Status: 429, Header: http.Header{"Retry-After": {"7"}}, ErrorBody: `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current pricing tier. Please retry after 7 seconds."}}`},
			"", "d", want{429, "rate_limit_error", "429", "", "exceeded token rate limit", "", "7"}},
		{"not JSON", azuretest.Reply{Status: 502, ErrorBody: `<html>Bad Gateway</html>`}, "", "d", want{502, "server_error", "", "", "Azure OpenAI answered 502 Bad Gateway", "", ""}},
		{"quotes the key", azuretest.Reply{Status: 400, ErrorBody: `{"error":{"code":400,"message":"bad key ` + azuretest.Key + `"}}`}, "", "d", want{400, "invalid_request_error", "400", "", "bad key [redacted]", "", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.SetReply(func(azuretest.Request) azuretest.Reply { return tc.reply })
			f.SetKey(azuretest.Key)
			if tc.key != "" {
				f.SetKey(tc.key)
			}
			resp, b := send(t, target(f), "/v1/chat/completions", `{"model":"`+tc.dep+`","messages":[]}`)
			var e struct {
				Error struct {
					Message, Type string
					Param, Code   *string
					InnerError    json.RawMessage `json:"innererror"`
				}
			}
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			str := func(p *string) string {
				if p == nil {
					return ""
				}
				return *p
			}
			w := tc.want
			if resp.StatusCode != w.status || e.Error.Type != w.typ || str(e.Error.Code) != w.code || str(e.Error.Param) != w.param ||
				!strings.Contains(e.Error.Message, w.msg) || !strings.Contains(string(e.Error.InnerError), w.inner) || resp.Header.Get("Retry-After") != w.retryIn {
				t.Fatalf("%d %s %v", resp.StatusCode, b, resp.Header)
			}
			if strings.Contains(string(b), azuretest.Key) {
				t.Fatal("the key is in the answer")
			}
		})
	}
}
