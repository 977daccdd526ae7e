package router_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/natsembed"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router"
)

func TestRouteDecisions(t *testing.T) {
	a, b, c := newFakeWorker(t, "m1"), newFakeWorker(t, "m1"), newFakeWorker(t, "m1", "m2")
	d := newFakeWorker(t, "m2")
	workers := []*fakeWorker{a, b, c, d}
	tr := startRouter(t, nil, workers...)

	type loads [4][2]int64 // waiting, running for a..d
	tests := []struct {
		name       string
		loads      loads
		model      string
		exclude    []string
		want       string
		wantReject routerv1.RejectCode
		wantCode   codes.Code
	}{
		{name: "least loaded wins", loads: loads{{2, 3}, {1, 1}, {4, 0}, {0, 0}}, model: "m1", want: "b"},
		// A waiting request must be prefilled first; a running one mostly
		// decodes alongside.
		{name: "running costs less than waiting", loads: loads{{0, 5}, {3, 3}, {1, 0}, {0, 0}}, model: "m1", want: "a"},
		{name: "model restricts candidates", loads: loads{{0, 0}, {0, 0}, {1, 1}, {5, 5}}, model: "m2", want: "c"},
		{name: "exclusion honoured", loads: loads{{2, 3}, {1, 1}, {0, 4}, {0, 0}}, model: "m1", exclude: []string{"b"}, want: "c"},
		{name: "exclusion of unknown id is harmless", loads: loads{{0, 0}, {1, 1}, {1, 1}, {0, 0}}, model: "m1", exclude: []string{"zz"}, want: "a"},
		{name: "all excluded", loads: loads{}, model: "m2", exclude: []string{"c", "d"},
			wantReject: routerv1.RejectCode_REJECT_CODE_NO_HEALTHY_ENDPOINT},
		{name: "unknown model", loads: loads{}, model: "gpt-9", wantReject: routerv1.RejectCode_REJECT_CODE_MODEL_NOT_FOUND},
		{name: "empty model", model: "", wantCode: codes.InvalidArgument},
		{name: "model too long", model: strings.Repeat("x", 300), wantCode: codes.InvalidArgument},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for j, w := range workers {
				w.setLoad(tt.loads[j][0], tt.loads[j][1])
			}
			tr.waitLoads(t, workers...)
			resp, err := tr.client.Route(context.Background(), &routerv1.RouteRequest{
				RequestId: "req-" + strconv.Itoa(i), Model: tt.model, ExcludeEndpoints: tt.exclude,
			})
			if tt.wantCode != codes.OK {
				if status.Code(err) != tt.wantCode {
					t.Fatalf("code %v (%v), want %v", status.Code(err), err, tt.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatalf("Route: %v", err)
			}
			if tt.wantReject != routerv1.RejectCode_REJECT_CODE_UNSPECIFIED {
				if resp.GetTarget() != nil || resp.GetRejection().GetCode() != tt.wantReject {
					t.Fatalf("got %v, want rejection %v", resp, tt.wantReject)
				}
				if resp.GetRejection().GetMessage() == "" {
					t.Fatal("rejection without message")
				}
				return
			}
			got, err := chosen(resp)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("routed to %s, want %s (reason: %s)", got, tt.want, resp.GetDecision().GetReason())
			}
			tg := resp.GetTarget()
			if tg.GetUrl() != workers[int(got[0]-'a')].URL() || tg.GetKind() != routerv1.TargetKind_TARGET_KIND_LOCAL || tg.GetServedModel() != tt.model {
				t.Fatalf("target %v", tg)
			}
			if d := resp.GetDecision(); d.GetStrategy() != "kv-ttft" || !strings.HasPrefix(d.GetReason(), "predicted TTFT ") || d.GetPredictedTtftSeconds() <= 0 {
				t.Fatalf("decision %v", d)
			}
		})
	}
	t.Run("missing request id", func(t *testing.T) {
		_, err := tr.client.Route(context.Background(), &routerv1.RouteRequest{Model: "m1"})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("code %v, want InvalidArgument", status.Code(err))
		}
	})
}

func TestUnhealthyEndpointIsSkippedUntilItAnswers(t *testing.T) {
	a, b := newFakeWorker(t, "m"), newFakeWorker(t, "m")
	tr := startRouter(t, func(c *router.Config) { c.ScrapeTimeout = 200 * time.Millisecond }, a, b)
	tests := []struct {
		name    string
		breakIt func()
		heal    func()
		wantErr string
	}{
		{name: "stops answering", breakIt: a.stop, heal: a.restart, wantErr: "connection refused"},
		{name: "http 500", breakIt: func() { a.mode.Store(modeStatus500) }, heal: func() { a.mode.Store(modeOK) }, wantErr: "status 500"},
		{name: "hangs past the scrape timeout", breakIt: func() { a.mode.Store(modeHang) }, heal: func() { a.mode.Store(modeOK) }, wantErr: "no answer within"},
		{name: "not vllm metrics", breakIt: func() { a.mode.Store(modeGarbage) }, heal: func() { a.mode.Store(modeOK) }, wantErr: "parse metrics"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a.setLoad(0, 0) // a is the better choice whenever it is healthy
			b.setLoad(5, 5)
			tr.waitLoads(t, a, b)
			tt.breakIt()
			waitFor(t, "a unhealthy", func() bool {
				e := tr.endpoints(t, "")["a"]
				return !e.GetHealthy() && strings.Contains(e.GetLastError(), tt.wantErr)
			})
			for j := range 3 {
				if got, err := chosen(tr.route(t, "down-"+strconv.Itoa(i*10+j), "m")); err != nil || got != "b" {
					t.Fatalf("while a is down: routed to %q, %v; want b", got, err)
				}
			}
			tt.heal()
			tr.waitLoads(t, a, b)
			if e := tr.endpoints(t, "")["a"]; e.GetLastError() != "" || e.GetLastScrape() == nil {
				t.Fatalf("healed endpoint still reports %q, last scrape %v", e.GetLastError(), e.GetLastScrape())
			}
			if got, err := chosen(tr.route(t, "up-"+strconv.Itoa(i), "m")); err != nil || got != "a" {
				t.Fatalf("after recovery: routed to %q, %v; want a", got, err)
			}
		})
	}
	t.Run("all down", func(t *testing.T) {
		a.stop()
		b.stop()
		waitFor(t, "both unhealthy", func() bool {
			eps := tr.endpoints(t, "")
			return !eps["a"].GetHealthy() && !eps["b"].GetHealthy()
		})
		resp := tr.route(t, "nobody", "m")
		if resp.GetRejection().GetCode() != routerv1.RejectCode_REJECT_CODE_NO_HEALTHY_ENDPOINT {
			t.Fatalf("got %v, want NO_HEALTHY_ENDPOINT", resp)
		}
		a.restart()
		b.restart()
	})
}

// slowScrapes keeps the first scrape only: in-flight numbers then move only
// through decisions, completions and expiry.
func slowScrapes(c *router.Config) { c.ScrapeInterval = time.Hour }

func TestInFlightSpreadsConsecutiveRoutes(t *testing.T) {
	workers := []*fakeWorker{newFakeWorker(t, "m"), newFakeWorker(t, "m"), newFakeWorker(t, "m"), newFakeWorker(t, "m")}
	tr := startRouter(t, slowScrapes, workers...)
	counts := map[string]int{}
	for i := range 8 {
		got, err := chosen(tr.route(t, "burst-"+strconv.Itoa(i), "m"))
		if err != nil {
			t.Fatal(err)
		}
		counts[got]++
		if i == 3 && len(counts) != 4 {
			t.Fatalf("first four routes used %v, want four distinct endpoints", counts)
		}
	}
	for id, e := range tr.endpoints(t, "m") {
		if counts[id] != 2 || e.GetInFlight() != 2 {
			t.Errorf("endpoint %s: %d routes, in_flight %d; want 2 and 2", id, counts[id], e.GetInFlight())
		}
	}
}

func TestInFlightTTLExpires(t *testing.T) {
	a, b := newFakeWorker(t, "m"), newFakeWorker(t, "m")
	tr := startRouter(t, func(c *router.Config) {
		slowScrapes(c)
		c.InflightTTL = 300 * time.Millisecond
	}, a, b)
	got, err := chosen(tr.route(t, "never-completes", "m"))
	if err != nil {
		t.Fatal(err)
	}
	if n := tr.endpoints(t, "")[got].GetInFlight(); n != 1 {
		t.Fatalf("in_flight after route = %d, want 1", n)
	}
	waitFor(t, "entry expiry", func() bool { return tr.endpoints(t, "")[got].GetInFlight() == 0 })
}

func TestExplainTable(t *testing.T) {
	a, b, c, d := newFakeWorker(t, "m"), newFakeWorker(t, "m"), newFakeWorker(t, "m"), newFakeWorker(t, "other")
	a.setLoad(1, 2)
	b.setLoad(0, 1)
	c.setLoad(0, 0)
	tr := startRouter(t, nil, a, b, c, d)
	tr.waitLoads(t, a, b, c, d)
	c.mode.Store(modeStatus500)
	waitFor(t, "c unhealthy", func() bool { return !tr.endpoints(t, "")["c"].GetHealthy() })

	req := &routerv1.RouteRequest{RequestId: "x", Model: "m", ExcludeEndpoints: []string{"b"}}
	resp, err := tr.client.Explain(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := chosen(resp.GetResult()); err != nil || id != "a" {
		t.Fatalf("explain result %q, %v; want a", id, err)
	}
	want := []struct {
		id       string
		eligible bool
		reason   string
		waiting  int64
		running  int64
		chosen   bool
	}{
		{"a", true, "", 1, 2, true},
		{"b", false, "excluded by request", 0, 1, false},
		{"c", false, "unhealthy: scrape http://", 0, 0, false},
		{"d", false, `does not serve model "m"`, 0, 0, false},
	}
	cands := resp.GetCandidates()
	if len(cands) != len(want) {
		t.Fatalf("%d candidates, want %d", len(cands), len(want))
	}
	for i, w := range want {
		cd := cands[i]
		if cd.GetEndpoint().GetId() != w.id || cd.GetEligible() != w.eligible || !strings.HasPrefix(cd.GetExcludedReason(), w.reason) ||
			cd.GetWaiting() != w.waiting || cd.GetRunning() != w.running || cd.GetChosen() != w.chosen ||
			cd.GetInFlight() != 0 {
			t.Errorf("candidate %d = %v, want %+v", i, cd, w)
		}
		// Eligible candidates carry their prediction; nothing is cached
		// (no body), so the score is the predicted TTFT plus the cache
		// pressure charge: the fake worker is 37.5 % full.
		if w.eligible != (cd.GetPredictedTtftSeconds() > 0) || w.eligible != (cd.GetScore() > cd.GetPredictedTtftSeconds()) {
			t.Errorf("candidate %d: predicted %v score %v", i, cd.GetPredictedTtftSeconds(), cd.GetScore())
		}
	}
	// Explain has no side effects: nothing is in flight, and asking again
	// gives the same answer.
	again, err := tr.client.Explain(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(again.GetResult(), resp.GetResult()) {
		t.Fatalf("second explain differs: %v vs %v", again.GetResult(), resp.GetResult())
	}
	for id, e := range tr.endpoints(t, "") {
		if e.GetInFlight() != 0 {
			t.Fatalf("explain left %d in flight on %s", e.GetInFlight(), id)
		}
	}
	if _, err := tr.client.Explain(context.Background(), &routerv1.RouteRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("explain without model: %v", err)
	}
}

func TestREST(t *testing.T) {
	a, b := newFakeWorker(t, "m"), newFakeWorker(t, "other")
	a.setLoad(2, 1)
	tr := startRouter(t, nil, a, b)
	tr.waitLoads(t, a, b)
	tr.route(t, "rest-1", "m")
	base := "http://" + tr.srv.HTTPAddr()

	tests := []struct {
		name, method, path, body string
		wantStatus               int
		check                    func(t *testing.T, body []byte)
	}{
		{name: "explain", method: http.MethodPost, path: "/v1/route:explain", body: `{"model":"m","request_id":"r"}`, wantStatus: 200,
			check: func(t *testing.T, body []byte) {
				var out struct {
					Result struct {
						Target   struct{ ID, URL string }
						Decision struct{ Strategy string }
					}
					Candidates []struct {
						Endpoint struct{ ID string }
						Eligible bool
						Waiting  string // int64 is a JSON string in protojson
						Score    float64
						Chosen   bool
					}
				}
				if err := json.Unmarshal(body, &out); err != nil {
					t.Fatal(err)
				}
				if out.Result.Target.ID != "a" || out.Result.Decision.Strategy != "kv-ttft" || len(out.Candidates) != 2 {
					t.Fatalf("explain body %s", body)
				}
				if c := out.Candidates[0]; c.Endpoint.ID != "a" || !c.Eligible || !c.Chosen || c.Waiting != "2" || c.Score <= 0 {
					t.Fatalf("candidate a %+v in %s", c, body)
				}
				if !strings.Contains(string(body), `"excluded_reason":"does not serve model \"m\""`) {
					t.Fatalf("snake_case field names expected: %s", body)
				}
			}},
		{name: "explain without model", method: http.MethodPost, path: "/v1/route:explain", body: `{}`, wantStatus: 400},
		{name: "explain with bad json", method: http.MethodPost, path: "/v1/route:explain", body: `{"model":`, wantStatus: 400},
		{name: "endpoints", method: http.MethodGet, path: "/v1/endpoints", wantStatus: 200,
			check: func(t *testing.T, body []byte) {
				var out struct {
					Endpoints []struct {
						ID       string
						Healthy  bool
						InFlight string `json:"in_flight"`
						Models   []string
					}
				}
				if err := json.Unmarshal(body, &out); err != nil {
					t.Fatal(err)
				}
				if len(out.Endpoints) != 2 || out.Endpoints[0].ID != "a" || !out.Endpoints[0].Healthy || out.Endpoints[0].InFlight != "1" {
					t.Fatalf("endpoints body %s", body)
				}
			}},
		{name: "endpoints filtered by model", method: http.MethodGet, path: "/v1/endpoints?model=other", wantStatus: 200,
			check: func(t *testing.T, body []byte) {
				if !strings.Contains(string(body), `"id":"b"`) || strings.Contains(string(body), `"id":"a"`) {
					t.Fatalf("filtered endpoints body %s", body)
				}
			}},
		{name: "healthz", method: http.MethodGet, path: "/healthz", wantStatus: 200},
		{name: "readyz", method: http.MethodGet, path: "/readyz", wantStatus: 200},
		{name: "metrics", method: http.MethodGet, path: "/metrics", wantStatus: 200,
			check: func(t *testing.T, body []byte) {
				for _, want := range []string{
					`switchyard_router_decisions_total{endpoint="a",model="m",outcome="routed"} 1`,
					`switchyard_router_endpoint_healthy{endpoint="a"} 1`,
					`switchyard_router_endpoint_inflight_requests{endpoint="a"} 1`,
					`switchyard_router_route_duration_seconds_count 1`,
				} {
					if !strings.Contains(string(body), want) {
						t.Errorf("metrics lack %q", want)
					}
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, base+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if tt.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.wantStatus, body)
			}
			if tt.check != nil {
				tt.check(t, body)
			}
		})
	}
}

// TestPprofOnlyWhenAsked: profiles are served on the HTTP port with
// --pprof and not without.
func TestPprofOnlyWhenAsked(t *testing.T) {
	w := newFakeWorker(t, "m")
	for _, on := range []bool{false, true} {
		tr := startRouter(t, func(c *router.Config) { c.Pprof = on }, w)
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline"} {
			resp, err := http.Get("http://" + tr.srv.HTTPAddr() + path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := map[bool]int{false: http.StatusNotFound, true: http.StatusOK}[on]; resp.StatusCode != want {
				t.Errorf("pprof=%v: GET %s status %d, want %d: %.200s", on, path, resp.StatusCode, want, body)
			}
		}
		tr.stop(t)
	}
}

// publishCompletion plays the gateway's part: an attempt on endpoint ended.
func publishCompletion(t testing.TB, nc *nats.Conn, reqID, endpoint string) {
	t.Helper()
	data, err := proto.Marshal(&eventsv1.RouteCompletion{
		RequestId: reqID, EndpointId: endpoint, CompletedAt: timestamppb.Now(), Success: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish(bus.SubjectRouteCompleted, data); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func startNATS(t testing.TB) (*natsembed.Server, *nats.Conn) { return testkit.NATS(t, 0) }

// warmUp makes sure every router is connected and subscribed before the
// test publishes (core NATS does not replay): each router routes one
// request, and its decision arriving here proves its subscriptions, sent
// earlier on the same connection, are in place. The warm-up requests are
// then completed, leaving nothing in flight.
func warmUp(t testing.TB, nc *nats.Conn, routers ...*testRouter) {
	t.Helper()
	decided := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe(bus.SubjectRouteDecided, decided)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for i, r := range routers {
		id := "warmup-" + strconv.Itoa(i)
		ep, err := chosen(r.route(t, id, "m"))
		if err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-decided:
			var d eventsv1.RouteDecision
			if err := proto.Unmarshal(m.Data, &d); err != nil || d.GetRequestId() != id || d.GetEndpointId() != ep {
				t.Fatalf("unexpected decision %v (%v)", &d, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("router %d published no decision", i)
		}
		publishCompletion(t, nc, id, ep)
	}
	for _, r := range routers {
		waitFor(t, "warm-up released", func() bool {
			for _, e := range r.endpoints(t, "") {
				if e.GetInFlight() != 0 {
					return false
				}
			}
			return true
		})
	}
}

func TestCompletionReleasesInFlight(t *testing.T) {
	ns, nc := startNATS(t)
	a, b := newFakeWorker(t, "m"), newFakeWorker(t, "m")
	tr := startRouter(t, func(c *router.Config) {
		slowScrapes(c)
		c.NATS.URL = ns.URL()
	}, a, b)
	warmUp(t, nc, tr)

	first, _ := chosen(tr.route(t, "r1", "m"))
	second, _ := chosen(tr.route(t, "r2", "m"))
	if first == second {
		t.Fatalf("two routes on idle endpoints both went to %s", first)
	}
	tests := []struct {
		name, reqID, endpoint string
		wantFree              string
	}{
		{name: "by request and endpoint", reqID: "r1", endpoint: first, wantFree: first},
		{name: "by request only", reqID: "r2", endpoint: "", wantFree: second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			publishCompletion(t, nc, tt.reqID, tt.endpoint)
			waitFor(t, "release", func() bool { return tr.endpoints(t, "")[tt.wantFree].GetInFlight() == 0 })
		})
	}
	// Both free again: the next two routes spread once more.
	x, _ := chosen(tr.route(t, "r3", "m"))
	y, _ := chosen(tr.route(t, "r4", "m"))
	if x == y {
		t.Fatalf("after release both routes went to %s", x)
	}
}

func TestReplicasShareInFlight(t *testing.T) {
	ns, nc := startNATS(t)
	a, b := newFakeWorker(t, "m"), newFakeWorker(t, "m")
	replica := func(id string) *testRouter {
		return startRouter(t, func(c *router.Config) {
			slowScrapes(c)
			c.NATS.URL = ns.URL()
			c.RouterID = id
		}, a, b)
	}
	r1, r2 := replica("r1"), replica("r2")
	warmUp(t, nc, r1, r2)

	// A decision on replica 1 raises the load replica 2 sees.
	x, err := chosen(r1.route(t, "shared-1", "m"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "replica 2 sees the decision", func() bool { return r2.endpoints(t, "")[x].GetInFlight() == 1 })
	if n := r1.endpoints(t, "")[x].GetInFlight(); n != 1 {
		t.Fatalf("replica 1 counts its own decision %d times", n)
	}
	y, err := chosen(r2.route(t, "shared-2", "m"))
	if err != nil {
		t.Fatal(err)
	}
	if y == x {
		t.Fatalf("replica 2 routed to %s, which replica 1 had just loaded", y)
	}
	waitFor(t, "replica 1 sees replica 2's decision", func() bool { return r1.endpoints(t, "")[y].GetInFlight() == 1 })

	// A completion releases the request on both replicas.
	publishCompletion(t, nc, "shared-1", x)
	for name, r := range map[string]*testRouter{"r1": r1, "r2": r2} {
		waitFor(t, name+" release", func() bool { return r.endpoints(t, "")[x].GetInFlight() == 0 })
	}
	if n := r1.endpoints(t, "")[y].GetInFlight(); n != 1 {
		t.Fatalf("unrelated entry released: %d", n)
	}
}

func TestKeepsRoutingWithoutNATS(t *testing.T) {
	a := newFakeWorker(t, "m")
	t.Run("server unreachable at start", func(t *testing.T) {
		ns, _ := startNATS(t)
		url := ns.URL()
		ns.Shutdown() // nothing listens there any more
		tr := startRouter(t, func(c *router.Config) { c.NATS.URL = url }, a)
		if _, err := chosen(tr.route(t, "x", "m")); err != nil {
			t.Fatal(err)
		}
		tr.stop(t) // shutdown must not hang on a drain that cannot happen
	})
	t.Run("server goes away", func(t *testing.T) {
		ns, nc := startNATS(t)
		tr := startRouter(t, func(c *router.Config) { c.NATS.URL = ns.URL() }, a)
		warmUp(t, nc, tr)
		if _, err := chosen(tr.route(t, "before", "m")); err != nil {
			t.Fatal(err)
		}
		base := "http://" + tr.srv.HTTPAddr()
		if code, body := get(t, base+"/readyz?verbose"); code != http.StatusOK || !strings.Contains(body, "[+]nats (optional) ok") {
			t.Errorf("readyz with NATS up: %d\n%s", code, body)
		}
		ns.Shutdown()
		for i := range 20 {
			if _, err := chosen(tr.route(t, "after-"+strconv.Itoa(i), "m")); err != nil {
				t.Fatal(err)
			}
		}
		// Still ready (it routes), and says what it is missing.
		waitFor(t, "readyz names the NATS outage", func() bool {
			code, body := get(t, base+"/readyz?verbose")
			return code == http.StatusOK && strings.Contains(body, "[-]nats (optional): reconnecting")
		})
		if _, metrics := get(t, base+"/metrics"); !strings.Contains(metrics, `switchyard_dependency_up{check="nats",required="false"} 0`) {
			t.Error("switchyard_dependency_up does not show NATS down")
		}
		tr.stop(t)
	})
}

// TestReplicasAgreeOnColdPrefix: two replicas that have not heard of each
// other (no NATS between them) and see the same idle fleet send the same
// new prompt to the same worker, prompt after prompt, whatever their
// near-tie rotations: a cold prompt's key places its near-ties. Without
// it, each of eight pairs agrees by chance one time in four.
func TestReplicasAgreeOnColdPrefix(t *testing.T) {
	workers := []*fakeWorker{newFakeWorker(t, "m"), newFakeWorker(t, "m"), newFakeWorker(t, "m"), newFakeWorker(t, "m")}
	r1 := startRouter(t, func(c *router.Config) { slowScrapes(c); c.RouterID = "r1" }, workers...)
	r2 := startRouter(t, func(c *router.Config) { slowScrapes(c); c.RouterID = "r2" }, workers...)
	route := func(r *testRouter, id, topic string) string {
		resp, err := r.client.Route(context.Background(), &routerv1.RouteRequest{RequestId: id, Tenant: "t", Model: "m",
			Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: chatBodyFor("m", doc(topic), "Summarise.")})
		if err != nil || resp.GetTarget() == nil {
			t.Fatalf("route %s: %v %v", id, resp, err)
		}
		return resp.GetTarget().GetId()
	}
	used := map[string]bool{}
	for i := range 8 {
		topic := "topic-" + strconv.Itoa(i)
		a, b := route(r1, "a-"+topic, topic), route(r2, "b-"+topic, topic)
		if a != b {
			t.Fatalf("%s: replica 1 chose %s, replica 2 %s", topic, a, b)
		}
		used[a] = true
	}
	if len(used) < 4 {
		t.Errorf("eight new prompts on four idle workers went to %d of them", len(used))
	}
}

// TestBurstOfNewPrefixStaysTogether: requests under one new system prompt
// that arrive together are decided a moment apart, each looking up the
// cache before taking the table's lock; the ones decided after the first
// must still see where the first sent the prefix (its speculation is
// written under the lock, and a stale lookup is made again there), and
// join it rather than compute the prefix again on an idle worker.
func TestBurstOfNewPrefixStaysTogether(t *testing.T) {
	workers := []*fakeWorker{newFakeWorker(t, "m"), newFakeWorker(t, "m"), newFakeWorker(t, "m"), newFakeWorker(t, "m")}
	tr := startRouter(t, slowScrapes, workers...)
	for round := range 5 {
		system := doc("burst-" + strconv.Itoa(round))
		targets := make([]string, 8)
		var wg sync.WaitGroup
		for i := range targets {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := tr.client.Route(context.Background(), &routerv1.RouteRequest{
					RequestId: fmt.Sprintf("burst-%d-%d", round, i), Tenant: "t", Model: "m",
					Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: chatBodyFor("m", system, "Question "+strconv.Itoa(i)+"?")})
				if err != nil || resp.GetTarget() == nil {
					t.Errorf("route: %v %v", resp, err)
					return
				}
				targets[i] = resp.GetTarget().GetId()
			}()
		}
		wg.Wait()
		for i, x := range targets {
			if x != targets[0] {
				t.Fatalf("round %d: request %d went to %s, the burst's first to %s: %v", round, i, x, targets[0], targets)
			}
		}
	}
}
