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
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/pprof"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/switchyard-dev/switchyard/internal/fleet"
	"github.com/switchyard-dev/switchyard/internal/kvblock"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
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
	tc      *tokChecker
	api     *lifecycle.API
	// policyConn is the client connection to policyd, nil without.
	policyConn *grpc.ClientConn
	// nats and redis are set by Serve, for the readiness checks.
	nats  atomic.Pointer[lifecycle.NATSConn]
	redis atomic.Pointer[lifecycle.RedisWatch]
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
	table := load.NewTable(load.Config{Prior: cfg.predictPrior(), RecomputeWeight: cfg.RecomputeWeight, PressureWeight: cfg.KVPressureWeight,
		Breaker: load.Breaker{Failures: cfg.BreakerFailures, OpenFor: cfg.BreakerOpenFor}, FirstRotation: rand.Uint64()})
	s := &Server{
		cfg:    cfg,
		log:    log,
		table:  table,
		kv:     kvblock.NewIndex(),
		approx: kvblock.NewIndex(),
	}
	s.metrics = newMetrics(table, s.kv, s.kvStats)
	table.OnLearn(func(_ string, predicted, routed, observed float64) {
		s.metrics.predictionError.Observe(math.Abs(observed - predicted))
		s.metrics.routedError.Observe(math.Abs(observed-routed) / observed)
	})
	if s.svc, err = newService(cfg, table, s.metrics, s.kv, s.approx, toks); err != nil {
		return nil, fmt.Errorf("router config: %w", err)
	}
	s.tc = newTokChecker(cfg, toks, table, s.metrics, log)
	s.svc.tc = s.tc

	s.source = fleet.Static(static)
	if cfg.PolicydAddr != "" {
		// grpc.NewClient does not dial: policyd may start after the router,
		// and the watcher keeps retrying.
		opts, err := cfg.Policyd.DialOptions("policyd")
		if err != nil {
			return nil, fmt.Errorf("router config: %w", err)
		}
		conn, err := grpc.NewClient(cfg.PolicydAddr, opts...)
		if err != nil {
			return nil, fmt.Errorf("policyd client %s: %w", cfg.PolicydAddr, err)
		}
		s.policyConn = conn
		s.source = followPolicyd(policyv1.NewPolicyServiceClient(conn), static, cfg.GatewayBackend, log,
			func(st *policyState) { s.svc.pol.Store(st) })
	}

	auth, err := newOperatorAuth(&cfg)
	if err != nil {
		return nil, fmt.Errorf("router config: operator-token-file: %w", err)
	}
	if auth.exposed() {
		log.Warn().Str("grpc_addr", cfg.GRPCAddr).Str("http_addr", cfg.HTTPAddr).
			Msg("Explain is refused beyond loopback: set --operator-token-file or --operator-identities to serve it to operators")
	}

	// Route's stack grows deep (JSON, template, tokenizer); workers that
	// live across calls keep theirs grown instead of copying a fresh
	// goroutine's stack up on every call. Calls beyond the workers get a
	// goroutine of their own, as without the option.
	s.api, err = lifecycle.NewAPI(lifecycle.APIConfig{
		GRPCAddr: cfg.GRPCAddr,
		HTTPAddr: cfg.HTTPAddr,
		GRPCOptions: []grpc.ServerOption{grpc.MaxRecvMsgSize(cfg.MaxRecvMsgBytes), grpc.NumStreamWorkers(uint32(goruntime.GOMAXPROCS(0))),
			grpc.ChainUnaryInterceptor(auth.unary)},
		GRPCTLS: cfg.GRPCTLS,
		Register: func(g *grpc.Server) []string {
			routerv1.RegisterRouterServer(g, s.svc)
			return []string{routerv1.Router_ServiceDesc.ServiceName}
		},
		// In-process registration: REST calls the service directly, no
		// loopback dial to our own gRPC port.
		REST: func(ctx context.Context, mux *runtime.ServeMux) error {
			return routerv1.RegisterRouterHandlerServer(ctx, mux, s.svc)
		},
		MaxRESTBody: maxRESTBody,
		Metrics:     s.metrics.reg,
		Ready:       s.ready,
		Checks:      s.checks(),
	})
	if err != nil {
		if s.policyConn != nil {
			_ = s.policyConn.Close()
		}
		return nil, err
	}
	// Explain also takes a client's chat or completions body as it is, which
	// the gateway's RouteRequest mapping cannot express.
	s.api.Mux.Handle("POST /v1/route:explain", auth.rest(s.api.REST, "Explain", true,
		http.MaxBytesHandler(&explainHandler{svc: s.svc, gw: s.api.REST, m: lifecycle.RESTMarshaler}, maxRESTBody)))
	s.api.Mux.Handle("GET /v1/endpoints", auth.rest(s.api.REST, "ListEndpoints", false, s.api.REST))
	if cfg.Pprof {
		s.api.Mux.HandleFunc("/debug/pprof/", pprof.Index)
		s.api.Mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		s.api.Mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		s.api.Mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		s.api.Mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return s, nil
}

// GRPCAddr is the bound gRPC address (useful with port 0).
func (s *Server) GRPCAddr() string { return s.api.GRPCAddr() }

// HTTPAddr is the bound HTTP address.
func (s *Server) HTTPAddr() string { return s.api.HTTPAddr() }

// ready is "every endpoint was scraped once": a fresh replica does not take
// traffic it would route blind.
func (s *Server) ready() error {
	select {
	case <-s.table.FirstRound():
	default:
		return errors.New("not serving yet: first scrape round not finished")
	}
	if !s.table.Attempted() {
		return errors.New("first scrape of every endpoint not finished")
	}
	return nil
}

// checks are the router's dependencies. None is required: without NATS a
// replica routes on its own in-flight view and a frozen KV index, without
// Redis a restarted replica waits for deltas instead of a snapshot, and
// without policyd it keeps the last policy it had; /readyz?verbose and
// switchyard_dependency_up say which of these it is doing.
func (s *Server) checks() []lifecycle.Check {
	var cs []lifecycle.Check
	if s.cfg.NATS.URL != "" {
		cs = append(cs, lifecycle.Check{Name: "nats", Probe: func() error { return s.nats.Load().Probe() }})
	}
	if s.cfg.Redis.URL != "" {
		cs = append(cs, lifecycle.Check{Name: "redis", Probe: func() error { return s.redis.Load().Probe() }})
	}
	if s.policyConn != nil {
		cs = append(cs, lifecycle.Check{Name: "policyd", Probe: func() error {
			if st := s.policyConn.GetState(); st != connectivity.Ready {
				return fmt.Errorf("connection %s; routing with the last policy received", strings.ToLower(st.String()))
			}
			return nil
		}})
	}
	return cs
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
	a.t.AddInFlight(d.RequestID, d.EndpointID, d.Model, d.At, d.PromptTokens, d.CachedTokens, d.OutputTokens)
}

func (a tableTracker) Complete(c replica.Completion) bool {
	return a.t.Complete(load.Completion{
		RequestID: c.RequestID, EndpointID: c.EndpointID, At: c.At, Success: c.Success,
		UpstreamFailed: c.UpstreamFailed, TTFTSeconds: c.TTFTSeconds, PromptTokens: c.PromptTokens, CachedTokens: c.CachedTokens,
	})
}

// Serve runs the router until ctx ends, then stops the lifecycle's way:
// not ready, the drain delay, gRPC GracefulStop and HTTP within the
// shutdown timeout, then the parts in reverse order of their start, so
// that NATS, drained last, still carries the decisions of the Routes that
// GracefulStop let finish. It returns nil after a clean stop.
func (s *Server) Serve(ctx context.Context) error {
	var comps []lifecycle.Component
	wait := func(name string, close func() error) lifecycle.Component {
		return lifecycle.Component{Name: name, Run: func(ctx context.Context) error {
			<-ctx.Done()
			return close()
		}}
	}
	if s.policyConn != nil {
		comps = append(comps, wait("policyd client", s.policyConn.Close))
	}
	var rdb *redis.Client
	if s.cfg.Redis.URL != "" {
		var err error
		if rdb, err = lifecycle.OpenRedis(s.cfg.Redis); err != nil {
			_ = s.api.Close()
			return err
		}
		comps = append(comps, wait("redis", rdb.Close))
		w := lifecycle.WatchRedis(rdb)
		s.redis.Store(w)
		comps = append(comps, lifecycle.Component{Name: "redis watch", Run: w.Run})
	}
	if s.cfg.NATS.URL != "" {
		nc, err := lifecycle.DialNATS(s.cfg.NATS, "switchyard-router "+s.cfg.RouterID, s.log)
		if err != nil {
			_ = s.api.Close()
			return err
		}
		comps = append(comps, wait("nats", func() error { return nc.Drain(s.cfg.ShutdownTimeout) }))
		s.nats.Store(nc)
		var store kvsync.SnapshotStore
		if rdb != nil {
			store = kvsync.NewRedisStore(rdb)
		} else {
			s.log.Info().Msg("no redis: kv index follows the nats deltas alone")
		}
		kvr, err := kvsync.New(kvsync.Config{Conn: nc.Conn, Store: store, Index: s.kv, Log: s.log.With().Str("part", "kvsync").Logger()})
		if err != nil {
			nc.Close()
			_ = s.api.Close()
			return err
		}
		s.kvMu.Lock()
		s.kvRep = kvr
		s.kvMu.Unlock()
		s.svc.sizes = kvr
		rs, err := replica.New(replica.Config{
			Conn:       nc.Conn,
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
			nc.Close()
			_ = s.api.Close()
			return err
		}
		s.svc.pub = rs
		comps = append(comps,
			lifecycle.Component{Name: "kv replica", Run: kvr.Run},
			lifecycle.Component{Name: "replica sync", Run: rs.Run})
	} else {
		s.log.Info().Msg("nats disabled: single replica, in-flight not shared, no kv events (approximate index only)")
	}

	sink := newRestartSink(s.table, s.kv, s.approx, s.log)
	sink.restarted = s.tc.recheck
	mgr := scrape.NewManager(scrape.Config{
		Interval: s.cfg.ScrapeInterval,
		Timeout:  s.cfg.ScrapeTimeout,
		Sink:     sink,
		OnError:  func(id string) { s.metrics.scrapeErrors.WithLabelValues(id).Inc() },
		Log:      s.log,
	})
	comps = append(comps,
		// Stops after the source, whose context its scrapes run on.
		wait("scrapes", func() error { mgr.Wait(); return nil }),
		lifecycle.Component{Name: "fleet source", Run: func(ctx context.Context) error {
			return s.source.Watch(ctx, func(c fleet.Catalog) {
				specs := endpoints.FromCatalog(c)
				s.table.SetEndpoints(specs)
				if s.cfg.NATS.URL == "" {
					for _, sp := range specs {
						if sp.MaxInFlight > 0 {
							// Completions arrive over NATS alone: without them
							// a slot frees only when its entry expires.
							s.log.Warn().Str("endpoint", sp.ID).Int("max_concurrency", sp.MaxInFlight).Dur("inflight_ttl", s.cfg.InflightTTL).
								Msg("provider has a concurrency cap but NATS is disabled: no completions arrive, so its requests count until --inflight-ttl")
						}
					}
				}
				mgr.Set(ctx, endpoints.Scraped(specs))
				s.log.Info().Int("endpoints", len(specs)).Msg("endpoint set updated")
			})
		}},
		lifecycle.Component{Name: "in-flight expiry", Run: func(ctx context.Context) error { s.expireLoop(ctx); return nil }},
		lifecycle.Component{Name: "index sweep", Run: func(ctx context.Context) error { s.sweepLoop(ctx); return nil }},
		lifecycle.Component{Name: "tokenizer check", Run: func(ctx context.Context) error { s.tc.run(ctx); return nil }},
	)
	return lifecycle.Run(ctx, lifecycle.Service{
		Name:            "router",
		Log:             s.log,
		API:             s.api,
		Components:      comps,
		DrainDelay:      s.cfg.DrainDelay,
		ShutdownTimeout: s.cfg.ShutdownTimeout,
	})
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
