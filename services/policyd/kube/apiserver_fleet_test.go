package kube

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/sim"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	"github.com/switchyard-dev/switchyard/internal/testkit/fleetprobe"
	"github.com/switchyard-dev/switchyard/internal/testkit/kubeapi"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/kvtracker"
	"github.com/switchyard-dev/switchyard/services/router"
)

// The pool of the fleet test's worker set.
const fleetPool = "gpus"

// workerSlice is the EndpointSlice the EndpointSlice controller would
// write for one pod of Service sim: its address, readiness and pod, and
// the pod's ports under the Service's port names. The simulated workers
// share one address on ports of their own, as host-network pods on one
// node would, so each is in a slice of its own ports.
func workerSlice(t *testing.T, pod string, w sim.WorkerInfo, ready bool) *unstructured.Unstructured {
	t.Helper()
	u, err := url.Parse(w.URL)
	if err != nil {
		t.Fatal(err)
	}
	ep := podEndpoint(pod, u.Hostname(), ready)
	_ = unstructured.SetNestedField(ep, "inference", "targetRef", "namespace")
	return slicePorts(endpointSlice(pod, "sim", ep), map[string]int64{
		PortHTTP: portOf(t, w.URL), PortKVEvents: portOf(t, w.KVEndpoint), PortKVReplay: portOf(t, w.ReplayEndpoint),
	})
}

// hostAddress is an IPv4 address of this machine that an EndpointSlice
// may hold: the API server refuses loopback and link-local endpoints
// (a pod never has one), so the simulated workers cannot stay on
// 127.0.0.1 here. Without one the test is skipped.
func hostAddress(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skipf("interface addresses: %v", err)
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.To4() == nil || n.IP.IsLoopback() || n.IP.IsLinkLocalUnicast() {
			continue
		}
		// It must be reachable from here, as a pod's address is from
		// the services.
		ln, err := net.Listen("tcp", net.JoinHostPort(n.IP.String(), "0"))
		if err != nil {
			continue
		}
		c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
		ln.Close()
		if err != nil {
			continue
		}
		c.Close()
		return n.IP.String()
	}
	t.Skip("no IPv4 address but loopback and link-local: an EndpointSlice may hold neither")
	return ""
}

// portOf is the port of an http:// or tcp:// address.
func portOf(t *testing.T, addr string) int64 {
	t.Helper()
	u, err := url.Parse(addr)
	if err != nil {
		t.Fatal(err)
	}
	_, p, err := net.SplitHostPort(u.Host)
	if err != nil {
		t.Fatalf("%s: %v", addr, err)
	}
	n, err := strconv.ParseInt(p, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The fleet from Kubernetes, end to end on a real API server: an
// InferenceWorkerSet naming Service sim, whose EndpointSlices the test
// writes as the EndpointSlice controller would (no kubelet here), and a
// router and a kvtracker following policyd's Watch. A pod's endpoint
// added to the Service is routed to, and its KV events are ingested (the
// kvtracker leases it, publishes its deltas, and they reach the router's
// index); a pod turning unready is dropped by both.
func TestFleetFromEndpointSlices(t *testing.T) {
	api := kubeapi.Start(t, "policyd")
	host := hostAddress(t)
	installCRDs(t, api)
	grantPolicyd(t, api, "policyd")

	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	if testing.Verbose() {
		log = log.Level(zerolog.InfoLevel)
	}
	sims := startSims(t, host, log)
	model := sims.Workers()[0].Model
	api.Apply(t, "inference", []byte(fmt.Sprintf(`apiVersion: switchyard.dev/v1alpha1
kind: InferencePool
metadata: {name: %s}
spec: {}
---
apiVersion: switchyard.dev/v1alpha1
kind: InferenceWorkerSet
metadata: {name: sims}
spec:
  model: %s
  pool: %s
  service: sim
  blockSize: 16
  kvEvents: {port: 5557, replayPort: 5567}
`, fleetPool, model, fleetPool)))
	pd := startReplica(t, api, "policyd", "fleet")

	ns, nc := testkit.NATS(t, 0)
	kc := kvtracker.DefaultConfig()
	kc.PolicydAddr = pd.GRPCAddr()
	kc.NATS.URL, kc.Redis.URL = ns.URL(), ""
	kc.ReplicaID = "kube-fleet"
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
	rc.RouterID = "kube-fleet"
	rc.ScrapeInterval = 100 * time.Millisecond
	// Only KV events may put a prompt in the router's index.
	rc.SpeculativeTTL, rc.ApproxTTL = time.Millisecond, time.Millisecond
	rs, err := router.New(rc, log.With().Str("service", "router").Logger())
	if err != nil {
		t.Fatal(err)
	}
	testkit.Serve(t, rs.Serve)
	conn, err := grpc.NewClient(rs.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	rt := routerv1.NewRouterClient(conn)

	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	metrics := "http://" + tracker.HTTPAddr() + "/metrics"
	tracked := func(id string) *trackedWorker {
		sub, err := nc.SubscribeSync(bus.KVDeltaSubject(fleetPool, id))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
		return &trackedWorker{t: t, js: js, id: id, deltas: sub}
	}
	w0, w1 := sims.Workers()[0], sims.Workers()[1]
	tw0, tw1 := tracked("sim-0"), tracked("sim-1")

	start := time.Now()
	api.ApplyObject(t, "inference", workerSlice(t, "sim-0", w0, true))
	waitEndpoints(t, rt, map[string]string{"sim-0": w0.URL})
	fleetprobe.RouteTo(t, rt, model, nil, "sim-0")
	tw0.waitLeased()
	tw0.waitDelta(w0)
	t.Logf("the first pod: routed to and ingested %s after its slice was written", time.Since(start).Round(time.Millisecond))

	// A second pod, on ports of its own.
	start = time.Now()
	api.ApplyObject(t, "inference", workerSlice(t, "sim-1", w1, true))
	waitEndpoints(t, rt, map[string]string{"sim-0": w0.URL, "sim-1": w1.URL})
	fleetprobe.RouteTo(t, rt, model, []string{"sim-0"}, "sim-1")
	tw1.waitLeased()
	prompt := tw1.waitDelta(w1)
	testkit.Eventually(t, 20*time.Second, "the router to see the added pod's cached prompt", func() bool {
		return fleetprobe.CachedOn(t, rt, model, prompt, "sim-1") > 0
	})
	t.Logf("an added pod: routed to and its blocks in the router's index %s after its slice was written", time.Since(start).Round(time.Millisecond))

	// The first pod turns unready: both drop it.
	start = time.Now()
	api.ApplyObject(t, "inference", workerSlice(t, "sim-0", w0, false))
	waitEndpoints(t, rt, map[string]string{"sim-1": w1.URL})
	fleetprobe.RouteTo(t, rt, model, nil, "sim-1")
	tw0.waitReleased()
	testkit.Eventually(t, 10*time.Second, "the kvtracker to track one worker", func() bool {
		return metric(metrics, "switchyard_kvtracker_workers_configured") == "1" && metric(metrics, "switchyard_kvtracker_leases_held") == "1"
	})
	t.Logf("an unready pod: dropped by both %s after its slice said so", time.Since(start).Round(time.Millisecond))
}

// startSims runs two simulated workers publishing KV events, each on
// ports of its own on host.
func startSims(t *testing.T, host string, log zerolog.Logger) *sim.Fleet {
	t.Helper()
	sc := sim.DefaultConfig()
	sc.Host, sc.Port = host, 0
	sc.Workers = 2
	sc.TimeScale = 100
	sc.DefaultMaxTokens = 1
	sc.ShutdownTimeout = 5 * time.Second
	sc.KVEventsConfig = `{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://` + host + `:*","replay_endpoint":"tcp://` + host + `:*"}`
	sims, err := sim.StartFleet(context.Background(), sc, log.With().Str("service", "sim").Logger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sims.Close() })
	return sims
}

// trackedWorker watches what the kvtracker does with one worker.
type trackedWorker struct {
	t      *testing.T
	js     jetstream.JetStream
	id     string
	deltas *nats.Subscription
	n      int
}

// lease reads the worker's lease; nil when nobody holds it.
func (w *trackedWorker) lease() (jetstream.KeyValueEntry, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	kv, err := w.js.KeyValue(ctx, bus.BucketKVLeases)
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, bus.KVLeaseKey(fleetPool, w.id))
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
func (w *trackedWorker) waitDelta(sw sim.WorkerInfo) string {
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
			w.t.Fatalf("%s: no KV delta from the kvtracker after 20s", w.id)
		}
	}
}

// metric is a sample's value on a /metrics page.
func metric(page, name string) string {
	resp, err := http.Get(page)
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

// waitEndpoints waits until the router lists exactly the workers of
// want (id → URL): each at the URL of its own slice's http port.
func waitEndpoints(t *testing.T, rt routerv1.RouterClient, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	testkit.Eventually(t, 20*time.Second, fmt.Sprintf("the router to list %v", want), func() bool {
		resp, err := rt.ListEndpoints(context.Background(), &routerv1.ListEndpointsRequest{})
		if err != nil {
			return false
		}
		clear(got)
		for _, e := range resp.GetEndpoints() {
			got[e.GetId()] = e.GetUrl()
		}
		return maps.Equal(got, want)
	})
}
