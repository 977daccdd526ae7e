package router_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router"
)

// BenchmarkReplicaSync is what keeping router replicas in agreement costs
// and buys: 4 replicas over one real NATS server and 16 workers, each
// request routed (an 8k-token chat) on the replicas in turn and then
// completed as a gateway would.
//
//   - nats-msgs/req and nats-B/req: every message on switchyard.> per
//     routed request (the replicas' decisions, the completions), counted
//     by a subscriber of its own;
//   - dup-in-window-%: of pairs of requests routed at the same instant on
//     two replicas, inside the sync window (neither has heard of the
//     other's decision), the share that picked the same worker while an
//     equally idle one was left; dup-after-sync-% the same for pairs
//     routed one after the other, once the first decision has arrived.
func BenchmarkReplicaSync(b *testing.B) {
	ns, nc := startNATS(b)
	workers := make([]*fakeWorker, 16)
	for i := range workers {
		workers[i] = newFakeWorker(b, "m")
	}
	replicas := make([]*testRouter, 4)
	for i := range replicas {
		replicas[i] = startRouter(b, func(c *router.Config) {
			slowScrapes(c)
			c.NATS.URL = ns.URL()
			c.RouterID = "r" + strconv.Itoa(i)
		}, workers...)
	}
	warmUp(b, nc, replicas...)
	var msgs, bytes atomic.Int64
	sub, err := nc.Subscribe("switchyard.>", func(m *nats.Msg) {
		msgs.Add(1)
		bytes.Add(int64(len(m.Subject) + len(m.Data)))
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		b.Fatal(err)
	}
	// Every request's prompt is its own (cached nowhere), so that no
	// worker is better than another but for the load.
	route := func(r *testRouter, id string) string {
		resp, err := r.client.Route(context.Background(), &routerv1.RouteRequest{RequestId: id, Tenant: "t", Model: "m",
			Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: chatBodyFor("m", doc(id), "Summarise.")})
		if err != nil || resp.GetTarget() == nil {
			b.Fatalf("route %s: %v %v", id, resp, err)
		}
		return resp.GetTarget().GetId()
	}

	// The cost: one request at a time, completed before the next.
	routed := 0
	msgs.Store(0)
	bytes.Store(0)
	for i := 0; b.Loop(); i++ {
		id := "sync-" + strconv.Itoa(i)
		publishCompletion(b, nc, id, route(replicas[i%len(replicas)], id))
		routed++
	}
	b.StopTimer()
	if err := nc.Flush(); err != nil {
		b.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the last messages reach the counter
	b.ReportMetric(float64(msgs.Load())/float64(routed), "nats-msgs/req")
	b.ReportMetric(float64(bytes.Load())/float64(routed), "nats-B/req")

	// What it buys: pairs on two replicas, at once and one after the
	// other, on an idle fleet (every pair completed before the next).
	const pairs = 100
	dup := func(concurrent bool) float64 {
		same := 0
		for p := range pairs {
			a, c := replicas[p%4], replicas[(p+1)%4]
			ida, idc := "pa-"+strconv.FormatBool(concurrent)+strconv.Itoa(p), "pc-"+strconv.FormatBool(concurrent)+strconv.Itoa(p)
			var ta, tc string
			if concurrent {
				var wg sync.WaitGroup
				wg.Add(2)
				go func() { defer wg.Done(); ta = route(a, ida) }()
				go func() { defer wg.Done(); tc = route(c, idc) }()
				wg.Wait()
			} else {
				ta = route(a, ida)
				waitFor(b, "the other replica hears of the decision", func() bool { return c.endpoints(b, "")[ta].GetInFlight() == 1 })
				tc = route(c, idc)
			}
			if ta == tc {
				same++
			}
			publishCompletion(b, nc, ida, ta)
			publishCompletion(b, nc, idc, tc)
			for _, r := range replicas {
				waitFor(b, "completions heard", func() bool {
					eps := r.endpoints(b, "")
					return eps[ta].GetInFlight() == 0 && eps[tc].GetInFlight() == 0
				})
			}
		}
		return 100 * float64(same) / pairs
	}
	b.ReportMetric(dup(true), "dup-in-window-%")
	b.ReportMetric(dup(false), "dup-after-sync-%")
}
