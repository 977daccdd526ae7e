package gateway

import (
	"context"
	"net/http"

	"github.com/switchyard-dev/switchyard/services/gateway/admission"
	"github.com/switchyard-dev/switchyard/services/gateway/internal/apibody"
)

// inboundAPI is one client API the gateway serves: it registers its routes
// on the gateway's mux. An API other than OpenAI's is served by translation
// onto the chat completions path (see anthropic.go): its handler reads and
// checks the client's body, hands the translated body to the chat handler
// through a ResponseWriter that translates the answer back, so routing,
// retries, metering and stream fault handling are the same for every API.
// A new API is a type with this one method and one line in inboundAPIs.
type inboundAPI interface {
	register(g *Gateway, mux *http.ServeMux)
}

// inboundAPIs are the client APIs every gateway serves.
var inboundAPIs = []inboundAPI{openAIInbound{}, anthropicInbound{}}

// openAIInbound is the OpenAI API, the gateway's own.
type openAIInbound struct{}

func (openAIInbound) register(g *Gateway, mux *http.ServeMux) {
	mux.Handle("POST /v1/chat/completions", g.completions(apibody.Chat, "/v1/chat/completions"))
	mux.Handle("POST /v1/completions", g.completions(apibody.Completions, "/v1/completions"))
	mux.HandleFunc("GET /v1/models", g.models)
	mux.HandleFunc("GET /v1/models/{id...}", g.model)
	mux.HandleFunc("/v1/chat/completions", methodNotAllowed)
	mux.HandleFunc("/v1/completions", methodNotAllowed)
	mux.HandleFunc("/v1/models", methodNotAllowed)
	mux.HandleFunc("/v1/models/{id...}", methodNotAllowed)
}

// admittedKey carries, on a request handed to the chat path by another API,
// the tenant its admission gave it: the chain runs once per request (a
// limiter must not count it twice), before the API reads the body, so an
// unauthenticated client learns nothing about its body.
type admittedKey struct{}

func withAdmitted(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, admittedKey{}, tenant)
}

func admittedTenant(ctx context.Context) (string, bool) {
	s, ok := ctx.Value(admittedKey{}).(string)
	return s, ok
}

// admitInbound runs the admission chain for an inbound API's handler; a refusal
// is written in the client's shape and counted.
func (g *Gateway) admitInbound(w http.ResponseWriter, r *http.Request) (string, bool) {
	c := &call{g: g, log: g.log}
	ar := admission.Request{HTTP: r}
	if err := c.admitRequest(&ar); err != nil {
		c.refuse(w, r, err)
		g.metrics.requests.WithLabelValues(unknownModel, statusLabel(c.status)).Inc()
		return "", false
	}
	addHeaders(w, ar.Header)
	return ar.Tenant, true
}

// inboundNameKey carries, on a request handed to the chat path by another
// API, that API's name for the usage event.
type inboundNameKey struct{}

func withInboundName(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, inboundNameKey{}, name)
}

func inboundName(ctx context.Context) string {
	s, _ := ctx.Value(inboundNameKey{}).(string)
	return s
}
