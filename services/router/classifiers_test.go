package router_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router"
)

// TestBuiltinClassifiersWithPolicyd runs the default classifiers (header
// and tenant tags, pii, pii-rules, complexity) under deploy/examples'
// policies, served by a real policyd: a prompt holding a valid card number
// or one of the GatewayBackend's own kinds of personal data is never routed
// to a Provider (pii-stays-local's guard), whatever tags the client sends
// and however busy the cluster is; a simple prompt asked of glm-5.3 goes
// to the smaller qwen-3.6-27b when that is faster (smart-semantic-routing),
// and a hard one does not.
func TestBuiltinClassifiersWithPolicyd(t *testing.T) {
	q0 := newFakeWorker(t, "qwen-3.6-27b")
	q1 := newFakeWorker(t, "qwen-3.6-27b")
	g0 := newFakeWorker(t, "glm-5.3")
	pd := startPolicyd(t, devCatalog(t, q0, q1, g0))
	tr := startRouter(t, func(c *router.Config) {
		if c.Classifiers != "header-tags,tenant-tags,pii,pii-rules,complexity,external" {
			t.Fatalf("default classifiers %q", c.Classifiers)
		}
		c.Endpoints = ""
		c.PolicydAddr = pd.GRPCAddr()
		c.GatewayBackend = "dev"
	})
	waitLoads := func(q0w, q1w, gw int64) {
		t.Helper()
		q0.setLoad(q0w, 0)
		q1.setLoad(q1w, 0)
		g0.setLoad(gw, 0)
		waitFor(t, "scraped loads", func() bool {
			eps := tr.endpoints(t, "")
			for id, w := range map[string]int64{"sim-0": q0w, "sim-1": q1w, "sim-2": gw} {
				if e := eps[id]; e == nil || !e.GetHealthy() || e.GetWaiting() != w {
					return false
				}
			}
			return true
		})
	}
	chat := func(model string, msgs ...string) []byte {
		type m struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		}
		var ms []m
		for i, c := range msgs {
			role := "user"
			if i == 0 && len(msgs) > 1 {
				role = "system"
			}
			ms = append(ms, m{role, c})
		}
		b, err := json.Marshal(map[string]any{"model": model, "messages": ms})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	n := 0
	route := func(t *testing.T, model string, api routerv1.ApiKind, body []byte, tags []string) *routerv1.RouteResponse {
		t.Helper()
		n++
		resp, err := tr.client.Route(context.Background(), &routerv1.RouteRequest{
			RequestId: fmt.Sprintf("cls-%d", n), Tenant: "team-a", Model: model, Tags: tags, Api: api, Body: body,
		})
		if err != nil {
			t.Fatalf("Route: %v", err)
		}
		return resp
	}
	const chatAPI, complAPI = routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, routerv1.ApiKind_API_KIND_COMPLETIONS
	piiBodies := map[string]struct {
		api  routerv1.ApiKind
		body []byte
	}{
		"chat, spaced":       {chatAPI, chat("qwen-3.6-27b", "You are a billing assistant.", "Please charge my card 4111 1111 1111 1111, expiry 09/27.")},
		"chat, in Japanese":  {chatAPI, chat("qwen-3.6-27b", "カード番号は4012-8888-8888-1881です。")},
		"chat, in a system":  {chatAPI, chat("qwen-3.6-27b", "Customer card on file: 5555555555554444.", "What is my balance?")},
		"completions prompt": {complAPI, []byte(`{"model":"qwen-3.6-27b","prompt":"Card: 378282246310005. Write a receipt."}`)},
		// The GatewayBackend's own kinds (spec.pii), by pii-rules.
		"an employee id": {chatAPI, chat("qwen-3.6-27b", "Look up the leave of EMP-204117, please.")},
		"a codename":     {chatAPI, chat("qwen-3.6-27b", "Draft the launch note for project\nfalcon.")},
	}
	headers := [][]string{nil, {"vip"}, {"batch"}, {"complexity-low"}, {"batch", "complexity-low", "vip"}}

	t.Run("a card number stays local under burst", func(t *testing.T) {
		// Local queues over 2: without personal data the burst rule sends
		// the request to bedrock.
		waitLoads(3, 4, 0)
		if tg := route(t, "qwen-3.6-27b", chatAPI, chat("qwen-3.6-27b", "Please charge my order ORD-2024-118842."), nil).GetTarget(); tg.GetKind() != routerv1.TargetKind_TARGET_KIND_PROVIDER {
			t.Fatalf("control without a card: routed to %v, want a provider (the test would prove nothing)", tg)
		}
		for name, b := range piiBodies {
			for _, tags := range headers {
				resp := route(t, "qwen-3.6-27b", b.api, b.body, tags)
				tg := resp.GetTarget()
				if tg == nil || tg.GetKind() == routerv1.TargetKind_TARGET_KIND_PROVIDER || !slices.Contains([]string{"sim-0", "sim-1"}, tg.GetId()) {
					t.Errorf("%s, tags %v: routed to %v (rejection %v), want sim-0 or sim-1", name, tags, tg, resp.GetRejection())
				}
			}
		}
	})

	t.Run("a card number with no local worker is rejected, not sent out", func(t *testing.T) {
		waitLoads(0, 0, 0)
		q0.mode.Store(modeStatus500)
		q1.mode.Store(modeStatus500)
		defer q0.mode.Store(modeOK)
		defer q1.mode.Store(modeOK)
		waitFor(t, "qwen workers unhealthy", func() bool {
			eps := tr.endpoints(t, "qwen-3.6-27b")
			return !eps["sim-0"].GetHealthy() && !eps["sim-1"].GetHealthy()
		})
		for name, b := range piiBodies {
			for _, tags := range headers {
				resp := route(t, "qwen-3.6-27b", b.api, b.body, tags)
				// Rejected by pii-stays-local's fail-closed onEmpty, or by
				// batch-to-idle's when the client says batch: never routed.
				if resp.GetTarget() != nil || resp.GetRejection().GetCode() != routerv1.RejectCode_REJECT_CODE_POLICY {
					t.Errorf("%s, tags %v: target %v rejection %v, want a policy's rejection", name, tags, resp.GetTarget(), resp.GetRejection())
				}
				if want := "pii-stays-local"; !slices.Contains(tags, "batch") && resp.GetDecision().GetPolicy() != want {
					t.Errorf("%s, tags %v: rejected by %q, want %q", name, tags, resp.GetDecision().GetPolicy(), want)
				}
			}
		}
		if tg := route(t, "qwen-3.6-27b", chatAPI, chat("qwen-3.6-27b", "Summarise ticket INV-2024-0042."), nil).GetTarget(); tg.GetId() != "provider/bedrock" {
			t.Errorf("without a card: routed to %v, want provider/bedrock", tg)
		}
	})

	t.Run("a simple prompt for glm goes to the smaller model", func(t *testing.T) {
		// glm's worker has a queue, qwen's are idle: qwen is faster.
		waitLoads(0, 0, 2)
		for _, body := range [][]byte{
			chat("glm-5.3", "What is the capital of Australia?"),
			chat("glm-5.3", "You are a friendly assistant.", "こんにちは！今日はいい天気ですね。"),
		} {
			resp := route(t, "glm-5.3", chatAPI, body, nil)
			d, tg := resp.GetDecision(), resp.GetTarget()
			if d.GetPolicy() != "smart-semantic-routing" || tg.GetServedModel() != "qwen-3.6-27b" || !slices.Contains([]string{"sim-0", "sim-1"}, tg.GetId()) {
				t.Errorf("simple prompt: %s/%s served %q by %s, want smart-semantic-routing's qwen-3.6-27b on sim-0 or sim-1 (reason %s)",
					d.GetPolicy(), d.GetRule(), tg.GetServedModel(), tg.GetId(), d.GetReason())
			}
		}
		hard := chat("glm-5.3", "Refactor this to be pure and explain the complexity:\n```python\ndef merge(a, b):\n    for k in b:\n        a[k] = a.get(k, 0) + b[k]\n    return a\n```")
		resp := route(t, "glm-5.3", chatAPI, hard, nil)
		if d, tg := resp.GetDecision(), resp.GetTarget(); d.GetPolicy() == "smart-semantic-routing" || tg.GetServedModel() != "glm-5.3" {
			t.Errorf("hard prompt: %s/%s served %q by %s, want glm-5.3 (not smart-semantic-routing)", d.GetPolicy(), d.GetRule(), tg.GetServedModel(), tg.GetId())
		}
	})
}
