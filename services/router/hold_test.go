package router_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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

// Flow control's KV test: each routed request claims its uncached prompt
// plus its output limit of its worker's KV cache, and a worker without
// room for the next claim is full for it. A request whose tenant is past
// its share leaves the reserve unclaimed; one within its share may use it.
func TestHoldOnKVClaims(t *testing.T) {
	a, b := newFakeWorker(t, "m"), newFakeWorker(t, "m")
	for _, w := range []*fakeWorker{a, b} {
		w.kvUsage[0].Store(0)
		w.kvUsage[1].Store(0)
	}
	tr := startRouter(t, nil, a, b)
	a.setLoad(0, 0)
	b.setLoad(0, 0)
	tr.waitLoads(t, a, b)
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("tell me more about it ", 200) + `"}]}`)
	count, err := tr.client.Route(context.Background(), &routerv1.RouteRequest{
		RequestId: "count", Model: "m", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: body, CountOnly: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Two engines of 27,431 blocks of 16 tokens: 877,792 tokens a worker.
	// A claim of 170,000 fits 5 times in the whole cache, 4 times in 90%.
	const capacity, claim = 2 * 27431 * 16, 170_000
	output := claim - count.GetDecision().GetPromptTokens()
	n := 0
	route := func(reserve float64) *routerv1.RouteResponse {
		t.Helper()
		n++
		resp, err := tr.client.Route(context.Background(), &routerv1.RouteRequest{
			RequestId: "r" + strconv.Itoa(n), Tenant: "team-a", Model: "m", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS,
			QueueThreshold: 100, KvCacheThreshold: 1, KvReserve: reserve, MaxOutputTokens: output, Body: body,
		})
		if err != nil {
			t.Fatalf("Route: %v", err)
		}
		return resp
	}
	perWorker := map[string]int{}
	for i := range 8 {
		id, err := chosen(route(0.1))
		if err != nil {
			t.Fatalf("borrower %d of 8: %v", i+1, err)
		}
		perWorker[id]++
	}
	if perWorker["a"] != 4 || perWorker["b"] != 4 {
		t.Errorf("routed %v, want 4 on each", perWorker)
	}
	resp := route(0.1)
	if !resp.GetHeld() {
		t.Fatalf("a ninth claim past 90%% of each cache: got %v, want held", resp)
	}
	if r := resp.GetDecision().GetReason(); !strings.Contains(r, "within 90% of its KV cache") || !strings.Contains(r, "10% kept for others") {
		t.Errorf("held reason %q: want the KV limit and the reserve", r)
	}
	for i := range 2 {
		if _, err := chosen(route(0)); err != nil {
			t.Fatalf("within its share, request %d of 2: %v", i+1, err)
		}
	}
	if resp := route(0); !resp.GetHeld() {
		t.Fatalf("each cache claimed to %d of %d tokens: got %v, want held", 5*claim, capacity, resp)
	}
	// Out-of-range flow-control fields are refused, each named.
	_, err = tr.client.Route(context.Background(), &routerv1.RouteRequest{
		RequestId: "bad", Model: "m", Body: body, KvCacheThreshold: 1.5, KvReserve: -0.1, MaxOutputTokens: -1, QueueThreshold: -2,
	})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("out-of-range fields: %v, want InvalidArgument", err)
	}
	for _, want := range []string{"queue_threshold -2", "kv_cache_threshold 1.5", "kv_reserve -0.1", "max_output_tokens -1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v: want %q", err, want)
		}
	}
}
