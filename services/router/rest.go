package router

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchyard-dev/switchyard/internal/jsonscan"
	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

// explainHandler serves POST /v1/route:explain. It reads the body by this
// rule:
//
//   - a JSON object with a top-level "messages" member is an OpenAI chat
//     completions body, one with "prompt" (and no "messages") a completions
//     body, as the client would send it to the gateway: the model is the
//     body's, the tenant and tags come from the query parameters
//     ?tenant=NAME&tags=a,b (tags may also repeat: &tags=a&tags=b);
//   - any other JSON object is the RouteRequest JSON mapping (the client's
//     body base64 in "body"), as the gateway would send it over gRPC; query
//     parameters are refused there, as the RouteRequest carries tenant and
//     tags itself.
//
// So `curl -d @chat.json` explains the body a user has at hand, and
// machines that build RouteRequests keep working. A body that is not a
// JSON object, a body that fails the API's validation and an unknown query
// parameter get a 400 naming the field; the body is bounded by maxRESTBody
// (413 beyond). Responses and errors are those of the gateway's mapping.
type explainHandler struct {
	svc *service
	gw  *runtime.ServeMux
	m   runtime.Marshaler
}

func (h *explainHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, err := h.readRequest(r)
	if err == nil {
		var resp *routerv1.ExplainResponse
		if resp, err = h.svc.Explain(r.Context(), req); err == nil {
			runtime.ForwardResponseMessage(r.Context(), h.gw, h.m, w, r, resp)
			return
		}
	}
	runtime.HTTPError(r.Context(), h.gw, h.m, w, r, restStatus(err))
}

func (h *explainHandler) readRequest(r *http.Request) (*routerv1.RouteRequest, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, &inputError{msg: "read body", err: err}
	}
	api, model, err := clientBody(body)
	if err != nil {
		return nil, err
	}
	if api == routerv1.ApiKind_API_KIND_UNSPECIFIED {
		if len(r.URL.Query()) > 0 {
			return nil, &inputError{field: "?" + slices.Sorted(maps.Keys(r.URL.Query()))[0],
				msg: "query parameters go with a chat or completions body; a RouteRequest carries tenant and tags in its fields"}
		}
		var req routerv1.RouteRequest
		if err := h.m.Unmarshal(body, &req); err != nil {
			return nil, &inputError{msg: "read as a RouteRequest (the body has neither messages nor prompt)", err: err}
		}
		return &req, nil
	}
	tenant, tags, err := routingContext(r.URL.Query())
	if err != nil {
		return nil, err
	}
	return &routerv1.RouteRequest{Tenant: tenant, Model: model, Api: api, Tags: tags, Body: body}, nil
}

// clientBody tells a chat or completions body (see explainHandler) from a
// RouteRequest (API_KIND_UNSPECIFIED) and validates it as the gateway
// would: Explain alone reads a malformed body as an empty prompt, and would
// explain another request than the one sent.
func clientBody(body []byte) (routerv1.ApiKind, string, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return 0, "", &inputError{msg: "empty body: send a chat completions body (messages), a completions body (prompt) or a RouteRequest"}
	}
	var chat, completions, hasModel bool
	var model jsonscan.Member
	kind, _, err := jsonscan.Members(body, func(m jsonscan.Member) {
		switch {
		case m.KeyIs("messages"):
			chat = true
		case m.KeyIs("prompt"):
			completions = true
		case m.KeyIs("model"):
			model, hasModel = m, true
		}
	})
	if err != nil {
		return 0, "", &inputError{msg: "body is not valid JSON: " + err.Error()}
	}
	if kind != jsonscan.Object {
		return 0, "", &inputError{msg: "body must be a JSON object: a chat completions body, a completions body or a RouteRequest"}
	}
	var api routerv1.ApiKind
	var apiErr *openaiapi.APIError
	switch {
	case chat:
		api = routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS
		_, apiErr = openaiapi.ParseChatCompletionRequest(body)
	case completions:
		api = routerv1.ApiKind_API_KIND_COMPLETIONS
		_, apiErr = openaiapi.ParseCompletionRequest(body)
	default:
		return routerv1.ApiKind_API_KIND_UNSPECIFIED, "", nil
	}
	if apiErr != nil {
		field := apiErr.Param
		if strings.Contains(apiErr.Message, field) {
			field = "" // the message names it already
		}
		return 0, "", &inputError{field: field, msg: apiErr.Message}
	}
	if !hasModel {
		return 0, "", &inputError{field: "model", msg: "required in a chat or completions body"}
	}
	name, _ := jsonscan.Unquote(model.Value) // the API's parser checked it is a string
	return api, name, nil
}

// routingContext reads what the gateway would add to a client's body: the
// tenant and the request tags.
func routingContext(q url.Values) (tenant string, tags []string, err error) {
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if k != "tenant" && k != "tags" {
			return "", nil, &inputError{field: "?" + k, msg: "unknown query parameter: want tenant or tags"}
		}
	}
	if len(q["tenant"]) > 1 {
		return "", nil, &inputError{field: "?tenant", msg: "given more than once"}
	}
	for _, v := range q["tags"] {
		for t := range strings.SplitSeq(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				tags = append(tags, t)
			}
		}
	}
	return q.Get("tenant"), tags, nil
}

// inputError is a REST request the router cannot read. field is the JSON
// field path or the query parameter it is about, when there is one.
type inputError struct {
	field, msg string
	err        error
}

func (e *inputError) Error() string {
	s := e.msg
	if e.field != "" {
		s = e.field + ": " + s
	}
	if e.err != nil {
		s += ": " + e.err.Error()
	}
	return s
}

func (e *inputError) Unwrap() error { return e.err }

// restStatus is the one place REST-only errors become statuses for the
// gateway's error writer; the service's errors are statuses already.
func restStatus(err error) error {
	var tooBig *http.MaxBytesError
	var bad *inputError
	switch {
	case errors.As(err, &tooBig):
		return &runtime.HTTPStatusError{
			HTTPStatus: http.StatusRequestEntityTooLarge,
			Err:        status.Errorf(codes.InvalidArgument, "body larger than %d bytes", tooBig.Limit),
		}
	case errors.As(err, &bad):
		return status.Error(codes.InvalidArgument, bad.Error())
	}
	return err
}
