// Package gateway is Switchyard's HTTP front door: it speaks the OpenAI API,
// asks the router where each request should go, proxies and streams the
// answer, retries once before the first byte, measures TTFT, inter-token
// latency and tokens, and publishes one usage event per request.
//
// This is the walking-skeleton version: one tenant ("default"), no auth, no
// rate limits, no Anthropic API (its clients get errors they can parse),
// local vLLM targets only (no provider credentials; the client's
// Authorization header is not forwarded).
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
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/upstream"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/gateway/admission"
	"github.com/switchyard-dev/switchyard/services/gateway/admission/defaulttenant"
	"github.com/switchyard-dev/switchyard/services/gateway/internal/apibody"
	"github.com/switchyard-dev/switchyard/services/gateway/internal/publish"

	"github.com/switchyard-dev/switchyard/internal/configcheck"

	"github.com/switchyard-dev/switchyard/internal/serve"
)

// Headers the gateway reads or writes.
const (
	RequestIDHeader = "X-Request-Id"
	// TagsHeader carries comma-separated routing tags, honoured only with
	// Config.AllowTagsHeader.
	TagsHeader = "X-Switchyard-Tags"
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
	ln        net.Listener
	srv       *http.Server
	conn      *grpc.ClientConn
	router    routeClient
	transport *http.Transport
	metrics   *metrics
	sink      eventSink
	// admit decides who is calling and whether they may (--admission).
	admit admission.Chain
	// upstreams speak to the targets, by their type.
	upstreams *upstream.Set
	// catalog follows policyd; nil without --policyd-addr (no providers).
	catalog *catalog

	inflight     atomic.Int64
	shuttingDown atomic.Bool
	started      atomic.Bool
}

// New checks cfg, prepares the router client (it connects lazily, in the
// background) and binds cfg.Addr, so Addr is known before Serve runs. Call
// Serve, or Close if Serve will never run.
func New(cfg Config, log zerolog.Logger) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gateway config: %w", err)
	}
	conn, err := grpc.NewClient(cfg.RouterAddr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// Router replicas are stateless; spread calls over all of them.
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`),
		// Readiness reports the channel state; an idle channel would flap
		// it between requests.
		grpc.WithIdleTimeout(0),
	)
	if err != nil {
		return nil, fmt.Errorf("router client %s: %w", cfg.RouterAddr, err)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("listen %s: %w", cfg.Addr, err)
	}
	g := &Gateway{
		cfg:       cfg,
		log:       log,
		ln:        ln,
		conn:      conn,
		router:    routerv1.NewRouterClient(conn),
		transport: newTransport(),
		sink:      discardSink{},
	}
	g.upstreams = upstream.NewSet(g.transport)
	if g.admit, err = admission.Build(cfg.Admission); err != nil {
		_ = ln.Close()
		_ = conn.Close()
		return nil, fmt.Errorf("gateway config: admission: %w", err)
	}
	if cfg.PolicydAddr != "" {
		g.catalog, err = newCatalog(cfg, log)
		if err != nil {
			_ = ln.Close()
			_ = conn.Close()
			return nil, err
		}
	}
	reg := prometheus.NewRegistry()
	g.metrics = newMetrics(reg, func() float64 { return float64(g.inflight.Load()) })

	mux := http.NewServeMux()
	mux.Handle("POST /v1/chat/completions", g.completions(apibody.Chat, "/v1/chat/completions"))
	mux.Handle("POST /v1/completions", g.completions(apibody.Completions, "/v1/completions"))
	mux.HandleFunc("GET /v1/models", g.models)
	mux.HandleFunc("GET /v1/models/{id...}", g.model)
	mux.HandleFunc("/v1/chat/completions", methodNotAllowed)
	mux.HandleFunc("/v1/completions", methodNotAllowed)
	mux.HandleFunc("/v1/models", methodNotAllowed)
	mux.HandleFunc("/v1/models/{id...}", methodNotAllowed)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", g.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/", notFound)

	g.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          stdlog.New(log.With().Str("component", "http").Logger(), "", 0),
	}
	return g, nil
}

// Addr is the address the gateway listens on (with the real port when
// Config.Addr asked for port 0).
func (g *Gateway) Addr() string { return g.ln.Addr().String() }

// Close releases what New acquired, for a Gateway whose Serve never ran.
func (g *Gateway) Close() error {
	if g.started.Load() {
		return errors.New("gateway: Close after Serve; cancel Serve's context instead")
	}
	err := errors.Join(g.ln.Close(), g.conn.Close())
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

// Serve connects to NATS (when configured), ensures the usage stream, and
// serves HTTP until ctx is cancelled; then it shuts down gracefully: not
// ready, stop accepting, let in-flight requests finish for up to
// Config.ShutdownTimeout, flush events, drain NATS. It returns nil after a
// clean shutdown.
func (g *Gateway) Serve(ctx context.Context) error {
	if !g.started.CompareAndSwap(false, true) {
		return errors.New("gateway: Serve called twice")
	}
	var nc *nats.Conn
	var pub *publish.Publisher
	natsClosed := make(chan struct{})
	if g.cfg.NATSURL == "" {
		g.log.Warn().Msg("nats url is empty: usage events and route completions are NOT published; nothing is metered and routers never see requests finish")
	} else {
		var err error
		nc, pub, err = g.connectNATS(ctx, natsClosed)
		if err != nil {
			_ = g.ln.Close()
			_ = g.conn.Close()
			return err
		}
		g.sink = pub
	}
	g.conn.Connect()
	g.log.Info().Str("addr", g.Addr()).Str("router", g.cfg.RouterAddr).Msg("gateway listening")

	eg, egctx := errgroup.WithContext(ctx)
	if g.catalog != nil {
		eg.Go(func() error {
			defer g.catalog.conn.Close()
			return g.catalog.run(egctx)
		})
	}
	eg.Go(func() error { return serve.HTTP(g.srv, g.ln) })
	eg.Go(func() error {
		<-egctx.Done()
		return g.shutdown(nc, pub, natsClosed)
	})
	return eg.Wait()
}

func (g *Gateway) connectNATS(ctx context.Context, closed chan struct{}) (*nats.Conn, *publish.Publisher, error) {
	redacted := configcheck.Redact(g.cfg.NATSURL)
	nc, err := nats.Connect(g.cfg.NATSURL,
		nats.Name("switchyard-gateway"),
		nats.MaxReconnects(-1),
		nats.DrainTimeout(flushTimeout),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil: our own drain at shutdown
				g.log.Warn().Err(err).Msg("nats disconnected")
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) { g.log.Info().Msg("nats reconnected") }),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("connect nats %s: %w", redacted, err)
	}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncTimeout(publish.AckTimeout),
		jetstream.WithPublishAsyncMaxPending(4096),
	)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream %s: %w", redacted, err)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := bus.EnsureUsageStream(sctx, js); err != nil {
		nc.Close()
		return nil, nil, err
	}
	pub := publish.New(nc, js, g.log, publish.Metrics{Published: g.metrics.published, Failures: g.metrics.pubFailures})
	g.log.Info().Str("nats", redacted).Msg("publishing usage events")
	return nc, pub, nil
}

func (g *Gateway) shutdown(nc *nats.Conn, pub *publish.Publisher, natsClosed chan struct{}) error {
	g.shuttingDown.Store(true)
	g.log.Info().Int64("inflight", g.inflight.Load()).Dur("timeout", g.cfg.ShutdownTimeout).Msg("gateway shutting down")
	var errs []error
	sctx, cancel := context.WithTimeout(context.Background(), g.cfg.ShutdownTimeout)
	defer cancel()
	if err := g.srv.Shutdown(sctx); err != nil {
		g.log.Warn().Int64("inflight", g.inflight.Load()).Msg("shutdown deadline reached, cutting remaining requests")
		_ = g.srv.Close()
	}
	// srv.Close does not wait for handlers; a cut request still publishes
	// its usage when its handler returns, so give them a moment.
	deadline := time.Now().Add(handlerGrace)
	for g.inflight.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if pub != nil {
		fctx, fcancel := context.WithTimeout(context.Background(), flushTimeout)
		if err := pub.Close(fctx); err != nil {
			g.log.Warn().Err(err).Msg("events still unsent at shutdown")
		}
		fcancel()
		if err := nc.Drain(); err != nil {
			errs = append(errs, fmt.Errorf("drain nats: %w", err))
		} else {
			select {
			case <-natsClosed:
			case <-time.After(2 * flushTimeout):
				nc.Close()
			}
		}
	}
	g.transport.CloseIdleConnections()
	if err := g.conn.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close router client: %w", err))
	}
	g.log.Info().Msg("gateway stopped")
	return errors.Join(errs...)
}

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

func (g *Gateway) readyz(w http.ResponseWriter, _ *http.Request) {
	if g.shuttingDown.Load() {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	st := g.conn.GetState()
	if st == connectivity.Idle {
		g.conn.Connect()
	}
	if st != connectivity.Ready {
		http.Error(w, "router connection "+st.String(), http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}
