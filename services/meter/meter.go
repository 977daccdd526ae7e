// Package meter counts usage: it consumes the gateways' usage events from
// JetStream, counts each request exactly once into per-tenant rollups in
// Redis (minute, hour, UTC day; package usage), exports per-tenant metrics
// (OpenTelemetry GenAI names, metrics.go), republishes each tenant's
// requests and minute summaries on subjects of its own (bus.Tenant*), and
// answers usage queries (GET /v1/usage, which yardctl usage calls).
//
// # Exactly once
//
// JetStream delivers at least once: an event whose ack does not arrive
// within --ack-wait (a meter killed mid-batch, a lost ack) is delivered
// again, to any replica; and a gateway re-sends an event whose publish
// ack it missed, which the stream stores once only inside its duplicate
// window. So counting must be idempotent, and it is made so in one place:
// a Lua script (count.lua) that, for each event of a batch, adds its
// request id to the set of ids counted in its hour (rediskeys.UsageSeen)
// and adds the event to the rollups only if the id was new. The script is
// atomic: the rollups and the ids move together or not at all, so there
// is no instant at which an event is marked counted but not counted, or
// counted but not marked. Only then is the batch acked. A meter killed
// anywhere loses nothing (the unacked events come again) and counts
// nothing twice (they are found in the sets). The metrics and the tenant
// feeds follow the script's answer: only events it counted now are
// observed and republished (so the feed is at most once: an event whose
// republish a crash cut short is not republished).
//
// The id sets live for --dedup-window past their hour; a copy arriving
// later than that would be counted again. Redelivery happens within
// --ack-wait, a gateway's re-send within seconds, so the default hour is
// ample.
//
// # Scale
//
// Replicas share one durable pull consumer (bus.DurableMeter): JetStream
// hands each batch to one of them. A batch is grouped by tenant (each
// tenant's keys share a Redis Cluster slot) and each group is one script
// call, which sums the batch's events per field before writing: a batch
// of 512 events costs 512 set additions and a few dozen hash increments.
// Label values, and the rollups' models, are bounded (labels.go).
package meter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/configcheck"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/internal/policy/watch"
	policyv1 "github.com/switchyard-dev/switchyard/proto/switchyard/policy/v1"
)

// Meter is one meter replica. New binds its listener; Serve runs it.
type Meter struct {
	cfg     Config
	log     zerolog.Logger
	metrics *metrics
	labels  *labels
	api     *lifecycle.API
	auth    *operatorAuth

	policyConn *grpc.ClientConn // nil without --policyd-addr
	policy     *watch.Watcher

	nc       atomic.Pointer[lifecycle.NATSConn]
	redis    atomic.Pointer[lifecycle.RedisWatch]
	rdb      atomic.Pointer[redis.Client]
	consumer atomic.Pointer[error] // nil once the consumer exists

	// Test hooks, set before Serve. beforeAck is called after a batch is
	// counted; false leaves it unacked, as a meter killed then would.
	beforeAck func([]jetstream.Msg) bool
}

// New validates cfg, binds the HTTP listener and builds the meter.
func New(cfg Config, log zerolog.Logger) (*Meter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("meter config: %w", err)
	}
	log = log.With().Str("component", "meter").Str("replica_id", cfg.ReplicaID).Logger()
	m := &Meter{cfg: cfg, log: log, metrics: newMetrics(), labels: newLabels(cfg.Tenants, cfg.Models)}
	notYet := errors.New("not made yet: waiting for nats")
	m.consumer.Store(&notYet)
	var err error
	if m.auth, err = newOperatorAuth(cfg.OperatorTokenFile, cfg.HTTPAddr); err != nil {
		return nil, fmt.Errorf("meter config: %w", err)
	}
	if m.api, err = lifecycle.NewAPI(lifecycle.APIConfig{HTTPAddr: cfg.HTTPAddr, Metrics: m.metrics.reg, Checks: m.checks()}); err != nil {
		return nil, err
	}
	m.api.Mux.Handle("GET /v1/usage", m.auth.wrap(m.usageHandler()))
	if cfg.PolicydAddr != "" {
		opts, err := cfg.Policyd.DialOptions("policyd")
		if err != nil {
			_ = m.api.Close()
			return nil, fmt.Errorf("meter config: %w", err)
		}
		if m.policyConn, err = grpc.NewClient(cfg.PolicydAddr, opts...); err != nil {
			_ = m.api.Close()
			return nil, fmt.Errorf("policyd client %s: %w", cfg.PolicydAddr, err)
		}
		m.policy = watch.New(policyv1.NewPolicyServiceClient(m.policyConn), log, watch.Options{OnUpdate: func(c watch.Current) {
			m.labels.update(c.Snapshot)
		}})
	}
	if !m.auth.configured() && !configcheck.Loopback(cfg.HTTPAddr) {
		log.Warn().Str("http_addr", cfg.HTTPAddr).Msg("the usage API is refused: it listens beyond loopback without --operator-token-file")
	}
	return m, nil
}

// HTTPAddr is the bound HTTP address (useful with port 0).
func (m *Meter) HTTPAddr() string { return m.api.HTTPAddr() }

// checks: the meter counts only with NATS, its consumer and Redis; policyd
// only names label values (without it, the static ones and "other").
func (m *Meter) checks() []lifecycle.Check {
	cs := []lifecycle.Check{
		{Name: "nats", Required: true, Probe: func() error { return m.nc.Load().Probe() }},
		{Name: "consumer", Required: true, Probe: func() error {
			if e := m.consumer.Load(); e != nil {
				return *e
			}
			return nil
		}},
		{Name: "redis", Required: true, Probe: func() error { return m.redis.Load().Probe() }},
	}
	if m.cfg.PolicydAddr != "" {
		cs = append(cs, lifecycle.Check{Name: "policyd", Probe: func() error {
			if !m.policy.Connected() {
				return errors.New("not connected: label values are the last snapshot's, or the static ones")
			}
			return nil
		}})
	}
	return cs
}

// Serve runs the meter until ctx ends, then stops the lifecycle's way:
// not ready, the drain delay, HTTP closed, then the consumer (the batch in
// hand is counted and acked, or left unacked for redelivery), the
// summaries, policyd's watch and last the connections. NATS or Redis down
// at start is ridden out: the meter waits for them.
func (m *Meter) Serve(ctx context.Context) error {
	nc, err := lifecycle.DialNATS(m.cfg.NATS, "switchyard-meter/"+m.cfg.ReplicaID, m.log)
	if err != nil {
		m.release()
		return err
	}
	m.nc.Store(nc)
	rdb, err := lifecycle.OpenRedis(m.cfg.Redis)
	if err != nil {
		nc.Close()
		m.release()
		return err
	}
	m.rdb.Store(rdb)
	rw := lifecycle.WatchRedis(rdb)
	m.redis.Store(rw)
	comps := []lifecycle.Component{
		{Name: "nats", Run: func(ctx context.Context) error {
			<-ctx.Done()
			return nc.Drain(m.cfg.ShutdownTimeout)
		}},
		{Name: "redis", Run: func(ctx context.Context) error {
			<-ctx.Done()
			return rdb.Close()
		}},
		{Name: "redis watch", Run: rw.Run},
	}
	if m.policy != nil {
		comps = append(comps,
			lifecycle.Component{Name: "policyd client", Run: func(ctx context.Context) error {
				<-ctx.Done()
				return m.policyConn.Close()
			}},
			lifecycle.Component{Name: "policyd watch", Run: m.policy.Run})
	}
	if m.cfg.SummaryDelay > 0 {
		comps = append(comps, lifecycle.Component{Name: "summaries", Run: func(ctx context.Context) error {
			m.summaries(ctx, nc.Conn, rdb)
			return nil
		}})
	}
	comps = append(comps, lifecycle.Component{Name: "consumer", Run: func(ctx context.Context) error {
		m.consume(ctx, nc.Conn, rdb)
		return nil
	}})
	return lifecycle.Run(ctx, lifecycle.Service{
		Name:            "meter",
		Log:             m.log,
		API:             m.api,
		Components:      comps,
		DrainDelay:      m.cfg.DrainDelay,
		ShutdownTimeout: m.cfg.ShutdownTimeout,
	})
}

// Run is the service adapter's entry point: a process of its own, so it
// also sets the process's collector (tuneGC).
func Run(ctx context.Context, cfg Config, log zerolog.Logger) error {
	tuneGC()
	m, err := New(cfg, log)
	if err != nil {
		return err
	}
	return m.Serve(ctx)
}

// gcPercent is the meter process's GOGC unless the environment sets one.
// Its live heap is a few batches of events, a few megabytes, and garbage
// collection took a tenth of its CPU at the default 100; 400 halves that
// for tens of megabytes more.
const gcPercent = 400

// tuneGC sets GOGC to gcPercent unless the environment chose one.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
}

func (m *Meter) release() {
	_ = m.api.Close()
	if m.policyConn != nil {
		_ = m.policyConn.Close()
	}
}

// consumerConfig is the meter's durable consumer on the usage stream.
func (m *Meter) consumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       bus.DurableMeter,
		Description:   "Switchyard meter: counts each usage event once",
		FilterSubject: bus.UsageSubjectAll,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       m.cfg.AckWait,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxAckPending: max(20_000, 4*m.cfg.Batch),
		MaxWaiting:    512,
	}
}

// ensureConsumer makes the usage stream and the consumer, retrying until
// NATS answers or ctx ends.
func (m *Meter) ensureConsumer(ctx context.Context, js jetstream.JetStream) (jetstream.Consumer, error) {
	backoff := 100 * time.Millisecond
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := bus.EnsureUsageStream(cctx, js)
		var cons jetstream.Consumer
		if err == nil {
			cons, err = js.CreateOrUpdateConsumer(cctx, bus.StreamUsage, m.consumerConfig())
		}
		cancel()
		if err == nil {
			m.consumer.Store(nil)
			return cons, nil
		}
		m.consumer.Store(&err)
		m.log.Warn().Err(err).Msg("usage consumer not ready; retrying")
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}
