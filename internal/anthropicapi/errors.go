// Package anthropicapi is the Anthropic HTTP API as Switchyard speaks it.
// So far that is only its error JSON: the gateway answers Anthropic clients
// in it, so that their SDKs can read why a request failed.
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
