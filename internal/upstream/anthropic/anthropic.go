// Package anthropic is the upstream adapter for providers of type
// Anthropic: Anthropic's Messages API (POST {baseURL}/messages, with the
// provider's key as x-api-key). The client's request, a chat completions
// body, is translated into a Messages request, and the answer back into
// the chat completions API: a message into a chat.completion, the event
// stream into chat.completion.chunk events one event at a time, and
// Anthropic's errors into OpenAI's error shape. Everything the gateway does
// with a response (relaying, timing, reading the usage, retrying a 5xx)
// then works as for any OpenAI upstream.
//
// The request translation: system and developer messages (wherever they
// are) become the system prompt, in order; user and assistant messages
// their turns, text parts text blocks (empty ones dropped), image_url parts
// image blocks (a base64 data: URL a base64 source, an http(s) URL a url
// source), an assistant's tool_calls tool_use blocks (arguments must be a
// JSON object), tool messages tool_result blocks, consecutive turns of one
// role (a run of tool results) merged into one user turn; function tools
// tools with their parameters as input_schema; tool_choice auto, none,
// required (any) or a named function (tool), and parallel_tool_calls false
// disable_parallel_tool_use; max_completion_tokens, else max_tokens, else
// DefaultMaxTokens (Anthropic requires one); stop stop_sequences;
// temperature, top_p, top_k and stream as they are; user metadata.user_id.
// Ignored, as Anthropic's own OpenAI compatibility does: seed,
// presence_penalty, frequency_penalty, service_tier, store, metadata.
// Refused with a 400 (code unsupported_parameter), as Messages has no
// equivalent: n > 1, logprobs, top_logprobs, logit_bias, response_format
// other than text, audio output, prediction, web_search_options,
// reasoning_effort, the deprecated functions, non-function tools, and
// content parts other than text and image_url. /v1/completions is refused
// with a 400: Messages has no completions.
//
// A request of Anthropic's own Messages API (an Anthropic client's, Path
// /v1/messages) is taken natively (upstream.Native): sent as it is, the
// answer returned as Anthropic sent it, errors in Anthropic's envelope
// (see native).
//
// The provider's key goes in the x-api-key header only; it is never
// logged, and a provider's message that quotes it has it cut out.
package anthropic

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/switchyard-dev/switchyard/internal/anthropicapi"
	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	"github.com/switchyard-dev/switchyard/internal/upstream"
)

const (
	// APIVersion is the anthropic-version header sent. It is the one
	// version Anthropic documents for the Messages API; a per-provider
	// setting would come from the InferenceProvider when it has one.
	APIVersion = "2023-06-01"
	// DefaultMaxTokens is max_tokens for a request that sets neither
	// max_tokens nor max_completion_tokens: Anthropic requires one, and
	// this is what the Anthropic SDKs' examples and most OpenAI-to-Anthropic
	// proxies use. A model's output limit may be far higher; clients that
	// want more say so.
	DefaultMaxTokens = 4096
	// MaxRequestBytes bounds the client body translated (the gateway
	// bounds it first, by --max-body-bytes).
	MaxRequestBytes = 64 << 20
	// MaxResponseBytes bounds a non-streamed message (or error body) read
	// to translate it.
	MaxResponseBytes = 16 << 20
	// maxEventBytes bounds one event of a stream.
	maxEventBytes = 4 << 20
	// maxMessageLen bounds a provider's error message passed on.
	maxMessageLen = 4096
)

// Adapter speaks Anthropic's Messages API over a shared transport.
type Adapter struct {
	rt  http.RoundTripper
	now func() time.Time
}

var (
	_ upstream.Adapter = Adapter{}
	_ upstream.Factory = New
)

// New is the adapter's upstream.Factory.
func New(rt http.RoundTripper) upstream.Adapter { return Adapter{rt: rt, now: time.Now} }

// RoundTrip translates the client's chat completions request, posts it to
// {BaseURL}/messages and returns the answer as a chat completions response.
// A request the translation refuses is answered with a 400 without calling
// the provider.
func (a Adapter) RoundTrip(ctx context.Context, t upstream.Target, r upstream.Request) (*http.Response, error) {
	switch r.Path {
	case "/v1/chat/completions":
	case NativePath:
		return a.native(ctx, t, r)
	case "/v1/completions":
		return respond(&openaiapi.APIError{Status: http.StatusBadRequest, Type: openaiapi.ErrTypeInvalidRequest,
			Message: "this model's provider speaks Anthropic's Messages API, which has no text completions: use /v1/chat/completions",
			Code:    "unsupported_endpoint"}), nil
	default:
		return respond(&openaiapi.APIError{Status: http.StatusNotFound, Type: openaiapi.ErrTypeNotFound,
			Message: fmt.Sprintf("%s is not served by this model's provider (Anthropic's Messages API)", r.Path),
			Code:    "unsupported_endpoint"}), nil
	}
	tr, apiErr := toMessages(r.Body)
	if apiErr != nil {
		return respond(apiErr), nil
	}
	url := strings.TrimSuffix(t.BaseURL, "/") + "/messages"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(tr.body))
	if err != nil {
		return nil, fmt.Errorf("build upstream request: %w", err)
	}
	for k, v := range r.Header {
		if k != "Accept" {
			req.Header[k] = v
		}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", APIVersion)
	if t.APIKey != "" {
		req.Header.Set("X-Api-Key", t.APIKey)
	}
	if tr.stream {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	resp, err := a.rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	created := a.now().Unix()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes))
		resp.Body.Close()
		e := fromError(resp.StatusCode, body, t.APIKey)
		return translatedResponse(resp, errorBody(e), e.Status), nil
	}
	if tr.stream && isEventStream(resp.Header) {
		out := translatedResponse(resp, nil, resp.StatusCode)
		out.Header.Set("Content-Type", "text/event-stream")
		out.Header.Del("Content-Length")
		out.ContentLength = -1
		out.Body = newStreamBody(resp.Body, newStreamTranslator(created, tr.includeUsage, t.APIKey))
		return out, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	resp.Body.Close()
	if err != nil {
		// The answer broke off before it was whole: as for a connection
		// that failed, the gateway may try elsewhere.
		return nil, fmt.Errorf("read the provider's answer: %w", err)
	}
	if len(body) > MaxResponseBytes {
		e := &openaiapi.APIError{Status: http.StatusBadGateway, Type: openaiapi.ErrTypeServer,
			Message: fmt.Sprintf("the provider's answer is over %d bytes", MaxResponseBytes), Code: "upstream_error"}
		return translatedResponse(resp, errorBody(e), e.Status), nil
	}
	out, apiErr := fromMessage(body, created)
	if apiErr != nil {
		return translatedResponse(resp, errorBody(apiErr), apiErr.Status), nil
	}
	return translatedResponse(resp, out, http.StatusOK), nil
}

// NativePath is the client API the adapter takes natively: Anthropic's
// Messages API, the provider's own.
const NativePath = "/v1/messages"

var _ upstream.Native = Adapter{}

// Native reports that the adapter takes Messages requests as they are
// (upstream.Native).
func (Adapter) Native(path string) bool { return path == NativePath }

// native posts a Messages request as the client sent it (the gateway has
// set the served model name) to {BaseURL}/messages, with the provider's key
// and anthropic-version, and returns Anthropic's answer as it is: message,
// event stream, and errors in Anthropic's envelope. Two exceptions, as on
// the translated path: the key is cut out of an error the provider quotes
// it in, and a 401 or 403 (the provider refusing the gateway's key, not
// the client's) is a 502, which the gateway may retry elsewhere.
func (a Adapter) native(ctx context.Context, t upstream.Target, r upstream.Request) (*http.Response, error) {
	url := strings.TrimSuffix(t.BaseURL, "/") + "/messages"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(r.Body))
	if err != nil {
		return nil, fmt.Errorf("build upstream request: %w", err)
	}
	maps.Copy(req.Header, r.Header)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", APIVersion)
	req.Header.Del("X-Api-Key")
	req.Header.Del("Authorization")
	if t.APIKey != "" {
		req.Header.Set("X-Api-Key", t.APIKey)
	}
	resp, err := a.rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return resp, nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes))
	resp.Body.Close()
	e := nativeError(resp.StatusCode, body, t.APIKey)
	b, _ := json.Marshal(e.Body())
	return translatedResponse(resp, b, e.Status), nil
}

// nativeError is the Anthropic error the client gets for the provider's
// error answer: the provider's own type and message (key cut out), but for
// a refused key, which is the gateway's fault (a 502), and a status
// outside 4xx and 5xx, which the transport did not follow (a 502 too).
func nativeError(status int, body []byte, key string) *anthropicapi.APIError {
	var env errorEnvelope
	typ, msg := "", ""
	if json.Unmarshal(body, &env) == nil && env.Error != nil {
		typ, msg = env.Error.Type, env.Error.Message
	}
	msg = scrub(msg, key)
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return &anthropicapi.APIError{Status: http.StatusBadGateway, Type: anthropicapi.ErrTypeAPI,
			Message: fmt.Sprintf("the provider refused the gateway's credentials (HTTP %d): %s", status, msg)}
	case status < 400 || status > 599:
		return &anthropicapi.APIError{Status: http.StatusBadGateway, Type: anthropicapi.ErrTypeAPI,
			Message: fmt.Sprintf("the provider answered HTTP %d", status)}
	}
	e := anthropicapi.StatusError(status, msg)
	if typ != "" {
		e.Type = typ
	}
	if strings.TrimSpace(e.Message) == "" {
		e.Message = fmt.Sprintf("the provider answered HTTP %d", status)
	}
	return e
}

// translatedResponse is the provider's response with a new body (nil: the
// caller sets it) and status, keeping its end-to-end headers (request-id,
// retry-after, the rate limit headers).
func translatedResponse(resp *http.Response, body []byte, status int) *http.Response {
	h := resp.Header.Clone()
	h.Del("Content-Length")
	h.Del("Content-Encoding")
	out := &http.Response{
		Status: strconv.Itoa(status) + " " + http.StatusText(status), StatusCode: status,
		Proto: resp.Proto, ProtoMajor: resp.ProtoMajor, ProtoMinor: resp.ProtoMinor,
		Header: h, Request: resp.Request,
	}
	if body != nil {
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(body)))
		out.ContentLength = int64(len(body))
		out.Body = io.NopCloser(bytes.NewReader(body))
	}
	return out
}

// respond is an answer the adapter gives itself.
func respond(e *openaiapi.APIError) *http.Response {
	body := errorBody(e)
	return &http.Response{
		Status: strconv.Itoa(e.Status) + " " + http.StatusText(e.Status), StatusCode: e.Status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}, "Content-Length": {strconv.Itoa(len(body))}},
		ContentLength: int64(len(body)),
		Body:          io.NopCloser(bytes.NewReader(body)),
	}
}

func isEventStream(h http.Header) bool {
	ct := h.Get("Content-Type")
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.EqualFold(strings.TrimSpace(ct), "text/event-stream")
}
