package gateway

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/apikey"
	"github.com/switchyard-dev/switchyard/internal/bus"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/gateway/flowcontrol"
)

// flowCatalog is a GatewayBackend with two keyed tenants: team-a (weight
// 1, may ask for Critical) and team-b (weight 1, Standard at most).
func flowCatalog(keyA, keyB string) string {
	return fmt.Sprintf(`apiVersion: switchyard.dev/v1alpha1
kind: GatewayBackend
metadata: {name: keyed, namespace: inference}
spec:
  auth: {mode: APIKey}
  tenants:
  - name: team-a
    keyDigests: [%q]
    maxPriority: Critical
  - name: team-b
    keyDigests: [%q]
`, apikey.Digest(keyA), apikey.Digest(keyB))
}

type flowEnv struct {
	*env
	up         *vllm
	keyA, keyB string
}

func newFlowEnv(t *testing.T, edit func(*Config)) *flowEnv {
	t.Helper()
	return newFlowEnvWith(t, modeOK, edit)
}

// newFlowEnvWith is newFlowEnv with its worker answering in mode.
func newFlowEnvWith(t *testing.T, mode upstreamMode, edit func(*Config)) *flowEnv {
	t.Helper()
	keyA, keyB := apikey.Generate(), apikey.Generate()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "gateway.yaml"), []byte(flowCatalog(keyA, keyB)), 0o600); err != nil {
		t.Fatal(err)
	}
	pdAddr := servePolicydFiles(t, dir)
	up := newVLLM(t, mode)
	e := newEnv(t, envOpts{noNATS: true, cfg: func(c *Config) {
		c.PolicydAddr, c.GatewayBackend = pdAddr, "keyed"
		c.Flow.Threshold = 1
		c.Flow.RetryInterval = 5 * time.Millisecond
		if edit != nil {
			edit(c)
		}
	}})
	e.router.setTargets(testModel, up.target("w0"))
	e.router.setFree(0)
	e.eventually(t, "policy snapshot", func() bool { p := e.gw.catalog.program(); return p != nil && p.AuthKeys() == 2 })
	return &flowEnv{env: e, up: up, keyA: keyA, keyB: keyB}
}

const flowBody = `{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`

// send posts a chat request with key (and priority, when set) in the
// background; the answer's status and shed reason arrive on the channel.
func (e *flowEnv) send(t *testing.T, key, priority string, out chan<- string) {
	go func() {
		h := map[string]string{"Authorization": "Bearer " + key}
		if priority != "" {
			h[PriorityHeader] = priority
		}
		req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/chat/completions", strings.NewReader(flowBody))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := e.client.Do(req)
		if err != nil {
			out <- "error: " + err.Error()
			return
		}
		resp.Body.Close()
		out <- fmt.Sprintf("%d %s", resp.StatusCode, resp.Header.Get(ShedReasonHeader))
	}()
}

func (e *flowEnv) waitQueued(t *testing.T, n int) {
	t.Helper()
	e.eventually(t, fmt.Sprintf("%d queued", n), func() bool { return e.gw.flow.Len() == n })
}

// Through a real gateway and policyd: while the router holds requests, a
// flood from team-a waits in the queue, and team-b's requests, sent after
// the flood, are let through among the first when capacity frees; a
// Critical request goes before all of them.
func TestFlowControlFairRelease(t *testing.T) {
	e := newFlowEnv(t, nil)
	out := make(chan string, 32)
	for i := range 12 {
		e.send(t, e.keyA, "", out)
		e.waitQueued(t, i+1)
	}
	for i := range 3 {
		e.send(t, e.keyB, "", out)
		e.waitQueued(t, 13+i)
	}
	e.send(t, e.keyA, "critical", out)
	e.waitQueued(t, 16)

	e.router.setFree(100)
	for range 16 {
		if got := <-out; got != "200 " {
			t.Fatalf("answer %q, want 200", got)
		}
	}
	order := e.router.routedTenants()
	if len(order) != 16 {
		t.Fatalf("routed %d, want 16", len(order))
	}
	if order[0] != "team-a" {
		t.Errorf("first routed %s, want team-a's critical request", order[0])
	}
	// Equal weights and costs: team-b's three go in the first seven
	// (after the critical one, alternating with team-a's backlog).
	b := 0
	for _, o := range order[:7] {
		if o == "team-b" {
			b++
		}
	}
	if b != 3 {
		t.Errorf("routed order %v: team-b has %d of the first 7, want 3", order, b)
	}
	if m := scrape(t, e.metricsURL); !strings.Contains(m, `switchyard_gateway_queue_wait_seconds_count{class="standard"} 15`) ||
		!strings.Contains(m, `switchyard_gateway_queue_wait_seconds_count{class="critical"} 1`) {
		t.Errorf("queue wait metrics:\n%s", grepLines(m, "queue_wait_seconds_count"))
	}
}

// The priority header is checked against the tenant's maximum; a value
// that is no class is a 400.
func TestFlowControlPriorityHeader(t *testing.T) {
	e := newFlowEnv(t, nil)
	e.router.setFree(100)
	for _, c := range []struct {
		key, priority string
		status        int
		code          string
	}{
		{e.keyA, "Critical", http.StatusOK, ""},
		{e.keyA, "sheddable", http.StatusOK, ""},
		{e.keyB, "critical", http.StatusForbidden, "priority_not_allowed"},
		{e.keyB, "standard", http.StatusOK, ""},
		{e.keyB, "urgent", http.StatusBadRequest, "invalid_priority"},
	} {
		resp := e.post(t, "/v1/chat/completions", flowBody, map[string]string{"Authorization": "Bearer " + c.key, PriorityHeader: c.priority})
		if resp.StatusCode != c.status {
			t.Errorf("%s: status %d, want %d", c.priority, resp.StatusCode, c.status)
		}
		if c.code != "" {
			if d := decodeError(t, resp); d.Code == nil || *d.Code != c.code {
				t.Errorf("%s: code %v, want %q", c.priority, d.Code, c.code)
			}
		} else {
			resp.Body.Close()
		}
	}
}

// A full queue sheds the newest request of the tenant queueing most, so a
// flood cannot lock a steady tenant out; the shed request gets 429 with
// the reason, in the client's API shape.
func TestFlowControlSheds(t *testing.T) {
	e := newFlowEnv(t, func(c *Config) { c.Flow.MaxQueued = 4 })
	out := make(chan string, 8)
	for i := range 4 {
		e.send(t, e.keyA, "", out)
		e.waitQueued(t, i+1)
	}
	resp := e.post(t, "/v1/chat/completions", flowBody, map[string]string{"Authorization": "Bearer " + e.keyA})
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get(ShedReasonHeader) != "queue-full" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("team-a's fifth: %d %q, want 429 queue-full with Retry-After", resp.StatusCode, resp.Header.Get(ShedReasonHeader))
	}
	if d := decodeError(t, resp); d.Code == nil || *d.Code != "fleet_saturated" {
		t.Errorf("shed error code %v, want fleet_saturated", d.Code)
	}
	e.send(t, e.keyB, "", out)
	if got := <-out; got != "429 queue-full" {
		t.Fatalf("the answer after team-b joined a full queue: %q, want team-a's newest shed", got)
	}
	e.waitQueued(t, 4)
	e.router.setFree(100)
	for range 4 {
		if got := <-out; got != "200 " {
			t.Errorf("answer %q, want 200", got)
		}
	}
	if m := scrape(t, e.metricsURL); !strings.Contains(m, `switchyard_gateway_queue_shed_total{class="standard",reason="queue-full"} 2`) {
		t.Errorf("shed metric:\n%s", grepLines(m, "queue_shed"))
	}
}

// A request waits at most --queue-max-wait; its usage event says shed and
// how long it waited. The Messages API answers in Anthropic's shape.
func TestFlowControlTimeout(t *testing.T) {
	e := newEnv(t, envOpts{cfg: func(c *Config) {
		c.Flow.Threshold, c.Flow.MaxWait = 1, 200*time.Millisecond
	}})
	up := newVLLM(t, modeOK)
	e.router.setTargets(testModel, up.target("w0"))
	e.router.setFree(0)
	resp := e.post(t, "/v1/chat/completions", flowBody, nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get(ShedReasonHeader) != "queue-timeout" {
		t.Fatalf("status %d reason %q, want 429 queue-timeout", resp.StatusCode, resp.Header.Get(ShedReasonHeader))
	}
	ev := e.usageEvent(t, resp.Header.Get(RequestIDHeader))
	if ev.GetOutcome() != bus.UsageOutcomeShed || ev.GetQueueSeconds() < 0.2 || ev.GetStatusCode() != http.StatusTooManyRequests {
		t.Errorf("usage event outcome %q queue %.3fs status %d, want shed, ≥ 0.2s, 429", ev.GetOutcome(), ev.GetQueueSeconds(), ev.GetStatusCode())
	}

	resp = e.post(t, "/v1/messages", `{"model":"test-model","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, nil)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), `"rate_limit_error"`) {
		t.Errorf("Messages API: %d %s, want 429 rate_limit_error", resp.StatusCode, body)
	}
}

// A tenant that claims more than its share of what the gateway has routed
// (in flight, uncached prompt plus output limit) asks the router to leave
// the reserve; a tenant within its share does not, nor does a critical
// request, while a sheddable one always does. Claims end with their
// requests.
func TestFlowControlReserve(t *testing.T) {
	e := newFlowEnvWith(t, modeGateAfter1, func(c *Config) { c.Flow.Reserve = 0.2 })
	e.router.setFree(100)
	stream := `{"model":"test-model","stream":true,"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	open := func(key string) *http.Response {
		t.Helper()
		resp := e.post(t, "/v1/chat/completions", stream, map[string]string{"Authorization": "Bearer " + key})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		return resp
	}
	var held []*http.Response
	for range 3 {
		held = append(held, open(e.keyA))
	}
	held = append(held, open(e.keyB))
	ask := func(key, priority string) *routerv1.RouteRequest {
		t.Helper()
		h := map[string]string{"Authorization": "Bearer " + key}
		if priority != "" {
			h[PriorityHeader] = priority
		}
		resp := e.post(t, "/v1/chat/completions", flowBody, h)
		resp.Body.Close()
		calls := e.router.calls()
		return calls[len(calls)-1]
	}
	for _, c := range []struct {
		name, key, priority string
		reserve             float64
	}{
		{"team-a with 3 of 4 in flight", e.keyA, "", 0.2},
		{"team-b with 1 of 4", e.keyB, "", 0},
		{"team-a's critical request", e.keyA, "critical", 0},
		{"team-b's sheddable request", e.keyB, "sheddable", 0.2},
	} {
		req := ask(c.key, c.priority)
		if req.GetKvReserve() != c.reserve || req.GetQueueThreshold() != 1 {
			t.Errorf("%s: asked with reserve %g threshold %d, want %g and 1", c.name, req.GetKvReserve(), req.GetQueueThreshold(), c.reserve)
		}
		if req.GetMaxOutputTokens() != 1024 {
			t.Errorf("%s: max_output_tokens %d, want the default 1024 (the body sets none)", c.name, req.GetMaxOutputTokens())
		}
	}
	close(e.up.gate)
	for _, r := range held {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	e.eventually(t, "claims released", func() bool { return !e.gw.flow.Borrowing("team-a", 1, flowcontrol.Standard) })
	if req := ask(e.keyA, ""); req.GetKvReserve() != 0 {
		t.Errorf("team-a alone: asked with reserve %g, want 0", req.GetKvReserve())
	}
	var first *routerv1.RouteRequest
	for _, r := range e.router.calls() {
		if r.GetMaxOutputTokens() == 64 {
			first = r
		}
	}
	if first == nil {
		t.Error("no request asked with the body's max_tokens 64")
	}
}
