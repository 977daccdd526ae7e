// Package router is the Switchyard router service: it answers Route (which
// worker serves this request) from live worker load, explains its
// decisions, and shares in-flight load with the other replicas over NATS.
//
// This is the load-aware walking skeleton: the score is queue length only;
// KV-cache overlap, policies and predicted TTFT come later.
package router

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/protobuf/encoding/protojson"

	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router/internal/endpoints"
	"github.com/switchyard-dev/switchyard/services/router/internal/load"
	"github.com/switchyard-dev/switchyard/services/router/internal/replica"
	"github.com/switchyard-dev/switchyard/services/router/internal/scrape"
)

// maxRESTBody bounds a REST request; RouteRequest carries the client's body.
const maxRESTBody = 16 << 20

// endpointSource supplies the endpoint set: static configuration today,
// policyd's InferenceWorkerSets later. update receives the full set on
// every change; Watch returns when ctx ends.
type endpointSource interface {
	Watch(ctx context.Context, update func([]endpoints.Spec)) error
}

// Server is one router replica. New binds the listeners; Serve runs it.
type Server struct {
	cfg      Config
	log      zerolog.Logger
	source   endpointSource
	table    *load.Table
	metrics  *metrics
	svc      *service
	health   *health.Server
	grpcSrv  *grpc.Server
	httpSrv  *http.Server
	grpcLn   net.Listener
	httpLn   net.Listener
	serving  atomic.Bool // set once the first scrape round is done
	stopping atomic.Bool // set when shutdown begins; wins over serving
}

// New validates cfg, binds the gRPC and HTTP listeners and builds the
// servers. Call Serve to run them; Serve closes the listeners when it
// returns.
func New(cfg Config, log zerolog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("router config: %w", err)
	}
	specs, err := cfg.endpointSpecs()
	if err != nil {
		return nil, fmt.Errorf("router config: %w", err)
	}
	log = log.With().Str("component", "router").Str("router_id", cfg.RouterID).Logger()
	table := load.NewTable()
	s := &Server{
		cfg:     cfg,
		log:     log,
		source:  endpoints.Static(specs),
		table:   table,
		metrics: newMetrics(table),
		health:  health.NewServer(),
	}
	s.svc = &service{table: table, pub: noPublisher{}, metrics: s.metrics}

	s.grpcSrv = grpc.NewServer(grpc.MaxRecvMsgSize(cfg.MaxRecvMsgBytes))
	routerv1.RegisterRouterServer(s.grpcSrv, s.svc)
	healthpb.RegisterHealthServer(s.grpcSrv, s.health)
	reflection.Register(s.grpcSrv)
	s.setHealth(healthpb.HealthCheckResponse_NOT_SERVING)

	handler, err := s.httpHandler()
	if err != nil {
		return nil, err
	}
	s.httpSrv = &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}

	s.grpcLn, err = net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		return nil, fmt.Errorf("listen grpc %s: %w", cfg.GRPCAddr, err)
	}
	s.httpLn, err = net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		s.grpcLn.Close()
		return nil, fmt.Errorf("listen http %s: %w", cfg.HTTPAddr, err)
	}
	return s, nil
}

// GRPCAddr is the bound gRPC address (useful with port 0).
func (s *Server) GRPCAddr() string { return s.grpcLn.Addr().String() }

// HTTPAddr is the bound HTTP address.
func (s *Server) HTTPAddr() string { return s.httpLn.Addr().String() }

func (s *Server) setHealth(st healthpb.HealthCheckResponse_ServingStatus) {
	s.health.SetServingStatus("", st)
	s.health.SetServingStatus(routerv1.Router_ServiceDesc.ServiceName, st)
}

func (s *Server) httpHandler() (http.Handler, error) {
	gw := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, &runtime.JSONPb{
			MarshalOptions: protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true},
		}),
	)
	// In-process registration: REST calls the service directly, no
	// loopback dial to our own gRPC port.
	if err := routerv1.RegisterRouterHandlerServer(context.Background(), gw, s.svc); err != nil {
		return nil, fmt.Errorf("register rest gateway: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", http.MaxBytesHandler(gw, maxRESTBody))
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		switch {
		case s.stopping.Load():
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
		case !s.serving.Load():
			http.Error(w, "not serving yet", http.StatusServiceUnavailable)
		case !s.table.Attempted():
			http.Error(w, "first scrape of every endpoint not finished", http.StatusServiceUnavailable)
		default:
			_, _ = w.Write([]byte("ok\n"))
		}
	})
	return mux, nil
}

// Serve runs the router until ctx ends, then shuts down: not ready, gRPC
// GracefulStop bounded by ShutdownTimeout, HTTP shutdown, and finally a
// NATS drain so the last decisions still reach the other replicas. It
// returns nil after a clean shutdown.
func (s *Server) Serve(ctx context.Context) error {
	defer s.grpcLn.Close()
	defer s.httpLn.Close()

	// Background parts outlive the servers during shutdown: NATS must still
	// publish decisions made by Routes that GracefulStop lets finish.
	bgCtx, bgCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer bgCancel()

	var rs *replica.Sync
	if s.cfg.NATSURL != "" {
		var err error
		rs, err = replica.Connect(replica.Config{
			URL:          s.cfg.NATSURL,
			RouterID:     s.cfg.RouterID,
			Tracker:      s.table,
			MaxAge:       s.cfg.InflightTTL,
			DrainTimeout: s.cfg.ShutdownTimeout,
			OnDecision:   func() { s.metrics.syncEvents.WithLabelValues("peer_decision").Inc() },
			OnCompletion: func(released bool) {
				if released {
					s.metrics.syncEvents.WithLabelValues("completion_released").Inc()
				} else {
					s.metrics.syncEvents.WithLabelValues("completion_unmatched").Inc()
				}
			},
			OnDropped:    func() { s.metrics.syncEvents.WithLabelValues("decision_dropped").Inc() },
			OnBadMessage: func(string) { s.metrics.syncEvents.WithLabelValues("malformed").Inc() },
			Log:          s.log,
		})
		if err != nil {
			return err
		}
		s.svc.pub = rs
	} else {
		s.log.Info().Msg("nats disabled: single replica, in-flight not shared")
	}

	mgr := scrape.NewManager(scrape.Config{
		Interval: s.cfg.ScrapeInterval,
		Timeout:  s.cfg.ScrapeTimeout,
		Sink:     s.table,
		OnError:  func(id string) { s.metrics.scrapeErrors.WithLabelValues(id).Inc() },
		Log:      s.log,
	})

	// A background part that fails stops the servers too.
	ctx, stopServers := context.WithCancel(ctx)
	defer stopServers()
	var bg errgroup.Group
	bgGo := func(f func() error) {
		bg.Go(func() error {
			err := f()
			if err != nil {
				stopServers()
			}
			return err
		})
	}
	g, gctx := errgroup.WithContext(ctx)

	bgGo(func() error {
		return s.source.Watch(bgCtx, func(specs []endpoints.Spec) {
			s.table.SetEndpoints(specs)
			mgr.Set(bgCtx, specs)
			s.log.Info().Int("endpoints", len(specs)).Msg("endpoint set updated")
		})
	})
	bgGo(func() error {
		s.expireLoop(bgCtx)
		return nil
	})
	if rs != nil {
		bgGo(func() error { return rs.Run(bgCtx) })
	}

	g.Go(func() error {
		if err := s.grpcSrv.Serve(s.grpcLn); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("serve grpc: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		if err := s.httpSrv.Serve(s.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve http: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		// Health turns SERVING only after every endpoint was scraped once,
		// so a fresh replica does not take traffic it would route blind.
		select {
		case <-s.table.FirstRound():
			// After health.Shutdown (in shutdown) this update is ignored,
			// so a late first round cannot flip a stopping router back.
			s.serving.Store(true)
			s.setHealth(healthpb.HealthCheckResponse_SERVING)
		case <-gctx.Done():
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		s.shutdown()
		return nil
	})
	s.log.Info().Str("grpc_addr", s.GRPCAddr()).Str("http_addr", s.HTTPAddr()).Msg("router serving")

	err := g.Wait()
	bgCancel()
	mgr.Wait()
	if bgErr := bg.Wait(); bgErr != nil && err == nil {
		err = bgErr
	}
	s.log.Info().Msg("router stopped")
	return err
}

func (s *Server) shutdown() {
	s.stopping.Store(true)
	s.health.Shutdown() // NOT_SERVING for every service, and stays so
	deadline := time.Now().Add(s.cfg.ShutdownTimeout)

	stopped := make(chan struct{})
	go func() {
		s.grpcSrv.GracefulStop()
		close(stopped)
	}()
	t := time.NewTimer(time.Until(deadline))
	select {
	case <-stopped:
		t.Stop()
	case <-t.C:
		s.log.Warn().Dur("timeout", s.cfg.ShutdownTimeout).Msg("grpc graceful stop timed out, forcing")
		s.grpcSrv.Stop()
		<-stopped
	}

	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := s.httpSrv.Shutdown(ctx); err != nil {
		s.log.Warn().Err(err).Msg("http shutdown")
		_ = s.httpSrv.Close()
	}
}

// expireLoop drops in-flight entries older than the TTL. It sweeps at a
// tenth of the TTL (bounded) so an entry outlives its TTL by at most that.
func (s *Server) expireLoop(ctx context.Context) {
	every := min(max(s.cfg.InflightTTL/10, 10*time.Millisecond), time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if n := s.table.Expire(now.Add(-s.cfg.InflightTTL)); n > 0 {
				s.log.Debug().Int("expired", n).Msg("in-flight entries expired")
			}
		}
	}
}

// Run builds and serves a router until ctx ends.
func Run(ctx context.Context, cfg Config, log zerolog.Logger) error {
	s, err := New(cfg, log)
	if err != nil {
		return err
	}
	return s.Serve(ctx)
}
