// Package openaiapi is the OpenAI HTTP API as Switchyard speaks and reads it:
// request and response shapes, and the error JSON every client-facing error
// uses.
package openaiapi

import (
	"encoding/json"
	"net/http"
)

// Error types as OpenAI uses them in error.type.
const (
	ErrTypeInvalidRequest = "invalid_request_error"
	ErrTypeNotFound       = "not_found_error"
	ErrTypeRateLimit      = "rate_limit_error"
	ErrTypeServer         = "server_error"
	ErrTypeUnavailable    = "service_unavailable_error"
	ErrTypeTimeout        = "timeout_error"
	ErrTypeAuthentication = "authentication_error"
	ErrTypePermission     = "permission_error"
)

// ErrTypeForStatus is the error type a provider's error of that status
// takes when its own envelope names none.
func ErrTypeForStatus(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return ErrTypeAuthentication
	case status == http.StatusForbidden:
		return ErrTypePermission
	case status == http.StatusNotFound:
		return ErrTypeNotFound
	case status == http.StatusTooManyRequests:
		return ErrTypeRateLimit
	case status == http.StatusServiceUnavailable:
		return ErrTypeUnavailable
	case status >= 500:
		return ErrTypeServer
	}
	return ErrTypeInvalidRequest
}

// ErrorBody is the OpenAI error envelope: {"error": {...}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of the envelope.
type ErrorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// APIError is an error that knows how to present itself to an OpenAI client.
type APIError struct {
	Status  int
	Type    string
	Message string
	Param   string // JSON field path, empty when not about one field
	Code    string
}

func (e *APIError) Error() string { return e.Message }

// Body returns the error envelope.
func (e *APIError) Body() ErrorBody {
	d := ErrorDetail{Message: e.Message, Type: e.Type}
	if e.Param != "" {
		p := e.Param
		d.Param = &p
	}
	if e.Code != "" {
		c := e.Code
		d.Code = &c
	}
	return ErrorBody{Error: d}
}

// Errorf helpers for the common cases.

// InvalidRequest is a 400 about param.
func InvalidRequest(param, msg string) *APIError {
	return &APIError{Status: http.StatusBadRequest, Type: ErrTypeInvalidRequest, Message: msg, Param: param}
}

// ModelNotFound is the 404 OpenAI returns for an unknown model.
func ModelNotFound(model string) *APIError {
	return &APIError{
		Status:  http.StatusNotFound,
		Type:    ErrTypeInvalidRequest,
		Message: "The model `" + model + "` does not exist or you do not have access to it.",
		Param:   "model",
		Code:    "model_not_found",
	}
}

// WriteError writes e as an OpenAI error response.
func WriteError(w http.ResponseWriter, e *APIError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(e.Body())
}
