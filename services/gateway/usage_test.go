package gateway

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/apikey"
	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

// Every request has one usage event, refused ones included, with the
// outcome saying why: a bad key (no tenant, no model: the body was never
// read), over a rate limit, refused by a policy; through either API. A
// routed one carries its target's type and the policy and rule that
// decided.
func TestUsageEventForEveryRequest(t *testing.T) {
	redisURL, _ := testkit.Redis(t)
	key := apikey.Generate()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "gateway.yaml"), []byte(keyedCatalog(map[string]string{"team-a": key})), 0o600); err != nil {
		t.Fatal(err)
	}
	pdAddr := servePolicydFiles(t, dir)
	up := newVLLM(t, modeOK)
	e := newEnv(t, envOpts{cfg: rateLimited(t, redisURL, "tenants:\n  team-a:\n    requestsPerMinute: 3\n", func(c *Config) {
		c.PolicydAddr, c.GatewayBackend = pdAddr, "keyed"
		c.Admission = "apikey,ratelimit"
	})})
	tgt := up.target("w0")
	e.router.setTargets(testModel, tgt)
	e.router.reject = map[string]*routerv1.Rejection{"secret-model": {Code: routerv1.RejectCode_REJECT_CODE_POLICY, Message: "no"}}
	e.router.decisionPolicy, e.router.decisionRule = "burst-policy", "overflow"
	e.eventually(t, "policy snapshot", func() bool { p := e.gw.catalog.program(); return p != nil && p.AuthKeys() == 1 })

	auth := map[string]string{"Authorization": "Bearer " + key}
	send := func(path, body string, h map[string]string) (string, int) {
		t.Helper()
		resp := e.post(t, path, body, h)
		resp.Body.Close()
		id := resp.Header.Get(RequestIDHeader)
		if id == "" {
			t.Fatalf("%s: no request id", path)
		}
		return id, resp.StatusCode
	}
	messages := fmt.Sprintf(`{"model":%q,"max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, testModel)
	for _, c := range []struct {
		name, path, body string
		h                map[string]string
		status           int
		outcome, tenant  string
		model            string
		api              string
	}{
		{"served", "/v1/chat/completions", chatBody, auth, 200, bus.UsageOutcomeOK, "team-a", testModel, "chat.completions"},
		{"refused by a policy", "/v1/chat/completions", `{"model":"secret-model","messages":[{"role":"user","content":"hi"}]}`, auth, 403, bus.UsageOutcomeRejectedPolicy, "team-a", "secret-model", "chat.completions"},
		{"unreadable, Messages API", "/v1/messages", `{"model":`, auth, 400, bus.UsageOutcomeError, "team-a", "", "messages"},
		{"over the limit", "/v1/chat/completions", chatBody, auth, 429, bus.UsageOutcomeRejectedLimit, "team-a", "", "chat.completions"},
		{"a bad key", "/v1/chat/completions", chatBody, map[string]string{"Authorization": "Bearer " + apikey.Generate()}, 401, bus.UsageOutcomeRejectedAuth, "", "", "chat.completions"},
		{"a bad key, Messages API", "/v1/messages", messages, map[string]string{"x-api-key": apikey.Generate()}, 401, bus.UsageOutcomeRejectedAuth, "", "", "messages"},
	} {
		t.Run(c.name, func(t *testing.T) {
			id, status := send(c.path, c.body, c.h)
			if status != c.status {
				t.Fatalf("status %d, want %d", status, c.status)
			}
			ev := e.usageEvent(t, id)
			if ev.GetOutcome() != c.outcome || ev.GetTenant() != c.tenant || ev.GetModel() != c.model || ev.GetApi() != c.api || ev.GetStatusCode() != int32(c.status) {
				t.Errorf("event outcome %q tenant %q model %q api %q status %d; want %q %q %q %q %d",
					ev.GetOutcome(), ev.GetTenant(), ev.GetModel(), ev.GetApi(), ev.GetStatusCode(), c.outcome, c.tenant, c.model, c.api, c.status)
			}
			if c.outcome == bus.UsageOutcomeOK && (ev.GetTargetType() != "vLLM" || ev.GetPolicy() != "burst-policy" || ev.GetRule() != "overflow" || ev.GetTargetKind() != "local") {
				t.Errorf("served event: target type %q kind %q policy %q rule %q", ev.GetTargetType(), ev.GetTargetKind(), ev.GetPolicy(), ev.GetRule())
			}
		})
	}
	if got := e.router.calls(); len(got) != 2 {
		t.Errorf("%d requests routed, want 2 (served, policy)", len(got))
	}
}
