package router_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router"
)

// writeProviders replaces the dev catalog's providers (in dir, as
// devCatalog wrote it) with bedrock and databricks on the burst policy's
// order, each with the spec lines given (indented under spec:); policyd
// picks the change up at its next poll.
func writeProviders(t testing.TB, dir, bedrock, databricks string) {
	t.Helper()
	yaml := fmt.Sprintf(`apiVersion: switchyard.dev/v1alpha1
kind: InferenceProvider
metadata: {name: bedrock, namespace: inference}
spec:
  type: OpenAICompatible
  baseURL: http://127.0.0.1:8100/v1
  credentials: {env: BEDROCK_API_KEY}
  models:
  - {name: qwen-3.6-27b, servedName: qwen.qwen3-6-27b-v1:0}
  - {name: glm-5.3, servedName: zai.glm-5-3-v1:0}
%s
---
apiVersion: switchyard.dev/v1alpha1
kind: InferenceProvider
metadata: {name: databricks, namespace: inference}
spec:
  type: OpenAICompatible
  baseURL: http://127.0.0.1:8101/v1
  credentials: {env: DATABRICKS_API_KEY}
  models:
  - {name: qwen-3.6-27b, servedName: databricks-qwen-3-6-27b}
%s
`, bedrock, databricks)
	// Written aside and renamed: policyd never reads half a file.
	tmp := filepath.Join(t.TempDir(), "providers.yaml")
	if err := os.WriteFile(tmp, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "providers.yaml")); err != nil {
		t.Fatal(err)
	}
}

// overflowRouter is a router following policyd's dev catalog over NATS,
// its local qwen workers past the burst policy's threshold, so qwen
// requests overflow to the providers in the policy's order.
func overflowRouter(t testing.TB, pd interface{ GRPCAddr() string }, url, id string, q0, q1 *fakeWorker, edit func(*router.Config)) *testRouter {
	t.Helper()
	tr := startRouter(t, func(c *router.Config) {
		c.Endpoints = ""
		c.PolicydAddr = pd.GRPCAddr()
		c.GatewayBackend = "dev"
		c.NATS.URL = url
		c.RouterID = id
		if edit != nil {
			edit(c)
		}
	})
	waitFor(t, id+": busy workers scraped", func() bool {
		eps := tr.endpoints(t, "qwen-3.6-27b")
		return eps["sim-0"].GetWaiting() == q0.waiting.Load() && eps["sim-1"].GetWaiting() == q1.waiting.Load()
	})
	return tr
}

func (tr *testRouter) routeQwen(t testing.TB, reqID string) string {
	t.Helper()
	resp, err := tr.client.Route(context.Background(), qwenRequest(reqID))
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetTarget().GetId()
}

func (tr *testRouter) explainQwen(t testing.TB) string {
	t.Helper()
	ex, err := tr.client.Explain(context.Background(), qwenRequest("why"))
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(ex)
}

func qwenRequest(reqID string) *routerv1.RouteRequest {
	return &routerv1.RouteRequest{
		RequestId: reqID, Tenant: "team-a", Model: "qwen-3.6-27b", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS,
		Body: []byte(`{"model":"qwen-3.6-27b","messages":[{"role":"user","content":"hi"}]}`),
	}
}

func (tr *testRouter) inFlight(t testing.TB, endpoint string) int64 {
	t.Helper()
	return tr.endpoints(t, "")[endpoint].GetInFlight()
}

// peersHear waits until each router hears the others' decisions over
// NATS: a glm request routed on one shows in flight on the others, then
// its completion releases it everywhere.
func peersHear(t testing.TB, nc *nats.Conn, routers ...*testRouter) {
	t.Helper()
	for i, from := range routers {
		var ids []string
		var ep string
		waitFor(t, fmt.Sprintf("router %d's decisions heard", i), func() bool {
			id := fmt.Sprintf("hear-%d-%d", i, len(ids))
			resp, err := from.client.Route(context.Background(), &routerv1.RouteRequest{
				RequestId: id, Tenant: "team-a", Model: "glm-5.3", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS,
				Body: []byte(`{"model":"glm-5.3","messages":[{"role":"user","content":"hi"}]}`),
			})
			if err != nil {
				t.Fatal(err)
			}
			ids, ep = append(ids, id), resp.GetTarget().GetId()
			deadline := time.Now().Add(time.Second)
			for time.Now().Before(deadline) {
				heard := true
				for j, to := range routers {
					if j != i && to.inFlight(t, ep) < 1 {
						heard = false
					}
				}
				if heard {
					return true
				}
				time.Sleep(10 * time.Millisecond)
			}
			return false
		})
		for _, id := range ids {
			publishCompletion(t, nc, id, "")
		}
		for j, r := range routers {
			waitFor(t, fmt.Sprintf("router %d released the warm-up", j), func() bool { return r.inFlight(t, ep) == 0 })
		}
	}
}

// completionsHeard makes sure tr hears completions before a test counts
// on one (core NATS does not replay what is published before the
// router's subscription reaches the server, and a provider's completion
// cannot be sent twice: each counts toward its circuit). It routes a
// request to the local glm worker and completes it until tr releases it.
func completionsHeard(t testing.TB, nc *nats.Conn, tr *testRouter) {
	t.Helper()
	resp, err := tr.client.Route(context.Background(), &routerv1.RouteRequest{
		RequestId: "heard", Tenant: "team-a", Model: "glm-5.3", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS,
		Body: []byte(`{"model":"glm-5.3","messages":[{"role":"user","content":"hi"}]}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	ep := resp.GetTarget().GetId()
	waitFor(t, "a completion heard", func() bool {
		publishCompletion(t, nc, "heard", ep)
		deadline := time.Now().Add(200 * time.Millisecond)
		for time.Now().Before(deadline) {
			if tr.inFlight(t, ep) == 0 {
				return true
			}
			time.Sleep(10 * time.Millisecond)
		}
		return false
	})
}

// TestProviderMaxConcurrency: bedrock has maxConcurrency 2. Two router
// replicas sharing their in-flight counts over NATS send it two requests
// between them; the third and fourth go to databricks, the burst
// policy's next provider, and Explain and the metrics say why. A burst of
// ten on one replica, once bedrock is free, gives it exactly two. Raised
// to 3 in policyd's files, the cap takes effect without a restart.
func TestProviderMaxConcurrency(t *testing.T) {
	q0 := newFakeWorker(t, "qwen-3.6-27b")
	q1 := newFakeWorker(t, "qwen-3.6-27b")
	g0 := newFakeWorker(t, "glm-5.3")
	dir := devCatalog(t, q0, q1, g0)
	writeProviders(t, dir, "  maxConcurrency: 2", "")
	pd := startPolicyd(t, dir)
	ns, nc := startNATS(t)
	q0.setLoad(3, 0)
	q1.setLoad(4, 0)
	a := overflowRouter(t, pd, ns.URL(), "router-a", q0, q1, nil)
	b := overflowRouter(t, pd, ns.URL(), "router-b", q0, q1, nil)
	peersHear(t, nc, a, b)

	const bedrock, databricks = "provider/bedrock", "provider/databricks"
	if got := a.routeQwen(t, "cap-1"); got != bedrock {
		t.Fatalf("first overflow on a: %q, want %s", got, bedrock)
	}
	waitFor(t, "b hears a's decision", func() bool { return b.inFlight(t, bedrock) == 1 })
	if got := b.routeQwen(t, "cap-2"); got != bedrock {
		t.Fatalf("second overflow on b: %q, want %s (1 of 2 in flight)", got, bedrock)
	}
	waitFor(t, "a hears b's decision", func() bool { return a.inFlight(t, bedrock) == 2 })
	for _, r := range []struct {
		tr *testRouter
		id string
	}{{a, "cap-3"}, {b, "cap-4"}} {
		if got := r.tr.routeQwen(t, r.id); got != databricks {
			t.Fatalf("%s with bedrock at its cap: %q, want %s", r.id, got, databricks)
		}
	}
	if n := a.inFlight(t, bedrock); n != 2 {
		t.Errorf("bedrock has %d in flight, want its cap 2", n)
	}
	if out := a.explainQwen(t); !strings.Contains(out, "at its concurrency cap: 2 in flight across the routers, maxConcurrency 2") {
		t.Errorf("Explain does not say why bedrock is out:\n%s", out)
	}
	m := a.metricsText(t)
	for _, want := range []string{
		`switchyard_router_provider_max_concurrency{endpoint="provider/bedrock"} 2`,
		`switchyard_router_endpoint_inflight_requests{endpoint="provider/bedrock"} 2`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(m, `switchyard_router_provider_max_concurrency{endpoint="provider/databricks"}`) {
		t.Errorf("metrics show a cap for databricks, which has none")
	}

	for _, id := range []string{"cap-1", "cap-2"} {
		publishCompletion(t, nc, id, bedrock)
	}
	for name, r := range map[string]*testRouter{"a": a, "b": b} {
		waitFor(t, name+" releases bedrock", func() bool { return r.inFlight(t, bedrock) == 0 })
	}
	var (
		mu     sync.Mutex
		counts = map[string]int{}
		wg     sync.WaitGroup
	)
	for i := range 10 {
		wg.Go(func() {
			resp, err := a.client.Route(context.Background(), qwenRequest(fmt.Sprintf("burst-%d", i)))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			counts[resp.GetTarget().GetId()]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if counts[bedrock] != 2 || counts[databricks] != 8 {
		t.Errorf("a burst of 10: %v, want 2 on bedrock (its cap), 8 on databricks", counts)
	}

	writeProviders(t, dir, "  maxConcurrency: 3", "")
	n := 0
	waitFor(t, "the raised cap applied", func() bool {
		n++
		return a.routeQwen(t, fmt.Sprintf("raised-%d", n)) == bedrock
	})
	if got := a.routeQwen(t, "past-raised"); got != databricks {
		t.Errorf("past the raised cap of 3: %q, want %s", got, databricks)
	}
	if m := a.metricsText(t); !strings.Contains(m, `switchyard_router_provider_max_concurrency{endpoint="provider/bedrock"} 3`) {
		t.Errorf("metrics do not show the raised cap")
	}
}

// TestProviderBreakerThresholds: bedrock's spec.circuitBreaker.failures
// is 2, databricks sets none and takes the router's --breaker-failures
// (5). Two failed attempts open bedrock's circuit — overflow goes to
// databricks — and databricks stays a candidate through four failures
// and opens at the fifth; with both providers out, the burst rule falls
// back to default routing on the local workers. Explain gives each
// circuit's count.
func TestProviderBreakerThresholds(t *testing.T) {
	q0 := newFakeWorker(t, "qwen-3.6-27b")
	q1 := newFakeWorker(t, "qwen-3.6-27b")
	g0 := newFakeWorker(t, "glm-5.3")
	dir := devCatalog(t, q0, q1, g0)
	writeProviders(t, dir, "  circuitBreaker: {failures: 2, openFor: 10m}", "")
	pd := startPolicyd(t, dir)
	ns, nc := startNATS(t)
	q0.setLoad(3, 0)
	q1.setLoad(4, 0)
	tr := overflowRouter(t, pd, ns.URL(), "router-a", q0, q1, func(c *router.Config) {
		c.BreakerFailures, c.BreakerOpenFor = 5, 10*time.Minute
	})
	completionsHeard(t, nc, tr)

	const bedrock, databricks = "provider/bedrock", "provider/databricks"
	n := 0
	attempt := func(want string) {
		t.Helper()
		n++
		id := fmt.Sprintf("b-%d", n)
		if got := tr.routeQwen(t, id); got != want {
			t.Fatalf("attempt %d: %q, want %s", n, got, want)
		}
		completion(t, nc, id, want, false)
		waitFor(t, "the failure reported", func() bool { return tr.inFlight(t, want) == 0 })
	}
	attempt(bedrock)
	attempt(bedrock)
	for range 4 {
		attempt(databricks) // bedrock is open after its 2
	}
	attempt(databricks) // still closed after 4: the fifth opens it
	got := tr.routeQwen(t, "after")
	if got == bedrock || got == databricks || !strings.HasPrefix(got, "sim-") {
		t.Fatalf("both circuits open: %q, want a local worker (the burst rule falls back)", got)
	}
	out := tr.explainQwen(t)
	for _, want := range []string{"circuit open after 2 failures in a row", "circuit open after 5 failures in a row"} {
		if !strings.Contains(out, want) {
			t.Errorf("Explain lacks %q:\n%s", want, out)
		}
	}
	m := tr.metricsText(t)
	for _, ep := range []string{bedrock, databricks} {
		if want := fmt.Sprintf(`switchyard_router_provider_circuit{endpoint=%q,state="open"} 1`, ep); !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
