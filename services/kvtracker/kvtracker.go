// Package kvtracker is the Switchyard kvtracker service: it ingests each
// vLLM worker's KV cache events over ZMQ, re-keys the blocks to
// Switchyard's own chained hashes (internal/kvblock), and publishes what
// changed as KVBlockDelta messages on JetStream, with periodic snapshots
// and summaries in Redis (and summaries on NATS), so routers can keep a
// replica of every worker's prefix cache.
//
// Replicas split the workers with leases in NATS KV; each leased worker
// runs one ordered pipeline (services/kvtracker/internal/ingest) that
// checks sequence numbers, replays gaps from the worker's replay socket,
// and starts a new epoch when the worker restarts or a gap cannot be
// recovered.
package kvtracker

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/configcheck"
	"github.com/switchyard-dev/switchyard/internal/fleet"
	"github.com/switchyard-dev/switchyard/internal/fleet/policysource"
	"github.com/switchyard-dev/switchyard/internal/serve"
	"github.com/switchyard-dev/switchyard/internal/vllm/kvzmq"
	policyv1 "github.com/switchyard-dev/switchyard/proto/switchyard/policy/v1"
	"github.com/switchyard-dev/switchyard/services/kvtracker/internal/lease"
)

// setupTimeout bounds connecting to NATS and creating the stream and the
// lease bucket at start.
const setupTimeout = 10 * time.Second

// Tracker is one kvtracker replica. New binds its listeners; Serve runs it.
type Tracker struct {
	cfg Config
	log zerolog.Logger
	// source supplies the fleet: the static workers (fleet.Static), or
	// with policyd those followed by its catalog.
	source fleet.Source
	// policyConn is the client connection to policyd, nil without.
	policyConn *grpc.ClientConn
	metrics    *metrics
	httpSrv    *http.Server
	httpLn     net.Listener
	bound      *kvzmq.Subscriber // nil without --bind

	serving  atomic.Bool // first lease round done
	stopping atomic.Bool
	nc       atomic.Pointer[nats.Conn]
	epochs   epochClock

	// Test hooks, set before Serve.
	dropMessage func(worker string, seq uint64) bool // drop a live message before the sequence check
	skipRelease atomic.Bool                          // stop like a killed replica: leases left to expire
	leaseTick   time.Duration

	mu      sync.Mutex
	wanted  map[string]fleet.Worker // by lease key
	runs    map[string]*run         // by lease key; written by the lease loop only
	routing atomic.Pointer[routing] // for the bound socket's dispatcher
}

// New validates cfg, binds the HTTP listener (and the --bind socket) and
// builds the tracker. Call Serve to run it.
func New(cfg Config, log zerolog.Logger) (*Tracker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("kvtracker config: %w", err)
	}
	static, err := cfg.staticCatalog()
	if err != nil {
		return nil, fmt.Errorf("kvtracker config: %w", err)
	}
	log = log.With().Str("component", "kvtracker").Str("replica_id", cfg.ReplicaID).Logger()
	t := &Tracker{
		cfg:       cfg,
		log:       log,
		source:    fleet.Static(static),
		metrics:   newMetrics(),
		leaseTick: time.Second,
		wanted:    map[string]fleet.Worker{},
		runs:      map[string]*run{},
	}
	t.routing.Store(&routing{})
	t.httpSrv = &http.Server{Handler: t.httpHandler(), ReadHeaderTimeout: 5 * time.Second}
	if t.httpLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		return nil, fmt.Errorf("listen http %s: %w", cfg.HTTPAddr, err)
	}
	if cfg.Bind != "" {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		t.bound, err = kvzmq.ListenSubscriber(ctx, cfg.Bind, "", kvzmq.WithLogger(log))
		if err != nil {
			t.httpLn.Close()
			return nil, err
		}
	}
	if cfg.PolicydAddr != "" {
		// grpc.NewClient does not dial: policyd may start after the
		// tracker, and the watcher keeps retrying.
		t.policyConn, err = grpc.NewClient(cfg.PolicydAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.httpLn.Close()
			if t.bound != nil {
				t.bound.Close()
			}
			return nil, fmt.Errorf("policyd client %s: %w", cfg.PolicydAddr, err)
		}
		t.source = policysource.New(policyv1.NewPolicyServiceClient(t.policyConn), policysource.Options{Static: static, Log: log})
	}
	return t, nil
}

// HTTPAddr is the bound HTTP address (useful with port 0).
func (t *Tracker) HTTPAddr() string { return t.httpLn.Addr().String() }

// BindEndpoint is the bound SUB socket's endpoint workers connect to, ""
// without --bind.
func (t *Tracker) BindEndpoint() string {
	if t.bound == nil {
		return ""
	}
	return t.bound.Endpoint()
}

func (t *Tracker) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(t.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		nc := t.nc.Load()
		switch {
		case t.stopping.Load():
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
		case nc == nil || !nc.IsConnected():
			http.Error(w, "nats not connected", http.StatusServiceUnavailable)
		case !t.serving.Load():
			http.Error(w, "first lease round not done", http.StatusServiceUnavailable)
		default:
			_, _ = w.Write([]byte("ok\n"))
		}
	})
	return mux
}

// deps are the connections Serve opens.
type deps struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	leases *lease.Manager
	rdb    *redis.Client // nil without Redis
}

// Serve runs the tracker until ctx ends, then shuts down: not ready, every
// pipeline stopped and its deltas flushed, leases released (so other
// replicas take over at once), HTTP closed, NATS drained, Redis closed. It
// returns nil after a clean shutdown.
func (t *Tracker) Serve(ctx context.Context) error {
	defer t.httpLn.Close()
	if t.bound != nil {
		defer t.bound.Close()
	}
	if t.policyConn != nil {
		defer t.policyConn.Close()
	}
	d, err := t.connect(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err := d.nc.Drain(); err != nil {
			t.log.Warn().Err(err).Msg("nats drain")
		}
		if d.rdb != nil {
			_ = d.rdb.Close()
		}
	}()

	g, gctx := errgroup.WithContext(ctx)
	loopDone := make(chan struct{})
	g.Go(func() error { return serve.HTTP(t.httpSrv, t.httpLn) })
	g.Go(func() error { return t.source.Watch(gctx, t.setWorkers) })
	if t.bound != nil {
		g.Go(func() error {
			t.dispatch(gctx)
			return nil
		})
	}
	g.Go(func() error {
		defer close(loopDone)
		t.leaseLoop(gctx, d)
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		t.stopping.Store(true)
		<-loopDone
		sctx, cancel := context.WithTimeout(context.Background(), t.cfg.ShutdownTimeout)
		defer cancel()
		if err := t.httpSrv.Shutdown(sctx); err != nil {
			_ = t.httpSrv.Close()
		}
		return nil
	})
	t.log.Info().Str("http_addr", t.HTTPAddr()).Str("bind", t.BindEndpoint()).Msg("kvtracker serving")
	err = g.Wait()
	t.log.Info().Msg("kvtracker stopped")
	return err
}

func (t *Tracker) connect(ctx context.Context) (*deps, error) {
	nc, err := nats.Connect(t.cfg.NATSURL,
		nats.Name("switchyard-kvtracker/"+t.cfg.ReplicaID),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500*time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil: our own Close at shutdown
				t.log.Warn().Err(err).Msg("nats disconnected")
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) { t.log.Info().Msg("nats reconnected") }),
	)
	if err != nil {
		return nil, fmt.Errorf("connect nats %s: %w", configcheck.Redact(t.cfg.NATSURL), err)
	}
	sctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(maxPendingAcks),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) {
			t.onAsyncPublishError(m.Subject, err)
		}))
	if err == nil {
		err = bus.EnsureKVStream(sctx, js)
	}
	var leases *lease.Manager
	if err == nil {
		leases, err = lease.Open(sctx, js, t.cfg.ReplicaID)
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	t.nc.Store(nc)
	d := &deps{nc: nc, js: js, leases: leases}
	if t.cfg.RedisURL == "" {
		t.log.Warn().Msg("redis disabled: no snapshots or summaries in redis, routers cannot start mid-stream")
		return d, nil
	}
	opt, err := redis.ParseURL(t.cfg.RedisURL)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("redis url %s: %w", configcheck.Redact(t.cfg.RedisURL), err)
	}
	d.rdb = redis.NewClient(opt)
	if err := d.rdb.Ping(sctx).Err(); err != nil {
		// Redis may come later; snapshots are retried every interval.
		t.log.Warn().Err(err).Msg("redis not reachable yet")
	}
	return d, nil
}

// setWorkers takes a new catalog from the source; the lease loop acts on
// the workers it tracks.
func (t *Tracker) setWorkers(c fleet.Catalog) {
	specs, problems := tracked(c, t.bound != nil)
	for _, err := range problems {
		t.log.Warn().Err(err).Msg("worker left out")
	}
	wanted := make(map[string]fleet.Worker, len(specs))
	for _, s := range specs {
		wanted[bus.KVLeaseKey(s.Pool, s.ID)] = s
	}
	t.mu.Lock()
	t.wanted = wanted
	t.mu.Unlock()
	t.metrics.workers.Set(float64(len(specs)))
	t.updateRouting()
	t.log.Info().Int("workers", len(specs)).Msg("worker set updated")
}

// Run builds and serves a kvtracker until ctx ends.
func Run(ctx context.Context, cfg Config, log zerolog.Logger) error {
	t, err := New(cfg, log)
	if err != nil {
		return err
	}
	return t.Serve(ctx)
}

// epochClock hands out epochs: nanoseconds since 1970, strictly
// increasing, so a replica taking a worker over starts a larger epoch than
// the one before it (given clocks within the takeover delay of each other).
type epochClock struct{ last atomic.Uint64 }

func (c *epochClock) next(floor uint64) uint64 {
	for {
		prev := c.last.Load()
		n := max(uint64(time.Now().UnixNano()), prev+1, floor)
		if c.last.CompareAndSwap(prev, n) {
			return n
		}
	}
}
