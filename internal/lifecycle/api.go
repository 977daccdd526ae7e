package lifecycle

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/switchyard-dev/switchyard/internal/serve"
)

// APIConfig describes a service's network face.
type APIConfig struct {
	// GRPCAddr is the gRPC listen address; empty for a service without
	// gRPC (the gateway).
	GRPCAddr string
	// HTTPAddr is the HTTP listen address (REST, /metrics, /healthz,
	// /readyz).
	HTTPAddr string
	// GRPCOptions are passed to grpc.NewServer.
	GRPCOptions []grpc.ServerOption
	// GRPCTLS, when enabled, serves gRPC over TLS (mutual with a client
	// CA).
	GRPCTLS ServerTLS
	// Register registers the service's gRPC services and returns their
	// names, for which health reports the service's readiness.
	Register func(*grpc.Server) []string
	// REST registers the grpc-gateway handlers on mux; nil for none. They
	// are served under /v1/, bounded by MaxRESTBody.
	REST        func(ctx context.Context, mux *runtime.ServeMux) error
	MaxRESTBody int64
	// Metrics is served on /metrics; nil for none.
	Metrics prometheus.Gatherer
	// MetricsAddr, when set, serves /metrics on a listener of its own at
	// this address instead of on HTTPAddr (a public port must not expose
	// it).
	MetricsAddr string
	// Ready says whether the service can take work, and if not, why; nil
	// is always ready. /readyz calls it, and gRPC health follows it.
	Ready func() error
	// Checks are the service's dependencies, each named in
	// /readyz?verbose and exported as switchyard_dependency_up; a failing
	// Required one makes the service not ready as Ready does.
	Checks []Check
	// HTTPServer, when set, tunes the HTTP server (timeouts, header size,
	// error log) before it serves.
	HTTPServer func(*http.Server)
}

// RESTMarshaler is how every service's REST API writes protobuf: the proto
// field names, unset fields included.
var RESTMarshaler = &runtime.JSONPb{
	MarshalOptions: protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true},
}

// API is a service's bound listeners and servers. Add routes to Mux before
// Run; everything else is the lifecycle's.
type API struct {
	GRPC *grpc.Server // nil without GRPCAddr
	// REST is the grpc-gateway mux (nil without APIConfig.REST), for
	// handlers that need to answer in its shape.
	REST *runtime.ServeMux
	// Mux is the HTTP mux; /v1/ (REST), /metrics, /healthz and /readyz are
	// taken.
	Mux *http.ServeMux

	http     *http.Server
	health   *health.Server
	names    []string
	ready    *readiness
	grpcLn   net.Listener
	httpLn   net.Listener
	metrics  *http.Server // nil without APIConfig.MetricsAddr
	metLn    net.Listener
	stopping atomic.Bool
	stopOnce sync.Once
	stopped  chan struct{}
}

// NewAPI builds the servers and binds the listeners, so the addresses are
// known (port 0) before Run.
func NewAPI(cfg APIConfig) (_ *API, err error) {
	ready, err := newReadiness(cfg.Ready, cfg.Checks)
	if err != nil {
		return nil, fmt.Errorf("readiness checks: %w", err)
	}
	a := &API{Mux: http.NewServeMux(), ready: ready, stopped: make(chan struct{})}
	if cfg.GRPCAddr != "" {
		opts := cfg.GRPCOptions
		tc, err := cfg.GRPCTLS.Config()
		if err != nil {
			return nil, err
		}
		if tc != nil {
			opts = append(slices.Clip(opts), grpc.Creds(credentials.NewTLS(tc)))
		}
		a.GRPC = grpc.NewServer(opts...)
		a.health = health.NewServer()
		healthpb.RegisterHealthServer(a.GRPC, a.health)
		reflection.Register(a.GRPC)
		if cfg.Register != nil {
			a.names = cfg.Register(a.GRPC)
		}
		a.setHealth(healthpb.HealthCheckResponse_NOT_SERVING)
	}
	if cfg.REST != nil {
		a.REST = runtime.NewServeMux(runtime.WithMarshalerOption(runtime.MIMEWildcard, RESTMarshaler))
		if err := cfg.REST(context.Background(), a.REST); err != nil {
			return nil, fmt.Errorf("register rest gateway: %w", err)
		}
		var h http.Handler = a.REST
		if cfg.MaxRESTBody > 0 {
			h = http.MaxBytesHandler(h, cfg.MaxRESTBody)
		}
		a.Mux.Handle("/v1/", h)
	}
	if cfg.Metrics != nil {
		var g prometheus.Gatherer = cfg.Metrics
		if len(cfg.Checks) > 0 {
			g = prometheus.Gatherers{cfg.Metrics, ready.collectors()}
		}
		h := promhttp.HandlerFor(g, promhttp.HandlerOpts{})
		if cfg.MetricsAddr != "" {
			mux := http.NewServeMux()
			mux.Handle("GET /metrics", h)
			a.metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		} else {
			a.Mux.Handle("GET /metrics", h)
		}
	}
	a.Mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	a.Mux.HandleFunc("GET /readyz", a.readyz)
	a.http = &http.Server{Handler: a.Mux, ReadHeaderTimeout: 5 * time.Second}
	if cfg.HTTPServer != nil {
		cfg.HTTPServer(a.http)
	}

	defer func() {
		if err != nil {
			a.closeListeners()
		}
	}()
	if cfg.GRPCAddr != "" {
		if a.grpcLn, err = net.Listen("tcp", cfg.GRPCAddr); err != nil {
			return nil, fmt.Errorf("listen grpc %s: %w", cfg.GRPCAddr, err)
		}
	}
	if a.httpLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		return nil, fmt.Errorf("listen http %s: %w", cfg.HTTPAddr, err)
	}
	if a.metrics != nil {
		if a.metLn, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			return nil, fmt.Errorf("listen metrics %s: %w", cfg.MetricsAddr, err)
		}
	}
	return a, nil
}

// GRPCAddr is the bound gRPC address; "" without gRPC.
func (a *API) GRPCAddr() string {
	if a.grpcLn == nil {
		return ""
	}
	return a.grpcLn.Addr().String()
}

// HTTPAddr is the bound HTTP address.
func (a *API) HTTPAddr() string { return a.httpLn.Addr().String() }

// MetricsAddr is the bound metrics address; "" without
// APIConfig.MetricsAddr.
func (a *API) MetricsAddr() string {
	if a.metLn == nil {
		return ""
	}
	return a.metLn.Addr().String()
}

// Close releases the listeners of an API that Run never served.
func (a *API) Close() error {
	a.closeListeners()
	return nil
}

func (a *API) closeListeners() {
	if a.grpcLn != nil {
		_ = a.grpcLn.Close()
	}
	if a.httpLn != nil {
		_ = a.httpLn.Close()
	}
	if a.metLn != nil {
		_ = a.metLn.Close()
	}
}

// Stopping reports whether the service has begun to stop.
func (a *API) Stopping() bool { return a.stopping.Load() }

func (a *API) setHealth(st healthpb.HealthCheckResponse_ServingStatus) {
	if a.health == nil {
		return
	}
	a.health.SetServingStatus("", st)
	for _, n := range a.names {
		a.health.SetServingStatus(n, st)
	}
}

// healthInterval is how often gRPC health follows Ready.
const healthInterval = 100 * time.Millisecond

// serve runs the servers until stop, keeping gRPC health in step with
// Ready.
func (a *API) serve() error {
	errs := make(chan error, 2)
	n := 1
	go func() { errs <- serve.HTTP(a.http, a.httpLn) }()
	if a.metrics != nil {
		n++
		go func() { errs <- serve.HTTP(a.metrics, a.metLn) }()
	}
	if a.GRPC != nil {
		n++
		go func() { errs <- serve.GRPC(a.GRPC, a.grpcLn) }()
		go a.followReady()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
			// One server failed: the other must not keep the service up.
			a.stop(time.Now(), zerolog.Nop())
		}
	}
	return first
}

func (a *API) followReady() {
	t := time.NewTicker(healthInterval)
	defer t.Stop()
	last := healthpb.HealthCheckResponse_UNKNOWN
	for {
		st := healthpb.HealthCheckResponse_SERVING
		if a.ready.err() != nil {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
		if a.stopping.Load() {
			return
		}
		if st != last {
			a.setHealth(st)
			last = st
		}
		select {
		case <-a.stopped:
			return
		case <-t.C:
		}
	}
}

// setStopping turns the service not ready for good.
func (a *API) setStopping() {
	a.stopping.Store(true)
	if a.health != nil {
		a.health.Shutdown() // NOT_SERVING everywhere, and stays so
	}
}

// stop stops the servers gracefully, forcing what is left at deadline.
func (a *API) stop(deadline time.Time, log zerolog.Logger) {
	a.stopOnce.Do(func() {
		a.setStopping()
		close(a.stopped)
		if a.GRPC != nil {
			serve.StopGRPC(a.GRPC, deadline, log)
		}
		serve.StopHTTP(a.http, deadline, log)
		if a.metrics != nil {
			serve.StopHTTP(a.metrics, deadline, log)
		}
	})
}
