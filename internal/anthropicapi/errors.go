// Package anthropicapi is Anthropic's Messages API as Switchyard speaks it:
// the request (Parse, over jsonscan with vLLM's key rule, bounded in every
// count a hostile body could inflate), its translation to a chat
// completions request (ToChat), the translation of a chat completion and of
// a chat stream back into a message and Messages events (FromChat, Stream),
// and the error envelope, into which any OpenAI-shaped error is mapped
// (FromOpenAIError, StatusError).
//
// Why translate: the gateway serves Anthropic clients from workers that
// speak chat completions (every vLLM version, the simulator, OpenAI-
// compatible providers), and the router must read the very body a worker
// renders, so the translated chat body is both what is routed and what is
// sent. The mapping is documented on ToChat. A provider that speaks the
// Messages API itself gets the client's body instead (WithModel), and its
// answer is metered as it is (Meter).
package anthropicapi

import (
	"encoding/json"
	"net/http"
)

// Error types as Anthropic uses them in error.type.
const (
	ErrTypeInvalidRequest  = "invalid_request_error"
	ErrTypeAuthentication  = "authentication_error"
	ErrTypePermission      = "permission_error"
	ErrTypeNotFound        = "not_found_error"
	ErrTypeRequestTooLarge = "request_too_large"
	ErrTypeRateLimit       = "rate_limit_error"
	ErrTypeAPI             = "api_error"
	ErrTypeTimeout         = "timeout_error"
	ErrTypeOverloaded      = "overloaded_error"
)

// ErrorBody is the Anthropic error envelope:
// {"type": "error", "error": {"type": ..., "message": ...}}.
type ErrorBody struct {
	Type  string      `json:"type"`
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of the envelope.
type ErrorDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// APIError is an error that knows how to present itself to an Anthropic
// client.
type APIError struct {
	Status  int
	Type    string
	Message string
}

func (e *APIError) Error() string { return e.Message }

// Body returns the error envelope.
func (e *APIError) Body() ErrorBody {
	return ErrorBody{Type: "error", Error: ErrorDetail{Type: e.Type, Message: e.Message}}
}

// WriteError writes e as an Anthropic error response.
func WriteError(w http.ResponseWriter, e *APIError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(e.Body())
}
