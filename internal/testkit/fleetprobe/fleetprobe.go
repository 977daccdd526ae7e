// Package fleetprobe drives a router and its simulated workers the way
// the fleet tests do (policyd's file source, the real Kubernetes API
// server's EndpointSlices): prompts spanning several KV blocks, a
// completion sent straight to a worker, waiting for a Route to pick a
// worker, and the cached tokens Explain reports.
package fleetprobe

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/sim"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

// LongPrompt is a prompt of several KV blocks, distinct per worker and n.
func LongPrompt(id string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "worker %s prompt %d:", id, n)
	for i := range 60 {
		fmt.Fprintf(&b, " word%d", (i*7+n)%50)
	}
	return b.String()
}

// CompletionBody is a one-token completions request for prompt.
func CompletionBody(model, prompt string) []byte {
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": prompt, "max_tokens": 1})
	return body
}

// Complete sends prompt to worker w directly, so it caches the prompt's
// blocks and publishes their KV events.
func Complete(t *testing.T, w sim.WorkerInfo, prompt string) {
	t.Helper()
	resp, err := http.Post(w.URL+"/v1/completions", "application/json", bytes.NewReader(CompletionBody(w.Model, prompt)))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("completion on %s: %d %s", w.URL, resp.StatusCode, data)
	}
}

// RouteTo waits until a Route (excluding exclude) picks want: the
// router's first scrape of a new worker makes it eligible.
func RouteTo(t *testing.T, rt routerv1.RouterClient, model string, exclude []string, want string) {
	t.Helper()
	var last string
	testkit.Eventually(t, 20*time.Second, "a route to "+want, func() bool {
		resp, err := rt.Route(context.Background(), &routerv1.RouteRequest{
			RequestId: "fleet-" + want, Model: model, Api: routerv1.ApiKind_API_KIND_COMPLETIONS,
			Body: CompletionBody(model, "hello"), ExcludeEndpoints: exclude,
		})
		if err != nil {
			last = err.Error()
			return false
		}
		last = resp.String()
		return resp.GetTarget().GetId() == want
	})
	if t.Failed() {
		t.Logf("last answer: %s", last)
	}
}

// CachedOn is the cached tokens Explain reports for the prompt on id.
func CachedOn(t *testing.T, rt routerv1.RouterClient, model, prompt, id string) int64 {
	resp, err := rt.Explain(context.Background(), &routerv1.RouteRequest{
		RequestId: "explain", Model: model, Api: routerv1.ApiKind_API_KIND_COMPLETIONS, Body: CompletionBody(model, prompt),
	})
	if err != nil {
		t.Logf("explain: %v", err)
		return 0
	}
	for _, c := range resp.GetCandidates() {
		if c.GetEndpoint().GetId() == id {
			return int64(c.GetCachedTokens())
		}
	}
	return 0
}
