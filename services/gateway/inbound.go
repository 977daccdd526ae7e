package gateway

import (
	"context"
	"crypto/rand"
	"net/http"
	"time"

	"github.com/switchyard-dev/switchyard/services/gateway/admission"
	"github.com/switchyard-dev/switchyard/services/gateway/internal/apibody"
)

// inboundAPI is one client API the gateway serves: it registers its routes
// on the gateway's mux. An API other than OpenAI's is served by translation
// onto the chat completions path (see anthropic.go): its handler reads and
// checks the client's body, hands the translated body to the chat handler
// through a ResponseWriter that translates the answer back, so routing,
// retries, metering and stream fault handling are the same for every API.
// With the translated body it may hand on the client's own (a
// nativeRequest, native.go), which an attempt on a provider speaking that
// API sends instead, its answer passed back untranslated.
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
func (g *Gateway) admitInbound(w http.ResponseWriter, r *http.Request, c *call) (string, bool) {
	ar := admission.Request{HTTP: r}
	if err := c.admitRequest(&ar); err != nil {
		c.tenant = ar.Tenant
		c.refuse(w, r, err)
		c.ended()
		return "", false
	}
	addHeaders(w, ar.Header)
	c.tenant = ar.Tenant
	return ar.Tenant, true
}

// inboundCall is a request of another client API before it reaches the
// chat path. With api set it is metered: a request that ends before the
// chat path (refused, unreadable) gets its usage event as one that went
// through would, under the gateway's request id. Without, it is only
// counted.
func (g *Gateway) inboundCall(w http.ResponseWriter, api string) *call {
	c := &call{g: g, log: g.log, start: time.Now(), apiName: api}
	if api != "" {
		c.id = rand.Text()
		c.log = g.log.With().Str("request_id", c.id).Logger()
		w.Header().Set(RequestIDHeader, c.id)
	}
	return c
}

// ended records a request that ended before the chat path: its usage
// event when it is metered, else the request metric alone.
func (c *call) ended() {
	if c.id == "" {
		c.g.metrics.requests.WithLabelValues(unknownModel, statusLabel(c.status)).Inc()
		return
	}
	c.finish()
}

// inboundKey carries, on a request handed to the chat path by another API,
// that API's name for the usage event and the request id it was given.
type inboundKey struct{}

type inbound struct {
	name, id string
	native   *nativeRequest // nil: every attempt takes the chat body
}

func withInbound(ctx context.Context, c *call, native *nativeRequest) context.Context {
	return context.WithValue(ctx, inboundKey{}, inbound{name: c.apiName, id: c.id, native: native})
}

// inboundOf is the inbound API a request came through; zero for none.
func inboundOf(ctx context.Context) inbound {
	in, _ := ctx.Value(inboundKey{}).(inbound)
	return in
}
