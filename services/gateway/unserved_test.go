package gateway

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestUnservedAnthropicSDK: until the gateway serves the Messages API, an
// Anthropic SDK gets an error it parses, saying so.
func TestUnservedAnthropicSDK(t *testing.T) {
	e := newEnv(t, envOpts{noNATS: true})
	client := anthropic.NewClient(aoption.WithBaseURL(e.url), aoption.WithAPIKey("unused"), aoption.WithMaxRetries(0))
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}
	tests := []struct {
		name string
		call func() error
	}{
		{"Messages.New", func() error {
			_, err := client.Messages.New(t.Context(), anthropic.MessageNewParams{Model: testModel, MaxTokens: 16, Messages: msgs})
			return err
		}},
		{"Messages.CountTokens", func() error {
			_, err := client.Messages.CountTokens(t.Context(), anthropic.MessageCountTokensParams{Model: testModel, Messages: msgs})
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var apiErr *anthropic.Error
			if err := tc.call(); !errors.As(err, &apiErr) {
				t.Fatalf("err = %v, want an *anthropic.Error", err)
			}
			if apiErr.StatusCode != http.StatusNotFound || apiErr.Type() != anthropic.ErrorTypeNotFoundError {
				t.Errorf("status %d type %q, want 404 %q", apiErr.StatusCode, apiErr.Type(), anthropic.ErrorTypeNotFoundError)
			}
			if !strings.Contains(apiErr.Message, "does not serve the Anthropic Messages API yet") {
				t.Errorf("message %q does not say the Messages API is not served yet", apiErr.Message)
			}
		})
	}
	if n := len(e.router.calls()); n != 0 {
		t.Errorf("%d Anthropic requests reached the router", n)
	}
}

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
		{method: http.MethodPost, path: "/v1/messages", status: 404, shape: anthropic, errType: "not_found_error"},
		{method: http.MethodGet, path: "/v1/messages", status: 404, shape: anthropic, errType: "not_found_error"},
		{method: http.MethodPost, path: "/v1/messages/count_tokens", status: 404, shape: anthropic, errType: "not_found_error"},
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
