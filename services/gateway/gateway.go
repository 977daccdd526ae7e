// Package gateway is Switchyard's HTTP front door: it speaks the OpenAI API,
// asks the router where each request should go, proxies and streams the
// answer, fails over before the first byte, measures TTFT, inter-token
// latency and tokens, and publishes one usage event per request.
//
// The request path, top to bottom (proxy.go): the admission chain says who
// is calling (package admission: jwt with bearer JWTs of the identity
// provider the GatewayBackend names, apikey with API keys, default-tenant
// without authentication) and may hold it to its rate limits (package
// ratelimit: one request of its requests per minute), the body is read
// once (apibody, over jsonscan), the router picks a target, the ratelimit
// step reserves the request's tokens (the router's prompt count and
// max_tokens; settled with the real usage when the request ends), the
// gateway splices the served model name and include_usage into the body,
// and the upstream adapter of the target's type (internal/upstream) sends
// the attempt; a failure before the first byte is retried on the next target
// the router allows, up to --max-attempts (cooldown.go keeps upstreams that
// sent Retry-After out meanwhile).
//
// Client APIs. The gateway serves a registry of inbound APIs (inbound.go:
// one method, register, per API). OpenAI's is native; Anthropic's Messages
// API (anthropic.go) is translated onto the chat completions path and its
// answers translated back, so the router reads, and the worker renders,
// the same chat body whichever API the client speaks.
//
// Token metering of streams. A stream only reports token counts when the
// request sets stream_options.include_usage. So that every stream is metered,
// the gateway sets it upstream when the client did not (a byte splice of the
// request body: the value is flipped or the member inserted, nothing is
// re-encoded) and then drops the final usage-only chunk (empty choices) from
// what that client receives, as a whole SSE event, so the client sees exactly
// the stream it asked for. A client that asked for usage gets the chunk. When
// a stream ends without usage (the client went away mid-stream), the usage
// event carries an estimate: the router's prompt token count and one
// completion token per streamed data event.
//
// Timings. TTFT is measured from the request's arrival at the gateway to the
// first streamed data event (vLLM's first chunk carries the first token), so
// it includes routing and any retry; route completions carry the attempt's own
// TTFT (from sending upstream), which is what routers learn prefill rates
// from. Inter-token latency is observed per gap between reads that delivered
// data events; the usage event carries the mean, (last-first)/(tokens-1).
package gateway

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/internal/upstream"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/gateway/admission"
	"github.com/switchyard-dev/switchyard/services/gateway/admission/defaulttenant"
	"github.com/switchyard-dev/switchyard/services/gateway/admission/jwt"
	"github.com/switchyard-dev/switchyard/services/gateway/flowcontrol"
	"github.com/switchyard-dev/switchyard/services/gateway/internal/publish"
	"github.com/switchyard-dev/switchyard/services/gateway/internal/spool"
	"github.com/switchyard-dev/switchyard/services/gateway/internal/stepclock"
	"github.com/switchyard-dev/switchyard/services/gateway/ratelimit"
)

// Headers the gateway reads or writes.
const (
	RequestIDHeader = "X-Request-Id"
	// TagsHeader carries comma-separated routing tags, honoured only with
	// Config.AllowTagsHeader.
	TagsHeader = "X-Switchyard-Tags"
	// TargetHeader and PredictedTTFTHeader carry the routing decision on
	// an answer, with Config.DecisionHeaders: the target's id, and the
	// router's predicted time to first token in seconds.
	TargetHeader        = "X-Switchyard-Target"
	PredictedTTFTHeader = "X-Switchyard-Predicted-TTFT"
)

// DefaultTenant is the tenant of requests no admission step claims (the
// default-tenant step).
const DefaultTenant = defaulttenant.Tenant

// Time given to finishing handlers and to event flushing after the HTTP
// drain, on top of Config.ShutdownTimeout.
const (
	handlerGrace = 2 * time.Second
	flushTimeout = 5 * time.Second
)

// routeClient is the part of the router API the gateway uses.
type routeClient interface {
	Route(ctx context.Context, in *routerv1.RouteRequest, opts ...grpc.CallOption) (*routerv1.RouteResponse, error)
	ListEndpoints(ctx context.Context, in *routerv1.ListEndpointsRequest, opts ...grpc.CallOption) (*routerv1.ListEndpointsResponse, error)
}

// eventSink receives the gateway's events; sending must never block.
type eventSink interface {
	RouteCompleted(ev *eventsv1.RouteCompletion)
	RequestFinished(tenant string, ev *eventsv1.UsageEvent)
}

type discardSink struct{}

func (discardSink) RouteCompleted(*eventsv1.RouteCompletion)     {}
func (discardSink) RequestFinished(string, *eventsv1.UsageEvent) {}

// Gateway is one gateway server. Create it with New, run it with Serve.
type Gateway struct {
	cfg       Config
	log       zerolog.Logger
	api       *lifecycle.API
	conn      *grpc.ClientConn
	router    routeClient
	transport *http.Transport
	metrics   *metrics
	sink      eventSink
	// admit decides who is calling and whether they may (--admission).
	admit admission.Chain
	jwt   *jwt.Step // the jwt step of the chain, if any
	// upstreams speak to the targets, by their type.
	upstreams *upstream.Set
	// catalog follows policyd; nil without --policyd-addr (no providers).
	catalog *catalog
	// ratelimit is the chain's ratelimit step, nil without one: it
	// reserves a routed request's tokens and settles them at the end.
	ratelimit *ratelimit.Step
	// redis holds the rate-limit counters; nil without the step.
	redis      *redis.Client
	redisWatch *lifecycle.RedisWatch

	// limiter caps each client's requests in flight; nil without a cap.
	limiter *clientLimiter
	// flow is the flow-control queue, nil when --queue-threshold is 0.
	flow        *flowcontrol.Queue
	flowMetrics *flowcontrol.Metrics
	// live is the upstream responses being relayed, by endpoint.
	live liveSet
	// steps follows the engine steps of the workers streamed from, for
	// the router's TTFT predictions (stepclock says why).
	steps stepclock.Clocks
	// cooldowns are the upstreams that asked, with Retry-After, not to be
	// sent requests for a while.
	cooldowns cooldowns
	// nats and pub are set by Serve (nil without NATS), read by readiness.
	nats atomic.Pointer[lifecycle.NATSConn]
	pub  atomic.Pointer[publish.Publisher]

	inflight atomic.Int64
	// settling counts rate-limit reservations being corrected after their
	// request's end (proxy.go, finish).
	settling atomic.Int64
	started  atomic.Bool
}

// New checks cfg, prepares the router client (it connects lazily, in the
// background) and binds cfg.Addr, so Addr is known before Serve runs. Call
// Serve, or Close if Serve will never run.
func New(cfg Config, log zerolog.Logger) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gateway config: %w", err)
	}
	creds, err := cfg.Router.DialOptions("router")
	if err != nil {
		return nil, fmt.Errorf("gateway config: %w", err)
	}
	conn, err := dialRouter(cfg.RouterAddr, creds...)
	if err != nil {
		return nil, fmt.Errorf("router client %s: %w", cfg.RouterAddr, err)
	}
	g := &Gateway{
		cfg:       cfg,
		log:       log,
		conn:      conn,
		router:    routerv1.NewRouterClient(conn),
		transport: newTransport(),
		sink:      discardSink{},
		limiter:   newClientLimiter(cfg.MaxStreamsPerClient),
	}
	g.upstreams = upstream.NewSet(g.transport)
	if cfg.PolicydAddr != "" {
		g.catalog, err = newCatalog(cfg, log)
		if err != nil {
			_ = conn.Close()
			return nil, err
		}
	}
	reg := prometheus.NewRegistry()
	g.metrics = newMetrics(reg, func() float64 { return float64(g.inflight.Load()) }, func() (int64, int64) {
		if pub := g.pub.Load(); pub != nil {
			return pub.Spooled()
		}
		return 0, 0
	})
	if cfg.Flow.Enabled() {
		g.flow = flowcontrol.New(flowcontrol.Limits{MaxQueued: cfg.Flow.MaxQueued, MaxWait: cfg.Flow.MaxWait})
		if g.flowMetrics, err = flowcontrol.NewMetrics(reg, g.flow); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("gateway metrics: %w", err)
		}
	}
	deps := admission.Deps{Metrics: reg, Log: log}
	if g.catalog != nil {
		deps.Program = g.catalog.program
	}
	if g.admit, err = admission.Build(cfg.Admission, deps); err != nil {
		_ = conn.Close()
		if g.catalog != nil {
			_ = g.catalog.conn.Close()
		}
		return nil, fmt.Errorf("gateway config: admission: %w", err)
	}
	if err := g.loadJWT(); err != nil {
		_ = conn.Close()
		if g.catalog != nil {
			_ = g.catalog.conn.Close()
		}
		return nil, err
	}
	if err := g.startRateLimit(reg); err != nil {
		_ = conn.Close()
		if g.catalog != nil {
			_ = g.catalog.conn.Close()
		}
		return nil, err
	}

	g.api, err = lifecycle.NewAPI(lifecycle.APIConfig{
		HTTPAddr:    cfg.Addr,
		Metrics:     reg,
		MetricsAddr: cfg.MetricsAddr,
		Checks:      g.checks(),
		HTTPServer: func(srv *http.Server) {
			srv.ReadHeaderTimeout = 10 * time.Second
			srv.IdleTimeout = 2 * time.Minute
			srv.MaxHeaderBytes = 64 << 10
			srv.ErrorLog = stdlog.New(log.With().Str("component", "http").Logger(), "", 0)
		},
	})
	if err != nil {
		_ = conn.Close()
		g.closeRedis()
		if g.catalog != nil {
			_ = g.catalog.conn.Close()
		}
		return nil, err
	}
	mux := g.api.Mux
	for _, in := range inboundAPIs {
		in.register(g, mux)
	}
	mux.HandleFunc("/", notFound)
	return g, nil
}

// Addr is the address the gateway listens on (with the real port when
// Config.Addr asked for port 0).
func (g *Gateway) Addr() string { return g.api.HTTPAddr() }

// MetricsAddr is the address /metrics is served on.
func (g *Gateway) MetricsAddr() string { return g.api.MetricsAddr() }

// Close releases what New acquired, for a Gateway whose Serve never ran.
func (g *Gateway) Close() error {
	if g.started.Load() {
		return errors.New("gateway: Close after Serve; cancel Serve's context instead")
	}
	err := errors.Join(g.api.Close(), g.conn.Close())
	g.closeRedis()
	if g.catalog != nil {
		err = errors.Join(err, g.catalog.conn.Close())
	}
	return err
}

// Run builds a gateway from cfg and serves until ctx is cancelled.
func Run(ctx context.Context, cfg Config, log zerolog.Logger) error {
	g, err := New(cfg, log)
	if err != nil {
		return err
	}
	return g.Serve(ctx)
}

// Serve serves HTTP until ctx is cancelled, then stops the lifecycle's way:
// not ready, the drain delay, in-flight requests (streams included) given
// Config.ShutdownTimeout to finish, then the parts in reverse order of
// their start: requests cut at the deadline given a moment to record
// their usage, the policy watch, the router client, the event publisher
// flushed, NATS drained. NATS being down at start or later is ridden out:
// events wait in the publisher until NATS acks them, and the usage stream
// is made when NATS answers (and again after every reconnect). It returns
// nil after a clean stop.
func (g *Gateway) Serve(ctx context.Context) error {
	if !g.started.CompareAndSwap(false, true) {
		return errors.New("gateway: Serve called twice")
	}
	var comps []lifecycle.Component
	wait := func(name string, stop func() error) lifecycle.Component {
		return lifecycle.Component{Name: name, Run: func(ctx context.Context) error {
			<-ctx.Done()
			return stop()
		}}
	}
	if g.cfg.NATS.URL == "" {
		g.log.Warn().Msg("nats url is empty: usage events and route completions are NOT published; nothing is metered and routers never see requests finish")
	} else {
		nc, err := lifecycle.DialNATS(g.cfg.NATS, "switchyard-gateway", g.log)
		if err != nil {
			_ = g.Close()
			return err
		}
		js, err := jetstream.New(nc.Conn,
			jetstream.WithPublishAsyncTimeout(usageAckTimeout),
			jetstream.WithPublishAsyncMaxPending(4096),
		)
		if err != nil {
			nc.Close()
			_ = g.Close()
			return fmt.Errorf("jetstream: %w", err)
		}
		var sp *spool.Spool
		if g.cfg.UsageSpoolDir != "" {
			if sp, err = spool.Open(g.cfg.UsageSpoolDir, spool.Options{MaxBytes: g.cfg.UsageSpoolMaxBytes}); err != nil {
				nc.Close()
				_ = g.Close()
				return err
			}
			if n, _ := sp.Stats(); n > 0 {
				g.log.Info().Int64("events", n).Str("dir", g.cfg.UsageSpoolDir).Msg("usage spool: sending the events a previous run left")
			}
		}
		// Within the component's own stop deadline; what a spool holds
		// past it is sent at the next start.
		flush := min(flushTimeout, g.cfg.ShutdownTimeout*4/5)
		pub := publish.New(nc.Conn, js, g.log, publish.Metrics{Published: g.metrics.published, Failures: g.metrics.pubFailures}, publish.Options{Spool: sp})
		g.sink = pub
		g.nats.Store(nc)
		g.pub.Store(pub)
		comps = append(comps,
			wait("nats", func() error { return nc.Drain(flush) }),
			wait("event publisher", func() error {
				fctx, cancel := context.WithTimeout(context.Background(), flush)
				defer cancel()
				if err := pub.Close(fctx); err != nil {
					g.log.Warn().Err(err).Msg("events still unsent at shutdown")
				}
				return nil
			}),
		)
	}
	g.conn.Connect()
	comps = append(comps, wait("router client", func() error {
		g.transport.CloseIdleConnections()
		return g.conn.Close()
	}), lifecycle.Component{Name: "endpoint health", Run: g.watchHealth})
	if g.redis != nil {
		comps = append(comps, lifecycle.Component{Name: "redis", Run: func(ctx context.Context) error {
			defer g.closeRedis()
			return g.redisWatch.Run(ctx)
		}})
	}
	if g.jwt != nil {
		comps = append(comps, lifecycle.Component{Name: "jwks", Run: g.jwt.Run})
	}
	if g.flow != nil {
		comps = append(comps, lifecycle.Component{Name: "flow control", Run: func(ctx context.Context) error {
			g.flow.Run(ctx, g.cfg.Flow.RetryInterval)
			return nil
		}})
	}
	if g.catalog != nil {
		comps = append(comps, lifecycle.Component{Name: "policy watch", Run: func(ctx context.Context) error {
			defer g.catalog.conn.Close()
			return g.catalog.run(ctx)
		}})
	}
	// The HTTP server's Close at the deadline does not wait for handlers;
	// a cut request still records its usage when its handler returns.
	comps = append(comps, wait("cut requests", func() error {
		deadline := time.Now().Add(handlerGrace)
		for (g.inflight.Load() > 0 || g.settling.Load() > 0) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		return nil
	}))
	g.log.Info().Str("router", g.cfg.RouterAddr).Msg("gateway starting")
	return lifecycle.Run(ctx, lifecycle.Service{
		Name:            "gateway",
		Log:             g.log,
		API:             g.api,
		Components:      comps,
		DrainDelay:      g.cfg.DrainDelay,
		ShutdownTimeout: g.cfg.ShutdownTimeout,
	})
}

// usageAckTimeout is how long a usage publish waits for its ack before it
// is sent again; tests shorten it.
var usageAckTimeout = publish.AckTimeout

// newTransport is the one client transport all upstream calls share, sized
// for many concurrent long-lived streams to a handful of workers.
func newTransport() *http.Transport {
	return &http.Transport{
		// Upstreams are in-cluster workers; never send them via a proxy
		// picked up from the environment.
		Proxy: nil,
		DialContext: (&net.Dialer{
			Timeout:   5 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		// Bytes are relayed as they come; transparent gzip would hide the
		// SSE framing and the usage object.
		DisableCompression: true,
		WriteBufferSize:    32 << 10,
		ReadBufferSize:     32 << 10,
	}
}

// checks are the gateway's dependencies for /readyz: a router replica is
// required (nothing is served without one); NATS, the usage stream and
// policyd are optional (requests are served meanwhile; usage events wait
// in the publisher, providers keep their last credentials).
func (g *Gateway) checks() []lifecycle.Check {
	cs := []lifecycle.Check{{Name: "router", Required: true, Probe: g.routerUp}}
	if g.cfg.NATS.URL != "" {
		cs = append(cs,
			lifecycle.Check{Name: "nats", Probe: func() error {
				if err := g.nats.Load().Probe(); err != nil {
					return fmt.Errorf("%w; usage events and route completions wait%s", err, g.held())
				}
				return nil
			}},
			lifecycle.Check{Name: "usage-stream", Probe: func() error {
				pub := g.pub.Load()
				if pub == nil {
					return errors.New("not made yet")
				}
				if err := pub.StreamErr(); err != nil {
					return fmt.Errorf("%w%s", err, g.held())
				}
				return nil
			}},
		)
	}
	if g.redis != nil {
		cs = append(cs, lifecycle.Check{Name: "redis", Probe: func() error {
			if err := g.redisWatch.Probe(); err != nil {
				return fmt.Errorf("%w; rate limits %s", err, map[ratelimit.DownMode]string{
					ratelimit.DownOpen:   "enforced per replica (limit / --ratelimit-replicas)",
					ratelimit.DownClosed: "cannot be checked: limited tenants' requests are refused",
				}[g.cfg.RateLimit.RedisDown])
			}
			return nil
		}})
	}
	if g.catalog != nil && (g.admit.Authenticates(string(v1alpha1.AuthAPIKey)) || g.admit.Authenticates(string(v1alpha1.AuthJWT))) {
		// Until the GatewayBackend arrives, whether requests need keys or
		// tokens is unknown and the apikey and jwt steps refuse them all
		// (503): not ready, so load balancers send none. Once received it
		// stays, through policyd outages, as the last snapshot does.
		cs = append(cs, lifecycle.Check{Name: "policy", Required: true, Probe: func() error {
			if g.catalog.program() == nil {
				return fmt.Errorf("no GatewayBackend %q from policyd yet: whether requests need API keys or JWTs is unknown, so they are refused", g.cfg.GatewayBackend)
			}
			return nil
		}})
	}
	if g.jwt != nil {
		// Optional: API keys, and requests of a GatewayBackend without
		// JWTs, are served meanwhile; tokens get a 503 until the keys come.
		cs = append(cs, lifecycle.Check{Name: "jwks", Probe: g.jwt.Probe})
	}
	if g.catalog != nil {
		cs = append(cs, lifecycle.Check{Name: "policyd", Probe: func() error {
			if st := g.catalog.conn.GetState(); st != connectivity.Ready {
				return fmt.Errorf("connection %s; serving with the last policy snapshot received", strings.ToLower(st.String()))
			}
			return nil
		}})
	}
	return cs
}

func (g *Gateway) held() string {
	if pub := g.pub.Load(); pub != nil {
		if n := pub.Held(); n > 0 {
			return fmt.Sprintf(" (%d events held)", n)
		}
	}
	return ""
}

// routerUp is "a router replica is connected and healthy".
func (g *Gateway) routerUp() error {
	st := g.conn.GetState()
	if st == connectivity.Idle {
		g.conn.Connect()
	}
	if st != connectivity.Ready {
		return fmt.Errorf("no router replica ready (connection %s)", strings.ToLower(st.String()))
	}
	return nil
}

// startRateLimit starts the chain's ratelimit step, if it has one: its
// Redis client (connected lazily: an unreachable Redis is the limiter's
// DownMode, not a failure to start), its limiter and its limits.
func (g *Gateway) startRateLimit(reg prometheus.Registerer) error {
	for _, s := range g.admit {
		if st, ok := s.(*ratelimit.Step); ok {
			g.ratelimit = st
		}
	}
	if g.ratelimit == nil {
		return nil
	}
	limits, err := ratelimit.LoadLimitsFile(g.cfg.RateLimit.LimitsFile)
	if err != nil {
		return fmt.Errorf("gateway config: %w", err)
	}
	if g.redis, err = lifecycle.OpenRedis(g.cfg.Redis); err != nil {
		return fmt.Errorf("gateway config: %w", err)
	}
	g.redisWatch = lifecycle.WatchRedis(g.redis)
	rc := g.cfg.RateLimit
	lim := ratelimit.NewLimiter(g.redis, ratelimit.Options{
		Prefix: rateLimitPrefix, Down: rc.RedisDown, Replicas: rc.Replicas, Timeout: rc.RedisTimeout,
		Registerer: reg, Log: g.log.With().Str("component", "ratelimit").Logger(),
	})
	g.ratelimit.Start(lim, rc, limits)
	g.log.Info().Int("tenants_limited", len(limits)).Str("redis_down", string(rc.RedisDown)).Msg("rate limits loaded")
	return nil
}

// loadJWT configures the jwt step, when the chain has one, and loads its
// JWKS.
func (g *Gateway) loadJWT() error {
	for _, s := range g.admit {
		if st, ok := s.(*jwt.Step); ok {
			g.jwt = st
		}
	}
	if g.jwt == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.jwt.Load(ctx, g.cfg.JWT); err != nil {
		return fmt.Errorf("gateway config: %w", err)
	}
	return nil
}

// rateLimitPrefix starts the rate-limit keys; empty is rediskeys'. Tests
// give each gateway its own.
var rateLimitPrefix string

func (g *Gateway) closeRedis() {
	if g.redis != nil {
		_ = g.redis.Close()
	}
}
