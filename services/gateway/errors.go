package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
	"github.com/switchyard-dev/switchyard/internal/anthropicapi"
	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/gateway/admission"
	"github.com/switchyard-dev/switchyard/services/gateway/admission/apikey"
	"github.com/switchyard-dev/switchyard/services/gateway/admission/jwt"
	"github.com/switchyard-dev/switchyard/services/gateway/ratelimit"
)

// statusClientClosed is the nginx convention for "client went away"; it is
// never written, only counted.
const statusClientClosed = 499

// errClientClosed marks a request whose client disconnected.
var errClientClosed = &openaiapi.APIError{Status: statusClientClosed, Type: "client_closed_request", Message: "client closed request"}

var errRouterUnavailable = &openaiapi.APIError{
	Status:  http.StatusServiceUnavailable,
	Type:    openaiapi.ErrTypeUnavailable,
	Message: "the routing service is unavailable, please retry",
	Code:    "router_unavailable",
}

var errUpstreamUnreachable = &openaiapi.APIError{
	Status:  http.StatusBadGateway,
	Type:    openaiapi.ErrTypeServer,
	Message: "the model server could not be reached, please retry",
	Code:    "upstream_unreachable",
}

var errUpstreamTimeout = &openaiapi.APIError{
	Status:  http.StatusGatewayTimeout,
	Type:    openaiapi.ErrTypeTimeout,
	Message: "the model server did not start responding in time, please retry",
	Code:    "upstream_timeout",
}

// Errors that end a stream after its 200 was sent, as the error event the
// client reads before the connection closes.
var (
	errUpstreamBroken = &openaiapi.APIError{
		Status:  http.StatusBadGateway,
		Type:    openaiapi.ErrTypeServer,
		Message: "the model server stopped mid-response; the answer is incomplete, please retry",
		Code:    "upstream_broken",
	}
	errUpstreamUnhealthy = &openaiapi.APIError{
		Status:  http.StatusBadGateway,
		Type:    openaiapi.ErrTypeServer,
		Message: "the model server became unhealthy mid-response; the answer is incomplete, please retry",
		Code:    "upstream_unhealthy",
	}
)

func errUpstreamStalled(idle time.Duration) *openaiapi.APIError {
	return &openaiapi.APIError{
		Status:  http.StatusGatewayTimeout,
		Type:    openaiapi.ErrTypeTimeout,
		Message: fmt.Sprintf("the model server sent nothing for %s; the answer is incomplete, please retry", idle),
		Code:    "upstream_stalled",
	}
}

// rejectionError maps a router rejection to the client's error. This is
// the one place router reject codes become HTTP statuses.
func rejectionError(model string, rej *routerv1.Rejection) *openaiapi.APIError {
	msg := rej.GetMessage()
	orDefault := func(def string) string {
		if msg == "" {
			return def
		}
		return msg
	}
	switch rej.GetCode() {
	case routerv1.RejectCode_REJECT_CODE_MODEL_NOT_FOUND:
		return openaiapi.ModelNotFound(model)
	case routerv1.RejectCode_REJECT_CODE_NO_HEALTHY_ENDPOINT:
		return &openaiapi.APIError{
			Status:  http.StatusServiceUnavailable,
			Type:    openaiapi.ErrTypeUnavailable,
			Message: orDefault("no healthy endpoint serves model `" + model + "` right now, please retry"),
			Code:    "no_healthy_endpoint",
		}
	case routerv1.RejectCode_REJECT_CODE_POLICY:
		return &openaiapi.APIError{
			Status:  http.StatusForbidden,
			Type:    openaiapi.ErrTypeInvalidRequest,
			Message: orDefault("the request was rejected by a routing policy"),
			Code:    "policy_rejected",
		}
	case routerv1.RejectCode_REJECT_CODE_INVALID_REQUEST:
		return openaiapi.InvalidRequest("", orDefault("the request body could not be read"))
	}
	return &openaiapi.APIError{
		Status:  http.StatusInternalServerError,
		Type:    openaiapi.ErrTypeServer,
		Message: "the routing service returned an unexpected answer",
	}
}

// clientAPI is the API a client speaks.
type clientAPI uint8

const (
	apiOpenAI clientAPI = iota
	apiAnthropic
)

// callerAPI judges from the request alone which API the client speaks, so
// that a path or method the gateway does not serve still fails in a shape
// the client's SDK can parse. Anthropic's SDKs send anthropic-version on
// every request; Anthropic's own paths catch clients that do not, and a
// Messages request handed to the chat path is marked by its inbound name.
func callerAPI(r *http.Request) clientAPI {
	p := r.URL.Path
	if r.Header.Get("anthropic-version") != "" || inboundOf(r.Context()).name == "messages" ||
		p == "/v1/messages" || strings.HasPrefix(p, "/v1/messages/") || p == "/v1/complete" {
		return apiAnthropic
	}
	return apiOpenAI
}

// anthropicNotServed says what of Anthropic's API an Anthropic client can
// use here.
const anthropicNotServed = "this gateway serves Anthropic's POST /v1/messages and POST /v1/messages/count_tokens, " +
	"and the OpenAI API: POST /v1/chat/completions, POST /v1/completions, GET /v1/models"

func notFound(w http.ResponseWriter, r *http.Request) {
	if callerAPI(r) == apiAnthropic {
		anthropicapi.WriteError(w, &anthropicapi.APIError{
			Status:  http.StatusNotFound,
			Type:    anthropicapi.ErrTypeNotFound,
			Message: r.Method + " " + r.URL.Path + ": " + anthropicNotServed,
		})
		return
	}
	openaiapi.WriteError(w, &openaiapi.APIError{
		Status:  http.StatusNotFound,
		Type:    openaiapi.ErrTypeInvalidRequest,
		Message: "unknown path " + r.URL.Path,
		Code:    "unknown_url",
	})
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	msg := "method " + r.Method + " is not allowed on " + r.URL.Path
	if callerAPI(r) == apiAnthropic {
		anthropicapi.WriteError(w, &anthropicapi.APIError{
			Status:  http.StatusMethodNotAllowed,
			Type:    anthropicapi.ErrTypeInvalidRequest,
			Message: msg + "; " + anthropicNotServed,
		})
		return
	}
	openaiapi.WriteError(w, &openaiapi.APIError{
		Status:  http.StatusMethodNotAllowed,
		Type:    openaiapi.ErrTypeInvalidRequest,
		Message: msg,
	})
}

// admitRequest runs the admission chain. A GatewayBackend accepting
// credentials that no step of the chain checks (API keys, JWTs) gets
// every request refused: served without the check would be a silent open
// door, and a credential it promises that nothing takes a silent lie.
func (c *call) admitRequest(ar *admission.Request) error {
	if c.g.catalog != nil {
		if p := c.g.catalog.program(); p != nil {
			for _, cred := range p.Credentials() {
				if !c.g.admit.Authenticates(cred) {
					hint := "this gateway has no step for them"
					if st, ok := credentialStep[cred]; ok {
						hint = "add " + st
					}
					return fmt.Errorf("GatewayBackend %s accepts %s credentials but --admission %q has no step that checks them (%s)", p.Name, cred, c.g.cfg.Admission, hint)
				}
			}
		}
	}
	return c.g.admit.Admit(ar.HTTP.Context(), ar)
}

// credentialStep is the admission step that checks each kind of
// credentials.
var credentialStep = map[string]string{string(v1alpha1.AuthAPIKey): apikey.Name, string(v1alpha1.AuthJWT): jwt.Name}

// refuse answers an admission chain's error in the client's API shape: a
// step's refusal as it said (401, 403, 429 ...) with its headers, anything
// else as a 500 whose detail stays in the log.
func (c *call) refuse(w http.ResponseWriter, r *http.Request, err error) {
	var ref *admission.Refusal
	if !errors.As(err, &ref) {
		c.log.Error().Err(err).Msg("admission failed")
		ref = &admission.Refusal{Status: http.StatusInternalServerError, Message: "the request could not be admitted"}
	}
	for k, v := range ref.Header {
		w.Header()[k] = v
	}
	oa := &openaiapi.APIError{Status: ref.Status, Type: openaiapi.ErrTypeInvalidRequest, Message: ref.Message, Code: ref.Code}
	at := anthropicapi.ErrTypeInvalidRequest
	switch ref.Status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="switchyard"`)
		at = anthropicapi.ErrTypeAuthentication
	case http.StatusForbidden:
		at = anthropicapi.ErrTypePermission
	case http.StatusTooManyRequests:
		oa.Type, at = openaiapi.ErrTypeRateLimit, anthropicapi.ErrTypeRateLimit
	case http.StatusServiceUnavailable:
		oa.Type, at = openaiapi.ErrTypeUnavailable, anthropicapi.ErrTypeOverloaded
	case http.StatusInternalServerError:
		oa.Type, at = openaiapi.ErrTypeServer, anthropicapi.ErrTypeAPI
	}
	c.status, c.errType = oa.Status, oa.Type
	if c.outcome == "" {
		switch {
		case ref.Status == http.StatusUnauthorized, ref.Status == http.StatusForbidden:
			c.outcome = bus.UsageOutcomeRejectedAuth
		case ref.Status == http.StatusTooManyRequests, ref.Code == ratelimit.CodeTooLarge:
			c.outcome = bus.UsageOutcomeRejectedLimit
		}
	}
	if callerAPI(r) == apiAnthropic {
		anthropicapi.WriteError(w, &anthropicapi.APIError{Status: ref.Status, Type: at, Message: ref.Message})
		return
	}
	openaiapi.WriteError(w, oa)
}
