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
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/fleet"
	"github.com/switchyard-dev/switchyard/internal/fleet/policysource"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
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
	// pubWarn is sampled: while the stream is missing every delta fails.
	pubWarn zerolog.Logger
	// source supplies the fleet: the static workers (fleet.Static), or
	// with policyd those followed by its catalog.
	source fleet.Source
	// policyConn is the client connection to policyd, nil without.
	policyConn *grpc.ClientConn
	metrics    *metrics
	api        *lifecycle.API
	// httpClient reads the workers' metrics for their start time.
	httpClient *http.Client
	bound      *kvzmq.Subscriber // nil without --bind

	serving atomic.Bool // first lease round done
	nc      atomic.Pointer[lifecycle.NATSConn]
	redis   atomic.Pointer[lifecycle.RedisWatch]
	epochs  epochClock
	jst     jsState

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
		pubWarn:   log.Sample(&zerolog.BurstSampler{Burst: 5, Period: 10 * time.Second}),
		source:    fleet.Static(static),
		metrics:   newMetrics(),
		leaseTick: time.Second,
		// Workers are in-cluster: never through a proxy from the environment.
		httpClient: &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1, IdleConnTimeout: time.Minute}},
		wanted:     map[string]fleet.Worker{},
		runs:       map[string]*run{},
	}
	t.routing.Store(&routing{})
	if t.api, err = lifecycle.NewAPI(lifecycle.APIConfig{HTTPAddr: cfg.HTTPAddr, Metrics: t.metrics.reg, Checks: t.checks()}); err != nil {
		return nil, err
	}
	if cfg.Bind != "" {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		t.bound, err = kvzmq.ListenSubscriber(ctx, cfg.Bind, "", kvzmq.WithLogger(log))
		if err != nil {
			_ = t.api.Close()
			return nil, err
		}
	}
	if cfg.PolicydAddr != "" {
		// grpc.NewClient does not dial: policyd may start after the
		// tracker, and the watcher keeps retrying.
		opts, err := cfg.Policyd.DialOptions("policyd")
		if err != nil {
			return nil, fmt.Errorf("kvtracker config: %w", err)
		}
		t.policyConn, err = grpc.NewClient(cfg.PolicydAddr, opts...)
		if err != nil {
			_ = t.api.Close()
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
func (t *Tracker) HTTPAddr() string { return t.api.HTTPAddr() }

// BindEndpoint is the bound SUB socket's endpoint workers connect to, ""
// without --bind.
func (t *Tracker) BindEndpoint() string {
	if t.bound == nil {
		return ""
	}
	return t.bound.Endpoint()
}

// checks are the tracker's readiness: ready once it is connected to NATS,
// its stream and lease bucket are there, and it takes part in the lease
// round. The workers whose KV event stream does not flow are named, not
// required: an idle worker is silent too, and a tracker that cannot reach
// one worker still serves the others.
func (t *Tracker) checks() []lifecycle.Check {
	cs := []lifecycle.Check{
		{Name: "nats", Required: true, Probe: func() error { return t.nc.Load().Probe() }},
		{Name: "jetstream", Required: true, Probe: t.probeJetStream},
		{Name: "leases", Required: true, Probe: t.probeLeases},
		{Name: "kv-events", Probe: t.probeKVEvents},
	}
	if t.cfg.Redis.URL != "" {
		// Optional: without Redis the deltas still reach the routers over
		// NATS; what is lost is the snapshot a router starting meanwhile
		// would begin from.
		cs = append(cs, lifecycle.Check{Name: "redis", Probe: func() error {
			if err := t.redis.Load().Probe(); err != nil {
				return fmt.Errorf("%w; snapshots for starting routers not stored", err)
			}
			return nil
		}})
	}
	return cs
}

// deps are the connections Serve opens.
type deps struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	leases *lease.Manager
	rdb    *redis.Client // nil without Redis
}

// Serve runs the tracker until ctx ends, then stops the lifecycle's way:
// not ready, the drain delay, HTTP closed, then the parts in reverse order
// of their start: every pipeline stopped and its deltas flushed and the
// leases released (so other replicas take over at once), the bound
// socket, the fleet source, and last the connections (NATS drained). NATS
// being down at start is ridden out: the tracker waits for it. It returns
// nil after a clean stop.
func (t *Tracker) Serve(ctx context.Context) error {
	nc, err := lifecycle.DialNATS(t.cfg.NATS, "switchyard-kvtracker/"+t.cfg.ReplicaID, t.log)
	if err != nil {
		t.release()
		return err
	}
	t.nc.Store(nc)
	var rdb *redis.Client
	if t.cfg.Redis.URL == "" {
		t.log.Warn().Msg("redis disabled: no snapshots or summaries in redis, routers cannot start mid-stream")
	} else if rdb, err = lifecycle.OpenRedis(t.cfg.Redis); err != nil {
		nc.Close()
		t.release()
		return err
	}
	comps := []lifecycle.Component{{Name: "nats", Run: func(ctx context.Context) error {
		<-ctx.Done()
		return nc.Drain(t.cfg.ShutdownTimeout)
	}}}
	if rdb != nil {
		comps = append(comps, lifecycle.Component{Name: "redis", Run: func(ctx context.Context) error {
			<-ctx.Done()
			return rdb.Close()
		}})
		w := lifecycle.WatchRedis(rdb)
		t.redis.Store(w)
		comps = append(comps, lifecycle.Component{Name: "redis watch", Run: w.Run})
	}
	if t.policyConn != nil {
		comps = append(comps, lifecycle.Component{Name: "policyd client", Run: func(ctx context.Context) error {
			<-ctx.Done()
			return t.policyConn.Close()
		}})
	}
	comps = append(comps, lifecycle.Component{Name: "fleet source", Run: func(ctx context.Context) error {
		return t.source.Watch(ctx, t.setWorkers)
	}})
	if t.bound != nil {
		comps = append(comps, lifecycle.Component{Name: "bound socket", Run: func(ctx context.Context) error {
			t.dispatch(ctx)
			return t.bound.Close()
		}})
	}
	comps = append(comps, lifecycle.Component{Name: "pipelines", Run: func(ctx context.Context) error {
		d, err := t.setup(ctx, nc.Conn, rdb)
		if err != nil {
			return nil // ctx ended while waiting for NATS
		}
		t.leaseLoop(ctx, d)
		return nil
	}})
	return lifecycle.Run(ctx, lifecycle.Service{
		Name:            "kvtracker",
		Log:             t.log.With().Str("bind", t.BindEndpoint()).Logger(),
		API:             t.api,
		Components:      comps,
		DrainDelay:      t.cfg.DrainDelay,
		ShutdownTimeout: t.cfg.ShutdownTimeout,
	})
}

// release frees what New acquired, for a Serve that cannot start.
func (t *Tracker) release() {
	_ = t.api.Close()
	if t.bound != nil {
		_ = t.bound.Close()
	}
	if t.policyConn != nil {
		_ = t.policyConn.Close()
	}
}

// setup creates what the pipelines need in JetStream (the KV stream, the
// lease bucket), retrying until NATS answers or ctx ends: a tracker started
// during a NATS outage waits for it instead of exiting.
func (t *Tracker) setup(ctx context.Context, nc *nats.Conn, rdb *redis.Client) (*deps, error) {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(maxPendingAcks),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) {
			t.onAsyncPublishError(m.Subject, err)
		}))
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	wait := time.Second
	for {
		sctx, cancel := context.WithTimeout(ctx, setupTimeout)
		err = bus.EnsureKVStream(sctx, js)
		var leases *lease.Manager
		if err == nil {
			leases, err = lease.Open(sctx, js, t.cfg.ReplicaID)
		}
		cancel()
		t.jst.mu.Lock()
		t.jst.ensureErr, t.jst.setUp = err, err == nil
		t.jst.mu.Unlock()
		if err == nil {
			t.jst.reconnects.Store(nc.Stats().Reconnects)
			if rdb != nil {
				pctx, cancel := context.WithTimeout(ctx, time.Second)
				if err := rdb.Ping(pctx).Err(); err != nil {
					// Redis may come later; snapshots are retried every interval.
					t.log.Warn().Err(err).Msg("redis not reachable yet")
				}
				cancel()
			}
			return &deps{nc: nc, js: js, leases: leases, rdb: rdb}, nil
		}
		t.log.Warn().Err(err).Dur("retry_in", wait).Msg("kv stream and lease bucket not ready: waiting for nats jetstream")
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 10*time.Second)
	}
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
