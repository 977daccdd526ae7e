// Package router is the Switchyard router service: it answers Route (which
// worker serves this request) by predicting each candidate's time to first
// token from its KV cache overlap with the prompt and its queue, explains
// its decisions, and shares in-flight load with the other replicas over
// NATS.
//
// Parts: the load table (scraped vLLM metrics, in-flight requests, a TTFT
// predictor per worker learned from completions), the KV block index
// (kvblock.Index) kept by a replica of the kvtracker's deltas and
// snapshots (kvsync), an approximate index of the router's own decisions,
// and the prompt reader that tokenizes requests like the workers do.
// With --policyd-addr it follows policyd's snapshot: the catalog's worker
// sets and providers become endpoints, and the GatewayBackend's compiled
// policies decide among the (endpoint, model) pairs, scored as above.
package router

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/switchyard-dev/switchyard/internal/fleet"
	"github.com/switchyard-dev/switchyard/internal/kvblock"
	"github.com/switchyard-dev/switchyard/internal/serve"
	policyv1 "github.com/switchyard-dev/switchyard/proto/switchyard/policy/v1"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router/internal/endpoints"
	"github.com/switchyard-dev/switchyard/services/router/internal/kvsync"
	"github.com/switchyard-dev/switchyard/services/router/internal/load"
	"github.com/switchyard-dev/switchyard/services/router/internal/replica"
	"github.com/switchyard-dev/switchyard/services/router/internal/scrape"
)

// maxRESTBody bounds a REST request: it carries a client's body, as it is or
// inside a RouteRequest.
const maxRESTBody = 16 << 20

// Server is one router replica. New binds the listeners; Serve runs it.
type Server struct {
	cfg Config
	log zerolog.Logger
	// source supplies the fleet: the static endpoints (fleet.Static), or
	// with policyd the endpoints followed by its catalog.
	source  fleet.Source
	table   *load.Table
	kv      *kvblock.Index
	approx  *kvblock.Index
	kvMu    sync.Mutex
	kvRep   *kvsync.Replica // set in Serve when NATS is configured
	metrics *metrics
	svc     *service
	health  *health.Server
	grpcSrv *grpc.Server
	httpSrv *http.Server
	// policyConn is the client connection to policyd, nil without.
	policyConn *grpc.ClientConn
	grpcLn     net.Listener
	httpLn     net.Listener
	serving    atomic.Bool // set once the first scrape round is done
	stopping   atomic.Bool // set when shutdown begins; wins over serving
}

// New validates cfg, binds the gRPC and HTTP listeners and builds the
// servers. Call Serve to run them; Serve closes the listeners when it
// returns.
func New(cfg Config, log zerolog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("router config: %w", err)
	}
	static, err := cfg.staticCatalog()
	if err != nil {
		return nil, fmt.Errorf("router config: %w", err)
	}
	tokSpecs, err := parseTokenizers(cfg.Tokenizers)
	if err != nil {
		return nil, fmt.Errorf("router config: tokenizers: %w", err)
	}
	toks, err := loadTokenizers(tokSpecs)
	if err != nil {
		return nil, fmt.Errorf("router tokenizers: %w", err)
	}
	log = log.With().Str("component", "router").Str("router_id", cfg.RouterID).Logger()
	table := load.NewTable(load.Config{Prior: cfg.predictPrior(), RecomputeWeight: cfg.RecomputeWeight, PressureWeight: cfg.KVPressureWeight})
	s := &Server{
		cfg:    cfg,
		log:    log,
		table:  table,
		kv:     kvblock.NewIndex(),
		approx: kvblock.NewIndex(),
		health: health.NewServer(),
	}
	s.metrics = newMetrics(table, s.kv, s.kvStats)
	table.OnLearn(func(_ string, predicted, observed float64) {
		s.metrics.predictionError.Observe(math.Abs(observed - predicted))
	})
	if s.svc, err = newService(cfg, table, s.metrics, s.kv, s.approx, toks); err != nil {
		return nil, fmt.Errorf("router config: %w", err)
	}

	s.source = fleet.Static(static)
	if cfg.PolicydAddr != "" {
		// grpc.NewClient does not dial: policyd may start after the router,
		// and the watcher keeps retrying.
		conn, err := grpc.NewClient(cfg.PolicydAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, fmt.Errorf("policyd client %s: %w", cfg.PolicydAddr, err)
		}
		s.policyConn = conn
		s.source = followPolicyd(policyv1.NewPolicyServiceClient(conn), static, cfg.GatewayBackend, log,
			func(st *policyState) { s.svc.pol.Store(st) })
	}

	// Route's stack grows deep (JSON, template, tokenizer); workers that
	// live across calls keep theirs grown instead of copying a fresh
	// goroutine's stack up on every call. Calls beyond the workers get a
	// goroutine of their own, as without the option.
	s.grpcSrv = grpc.NewServer(grpc.MaxRecvMsgSize(cfg.MaxRecvMsgBytes), grpc.NumStreamWorkers(uint32(goruntime.GOMAXPROCS(0))))
	routerv1.RegisterRouterServer(s.grpcSrv, s.svc)
	healthpb.RegisterHealthServer(s.grpcSrv, s.health)
	reflection.Register(s.grpcSrv)
	s.setHealth(healthpb.HealthCheckResponse_NOT_SERVING)

	handler, err := s.httpHandler()
	if err != nil {
		return nil, err
	}
	s.httpSrv = &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}

	closeConn := func() {
		if s.policyConn != nil {
			_ = s.policyConn.Close()
		}
	}
	s.grpcLn, err = net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		closeConn()
		return nil, fmt.Errorf("listen grpc %s: %w", cfg.GRPCAddr, err)
	}
	s.httpLn, err = net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		s.grpcLn.Close()
		closeConn()
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
	marshaler := &runtime.JSONPb{
		MarshalOptions: protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true},
	}
	gw := runtime.NewServeMux(runtime.WithMarshalerOption(runtime.MIMEWildcard, marshaler))
	// In-process registration: REST calls the service directly, no
	// loopback dial to our own gRPC port.
	if err := routerv1.RegisterRouterHandlerServer(context.Background(), gw, s.svc); err != nil {
		return nil, fmt.Errorf("register rest gateway: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", http.MaxBytesHandler(gw, maxRESTBody))
	// Explain also takes a client's chat or completions body as it is, which
	// the gateway's RouteRequest mapping cannot express.
	mux.Handle("POST /v1/route:explain", http.MaxBytesHandler(&explainHandler{svc: s.svc, gw: gw, m: marshaler}, maxRESTBody))
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
	if s.cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux, nil
}

// kvStats reads the KV replica's counters for metrics; zero without one.
func (s *Server) kvStats() (kvsync.Stats, bool) {
	s.kvMu.Lock()
	r := s.kvRep
	s.kvMu.Unlock()
	if r == nil {
		return kvsync.Stats{}, false
	}
	return r.Stats(), true
}

// tableTracker adapts the load table to the replica's events.
type tableTracker struct{ t *load.Table }

func (a tableTracker) AddInFlight(d replica.PeerDecision) {
	a.t.AddInFlight(d.RequestID, d.EndpointID, d.Model, d.At, d.PromptTokens, d.CachedTokens)
}

func (a tableTracker) Complete(c replica.Completion) bool {
	return a.t.Complete(load.Completion{
		RequestID: c.RequestID, EndpointID: c.EndpointID, At: c.At, Success: c.Success,
		TTFTSeconds: c.TTFTSeconds, PromptTokens: c.PromptTokens, CachedTokens: c.CachedTokens,
	})
}

// Serve runs the router until ctx ends, then shuts down: not ready, gRPC
// GracefulStop bounded by ShutdownTimeout, HTTP shutdown, and finally a
// NATS drain so the last decisions still reach the other replicas. It
// returns nil after a clean shutdown.
func (s *Server) Serve(ctx context.Context) error {
	defer s.grpcLn.Close()
	defer s.httpLn.Close()
	if s.policyConn != nil {
		defer s.policyConn.Close()
	}

	// Background parts outlive the servers during shutdown: NATS must still
	// publish decisions made by Routes that GracefulStop lets finish.
	bgCtx, bgCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer bgCancel()

	var rdb *redis.Client
	if s.cfg.RedisURL != "" {
		opts, err := redis.ParseURL(s.cfg.RedisURL)
		if err != nil {
			return fmt.Errorf("redis-url: %w", err)
		}
		rdb = redis.NewClient(opts)
		defer rdb.Close()
	}

	var (
		nc       *nats.Conn
		ncClosed <-chan struct{}
		rs       *replica.Sync
		kvr      *kvsync.Replica
	)
	if s.cfg.NATSURL != "" {
		var err error
		nc, ncClosed, err = dialNATS(s.cfg.NATSURL, s.cfg.RouterID, s.cfg.ShutdownTimeout, s.log)
		if err != nil {
			return err
		}
		defer nc.Close()
		var store kvsync.SnapshotStore
		if rdb != nil {
			store = kvsync.NewRedisStore(rdb)
		} else {
			s.log.Info().Msg("no redis: kv index follows the nats deltas alone")
		}
		kvr, err = kvsync.New(kvsync.Config{Conn: nc, Store: store, Index: s.kv, Log: s.log.With().Str("part", "kvsync").Logger()})
		if err != nil {
			return err
		}
		s.kvMu.Lock()
		s.kvRep = kvr
		s.kvMu.Unlock()
		s.svc.sizes = kvr
		rs, err = replica.New(replica.Config{
			Conn:       nc,
			RouterID:   s.cfg.RouterID,
			Tracker:    tableTracker{s.table},
			MaxAge:     s.cfg.InflightTTL,
			OnDecision: func() { s.metrics.syncEvents.WithLabelValues("peer_decision").Inc() },
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
		s.log.Info().Msg("nats disabled: single replica, in-flight not shared, no kv events (approximate index only)")
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
		return s.source.Watch(bgCtx, func(c fleet.Catalog) {
			specs := endpoints.FromCatalog(c)
			s.table.SetEndpoints(specs)
			mgr.Set(bgCtx, endpoints.Scraped(specs))
			s.log.Info().Int("endpoints", len(specs)).Msg("endpoint set updated")
		})
	})
	bgGo(func() error {
		s.expireLoop(bgCtx)
		return nil
	})
	bgGo(func() error {
		s.sweepLoop(bgCtx)
		return nil
	})
	if rs != nil {
		bgGo(func() error { return rs.Run(bgCtx) })
		bgGo(func() error { return kvr.Run(bgCtx) })
	}

	g.Go(func() error { return serve.GRPC(s.grpcSrv, s.grpcLn) })
	g.Go(func() error { return serve.HTTP(s.httpSrv, s.httpLn) })
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
	if nc != nil {
		// After the publisher flushed its queue: the drain delivers it.
		if dErr := drainNATS(nc, ncClosed, s.cfg.ShutdownTimeout); dErr != nil && err == nil {
			err = dErr
		}
	}
	s.log.Info().Msg("router stopped")
	return err
}

func (s *Server) shutdown() {
	s.stopping.Store(true)
	s.health.Shutdown() // NOT_SERVING for every service, and stays so
	deadline := time.Now().Add(s.cfg.ShutdownTimeout)
	serve.StopGRPC(s.grpcSrv, deadline, s.log)
	serve.StopHTTP(s.httpSrv, deadline, s.log)
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

// sweepLoop frees expired speculative and approximate entries.
func (s *Server) sweepLoop(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.kv.Sweep(now)
			s.approx.Sweep(now)
		}
	}
}

// Run builds and serves a router until ctx ends.
func Run(ctx context.Context, cfg Config, log zerolog.Logger) error {
	// The GC target is the process's, so it is set here and not in New:
	// `switchyard dev` runs every service in one process.
	if _, set := os.LookupEnv("GOGC"); !set && cfg.GCPercent > 0 {
		debug.SetGCPercent(cfg.GCPercent)
	}
	s, err := New(cfg, log)
	if err != nil {
		return err
	}
	return s.Serve(ctx)
}
