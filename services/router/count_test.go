package router_test

import (
	"context"
	"testing"

	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router"
)

func (tr *testRouter) count(t testing.TB, model string, body []byte) *routerv1.RouteResponse {
	t.Helper()
	resp, err := tr.client.Route(context.Background(), &routerv1.RouteRequest{
		RequestId: "count", Tenant: "t", Model: model, Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: body, CountOnly: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestCountOnly: a count_only Route answers the prompt's length as the
// routed request's decision counts it, picks nothing and leaves nothing in
// flight; a model nothing serves is rejected; without a tokenizer the count
// is marked inexact.
func TestCountOnly(t *testing.T) {
	a, b := newFakeWorker(t, "m"), newFakeWorker(t, "m")
	tr := startRouter(t, nil, a, b)
	body := chatBody(doc("contracts"), "What is clause 4 about?")

	resp := tr.count(t, "m", body)
	d := resp.GetDecision()
	if resp.GetTarget() != nil || resp.GetRejection() != nil || d.GetPromptTokens() <= 0 || !d.GetPromptTokensExact() {
		t.Fatalf("count answer = %v", resp)
	}
	for id, e := range tr.endpoints(t, "m") {
		if e.GetInFlight() != 0 {
			t.Errorf("endpoint %s has %d in flight after a count", id, e.GetInFlight())
		}
	}
	if routed := tr.routeBody(t, "r1", body).GetDecision().GetPromptTokens(); routed != d.GetPromptTokens() {
		t.Errorf("count %d, routed decision %d", d.GetPromptTokens(), routed)
	}
	if rej := tr.count(t, "nope", body).GetRejection(); rej.GetCode() != routerv1.RejectCode_REJECT_CODE_MODEL_NOT_FOUND {
		t.Errorf("unknown model: rejection %v", rej)
	}

	none := startRouter(t, func(c *router.Config) { c.Tokenizers = "*=none" }, newFakeWorker(t, "m"))
	if d := none.count(t, "m", body).GetDecision(); d.GetPromptTokensExact() {
		t.Errorf("no tokenizer: count %v marked exact", d)
	}
}
