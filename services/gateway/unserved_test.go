package gateway

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestUnservedOpenAISDK: an OpenAI SDK calling a path the gateway does not
// serve still gets OpenAI's error.
func TestUnservedOpenAISDK(t *testing.T) {
	e := newEnv(t, envOpts{noNATS: true})
	client := openai.NewClient(option.WithBaseURL(e.url+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	_, err := client.Embeddings.New(t.Context(), openai.EmbeddingNewParams{
		Model: testModel,
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hi")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v, want an *openai.Error", err)
	}
	if apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "unknown_url" || apiErr.Type != "invalid_request_error" {
		t.Errorf("status %d code %q type %q, want 404 unknown_url invalid_request_error", apiErr.StatusCode, apiErr.Code, apiErr.Type)
	}
}

// TestUnservedErrorShape: which shape an unserved path or method answers
// in, decided by the path and the anthropic-version header.
func TestUnservedErrorShape(t *testing.T) {
	e := newEnv(t, envOpts{noNATS: true})
	const (
		openAI    = "openai"
		anthropic = "anthropic"
	)
	tests := []struct {
		method, path     string
		anthropicVersion bool
		status           int
		shape, errType   string
	}{
		{method: http.MethodPost, path: "/v1/messages", status: 400, shape: anthropic, errType: "invalid_request_error"},
		{method: http.MethodGet, path: "/v1/messages", status: 405, shape: anthropic, errType: "invalid_request_error"},
		{method: http.MethodPost, path: "/v1/messages/count_tokens", status: 400, shape: anthropic, errType: "invalid_request_error"},
		{method: http.MethodPost, path: "/v1/messages/batches", status: 404, shape: anthropic, errType: "not_found_error"},
		{method: http.MethodPost, path: "/v1/complete", status: 404, shape: anthropic, errType: "not_found_error"},
		{method: http.MethodGet, path: "/v1/skills", anthropicVersion: true, status: 404, shape: anthropic, errType: "not_found_error"},
		{method: http.MethodGet, path: "/v1/chat/completions", anthropicVersion: true, status: 405, shape: anthropic, errType: "invalid_request_error"},
		{method: http.MethodPost, path: "/v1/embeddings", status: 404, shape: openAI, errType: "invalid_request_error"},
		{method: http.MethodPost, path: "/v1/messagesx", status: 404, shape: openAI, errType: "invalid_request_error"},
		{method: http.MethodGet, path: "/v1/chat/completions", status: 405, shape: openAI, errType: "invalid_request_error"},
	}
	for _, tc := range tests {
		name := tc.method + " " + tc.path
		if tc.anthropicVersion {
			name += " with anthropic-version"
		}
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, e.url+tc.path, strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			if tc.anthropicVersion {
				req.Header.Set("anthropic-version", "2023-06-01")
			}
			resp, err := e.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
				t.Errorf("status %d Content-Type %q, want %d JSON", resp.StatusCode, resp.Header.Get("Content-Type"), tc.status)
			}
			// The envelopes differ in their top-level type and in
			// OpenAI's param and code members, null or not.
			var body struct {
				Type  *string                    `json:"type"`
				Error map[string]json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal(raw, &body); err != nil {
				t.Fatalf("body %s: %v", raw, err)
			}
			var typ, msg string
			_ = json.Unmarshal(body.Error["type"], &typ)
			_ = json.Unmarshal(body.Error["message"], &msg)
			_, hasCode := body.Error["code"]
			shape := openAI
			if body.Type != nil && *body.Type == "error" && !hasCode {
				shape = anthropic
			}
			if shape != tc.shape || typ != tc.errType || msg == "" {
				t.Errorf("body %s: want the %s shape with type %q and a message", raw, tc.shape, tc.errType)
			}
		})
	}
}
