package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

type modelList struct {
	Object string       `json:"object"`
	Data   []modelEntry `json:"data"`
}

type modelEntry struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func modelObject(id string) modelEntry {
	return modelEntry{ID: id, Object: "model", OwnedBy: "switchyard"}
}

// publicModels are the model names clients may ask this gateway for,
// sorted. A GatewayBackend that lists models decides them: its aliases are
// served by no endpoint under their own name, and a model it does not list
// is not one it offers. Otherwise (no policyd, no snapshot yet, or a
// backend whose empty list means any model) they are every model some
// endpoint serves, healthy or not: a model whose workers are briefly down
// still exists.
func (g *Gateway) publicModels(ctx context.Context) ([]string, error) {
	if g.catalog != nil {
		if names := g.catalog.models(); len(names) > 0 {
			return slices.Sorted(slices.Values(names)), nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.RouteTimeout)
	defer cancel()
	resp, err := g.router.ListEndpoints(ctx, &routerv1.ListEndpointsRequest{})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, ep := range resp.GetEndpoints() {
		names = append(names, ep.GetModels()...)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// models answers GET /v1/models.
func (g *Gateway) models(w http.ResponseWriter, r *http.Request) {
	names, ok := g.answerableModels(w, r)
	if !ok {
		return
	}
	list := modelList{Object: "list", Data: make([]modelEntry, 0, len(names))}
	for _, n := range names {
		list.Data = append(list.Data, modelObject(n))
	}
	writeJSON(w, list)
}

// model answers GET /v1/models/{id...}. The id is the rest of the path
// because model names hold slashes (meta-llama/Llama-3.1-8B), which
// clients send as they are or escaped as %2F, as the OpenAI SDKs do.
func (g *Gateway) model(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	names, ok := g.answerableModels(w, r)
	if !ok {
		return
	}
	if _, found := slices.BinarySearch(names, id); !found {
		openaiapi.WriteError(w, openaiapi.ModelNotFound(id))
		return
	}
	writeJSON(w, modelObject(id))
}

// answerableModels is publicModels, or false once the failure is answered.
func (g *Gateway) answerableModels(w http.ResponseWriter, r *http.Request) ([]string, bool) {
	names, err := g.publicModels(r.Context())
	if err != nil {
		if r.Context().Err() == nil {
			g.log.Warn().Err(err).Msg("list endpoints")
			openaiapi.WriteError(w, errRouterUnavailable)
		}
		return nil, false
	}
	return names, true
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
