// Package policyd is the Switchyard policy daemon: it reads the routing
// resources (InferenceWorkerSet, InferencePool, InferenceProvider,
// InferencePolicy, GatewayBackend) from a directory of YAML files or from
// Kubernetes, validates and compiles them on every change, keeps serving
// the last good snapshot when a change is invalid (reporting why: in
// GetSnapshot, in logs, and in Kubernetes as status.conditions), and
// serves policy.v1.PolicyService over gRPC (Watch streams every new
// revision to routers) and REST (grpc-gateway).
package policyd

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/internal/serve"
	policyv1 "github.com/switchyard-dev/switchyard/proto/switchyard/policy/v1"
)

// maxRESTBody bounds a REST request (Validate carries files).
const maxRESTBody = 16 << 20

// Server is one policyd. New binds the listeners; Serve runs it.
type Server struct {
	cfg      Config
	log      zerolog.Logger
	st       *state
	metrics  *metrics
	svc      *service
	health   *health.Server
	grpcSrv  *grpc.Server
	httpSrv  *http.Server
	grpcLn   net.Listener
	httpLn   net.Listener
	source   Source
	stopping atomic.Bool
	// invalid is set while the last resources read did not compile.
	invalid atomic.Bool
}

// New validates cfg, builds the source it names, binds the gRPC and HTTP
// listeners and builds the servers. Serve runs them and closes the
// listeners when it returns.
func New(cfg Config, log zerolog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("policyd config: %w", err)
	}
	f, _ := sourceFactory(cfg.Source) // Validate checked it is there
	log = log.With().Str("component", "policyd").Logger()
	src, err := f(cfg, log)
	if err != nil {
		return nil, fmt.Errorf("policyd source %s: %w", cfg.Source, err)
	}
	return newServer(cfg, src, log)
}

// NewWithSource is New with a source built by the caller (a test's
// Kubernetes client, say); cfg.Source is not looked up. A source that is
// a prometheus.Collector has its metrics served with policyd's.
func NewWithSource(cfg Config, src Source, log zerolog.Logger) (*Server, error) {
	if err := cfg.validateServer(); err != nil {
		return nil, fmt.Errorf("policyd config: %w", err)
	}
	return newServer(cfg, src, log.With().Str("component", "policyd").Logger())
}

func newServer(cfg Config, src Source, log zerolog.Logger) (*Server, error) {
	s := &Server{cfg: cfg, log: log, st: newState(), metrics: newMetrics(), health: health.NewServer(), source: src}
	if c, ok := src.(prometheus.Collector); ok {
		if err := s.metrics.reg.Register(c); err != nil {
			return nil, fmt.Errorf("source metrics: %w", err)
		}
	}
	s.svc = &service{st: s.st, metrics: s.metrics, quit: make(chan struct{})}
	s.grpcSrv = grpc.NewServer(grpc.MaxRecvMsgSize(maxValidateBytes + 1<<20))
	policyv1.RegisterPolicyServiceServer(s.grpcSrv, s.svc)
	healthpb.RegisterHealthServer(s.grpcSrv, s.health)
	reflection.Register(s.grpcSrv)
	s.setHealth(healthpb.HealthCheckResponse_NOT_SERVING)

	gw := runtime.NewServeMux(runtime.WithMarshalerOption(runtime.MIMEWildcard, &runtime.JSONPb{
		MarshalOptions: protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true},
	}))
	if err := policyv1.RegisterPolicyServiceHandlerServer(context.Background(), gw, s.svc); err != nil {
		return nil, fmt.Errorf("register rest gateway: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", http.MaxBytesHandler(gw, maxRESTBody))
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		cur, _ := s.st.current()
		switch {
		case s.stopping.Load():
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
		case cur == nil:
			http.Error(w, "no valid snapshot yet", http.StatusServiceUnavailable)
		default:
			_, _ = w.Write([]byte("ok\n"))
		}
	})
	s.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}

	var err error
	if s.grpcLn, err = net.Listen("tcp", cfg.GRPCAddr); err != nil {
		return nil, fmt.Errorf("listen grpc %s: %w", cfg.GRPCAddr, err)
	}
	if s.httpLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		s.grpcLn.Close()
		return nil, fmt.Errorf("listen http %s: %w", cfg.HTTPAddr, err)
	}
	return s, nil
}

// GRPCAddr is the bound gRPC address (useful with port 0).
func (s *Server) GRPCAddr() string { return s.grpcLn.Addr().String() }

// HTTPAddr is the bound HTTP address.
func (s *Server) HTTPAddr() string { return s.httpLn.Addr().String() }

// Snapshot returns the served snapshot and its revision (nil, 0 before
// the first valid set of resources).
func (s *Server) Snapshot() (*policy.Snapshot, int64) {
	cur, _ := s.st.current()
	if cur == nil {
		return nil, 0
	}
	return cur.snap, cur.revision
}

func (s *Server) setHealth(st healthpb.HealthCheckResponse_ServingStatus) {
	s.health.SetServingStatus("", st)
	s.health.SetServingStatus(policyv1.PolicyService_ServiceDesc.ServiceName, st)
}

// apply compiles what a source read, serves it when valid, and logs and
// counts the outcome.
func (s *Server) apply(objs []*policy.Object, diags policy.Diagnostics) Result {
	res := s.st.apply(objs, diags, time.Now())
	errs, warns := res.Diags.Errors(), res.Diags.Warnings()
	s.metrics.diagnostics.WithLabelValues("error").Set(float64(len(errs)))
	s.metrics.diagnostics.WithLabelValues("warning").Set(float64(len(warns)))
	// wasInvalid: the last thing logged was a warning that the resources
	// are invalid. Once they are valid again, say so, even when they
	// compile to the snapshot already served (the edit was undone):
	// otherwise that warning stays the last word in the log.
	wasInvalid := s.invalid.Swap(!res.Applied && !res.Unchanged)
	switch {
	case res.Applied:
		s.metrics.compiles.WithLabelValues("applied").Inc()
		s.metrics.revision.Set(float64(res.Revision))
		s.setHealth(healthpb.HealthCheckResponse_SERVING)
		ev := s.log.Info().Int64("revision", res.Revision).Int("resources", len(objs)).Int("warnings", len(warns))
		if wasInvalid {
			ev.Msg("resources valid again: snapshot served")
		} else {
			ev.Msg("snapshot served")
		}
	case res.Unchanged:
		s.metrics.compiles.WithLabelValues("unchanged").Inc()
		if wasInvalid {
			s.log.Info().Int64("revision", res.Revision).Msg("resources valid again: they compile to the snapshot already served")
		}
	default:
		s.metrics.compiles.WithLabelValues("invalid").Inc()
		ev := s.log.Warn().Int("errors", len(errs)).Int64("serving_revision", res.Revision)
		for i, d := range errs {
			if i == 5 {
				break
			}
			ev = ev.Str(fmt.Sprintf("error_%d", i), d.String())
		}
		ev.Msg("resources invalid: keeping the last good snapshot")
	}
	for _, w := range warns {
		s.log.Debug().Str("warning", w.String()).Msg("resource warning")
	}
	return res
}

// Serve runs policyd until ctx ends, then shuts down: not ready, gRPC
// GracefulStop bounded by ShutdownTimeout (Watch streams end with it), HTTP
// shutdown. It returns nil after a clean shutdown.
func (s *Server) Serve(ctx context.Context) error {
	defer s.grpcLn.Close()
	defer s.httpLn.Close()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.source.Run(gctx, s.apply) })
	g.Go(func() error { return serve.GRPC(s.grpcSrv, s.grpcLn) })
	g.Go(func() error { return serve.HTTP(s.httpSrv, s.httpLn) })
	g.Go(func() error {
		<-gctx.Done()
		s.shutdown()
		return nil
	})
	s.log.Info().Str("grpc_addr", s.GRPCAddr()).Str("http_addr", s.HTTPAddr()).Str("source", s.cfg.Source).Msg("policyd serving")
	err := g.Wait()
	s.log.Info().Msg("policyd stopped")
	return err
}

func (s *Server) shutdown() {
	s.stopping.Store(true)
	s.health.Shutdown()
	close(s.svc.quit)
	deadline := time.Now().Add(s.cfg.ShutdownTimeout)
	serve.StopGRPC(s.grpcSrv, deadline, s.log)
	serve.StopHTTP(s.httpSrv, deadline, s.log)
}

// Run builds and serves policyd until ctx ends.
func Run(ctx context.Context, cfg Config, log zerolog.Logger) error {
	s, err := New(cfg, log)
	if err != nil {
		return err
	}
	return s.Serve(ctx)
}
