package router_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router"
)

// Worker failure modes the fake worker can be switched into.
const (
	modeOK int32 = iota
	modeStatus500
	modeHang
	modeGarbage
)

// fakeWorker is a real HTTP server speaking the two vLLM endpoints the
// router reads, with numbers the test controls. Its load is split over two
// engines, as a data-parallel vLLM reports it.
type fakeWorker struct {
	t       testing.TB
	models  []string
	waiting atomic.Int64
	running atomic.Int64
	mode    atomic.Int32
	// kvUsage is each engine's vllm:kv_cache_usage_perc × 1000; the
	// defaults are 500 and 250.
	kvUsage [2]atomic.Int64

	mu   sync.Mutex
	addr string
	srv  *http.Server
}

func newFakeWorker(t testing.TB, models ...string) *fakeWorker {
	t.Helper()
	w := &fakeWorker{t: t, models: models}
	w.kvUsage[0].Store(500)
	w.kvUsage[1].Store(250)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w.addr = ln.Addr().String()
	w.serve(ln)
	t.Cleanup(w.stop)
	return w
}

func (w *fakeWorker) URL() string { return "http://" + w.addr }

func (w *fakeWorker) setLoad(waiting, running int64) {
	w.waiting.Store(waiting)
	w.running.Store(running)
}

func (w *fakeWorker) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(w.handle)}
	w.srv = srv
	go func() { _ = srv.Serve(ln) }()
}

// stop closes the listener and every connection: the router's next scrape
// gets "connection refused".
func (w *fakeWorker) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.srv != nil {
		_ = w.srv.Close()
		w.srv = nil
	}
}

// restart listens again on the same address.
func (w *fakeWorker) restart() {
	w.mu.Lock()
	defer w.mu.Unlock()
	ln, err := net.Listen("tcp", w.addr)
	if err != nil {
		w.t.Fatalf("relisten %s: %v", w.addr, err)
	}
	w.serve(ln)
}

func (w *fakeWorker) handle(rw http.ResponseWriter, r *http.Request) {
	switch w.mode.Load() {
	case modeStatus500:
		http.Error(rw, "engine dead", http.StatusInternalServerError)
		return
	case modeHang:
		<-r.Context().Done()
		return
	case modeGarbage:
		_, _ = rw.Write([]byte("<html>502 Bad Gateway</html>"))
		return
	}
	switch r.URL.Path {
	case "/metrics":
		rw.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = rw.Write([]byte(vllmMetrics(w.models[0], w.waiting.Load(), w.running.Load(), w.kvUsage[0].Load(), w.kvUsage[1].Load())))
	case "/v1/models":
		var b strings.Builder
		b.WriteString(`{"object":"list","data":[`)
		for i, m := range w.models {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"id":%q,"object":"model","created":1749314210,"owned_by":"vllm","root":%q,"parent":null,"max_model_len":32768}`, m, m)
		}
		b.WriteString(`]}`)
		rw.Header().Set("Content-Type", "application/json")
		_, _ = rw.Write([]byte(b.String()))
	default:
		http.NotFound(rw, r)
	}
}

// vllmMetrics is a page of two engines' metrics, each with a KV cache of
// 27,431 blocks of 16 tokens; kv0 and kv1 are their usage × 1000.
func vllmMetrics(model string, waiting, running, kv0, kv1 int64) string {
	var b strings.Builder
	w0, r0 := waiting/2, running/2
	w1, r1 := waiting-w0, running-r0
	fmt.Fprintf(&b, "# HELP vllm:num_requests_running Number of requests in model execution batches.\n# TYPE vllm:num_requests_running gauge\n")
	fmt.Fprintf(&b, "vllm:num_requests_running{engine=\"0\",model_name=%q} %d.0\n", model, r0)
	fmt.Fprintf(&b, "vllm:num_requests_running{engine=\"1\",model_name=%q} %d.0\n", model, r1)
	fmt.Fprintf(&b, "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n# TYPE vllm:num_requests_waiting gauge\n")
	fmt.Fprintf(&b, "vllm:num_requests_waiting{engine=\"0\",model_name=%q} %d.0\n", model, w0)
	fmt.Fprintf(&b, "vllm:num_requests_waiting{engine=\"1\",model_name=%q} %d.0\n", model, w1)
	fmt.Fprintf(&b, "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n# TYPE vllm:kv_cache_usage_perc gauge\n")
	fmt.Fprintf(&b, "vllm:kv_cache_usage_perc{engine=\"0\",model_name=%q} %g\n", model, float64(kv0)/1000)
	fmt.Fprintf(&b, "vllm:kv_cache_usage_perc{engine=\"1\",model_name=%q} %g\n", model, float64(kv1)/1000)
	fmt.Fprintf(&b, "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n# TYPE vllm:cache_config_info gauge\n")
	fmt.Fprintf(&b, "vllm:cache_config_info{block_size=\"16\",enable_prefix_caching=\"True\",engine=\"0\",num_gpu_blocks=\"27431\"} 1.0\n")
	return b.String()
}

// testRouter is a real router serving on loopback.
type testRouter struct {
	srv    *router.Server
	client routerv1.RouterClient
	cancel context.CancelFunc
	done   chan error
}

// startRouter runs a router over the workers (ids a, b, c, ... in order)
// and waits until it is ready (every worker scraped once).
func startRouter(t testing.TB, edit func(*router.Config), workers ...*fakeWorker) *testRouter {
	t.Helper()
	cfg := router.DefaultConfig()
	cfg.GRPCAddr = "127.0.0.1:0"
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.NATS.URL = ""
	cfg.RouterID = "test-router"
	cfg.ScrapeInterval = 50 * time.Millisecond
	cfg.ScrapeTimeout = 500 * time.Millisecond
	cfg.ShutdownTimeout = 5 * time.Second
	var eps []string
	for i, w := range workers {
		eps = append(eps, workerID(i)+"="+w.URL())
	}
	cfg.Endpoints = strings.Join(eps, ",")
	if edit != nil {
		edit(&cfg)
	}
	srv, err := router.New(cfg, zerolog.Nop())
	if err != nil {
		t.Fatalf("router.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tr := &testRouter{srv: srv, cancel: cancel, done: make(chan error, 1)}
	go func() { tr.done <- srv.Serve(ctx) }()
	conn, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	tr.client = routerv1.NewRouterClient(conn)
	t.Cleanup(func() {
		_ = conn.Close()
		tr.stop(t)
	})
	waitFor(t, "router ready", func() bool {
		resp, err := http.Get("http://" + srv.HTTPAddr() + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return tr
}

// stop shuts the router down and checks that Serve returned cleanly.
func (tr *testRouter) stop(t testing.TB) {
	if tr.cancel == nil {
		return
	}
	tr.cancel()
	tr.cancel = nil
	select {
	case err := <-tr.done:
		if err != nil {
			t.Errorf("Serve returned %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Errorf("Serve did not return after cancel")
	}
}

func workerID(i int) string { return string(rune('a' + i)) }

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (tr *testRouter) endpoints(t testing.TB, model string) map[string]*routerv1.Endpoint {
	t.Helper()
	resp, err := tr.client.ListEndpoints(context.Background(), &routerv1.ListEndpointsRequest{Model: model})
	if err != nil {
		t.Fatalf("ListEndpoints: %v", err)
	}
	out := map[string]*routerv1.Endpoint{}
	for _, e := range resp.GetEndpoints() {
		out[e.GetId()] = e
	}
	return out
}

// waitLoads waits until the router has scraped the workers' current numbers.
func (tr *testRouter) waitLoads(t testing.TB, workers ...*fakeWorker) {
	t.Helper()
	waitFor(t, "scraped loads", func() bool {
		eps := tr.endpoints(t, "")
		for i, w := range workers {
			e := eps[workerID(i)]
			if w.mode.Load() != modeOK {
				continue
			}
			if e == nil || !e.GetHealthy() || e.GetWaiting() != w.waiting.Load() || e.GetRunning() != w.running.Load() {
				return false
			}
		}
		return true
	})
}

func (tr *testRouter) route(t testing.TB, reqID, model string, exclude ...string) *routerv1.RouteResponse {
	t.Helper()
	resp, err := tr.client.Route(context.Background(), &routerv1.RouteRequest{
		RequestId: reqID, Tenant: "team-a", Model: model, Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS,
		ExcludeEndpoints: exclude,
	})
	if err != nil {
		t.Fatalf("Route(%s): %v", reqID, err)
	}
	return resp
}

var errNotRouted = errors.New("not routed")

func chosen(resp *routerv1.RouteResponse) (string, error) {
	if resp.GetTarget() == nil {
		return "", fmt.Errorf("%w: %v", errNotRouted, resp.GetRejection())
	}
	return resp.GetTarget().GetId(), nil
}

// get fetches url and returns its status and body.
func get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
