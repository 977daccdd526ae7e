package databricks

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/upstream"
	"github.com/switchyard-dev/switchyard/internal/upstream/databricks/databrickstest"
)

const chat = `{"model":"databricks-meta-llama-3-3-70b-instruct","messages":[{"role":"user","content":"hi"}]}`

func pat(f *databrickstest.Fake) upstream.Target {
	return upstream.Target{Type: "Databricks", BaseURL: f.BaseURL(), APIKey: databrickstest.PAT, Provider: "inference/dbx"}
}

func oauth(f *databrickstest.Fake) upstream.Target {
	return upstream.Target{Type: "Databricks", BaseURL: f.BaseURL() + "/", ClientSecret: databrickstest.ClientSecret, Provider: "inference/dbx",
		Settings: upstream.Settings{DatabricksOAuthClientID: databrickstest.ClientID}}
}

func send(t *testing.T, a *Adapter, tg upstream.Target, path, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := a.RoundTrip(context.Background(), tg, upstream.Request{Path: path, Body: []byte(body), Header: http.Header{"Authorization": {"Bearer client-key"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func newAdapter() *Adapter { return New(http.DefaultTransport).(*Adapter) }

// TestPAT: the OpenAI clients' path, the token as the bearer (never the
// client's), the body as it is.
func TestPAT(t *testing.T) {
	f := databrickstest.New("databricks-meta-llama-3-3-70b-instruct")
	defer f.Close()
	resp, b := send(t, newAdapter(), pat(f), "/v1/chat/completions", chat)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "echo: hi") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	r := f.Requests()[0]
	if r.Path != "/serving-endpoints/chat/completions" || r.Authorization != "Bearer "+databrickstest.PAT || string(r.Body) != chat {
		t.Fatalf("fake saw %+v", r)
	}
	if f.TokenRequests() != 0 {
		t.Fatal("a PAT provider asked for a token")
	}
	resp, _ = send(t, newAdapter(), pat(f), "/v1/embeddings", chat)
	if resp.StatusCode != 404 || len(f.Requests()) != 1 {
		t.Fatalf("embeddings: %d", resp.StatusCode)
	}
}

// TestOAuth: one token for many requests (also concurrent ones), a new one
// shortly before it expires, a new one and one more try after a 401, and
// only one more.
func TestOAuth(t *testing.T) {
	f := databrickstest.New("databricks-meta-llama-3-3-70b-instruct")
	defer f.Close()
	a := newAdapter()
	now := time.Now()
	var clock sync.Mutex
	a.now = func() time.Time { clock.Lock(); defer clock.Unlock(); return now }
	advance := func(d time.Duration) { clock.Lock(); now = now.Add(d); clock.Unlock() }
	tg := oauth(f)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, b := send(t, a, tg, "/v1/chat/completions", chat)
			if resp.StatusCode != 200 {
				t.Errorf("%d %s", resp.StatusCode, b)
			}
		}()
	}
	wg.Wait()
	if n := f.TokenRequests(); n != 1 {
		t.Fatalf("%d token requests for 8 calls, want 1", n)
	}
	first := f.Requests()[0].Authorization
	if !strings.HasPrefix(first, "Bearer eyJ") {
		t.Fatalf("authorization %q", first)
	}
	advance(time.Hour - RefreshBefore - time.Second)
	send(t, a, tg, "/v1/chat/completions", chat)
	if n := f.TokenRequests(); n != 1 {
		t.Fatalf("renewed %s before expiry", RefreshBefore+time.Second)
	}
	advance(2 * time.Second)
	send(t, a, tg, "/v1/chat/completions", chat)
	if n := f.TokenRequests(); n != 2 {
		t.Fatalf("%d token requests: not renewed within %s of expiry", n, RefreshBefore)
	}

	t.Run("401: a new token, once", func(t *testing.T) {
		f.Revoke()
		n, tokens := len(f.Requests()), f.TokenRequests()
		resp, b := send(t, a, tg, "/v1/chat/completions", chat)
		if resp.StatusCode != 200 || len(f.Requests()) != n+2 || f.TokenRequests() != tokens+1 {
			t.Fatalf("%d %s after %d requests, %d tokens", resp.StatusCode, b, len(f.Requests())-n, f.TokenRequests()-tokens)
		}
		f.SetReply(func(databrickstest.Request) databrickstest.Reply {
			return databrickstest.Reply{Status: 401, ErrorBody: `{"error_code":"401","message":"Invalid Token"}`}
		})
		defer f.SetReply(databrickstest.Echo)
		n, tokens = len(f.Requests()), f.TokenRequests()
		resp, b = send(t, a, tg, "/v1/chat/completions", chat)
		if resp.StatusCode != 401 || len(f.Requests()) != n+2 || f.TokenRequests() != tokens+1 || !strings.Contains(string(b), "authentication_error") {
			t.Fatalf("%d %s after %d requests, %d tokens", resp.StatusCode, b, len(f.Requests())-n, f.TokenRequests()-tokens)
		}
	})

	t.Run("a short-lived token is renewed at half its life", func(t *testing.T) {
		f.SetTokenTTL(60 * time.Second)
		defer f.SetTokenTTL(time.Hour)
		f.Revoke()
		send(t, a, tg, "/v1/chat/completions", chat) // 401, a 60s token
		tokens := f.TokenRequests()
		advance(29 * time.Second)
		send(t, a, tg, "/v1/chat/completions", chat)
		advance(2 * time.Second)
		send(t, a, tg, "/v1/chat/completions", chat)
		if got := f.TokenRequests() - tokens; got != 1 {
			t.Fatalf("%d new tokens, want 1", got)
		}
	})

	t.Run("wrong secret: 401, the secret nowhere", func(t *testing.T) {
		bad := oauth(f)
		bad.ClientSecret = "not-the-secret-0123456789"
		resp, b := send(t, a, bad, "/v1/chat/completions", chat)
		if resp.StatusCode != 401 || !strings.Contains(string(b), "invalid_client") || strings.Contains(string(b), bad.ClientSecret) {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
	})

	t.Run("token endpoint down: an error without the secret", func(t *testing.T) {
		down := oauth(f)
		down.BaseURL = "http://127.0.0.1:1/serving-endpoints"
		_, err := a.RoundTrip(context.Background(), down, upstream.Request{Path: "/v1/chat/completions", Body: []byte(chat)})
		if err == nil || strings.Contains(err.Error(), databrickstest.ClientSecret) {
			t.Fatalf("err %v", err)
		}
	})
}

// TestErrors: Databricks' envelope becomes OpenAI's.
func TestErrors(t *testing.T) {
	f := databrickstest.New("e")
	defer f.Close()
	a := newAdapter()
	for _, tc := range []struct {
		name, body             string
		reply                  databrickstest.Reply
		status                 int
		typ, code, msg, absent string
	}{
		{"no endpoint", `{"model":"missing"}`, databrickstest.Reply{}, 404, "not_found_error", "RESOURCE_DOES_NOT_EXIST", "does not exist", ""},
		{"rate limit", `{"model":"e"}`, databrickstest.Reply{Status: 429, ErrorBody: `{"error_code":"REQUEST_LIMIT_EXCEEDED","message":"Exceeded workspace rate limit for Foundation Model APIs."}`}, 429, "rate_limit_error", "REQUEST_LIMIT_EXCEEDED", "rate limit", ""},
		{"bad request", `{"model":"e"}`, databrickstest.Reply{Status: 400, ErrorBody: `{"error_code":"BAD_REQUEST","message":"Input validation error: max_tokens must be positive"}`}, 400, "invalid_request_error", "BAD_REQUEST", "max_tokens", ""},
		{"OpenAI's shape from an external model", `{"model":"e"}`, databrickstest.Reply{Status: 400, ErrorBody: `{"error":{"message":"Unsupported parameter: 'n'","type":"invalid_request_error","param":"n","code":"unsupported_parameter"}}`}, 400, "invalid_request_error", "unsupported_parameter", "Unsupported parameter", ""},
		{"not JSON", `{"model":"e"}`, databrickstest.Reply{Status: 503, ErrorBody: `upstream connect error`}, 503, "service_unavailable_error", "", "answered 503", ""},
		{"quotes the token", `{"model":"e"}`, databrickstest.Reply{Status: 400, ErrorBody: `{"error_code":"BAD_REQUEST","message":"token ` + databrickstest.PAT + `"}`}, 400, "invalid_request_error", "BAD_REQUEST", "[redacted]", databrickstest.PAT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.SetReply(func(databrickstest.Request) databrickstest.Reply { return tc.reply })
			resp, b := send(t, a, pat(f), "/v1/chat/completions", tc.body)
			var e struct {
				Error struct{ Message, Type, Code string }
			}
			_ = json.Unmarshal(b, &e)
			if resp.StatusCode != tc.status || e.Error.Type != tc.typ || e.Error.Code != tc.code || !strings.Contains(e.Error.Message, tc.msg) || (tc.absent != "" && strings.Contains(string(b), tc.absent)) {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
		})
	}
}
