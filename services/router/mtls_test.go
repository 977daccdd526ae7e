package router_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/internal/sim"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/gateway"
	"github.com/switchyard-dev/switchyard/services/policyd"
	"github.com/switchyard-dev/switchyard/services/router"
)

// TestMutualTLS runs the router's gRPC over mutual TLS with operator
// identities, certificates made by the test: clients without a
// certificate, or with one another CA signed, are refused; a certificate
// of the right CA may Route, and Explain only when it names an operator
// (or with the token); a gateway dialling with its certificate and the
// token routes and lists models through it.
func TestMutualTLS(t *testing.T) {
	ca, other := testkit.NewCA(t, "switchyard"), testkit.NewCA(t, "intruder")
	srvCert, srvKey := ca.Server(t, "router.switchyard")
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	fleet := startSim(t, log, func(sc *sim.Config) { sc.TimeScale, sc.DefaultMaxTokens = 100, 1 })
	tok := tokenFile(t, operatorToken)
	tr := startRouter(t, func(c *router.Config) {
		c.Endpoints = "sim-0=" + fleet.Workers()[0].URL
		c.GRPCTLS = lifecycle.ServerTLS{Cert: srvCert, Key: srvKey, ClientCA: ca.File}
		c.OperatorIdentities = "yardctl, spiffe://switchyard/operator"
		c.OperatorTokenFile = tok
	})

	client := func(gc lifecycle.GRPCClient) routerv1.RouterClient {
		opts, err := gc.DialOptions("router")
		if err != nil {
			t.Fatal(err)
		}
		conn, err := grpc.NewClient(tr.srv.GRPCAddr(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return routerv1.NewRouterClient(conn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	route := &routerv1.RouteRequest{RequestId: "r", Model: sim.DefaultServedModelName}

	badCert, badKey := other.Client(t, "yardctl")
	for name, c := range map[string]lifecycle.GRPCClient{
		"plain":                     {},
		"no client certificate":     {TLS: lifecycle.TLS{CA: ca.File}},
		"certificate of another CA": {TLS: lifecycle.TLS{CA: ca.File, Cert: badCert, Key: badKey}},
	} {
		if _, err := client(c).Route(ctx, route); status.Code(err) != codes.Unavailable {
			t.Errorf("%s: Route %v, want the connection refused", name, err)
		}
	}

	gwCert, gwKey := ca.Client(t, "gateway")
	gw := client(lifecycle.GRPCClient{TLS: lifecycle.TLS{CA: ca.File, Cert: gwCert, Key: gwKey}, ServerName: "router.switchyard"})
	if _, err := gw.Route(ctx, route); err != nil {
		t.Fatalf("Route with a certificate of the CA: %v", err)
	}
	if _, err := gw.Explain(ctx, route); status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "operator") {
		t.Fatalf("Explain with a certificate that is no operator's: %v", err)
	}
	opCert, opKey := ca.Client(t, "yardctl")
	op := client(lifecycle.GRPCClient{TLS: lifecycle.TLS{CA: ca.File, Cert: opCert, Key: opKey}})
	if resp, err := op.Explain(ctx, route); err != nil || len(resp.GetCandidates()) != 1 {
		t.Fatalf("Explain with an operator certificate: %v %v", resp, err)
	}
	withToken := client(lifecycle.GRPCClient{TLS: lifecycle.TLS{CA: ca.File, Cert: gwCert, Key: gwKey}, TokenFile: tok})
	if _, err := withToken.ListEndpoints(ctx, &routerv1.ListEndpointsRequest{}); err != nil {
		t.Fatalf("ListEndpoints with the token: %v", err)
	}

	// A gateway with its certificate and the token: /v1/models (which lists
	// endpoints) and a completion go through.
	gc := gateway.DefaultConfig()
	gc.Addr, gc.RouterAddr, gc.NATS.URL = "127.0.0.1:0", tr.srv.GRPCAddr(), ""
	gc.Router = lifecycle.GRPCClient{TLS: lifecycle.TLS{CA: ca.File, Cert: gwCert, Key: gwKey}, TokenFile: tok}
	g, err := gateway.New(gc, log)
	if err != nil {
		t.Fatal(err)
	}
	serveUntilCleanup(t, "gateway", g.Serve)
	waitHTTPReady(t, "http://"+g.Addr()+"/readyz")
	code, body := get(t, "http://"+g.Addr()+"/v1/models")
	if code != 200 || !strings.Contains(body, sim.DefaultServedModelName) {
		t.Fatalf("/v1/models through an mTLS router: %d %s", code, body)
	}
	resp, err := http.Post("http://"+g.Addr()+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"`+sim.DefaultServedModelName+`","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("completion through an mTLS router: %d %s", resp.StatusCode, b)
	}
}

// TestPolicydOverMutualTLS: policyd serves gRPC over mutual TLS, and the
// router follows it with its client certificate (--policyd-tls-*): the
// worker sets of policyd's catalog become its endpoints.
func TestPolicydOverMutualTLS(t *testing.T) {
	ca := testkit.NewCA(t, "switchyard")
	srvCert, srvKey := ca.Server(t, "policyd")
	cliCert, cliKey := ca.Client(t, "router")
	q0, q1, g0 := newFakeWorker(t, "qwen-3.6-27b"), newFakeWorker(t, "qwen-3.6-27b"), newFakeWorker(t, "glm-5.3")
	cfg := policyd.DefaultConfig()
	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.GRPCTLS = lifecycle.ServerTLS{Cert: srvCert, Key: srvKey, ClientCA: ca.File}
	cfg.Paths = []string{devCatalog(t, q0, q1, g0)}
	cfg.ShutdownTimeout = 5 * time.Second
	pd, err := policyd.New(cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	serveUntilCleanup(t, "policyd", pd.Serve)
	tr := startRouter(t, func(c *router.Config) {
		c.Endpoints, c.PolicydAddr, c.GatewayBackend = "", pd.GRPCAddr(), "dev"
		c.Policyd = lifecycle.GRPCClient{TLS: lifecycle.TLS{CA: ca.File, Cert: cliCert, Key: cliKey}, ServerName: "policyd"}
	})
	waitFor(t, "policyd's workers", func() bool { return len(tr.endpoints(t, "")) >= 3 })
}
