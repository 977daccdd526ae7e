package router_test

import (
	"context"
	"strings"
	"testing"

	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

// Flow control: a request is held, not routed, while every eligible worker
// has the gateway's queue threshold of requests waiting to be scheduled,
// counting both what the last scrape saw and what was routed since; a held
// request leaves no record.
func TestHoldWhenSaturated(t *testing.T) {
	a, b := newFakeWorker(t, "m"), newFakeWorker(t, "m")
	tr := startRouter(t, nil, a, b)
	a.setLoad(3, 4)
	b.setLoad(2, 4)
	tr.waitLoads(t, a, b)

	route := func(id string, threshold int32, hold bool, body string) *routerv1.RouteResponse {
		t.Helper()
		resp, err := tr.client.Route(context.Background(), &routerv1.RouteRequest{
			RequestId: id, Tenant: "team-a", Model: "m", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS,
			QueueThreshold: threshold, Hold: hold, Body: []byte(body),
		})
		if err != nil {
			t.Fatalf("Route(%s): %v", id, err)
		}
		return resp
	}
	inFlight := func() int64 {
		var n int64
		for _, e := range tr.endpoints(t, "m") {
			n += e.GetInFlight()
		}
		return n
	}
	long := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("tell me more about it ", 2000) + `"}]}`

	// Scraped: a has 3 waiting, b 2; with a threshold of 2 both are full.
	resp := route("r1", 2, false, long)
	if !resp.GetHeld() || resp.GetTarget() != nil || resp.GetRejection() != nil {
		t.Fatalf("threshold 2 over waiting 3 and 2: got %v, want held", resp)
	}
	if d := resp.GetDecision(); d.GetPromptTokens() < 4000 || !strings.Contains(d.GetReason(), "2 or more") {
		t.Errorf("held decision %v: want the prompt's length and the threshold in the reason", d)
	}
	if n := inFlight(); n != 0 {
		t.Fatalf("a held request left %d in flight", n)
	}
	// Without a threshold nothing is held.
	if id, err := chosen(route("r2", 0, false, long)); err != nil {
		t.Fatalf("no threshold: %v", err)
	} else if id != "b" {
		t.Errorf("no threshold: routed to %s, want b (the shorter queue)", id)
	}

	// b's queue drains to one waiting: room for one more, then b has two
	// waiting (the scraped one and r3, routed since) and the next is
	// held.
	b.setLoad(1, 4)
	tr.waitLoads(t, a, b)
	if id, err := chosen(route("r3", 2, false, long)); err != nil || id != "b" {
		t.Fatalf("b below the threshold: got %q, %v; want b", id, err)
	}
	if resp := route("r4", 2, false, long); !resp.GetHeld() {
		t.Fatalf("b filled by r3: got %v, want held", resp)
	}

	// hold holds whatever the load; a higher threshold routes.
	if resp := route("r5", 0, true, long); !resp.GetHeld() {
		t.Fatalf("hold: got %v, want held", resp)
	}
	if _, err := chosen(route("r6", 10, false, long)); err != nil {
		t.Fatalf("threshold 10: %v", err)
	}
	if n := inFlight(); n != 3 {
		t.Errorf("in flight %d, want 3 (r2, r3, r6): held requests must leave none", n)
	}
}
