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
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/internal/policy"
	policyv1 "github.com/switchyard-dev/switchyard/proto/switchyard/policy/v1"
)

// maxRESTBody bounds a REST request (Validate carries files).
const maxRESTBody = 16 << 20

// Server is one policyd. New binds the listeners; Serve runs it.
type Server struct {
	cfg     Config
	log     zerolog.Logger
	st      *state
	metrics *metrics
	svc     *service
	api     *lifecycle.API
	source  Source
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
	s := &Server{cfg: cfg, log: log, st: newState(), metrics: newMetrics(), source: src}
	if c, ok := src.(prometheus.Collector); ok {
		if err := s.metrics.reg.Register(c); err != nil {
			return nil, fmt.Errorf("source metrics: %w", err)
		}
	}
	s.svc = &service{st: s.st, metrics: s.metrics, quit: make(chan struct{})}
	api, err := lifecycle.NewAPI(lifecycle.APIConfig{
		GRPCAddr:    cfg.GRPCAddr,
		HTTPAddr:    cfg.HTTPAddr,
		GRPCOptions: []grpc.ServerOption{grpc.MaxRecvMsgSize(maxValidateBytes + 1<<20)},
		GRPCTLS:     cfg.GRPCTLS,
		Register: func(g *grpc.Server) []string {
			policyv1.RegisterPolicyServiceServer(g, s.svc)
			return []string{policyv1.PolicyService_ServiceDesc.ServiceName}
		},
		REST: func(ctx context.Context, mux *runtime.ServeMux) error {
			return policyv1.RegisterPolicyServiceHandlerServer(ctx, mux, s.svc)
		},
		MaxRESTBody: maxRESTBody,
		Metrics:     s.metrics.reg,
		Ready: func() error {
			if cur, _ := s.st.current(); cur == nil {
				return errors.New("no valid snapshot yet")
			}
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	s.api = api
	return s, nil
}

// GRPCAddr is the bound gRPC address (useful with port 0).
func (s *Server) GRPCAddr() string { return s.api.GRPCAddr() }

// HTTPAddr is the bound HTTP address.
func (s *Server) HTTPAddr() string { return s.api.HTTPAddr() }

// Snapshot returns the served snapshot and its revision (nil, 0 before
// the first valid set of resources).
func (s *Server) Snapshot() (*policy.Snapshot, int64) {
	cur, _ := s.st.current()
	if cur == nil {
		return nil, 0
	}
	return cur.snap, cur.revision
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

// Serve runs policyd until ctx ends, then stops the lifecycle's way: not
// ready, the drain delay, Watch streams ended, gRPC and HTTP stopped within
// the shutdown timeout, the source last. It returns nil after a clean
// stop.
func (s *Server) Serve(ctx context.Context) error {
	s.log.Info().Str("source", s.cfg.Source).Msg("policyd starting")
	return lifecycle.Run(ctx, lifecycle.Service{
		Name: "policyd",
		Log:  s.log,
		API:  s.api,
		Components: []lifecycle.Component{
			{Name: "source " + s.cfg.Source, Run: func(ctx context.Context) error { return s.source.Run(ctx, s.apply) }},
		},
		EndStreams:      func() { close(s.svc.quit) },
		DrainDelay:      s.cfg.DrainDelay,
		ShutdownTimeout: s.cfg.ShutdownTimeout,
	})
}

// Run builds and serves policyd until ctx ends.
func Run(ctx context.Context, cfg Config, log zerolog.Logger) error {
	s, err := New(cfg, log)
	if err != nil {
		return err
	}
	return s.Serve(ctx)
}
