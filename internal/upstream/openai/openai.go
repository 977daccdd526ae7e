// Package openai is the upstream adapter for servers that speak the OpenAI
// API themselves: vLLM workers and OpenAI-compatible providers (OpenAI,
// vLLM or SGLang behind a cloud endpoint, Databricks' and Together's
// OpenAI-compatible APIs). Nothing is translated: the request goes out as
// the client sent it (with the gateway's splices) and the answer comes
// back as it is.
package openai

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/switchyard-dev/switchyard/internal/upstream"
)

// Adapter sends OpenAI requests over a shared transport.
type Adapter struct{ rt http.RoundTripper }

var (
	_ upstream.Adapter = Adapter{}
	_ upstream.Factory = New
)

// New is the adapter's upstream.Factory.
func New(rt http.RoundTripper) upstream.Adapter { return Adapter{rt: rt} }

// RoundTrip posts the body to the target's URL for the client's path. A
// worker's base URL is its root (http://host:8000 + /v1/chat/completions);
// a provider's ends in its API version, as the OpenAI clients take it
// (https://api.openai.com/v1 + /chat/completions). A provider gets its own
// key as a bearer token, never the client's.
func (a Adapter) RoundTrip(ctx context.Context, t upstream.Target, r upstream.Request) (*http.Response, error) {
	base := strings.TrimSuffix(t.BaseURL, "/")
	url := base + r.Path
	if t.Type != upstream.TypeWorker {
		url = base + strings.TrimPrefix(r.Path, "/v1")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(r.Body))
	if err != nil {
		return nil, fmt.Errorf("build upstream request: %w", err)
	}
	for k, v := range r.Header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	if t.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+t.APIKey)
	}
	return a.rt.RoundTrip(req)
}
