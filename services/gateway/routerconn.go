package gateway

import (
	"fmt"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/health" // client-side health checking, named in routerServiceConfig
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

// The router connection.
//
// Router replicas are stateless, so the gateway spreads Route calls over
// every replica it knows (round_robin) and a replica's death must cost no
// request:
//   - each replica's connection is health-checked (gRPC health, which the
//     router keeps in step with its readiness), so a replica that is
//     starting, not ready or draining for shutdown gets no calls;
//   - a call that fails with UNAVAILABLE (the replica died under it, or its
//     connection had not noticed yet) is retried by gRPC on the next
//     replica, within the call's --route-timeout;
//   - a lost replica is redialled at most routerMaxBackoff apart, so one
//     that comes back is used within about a second (gRPC's default backoff
//     grows to two minutes, which left a gateway with one router answering
//     503 for seconds after the router was back).
//
// --router-addr names the replicas: a comma-separated list of host:port,
// or one gRPC target (host:port, or dns:///name:port for a Kubernetes
// headless Service, re-resolved when a connection fails).
const (
	routerMaxBackoff = time.Second // lifecycle.RedialParams
	routerListScheme = "switchyard-routers"
)

// routerServiceConfig: round_robin over healthy replicas; Route and
// ListEndpoints retried on UNAVAILABLE (a Route that reached a replica
// before it died may have published its decision there: routers drop
// that in-flight entry when this request's completion arrives, as it
// carries the same request id, or at its TTL).
var routerServiceConfig = fmt.Sprintf(`{
  "loadBalancingConfig": [{"round_robin": {}}],
  "healthCheckConfig": {"serviceName": %q},
  "methodConfig": [{
    "name": [{"service": %q}],
    "retryPolicy": {
      "maxAttempts": 3,
      "initialBackoff": "0.01s",
      "maxBackoff": "0.1s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE"]
    }
  }]
}`, routerv1.Router_ServiceDesc.ServiceName, routerv1.Router_ServiceDesc.ServiceName)

// routerAddrs splits --router-addr into its replicas' addresses, or
// returns nil for a single gRPC target.
func routerAddrs(addr string) ([]string, error) {
	if !strings.Contains(addr, ",") {
		return nil, nil
	}
	var out []string
	for a := range strings.SplitSeq(addr, ",") {
		a = strings.TrimSpace(a)
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("%q in a list: want host:port: %w", a, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// dialRouter makes the router client (it connects lazily); creds are the
// transport and token options (lifecycle.GRPCClient.DialOptions).
func dialRouter(addr string, creds ...grpc.DialOption) (*grpc.ClientConn, error) {
	opts := []grpc.DialOption{
		grpc.WithDefaultServiceConfig(routerServiceConfig),
		grpc.WithConnectParams(lifecycle.RedialParams),
		// Readiness reports the channel state; an idle channel would flap
		// it between requests.
		grpc.WithIdleTimeout(0),
	}
	addrs, err := routerAddrs(addr)
	if err != nil {
		return nil, err
	}
	opts = append(opts, creds...)
	if len(creds) == 0 {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	target := addr
	if addrs != nil {
		r := manual.NewBuilderWithScheme(routerListScheme)
		var st resolver.State
		for _, a := range addrs {
			st.Endpoints = append(st.Endpoints, resolver.Endpoint{Addresses: []resolver.Address{{Addr: a}}})
		}
		r.InitialState(st)
		opts = append(opts, grpc.WithResolvers(r))
		target = routerListScheme + ":///routers"
	}
	return grpc.NewClient(target, opts...)
}
