package router_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/natsembed"
	"github.com/switchyard-dev/switchyard/internal/sim"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/kvtracker"
	"github.com/switchyard-dev/switchyard/services/router"
)

// kvStack is a simulated worker publishing KV events, a kvtracker and a
// router, over a NATS of the test's own and the shared Redis: the path a
// worker's cache takes into the router's index.
type kvStack struct {
	natsURL string
	worker  sim.WorkerInfo
	tracker *kvtracker.Tracker
	router  *testRouter
}

// kvStackID is the worker's id, in the tracker's deltas and the router's
// endpoints alike.
const kvStackID = "sim-0"

func startKVStack(t *testing.T, natsURL string, fleet *sim.Fleet) *kvStack {
	t.Helper()
	redisRaw, _ := redisURL(t)
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	w := fleet.Workers()[0]
	kc := kvtracker.DefaultConfig()
	kc.Workers = kvStackID + "=" + w.URL + "|" + w.KVEndpoint + "|" + w.ReplayEndpoint
	kc.NATS.URL, kc.Redis.URL = natsURL, redisRaw
	kc.Pool = "kvrestart-" + strconv.FormatUint(rand.Uint64(), 36)
	kc.Model = sim.DefaultServedModelName
	kc.Topic = "kv"
	kc.ReplicaID = "kvrestart-tracker"
	kc.HTTPAddr = "127.0.0.1:0"
	kc.SnapshotInterval = 200 * time.Millisecond
	kc.ShutdownTimeout = 5 * time.Second
	tracker, err := kvtracker.New(kc, log)
	if err != nil {
		t.Fatal(err)
	}
	serveUntilCleanup(t, "kvtracker", tracker.Serve)
	waitHTTPReady(t, "http://"+tracker.HTTPAddr()+"/readyz")
	tr := startRouter(t, func(c *router.Config) {
		c.Endpoints = kvStackID + "=" + w.URL
		c.NATS.URL, c.Redis.URL = natsURL, redisRaw
		c.ScrapeInterval = 100 * time.Millisecond
		// Only the kvtracker's events may put a prefix in the index.
		c.SpeculativeTTL, c.ApproxTTL = time.Millisecond, time.Millisecond
	})
	return &kvStack{natsURL: natsURL, worker: w, tracker: tracker, router: tr}
}

// serve sends a chat with system's prefix straight to the worker (not
// through the router: only the KV events may tell the router about it).
func (s *kvStack) serve(t *testing.T, system string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": s.worker.Model, "max_tokens": 1,
		"messages": []map[string]string{{"role": "system", "content": system}, {"role": "user", "content": "hi"}}})
	resp, err := http.Post(s.worker.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("chat on the worker: %d %s", resp.StatusCode, data)
	}
}

// cached is how many of system's prefix tokens the router's index holds on
// the worker.
func (s *kvStack) cached(t *testing.T, system string) int64 {
	t.Helper()
	return cachedOn(s.router.explainModel(t, sim.DefaultServedModelName, chatBodyFor(sim.DefaultServedModelName, system, "probe")), kvStackID)
}

func (s *kvStack) waitCached(t *testing.T, system string, within time.Duration) {
	t.Helper()
	testkit.Eventually(t, within, "the prefix in the router's index", func() bool { return s.cached(t, system) > 7000 })
}

// TestKVIndexAfterNATSRestart: NATS restarts and loses the KV stream and
// the kvtracker's lease bucket (memory storage). The kvtracker makes them
// again and takes its worker back, and what the worker caches afterwards
// reaches the router's index again; the kvtracker is not ready meanwhile.
func TestKVIndexAfterNATSRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end; skipped in -short")
	}
	port := testkit.FreePort(t)
	ns, _ := testkit.NATS(t, port)
	fleet := startSim(t, zerolog.Nop(), func(sc *sim.Config) {
		sc.Workers, sc.TimeScale, sc.DefaultMaxTokens = 1, 50, 1
		sc.KVEventsConfig = `{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://127.0.0.1:*","replay_endpoint":"tcp://127.0.0.1:*","topic":"kv"}`
	})
	s := startKVStack(t, ns.URL(), fleet)
	trackerReady := "http://" + s.tracker.HTTPAddr() + "/readyz"

	before := doc("before the restart")
	s.serve(t, before)
	s.waitCached(t, before, 10*time.Second)

	ns.Shutdown()
	testkit.Eventually(t, 10*time.Second, "kvtracker not ready while NATS is down", func() bool {
		return testkit.HTTPStatus(t, trackerReady) == http.StatusServiceUnavailable
	})
	ns2, err := natsembed.Start(natsembed.Options{Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns2.Shutdown)
	back := time.Now()

	// Cached while the kvtracker has not taken the worker back: the
	// worker's replay buffer brings it in.
	after := doc("after the restart")
	s.serve(t, after)
	testkit.Eventually(t, 30*time.Second, "kvtracker ready again", func() bool {
		return testkit.HTTPStatus(t, trackerReady) == http.StatusOK
	})
	t.Logf("kvtracker ready %s after NATS came back", time.Since(back).Round(10*time.Millisecond))
	s.waitCached(t, after, 10*time.Second)
	// And what is cached from now on keeps flowing.
	later := doc("later still")
	s.serve(t, later)
	s.waitCached(t, later, 10*time.Second)
}

// TestKVIndexAfterWorkerRestart: the worker restarts on the same ports and
// stays idle. Its cache is empty; the router's index drops what it held
// there before any request or event (the kvtracker reads the new process
// start time from the worker's metrics), so no request is sent there for a
// prefix it no longer caches.
func TestKVIndexAfterWorkerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end; skipped in -short")
	}
	ns, _ := startNATS(t)
	port, kvPort, replayPort := testkit.FreePort(t), testkit.FreePort(t), testkit.FreePort(t)
	simCfg := func(sc *sim.Config) {
		sc.Workers, sc.TimeScale, sc.DefaultMaxTokens = 1, 50, 1
		sc.Port = port
		// A wildcard host: vLLM (and the simulator) bind only then.
		sc.KVEventsConfig = fmt.Sprintf(`{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:%d","replay_endpoint":"tcp://*:%d","topic":"kv"}`,
			kvPort, replayPort)
	}
	fleet := startSim(t, zerolog.Nop(), simCfg)
	s := startKVStack(t, ns.URL(), fleet)

	before := doc("before the worker restarts")
	s.serve(t, before)
	s.waitCached(t, before, 10*time.Second)

	if err := fleet.Close(); err != nil {
		t.Fatal(err)
	}
	restarted := startSim(t, zerolog.Nop(), simCfg)
	if restarted.Workers()[0].URL != s.worker.URL {
		t.Fatalf("restarted at %s, not %s", restarted.Workers()[0].URL, s.worker.URL)
	}
	back := time.Now()
	testkit.Eventually(t, 10*time.Second, "the restarted worker's blocks dropped from the index", func() bool { return s.cached(t, before) == 0 })
	t.Logf("dropped %s after the worker came back", time.Since(back).Round(time.Millisecond))
	after := doc("after the worker restarted")
	s.serve(t, after)
	s.waitCached(t, after, 10*time.Second)
}

// TestGuessesDroppedAfterWorkerRestart: for a worker without KV events the
// router guesses what it caches from its own decisions (the approximate
// index). When the worker restarts (its metrics show a new process start
// time), those guesses go at once: its cache is empty.
func TestGuessesDroppedAfterWorkerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end; skipped in -short")
	}
	port := testkit.FreePort(t)
	simCfg := func(sc *sim.Config) { sc.Workers, sc.TimeScale, sc.DefaultMaxTokens, sc.Port = 1, 50, 1, port }
	fleet := startSim(t, zerolog.Nop(), simCfg)
	model := sim.DefaultServedModelName
	tr := startRouter(t, func(c *router.Config) { c.Endpoints = kvStackID + "=" + fleet.Workers()[0].URL })
	system := doc("guessed")
	resp, err := tr.client.Route(context.Background(), &routerv1.RouteRequest{RequestId: "r1", Tenant: "t", Model: model,
		Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: chatBodyFor(model, system, "question")})
	if err != nil || resp.GetTarget() == nil {
		t.Fatalf("route: %v %v", resp, err)
	}
	guessed := func() int64 {
		return cachedOn(tr.explainModel(t, model, chatBodyFor(model, system, "probe")), kvStackID)
	}
	if guessed() <= 0 {
		t.Fatal("no guess after routing the prompt")
	}
	if err := fleet.Close(); err != nil {
		t.Fatal(err)
	}
	startSim(t, zerolog.Nop(), simCfg)
	testkit.Eventually(t, 10*time.Second, "the restarted worker's guesses dropped", func() bool { return guessed() == 0 })
}
