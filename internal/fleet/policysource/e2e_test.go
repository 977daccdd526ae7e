package policysource_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/sim"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	"github.com/switchyard-dev/switchyard/internal/testkit/fleetprobe"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/kvtracker"
	"github.com/switchyard-dev/switchyard/services/router"
)

// TestRouterAndKVTrackerFollowPolicyd is the fleet end to end: simulated
// workers publishing KV events, a policyd in files mode, and a router and
// a kvtracker that both follow it. Editing the catalog directory under the
// running fleet adds a worker, which the router routes to and whose KV
// events the kvtracker ingests (they reach the router's index), then
// removes one, which both drop.
func TestRouterAndKVTrackerFollowPolicyd(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end; skipped in -short")
	}
	log := testLog(t)
	ns, nc := testkit.NATS(t, 0)

	sc := sim.DefaultConfig()
	sc.Port = 0
	sc.Workers = 2
	sc.TimeScale = 100
	sc.DefaultMaxTokens = 1
	sc.ShutdownTimeout = 5 * time.Second
	sc.KVEventsConfig = `{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://127.0.0.1:*","replay_endpoint":"tcp://127.0.0.1:*"}`
	sims, err := sim.StartFleet(context.Background(), sc, log.With().Str("service", "sim").Logger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sims.Close() })
	model := sims.Workers()[0].Model
	catalogWorker := func(id string, i int) worker {
		w := sims.Workers()[i]
		return worker{id: id, url: w.URL, kv: w.KVEndpoint, replay: w.ReplayEndpoint}
	}
	w0, w1 := catalogWorker("w0", 0), catalogWorker("w1", 1)

	dir := newCatalogDir(t, model)
	dir.write(w0)
	pd := startPolicyd(t, dir.dir, log)

	kc := kvtracker.DefaultConfig()
	kc.PolicydAddr = pd.GRPCAddr()
	kc.NATS.URL, kc.Redis.URL = ns.URL(), ""
	kc.ReplicaID = "fleet-e2e"
	kc.HTTPAddr = "127.0.0.1:0"
	kc.ShutdownTimeout = 5 * time.Second
	tracker, err := kvtracker.New(kc, log.With().Str("service", "kvtracker").Logger())
	if err != nil {
		t.Fatal(err)
	}
	testkit.Serve(t, tracker.Serve)

	rc := router.DefaultConfig()
	rc.GRPCAddr, rc.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	rc.PolicydAddr = pd.GRPCAddr()
	rc.NATS.URL = ns.URL()
	rc.RouterID = "fleet-e2e"
	rc.ScrapeInterval = 100 * time.Millisecond
	// Only KV events may put a prompt in the router's index.
	rc.SpeculativeTTL, rc.ApproxTTL = time.Millisecond, time.Millisecond
	rs, err := router.New(rc, log.With().Str("service", "router").Logger())
	if err != nil {
		t.Fatal(err)
	}
	testkit.Serve(t, rs.Serve)
	rt := routerv1.NewRouterClient(dial(t, rs.GRPCAddr()))

	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	tracked := func(id string) *trackedWorker {
		sub, err := nc.SubscribeSync(bus.KVDeltaSubject("gpus", id))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
		return &trackedWorker{t: t, js: js, id: id, deltas: sub, metrics: "http://" + tracker.HTTPAddr() + "/metrics"}
	}
	tw0, tw1 := tracked("w0"), tracked("w1")

	// The catalog's first worker: listed, routed to, leased and ingested.
	waitEndpoints(t, rt, "w0")
	fleetprobe.RouteTo(t, rt, model, nil, "w0")
	tw0.waitLeased()
	tw0.waitDelta(sims.Workers()[0], "first worker")

	// A worker added to the InferenceWorkerSet.
	dir.write(w0, w1)
	waitEndpoints(t, rt, "w0", "w1")
	fleetprobe.RouteTo(t, rt, model, []string{"w0"}, "w1")
	tw1.waitLeased()
	prompt := tw1.waitDelta(sims.Workers()[1], "added worker")
	// Its events reach the router's index through the kvtracker: the
	// prompt sent to the worker directly shows as cached there.
	testkit.Eventually(t, 20*time.Second, "the router to see the added worker's cached prompt", func() bool {
		return fleetprobe.CachedOn(t, rt, model, prompt, "w1") > 0
	})

	// A worker removed from it.
	dir.write(w1)
	waitEndpoints(t, rt, "w1")
	fleetprobe.RouteTo(t, rt, model, nil, "w1")
	tw0.waitReleased()
	testkit.Eventually(t, 10*time.Second, "the kvtracker to track one worker", func() bool {
		return tw0.metric("switchyard_kvtracker_workers_configured") == "1" && tw0.metric("switchyard_kvtracker_leases_held") == "1"
	})
}

// trackedWorker watches what the kvtracker does with one worker.
type trackedWorker struct {
	t       *testing.T
	js      jetstream.JetStream
	id      string
	deltas  *nats.Subscription
	metrics string
	n       int
}

// lease reads the worker's lease; nil when nobody holds it.
func (w *trackedWorker) lease() (jetstream.KeyValueEntry, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	kv, err := w.js.KeyValue(ctx, bus.BucketKVLeases)
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, bus.KVLeaseKey("gpus", w.id))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, nil
	}
	return e, err
}

func (w *trackedWorker) waitLeased() {
	w.t.Helper()
	testkit.Eventually(w.t, 20*time.Second, w.id+"'s lease taken", func() bool {
		e, err := w.lease()
		return err == nil && e != nil
	})
}

func (w *trackedWorker) waitReleased() {
	w.t.Helper()
	testkit.Eventually(w.t, 20*time.Second, w.id+"'s lease released", func() bool {
		e, err := w.lease()
		return err == nil && e == nil
	})
}

// waitDelta sends prompts straight to the simulated worker until a KV
// delta for it comes out of the kvtracker (the subscription reaches the
// worker's socket a moment after the lease), and returns the last prompt.
func (w *trackedWorker) waitDelta(sw sim.WorkerInfo, what string) string {
	w.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		w.n++
		prompt := fleetprobe.LongPrompt(w.id, w.n)
		fleetprobe.Complete(w.t, sw, prompt)
		if _, err := w.deltas.NextMsg(500 * time.Millisecond); err == nil {
			return prompt
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("%s %s: no KV delta from the kvtracker after 20s", what, w.id)
		}
	}
}

// metric is a sample's value on the kvtracker's /metrics page.
func (w *trackedWorker) metric(name string) string {
	resp, err := http.Get(w.metrics)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return v
		}
	}
	return ""
}

// waitEndpoints waits until the router lists exactly ids.
func waitEndpoints(t *testing.T, rt routerv1.RouterClient, ids ...string) {
	t.Helper()
	var got []string
	testkit.Eventually(t, 20*time.Second, fmt.Sprintf("the router to list %v", ids), func() bool {
		resp, err := rt.ListEndpoints(context.Background(), &routerv1.ListEndpointsRequest{})
		if err != nil {
			return false
		}
		got = got[:0]
		for _, e := range resp.GetEndpoints() {
			got = append(got, e.GetId())
		}
		slices.Sort(got)
		return slices.Equal(got, ids)
	})
}
