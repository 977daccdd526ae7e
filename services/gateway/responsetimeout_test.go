package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/anthropicapi"
)

// TestUpstreamResponseTimeout: a non-streamed attempt whose upstream sends
// no headers within --upstream-response-timeout fails like one that could
// not connect: retried on the next target (nothing reached the client),
// else a 504 in the client's API, and reported to the routers as the
// upstream's failure either way.
func TestUpstreamResponseTimeout(t *testing.T) {
	short := func(c *Config) { c.UpstreamResponseTimeout = 300 * time.Millisecond }

	t.Run("retried on the next target", func(t *testing.T) {
		e := newEnv(t, envOpts{cfg: short})
		stall, good := newVLLM(t, modeHoldBeforeHeaders), newVLLM(t, modeOK)
		e.router.setTargets(testModel, stall.target("stall"), good.target("good"))
		resp := e.post(t, "/v1/chat/completions", chatBody, nil)
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, out)
		}
		<-stall.canceled // the stalled attempt was given up, its connection closed
		if good.hits.Load() != 1 {
			t.Errorf("the second target got %d requests, want 1", good.hits.Load())
		}
		calls := e.router.calls()
		if len(calls) != 2 || !slices.Equal(calls[1].GetExcludeEndpoints(), []string{"stall"}) {
			t.Errorf("router calls %v: want a second one excluding the stalled target", calls)
		}
		id := resp.Header.Get(RequestIDHeader)
		if ev := e.usageEvent(t, id); ev.GetAttempts() != 2 || ev.GetEndpointId() != "good" || ev.GetStatusCode() != http.StatusOK {
			t.Errorf("usage event %v", ev)
		}
		byEndpoint := map[string]bool{}
		for _, c := range e.completions(t, id, 2) {
			byEndpoint[c.GetEndpointId()] = c.GetUpstreamFailed()
		}
		if failed, seen := byEndpoint["stall"]; !seen || !failed {
			t.Errorf("completions %v: want the stalled attempt reported as the upstream's failure", byEndpoint)
		}
	})

	t.Run("the only target: 504", func(t *testing.T) {
		e := newEnv(t, envOpts{cfg: short})
		stall := newVLLM(t, modeHoldBeforeHeaders)
		e.router.setTargets(testModel, stall.target("stall"))
		resp := e.post(t, "/v1/chat/completions", chatBody, nil)
		id := resp.Header.Get(RequestIDHeader)
		if resp.StatusCode != http.StatusGatewayTimeout {
			t.Fatalf("status %d, want 504", resp.StatusCode)
		}
		if d := decodeError(t, resp); d.Code == nil || *d.Code != "upstream_timeout" {
			t.Errorf("error %+v", d)
		}
		comps := e.completions(t, id, 1)
		if !comps[0].GetUpstreamFailed() || comps[0].GetSuccess() {
			t.Errorf("completion %v: want upstream_failed", comps[0])
		}
		if ev := e.usageEvent(t, id); ev.GetStatusCode() != http.StatusGatewayTimeout {
			t.Errorf("usage event %v", ev)
		}
	})

	t.Run("an Anthropic client's 504 is Anthropic's", func(t *testing.T) {
		e := newEnv(t, envOpts{noNATS: true, cfg: short})
		stall := newVLLM(t, modeHoldBeforeHeaders)
		e.router.setTargets(testModel, stall.target("stall"))
		resp := e.post(t, "/v1/messages", messagesBody, map[string]string{"anthropic-version": "2023-06-01"})
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var body anthropicapi.ErrorBody
		if err := json.Unmarshal(raw, &body); err != nil || resp.StatusCode != http.StatusGatewayTimeout ||
			body.Type != "error" || body.Error.Type != anthropicapi.ErrTypeTimeout {
			t.Errorf("got %d %s, want a 504 timeout_error envelope", resp.StatusCode, raw)
		}
	})
}
