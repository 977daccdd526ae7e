package upstream

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
)

// ErrorResponse is an answer an adapter gives itself, without asking the
// upstream: e in OpenAI's error shape, as an upstream's answer would be.
func ErrorResponse(e *openaiapi.APIError) *http.Response {
	b, _ := json.Marshal(e.Body())
	return &http.Response{StatusCode: e.Status, Status: strconv.Itoa(e.Status) + " " + http.StatusText(e.Status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(b)), ContentLength: int64(len(b))}
}

// WithJSONBody is the upstream's answer resp with body, a JSON document
// the adapter translated it into, in place of its own: status and headers
// kept (Retry-After, request ids), the length and encoding of the old
// body dropped.
func WithJSONBody(resp *http.Response, body []byte) *http.Response {
	h := resp.Header.Clone()
	h.Del("Content-Length")
	h.Del("Content-Encoding")
	h.Set("Content-Type", "application/json")
	return &http.Response{StatusCode: resp.StatusCode, Status: resp.Status, Proto: resp.Proto, ProtoMajor: resp.ProtoMajor, ProtoMinor: resp.ProtoMinor,
		Header: h, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: resp.Request}
}

// ErrorCode is a provider error's code, which some send as a string and
// some as a number, as a string ("" when neither).
func ErrorCode(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}
