package databricks

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/upstream"
)

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// FuzzError: any error body becomes OpenAI's error, with a message and a
// type, and never quotes a secret.
func FuzzError(f *testing.F) {
	f.Add(404, []byte(`{"error_code":"RESOURCE_DOES_NOT_EXIST","message":"no"}`))
	f.Add(400, []byte(`{"error":{"message":"m","type":"invalid_request_error","code":1}}`))
	f.Add(400, []byte(`{"error":"s3cret"}`))
	f.Add(503, []byte(`upstream connect error`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 400 || status > 599 {
			return
		}
		resp := translateError(&http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body))}, []string{"s3cret"})
		b, _ := io.ReadAll(resp.Body)
		var e struct {
			Error struct{ Message, Type string }
		}
		if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
			t.Fatalf("%s: %v", b, err)
		}
		if strings.Contains(e.Error.Message, "s3cret") {
			t.Fatalf("the secret in %s", b)
		}
	})
}

// FuzzTokenResponse: whatever the token endpoint answers, the adapter
// answers or errs without panicking and without the secret, and uses a
// token only from a 200 with an access_token and a positive expires_in.
func FuzzTokenResponse(f *testing.F) {
	f.Add(200, []byte(`{"access_token":"t","token_type":"Bearer","expires_in":3600}`))
	f.Add(200, []byte(`{"access_token":"t","expires_in":"3600"}`))
	f.Add(200, []byte(`{"access_token":"t","expires_in":-1}`))
	f.Add(401, []byte(`{"error":"invalid_client","error_description":"s3cret"}`))
	f.Add(500, []byte(`x`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 200 || status > 599 {
			return
		}
		var sent string
		rt := rtFunc(func(r *http.Request) (*http.Response, error) {
			if strings.HasSuffix(r.URL.Path, TokenPath) {
				return &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body))}, nil
			}
			sent = r.Header.Get("Authorization")
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(`{}`))}, nil
		})
		a := New(rt)
		tg := upstream.Target{BaseURL: "https://w.example/serving-endpoints", ClientSecret: "s3cret", Settings: upstream.Settings{DatabricksOAuthClientID: "id"}}
		resp, err := a.RoundTrip(context.Background(), tg, upstream.Request{Path: "/v1/chat/completions", Body: []byte(`{}`)})
		if err != nil {
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatal(err)
			}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		if strings.Contains(string(b), "s3cret") {
			t.Fatalf("the secret in %s", b)
		}
		if resp.StatusCode == 200 && (status != 200 || sent == "" || sent == "Bearer ") {
			t.Fatalf("served with %q after a token answer %d %s", sent, status, body)
		}
	})
}
