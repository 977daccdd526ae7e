package router_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard-dev/switchyard/internal/bus"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router"
)

// TestProviderCircuit, through the router's real paths (route completions
// over NATS, the policy program, Explain): with the local workers past
// the burst policy's threshold, overflow goes to bedrock; the gateways
// report 3 of its attempts failed and it is left out — overflow goes to
// databricks, the policy's next provider, and Explain says bedrock's
// circuit is open; after --breaker-open-for one request probes bedrock,
// and once the probe succeeds bedrock takes the overflow again.
func TestProviderCircuit(t *testing.T) {
	q0 := newFakeWorker(t, "qwen-3.6-27b")
	q1 := newFakeWorker(t, "qwen-3.6-27b")
	g0 := newFakeWorker(t, "glm-5.3")
	pd := startPolicyd(t, devCatalog(t, q0, q1, g0))
	ns, nc := startNATS(t)
	openFor := 500 * time.Millisecond
	tr := startRouter(t, func(c *router.Config) {
		c.Endpoints = ""
		c.PolicydAddr = pd.GRPCAddr()
		c.GatewayBackend = "dev"
		c.NATS.URL = ns.URL()
		c.BreakerFailures, c.BreakerOpenFor = 3, openFor
	})
	q0.setLoad(3, 0)
	q1.setLoad(4, 0)
	waitFor(t, "busy workers scraped", func() bool {
		eps := tr.endpoints(t, "qwen-3.6-27b")
		return eps["sim-0"].GetWaiting() == 3 && eps["sim-1"].GetWaiting() == 4
	})
	n := 0
	route := func() string {
		t.Helper()
		n++
		resp, err := tr.client.Route(context.Background(), &routerv1.RouteRequest{
			RequestId: fmt.Sprintf("c-%d", n), Tenant: "team-a", Model: "qwen-3.6-27b",
			Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: []byte(`{"model":"qwen-3.6-27b","messages":[{"role":"user","content":"hi"}]}`),
		})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetTarget().GetId()
	}
	complete := func(success bool) {
		t.Helper()
		completion(t, nc, fmt.Sprintf("c-%d", n), "provider/bedrock", success)
	}

	if got := route(); got != "provider/bedrock" {
		t.Fatalf("overflow went to %q, want provider/bedrock", got)
	}
	complete(false)
	for range 2 {
		if got := route(); got != "provider/bedrock" {
			t.Fatalf("overflow went to %q before the circuit opened", got)
		}
		complete(false)
	}
	waitFor(t, "bedrock's circuit open", func() bool { return route() == "provider/databricks" })
	ex, err := tr.client.Explain(context.Background(), &routerv1.RouteRequest{
		RequestId: "why", Tenant: "team-a", Model: "qwen-3.6-27b", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS,
		Body: []byte(`{"model":"qwen-3.6-27b","messages":[{"role":"user","content":"hi"}]}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if out := fmt.Sprint(ex); !strings.Contains(out, "circuit open after 3 failures in a row") {
		t.Errorf("Explain does not say why bedrock is out:\n%s", out)
	}
	if m := tr.metricsText(t); !strings.Contains(m, `switchyard_router_provider_circuit{endpoint="provider/bedrock",state="open"} 1`) {
		t.Errorf("metrics do not show the open circuit")
	}

	time.Sleep(openFor)
	if got := route(); got != "provider/bedrock" {
		t.Fatalf("half-open: %q, want the probe to bedrock", got)
	}
	probe := n
	if got := route(); got != "provider/databricks" {
		t.Fatalf("while the probe is in flight: %q, want databricks", got)
	}
	completion(t, nc, fmt.Sprintf("c-%d", probe), "provider/bedrock", true)
	waitFor(t, "bedrock's circuit closed by the probe", func() bool { return route() == "provider/bedrock" })
}

// completion plays a gateway's part: its attempt on endpoint ended, served
// or failed by the upstream.
func completion(t testing.TB, nc *nats.Conn, reqID, endpoint string, success bool) {
	t.Helper()
	data, err := proto.Marshal(&eventsv1.RouteCompletion{
		RequestId: reqID, EndpointId: endpoint, CompletedAt: timestamppb.Now(), Success: success, UpstreamFailed: !success,
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
