// Package devenv runs the whole system in one process for `switchyard dev`
// and the end-to-end tests: an embedded NATS server (JetStream, its own
// port), simulated vLLM workers and providers, the router and the gateway
// — the same service packages the production binary runs, wired over real
// loopback connections. A catalog's Bedrock provider is served by a fake
// Bedrock runtime that checks SigV4 (bedrocktest), so that the gateway's
// real Bedrock adapter is what talks to it.
package devenv

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/natsembed"
	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/internal/sim"
	"github.com/switchyard-dev/switchyard/internal/upstream/bedrock/bedrocktest"
	"github.com/switchyard-dev/switchyard/services/gateway"
	"github.com/switchyard-dev/switchyard/services/gateway/flowcontrol"
	"github.com/switchyard-dev/switchyard/services/kvtracker"
	"github.com/switchyard-dev/switchyard/services/meter"
	"github.com/switchyard-dev/switchyard/services/policyd"
	"github.com/switchyard-dev/switchyard/services/router"
)

// Config is `switchyard dev`.
type Config struct {
	GatewayAddr string
	// GatewayMetricsAddr serves the gateway's /metrics.
	GatewayMetricsAddr string
	RouterGRPCAddr     string
	RouterHTTPAddr     string
	// NATSURL uses an existing server; empty starts an embedded one.
	NATSURL string
	// NATSPort is the embedded server's port; 0 picks a free one (never
	// 4222, which a machine-wide server may hold).
	NATSPort int
	// RedisURL is where kvtracker keeps snapshots for routers that start
	// late, and the meter its rollups. Empty: the Redis on
	// 127.0.0.1:6379 when one answers there, else none (no snapshots,
	// which one process whose router starts with the tracker does not
	// need, and no meter), said so at start; NoRedis: none.
	RedisURL string
	// MeterHTTPAddr serves the meter's usage API and /metrics.
	MeterHTTPAddr string
	// UsageKeyPrefix starts the meter's Redis keys (tests give their own:
	// a shared Redis otherwise sums every run's usage).
	UsageKeyPrefix string
	// KVTrackerHTTPAddr serves the tracker's /metrics.
	KVTrackerHTTPAddr string
	// Sim configures the simulated workers.
	Sim sim.Config
	// Endpoints, when set ("id=url,id=url"), uses already running workers
	// (a `switchyard sim` started elsewhere, or real vLLM servers) instead of
	// starting simulated ones. The load generator uses it to keep one fleet
	// across the strategies it compares.
	Endpoints string
	// ReadyTimeout bounds the wait for every component to become ready.
	ReadyTimeout time.Duration
	// Policies is a catalog directory (deploy/examples): when set and
	// Endpoints is not, dev runs policyd on it in files mode and simulates
	// what it describes (each worker set's workers, each provider's
	// endpoint: a fake Bedrock runtime for a provider of type Bedrock)
	// instead of Sim.Workers anonymous workers.
	Policies string
	// Auth turns API keys on: the catalog's GatewayBackends get auth.mode
	// APIKey and a tenant DevTenant whose key dev makes and prints in its
	// banner. Off by default, so the dev catalog answers without keys;
	// needs Policies.
	Auth bool
	// Tenants are the tenants dev makes a key for when Auth is on (each
	// printed in the banner); DevTenant alone by default.
	Tenants []string
	// KeysFile, when set, is where dev writes the keys it made, one
	// TENANT=KEY line each (mode 0600), for scripts to read.
	KeysFile string
	// ScrapeInterval is how often the router scrapes the workers' metrics.
	ScrapeInterval time.Duration
	// Flow is the gateway's flow control, its --queue-* flags (off by
	// default: --queue-threshold 0).
	Flow flowcontrol.Config
	// PolicydGRPCAddr and PolicydHTTPAddr are policyd's listen addresses.
	PolicydGRPCAddr string
	PolicydHTTPAddr string

	tenantsSet bool // --tenants was given
}

// NoRedis as Config.RedisURL runs without Redis, even when one answers on
// 127.0.0.1:6379.
const NoRedis = "none"

// DefaultKVEventsConfig makes each simulated worker publish KV events like a
// vLLM started with --kv-events-config: worker i on 5557+i, replay on
// 5567+i. The endpoint must hold a wildcard: by vLLM's rule only such an
// endpoint binds (anything else connects, to a tracker that binds), and
// the kvtracker dials the workers. The simulator binds it on its --host.
const DefaultKVEventsConfig = `{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557","replay_endpoint":"tcp://*:5567"}`

// DefaultConfig is what `switchyard dev` runs without flags.
func DefaultConfig() Config {
	s := sim.DefaultConfig()
	s.Workers = 3
	s.KVEventsConfig = DefaultKVEventsConfig
	return Config{
		GatewayAddr:        "127.0.0.1:8080",
		GatewayMetricsAddr: "127.0.0.1:9094",
		RouterGRPCAddr:     "127.0.0.1:9090",
		RouterHTTPAddr:     "127.0.0.1:9091",
		KVTrackerHTTPAddr:  "127.0.0.1:9095",
		MeterHTTPAddr:      "127.0.0.1:9096",
		RedisURL:           os.Getenv("REDIS_URL"),
		Sim:                s,
		ReadyTimeout:       30 * time.Second,
		Policies:           defaultPolicies(),
		PolicydGRPCAddr:    "127.0.0.1:9092",
		PolicydHTTPAddr:    "127.0.0.1:9093",
		Tenants:            []string{DevTenant},
		Flow:               gateway.DefaultConfig().Flow,
		// Simulated workers answer in microseconds; scrape them often so
		// the load the router sees is fresh even at high time scales.
		ScrapeInterval: 250 * time.Millisecond,
	}
}

// defaultPolicies is DefaultPolicies when it exists here, else none.
func defaultPolicies() string {
	if st, err := os.Stat(DefaultPolicies); err == nil && st.IsDir() {
		return DefaultPolicies
	}
	return ""
}

// RegisterFlags registers dev's own flags and the few simulator flags worth
// changing from here (the full set is on `switchyard sim`).
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	*c = d
	fs.StringVar(&c.GatewayAddr, "gateway-addr", d.GatewayAddr, "gateway HTTP listen address")
	fs.StringVar(&c.GatewayMetricsAddr, "gateway-metrics-addr", d.GatewayMetricsAddr, "gateway /metrics listen address")
	fs.StringVar(&c.RouterGRPCAddr, "router-grpc-addr", d.RouterGRPCAddr, "router gRPC listen address")
	fs.StringVar(&c.RouterHTTPAddr, "router-http-addr", d.RouterHTTPAddr, "router REST/metrics listen address")
	fs.StringVar(&c.NATSURL, "nats-url", "", "use this NATS server instead of starting an embedded one")
	fs.IntVar(&c.NATSPort, "nats-port", 0, "port of the embedded NATS server (0: a free port)")
	fs.StringVar(&c.RedisURL, "redis-url", d.RedisURL, "Redis for KV snapshots and the meter, $REDIS_URL when not given (empty: 127.0.0.1:6379 when a Redis answers there, else none: no meter; \"none\": none)")
	fs.StringVar(&c.MeterHTTPAddr, "meter-http-addr", d.MeterHTTPAddr, "meter listen address (GET /v1/usage, /metrics)")
	fs.StringVar(&c.KVTrackerHTTPAddr, "kvtracker-http-addr", d.KVTrackerHTTPAddr, "kvtracker /metrics listen address")
	fs.IntVar(&c.Sim.Workers, "workers", d.Sim.Workers, "number of simulated vLLM workers")
	fs.IntVar(&c.Sim.Port, "sim-port", d.Sim.Port, "HTTP port of the first simulated worker (worker i uses port+i)")
	fs.StringVar(&c.Sim.ServedModelName, "served-model-name", d.Sim.ServedModelName, "model name the simulated workers serve")
	fs.Float64Var(&c.Sim.TimeScale, "time-scale", d.Sim.TimeScale, "run the simulated GPUs this many times faster than real time (with --endpoints: the time scale those simulated workers run at, for the router's prior)")
	fs.StringVar(&c.Sim.KVEventsConfig, "kv-events-config", d.Sim.KVEventsConfig, "vLLM KV events config of the workers (ports offset per worker); empty disables")
	fs.StringVar(&c.Endpoints, "endpoints", "", "use running workers (id=url,id=url) instead of starting simulated ones")
	fs.StringVar(&c.Policies, "policies", d.Policies, "catalog directory run by an in-process policyd, whose worker sets and providers are simulated ("+DefaultPolicies+" when run from a checkout; empty: --workers anonymous workers, no policies)")
	fs.BoolVar(&c.Auth, "auth", false, "turn API keys on: the catalog's GatewayBackends ask for keys, and dev makes and prints one per --tenants tenant (needs --policies)")
	fs.Func("tenants", "with --auth: the tenants dev makes a key for, comma-separated (default "+DevTenant+")", func(s string) error {
		c.Tenants = nil
		for n := range strings.SplitSeq(s, ",") {
			if n = strings.TrimSpace(n); n != "" {
				c.Tenants = append(c.Tenants, n)
			}
		}
		c.tenantsSet = true
		return nil
	})
	fs.StringVar(&c.KeysFile, "keys-file", "", "with --auth: also write the keys dev made to this file, one TENANT=KEY line each (mode 0600)")
	fs.DurationVar(&c.ScrapeInterval, "scrape-interval", d.ScrapeInterval, "how often the router scrapes the workers' metrics (wall time: at --time-scale 10, 250ms is 2.5 s of model time)")
	c.Flow.RegisterFlags(fs) // the gateway's --queue-* flags
	fs.StringVar(&c.PolicydGRPCAddr, "policyd-grpc-addr", d.PolicydGRPCAddr, "policyd gRPC listen address")
	fs.StringVar(&c.PolicydHTTPAddr, "policyd-http-addr", d.PolicydHTTPAddr, "policyd REST listen address")
	fs.DurationVar(&c.ReadyTimeout, "ready-timeout", d.ReadyTimeout, "how long to wait for every component to become ready")
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.Sim.Workers < 1 {
		errs = append(errs, fmt.Errorf("workers: need at least 1, got %d", c.Sim.Workers))
	}
	if c.NATSPort < 0 || c.NATSPort > 65535 {
		errs = append(errs, fmt.Errorf("nats-port: %d out of range", c.NATSPort))
	}
	if c.ReadyTimeout <= 0 {
		errs = append(errs, fmt.Errorf("ready-timeout: must be positive"))
	}
	if c.Auth && (c.Policies == "" || c.Endpoints != "") {
		errs = append(errs, errors.New("auth: needs a catalog (--policies) and no --endpoints: the key is checked against the catalog's GatewayBackend"))
	}
	if !c.Auth && (c.tenantsSet || c.KeysFile != "") {
		errs = append(errs, errors.New("tenants, keys-file: only with --auth (without it nobody needs a key)"))
	}
	seen := map[string]bool{}
	if c.Auth && len(c.Tenants) == 0 {
		errs = append(errs, errors.New("tenants: name at least one"))
	}
	for _, t := range c.Tenants {
		if !policy.ValidTenant(t) {
			errs = append(errs, fmt.Errorf("tenants: %q is not a valid tenant name (1-63 lowercase letters, digits, '.', '_' and '-', starting and ending with a letter or digit)", t))
		} else if seen[t] {
			errs = append(errs, fmt.Errorf("tenants: %q listed twice", t))
		}
		seen[t] = true
	}
	if c.ScrapeInterval < 10*time.Millisecond || c.ScrapeInterval > time.Minute {
		errs = append(errs, fmt.Errorf("scrape-interval %s: want 10ms to 1m", c.ScrapeInterval))
	}
	errs = append(errs, c.Flow.Validate())
	if c.Endpoints == "" {
		if err := c.Sim.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("sim: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Stack is a running system.
type Stack struct {
	nats    *natsembed.Server
	natsURL string
	fleets  []*sim.Fleet
	policyd *policyd.Server
	catalog *catalogFleet
	// tempDirs are removed by Stop.
	tempDirs []string
	tracker  *kvtracker.Tracker
	meter    *meter.Meter
	router   *router.Server
	gateway  *gateway.Gateway
	// sims lists every simulator the stack started, for the banner.
	sims []simulated
	// bedrock are the fake Bedrock runtimes, by provider name.
	bedrock map[string]*bedrocktest.Server
	// secretsDir is the gateway's --provider-secrets-dir, where dev puts
	// the Secrets providers name (a temporary directory); empty: none.
	secretsDir string
	redisURL   string

	gatewayRun, routerRun, trackerRun, policydRun, meterRun *background
	stopOnce                                                sync.Once
	stopErr                                                 error
}

// Start brings the system up and returns once the gateway is ready to serve
// (the router has scraped every worker). Stop, or cancelling ctx, shuts it
// down in dependency order: gateway (draining streams), router, workers,
// NATS.
func Start(ctx context.Context, cfg Config, log zerolog.Logger) (_ *Stack, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch cfg.RedisURL {
	case "":
		cfg.RedisURL = localRedis()
	case NoRedis:
		cfg.RedisURL = ""
	}
	s := &Stack{natsURL: cfg.NATSURL, redisURL: cfg.RedisURL}
	defer func() {
		if err != nil {
			_ = s.Stop()
		}
	}()

	if s.natsURL == "" {
		ns, err := natsembed.Start(natsembed.Options{Port: cfg.NATSPort})
		if err != nil {
			return nil, fmt.Errorf("start embedded nats: %w", err)
		}
		s.nats, s.natsURL = ns, ns.URL()
	}

	eps := []string{cfg.Endpoints}
	switch {
	case cfg.Endpoints == "" && cfg.Policies != "":
		eps = nil
		cf, err := s.startCatalog(ctx, cfg, log)
		if err != nil {
			return nil, err
		}
		s.catalog = cf
		if err := s.startPolicyd(ctx, cfg, cf.dir, log); err != nil {
			return nil, err
		}
		if cf.kvEvents {
			// The kvtracker follows policyd, as the router does.
			err := s.startTracker(ctx, cfg, log, func(tc *kvtracker.Config) { tc.PolicydAddr = s.policyd.GRPCAddr() })
			if err != nil {
				return nil, err
			}
		}
	case cfg.Endpoints == "":
		fleet, err := sim.StartFleet(context.WithoutCancel(ctx), cfg.Sim, log.With().Str("service", "sim").Logger())
		if err != nil {
			return nil, fmt.Errorf("start simulated workers: %w", err)
		}
		s.fleets = append(s.fleets, fleet)
		// One line describes each worker to the router and the kvtracker
		// alike: id=url|kv_endpoint|replay_endpoint.
		eps = eps[:0]
		kv := false
		for _, w := range fleet.Workers() {
			id := fmt.Sprintf("sim-%d", w.ID)
			entry := []string{id + "=" + w.URL}
			if w.KVEndpoint != "" {
				kv = true
				entry = append(entry, w.KVEndpoint)
				if w.ReplayEndpoint != "" {
					entry = append(entry, w.ReplayEndpoint)
				}
			}
			eps = append(eps, strings.Join(entry, "|"))
			s.sims = append(s.sims, simulated{name: id, models: w.Model, url: w.URL, kv: w.KVEndpoint, replay: w.ReplayEndpoint, vllm: true})
		}
		if kv {
			err := s.startTracker(ctx, cfg, log, func(tc *kvtracker.Config) {
				tc.Workers = strings.Join(eps, ",")
				tc.Model, tc.BlockSize = fleet.Workers()[0].Model, cfg.Sim.BlockSize
			})
			if err != nil {
				return nil, err
			}
		}
	}

	rc := router.DefaultConfig()
	rc.GRPCAddr, rc.HTTPAddr = cfg.RouterGRPCAddr, cfg.RouterHTTPAddr
	rc.NATS.URL = s.natsURL
	rc.Redis.URL = cfg.RedisURL
	rc.RouterID = "dev-router"
	rc.Endpoints = strings.Join(eps, ",")
	if s.policyd != nil {
		rc.PolicydAddr = s.policyd.GRPCAddr()
	}
	rc.ScrapeInterval = cfg.ScrapeInterval
	if ts := cfg.Sim.TimeScale; ts > 0 && ts != 1 {
		// The simulated workers (dev's own, or --endpoints' at this time
		// scale) run ts times faster than the GPU the router's prior
		// describes: so must the prior, or every TTFT is predicted ts
		// times too long until the router has learned.
		rc.PrefillRatePrior *= ts
		rc.QueueCostPrior = time.Duration(float64(rc.QueueCostPrior) / ts)
		rc.BaseTTFTPrior = time.Duration(float64(rc.BaseTTFTPrior) / ts)
	}
	rs, err := router.New(rc, log.With().Str("service", "router").Logger())
	if err != nil {
		return nil, fmt.Errorf("start router: %w", err)
	}
	s.router = rs
	s.routerRun = runInBackground(ctx, rs.Serve)

	gc := gateway.DefaultConfig()
	gc.Addr, gc.MetricsAddr = cfg.GatewayAddr, cfg.GatewayMetricsAddr
	gc.RouterAddr = rs.GRPCAddr()
	gc.NATS.URL = s.natsURL
	gc.AllowTagsHeader = true
	// A local system serves its developer: answers say which worker served
	// them and what the router predicted (loadtest records both).
	gc.DecisionHeaders = true
	gc.Flow = cfg.Flow
	if s.policyd != nil {
		gc.PolicydAddr = s.policyd.GRPCAddr()
	}
	if s.secretsDir != "" {
		gc.ProviderSecretsDir = s.secretsDir
	}
	gw, err := gateway.New(gc, log.With().Str("service", "gateway").Logger())
	if err != nil {
		return nil, fmt.Errorf("start gateway: %w", err)
	}
	s.gateway = gw
	s.gatewayRun = runInBackground(ctx, gw.Serve)

	if cfg.RedisURL != "" {
		mc := meter.DefaultConfig()
		mc.NATS.URL, mc.Redis.URL = s.natsURL, cfg.RedisURL
		mc.HTTPAddr, mc.ReplicaID = cfg.MeterHTTPAddr, "dev-meter"
		if cfg.UsageKeyPrefix != "" {
			mc.KeyPrefix = cfg.UsageKeyPrefix
		}
		if s.policyd != nil {
			mc.PolicydAddr = s.policyd.GRPCAddr()
		}
		m, err := meter.New(mc, log.With().Str("service", "meter").Logger())
		if err != nil {
			return nil, fmt.Errorf("start meter: %w", err)
		}
		s.meter = m
		s.meterRun = runInBackground(ctx, m.Serve)
	}

	readyCtx, cancel := context.WithTimeout(ctx, cfg.ReadyTimeout)
	defer cancel()
	ready := []string{s.RouterURL() + "/readyz", s.GatewayURL() + "/readyz"}
	if s.tracker != nil {
		ready = append(ready, "http://"+s.tracker.HTTPAddr()+"/readyz")
	}
	if s.meter != nil {
		ready = append(ready, s.MeterURL()+"/readyz")
	}
	if s.policyd != nil {
		ready = append(ready, "http://"+s.policyd.HTTPAddr()+"/readyz")
	}
	for _, u := range ready {
		if err := waitReady(readyCtx, u); err != nil {
			return nil, err
		}
	}
	context.AfterFunc(ctx, func() { _ = s.Stop() })
	return s, nil
}

// startTracker runs a kvtracker over the simulated workers' KV events;
// workers says where it takes them from.
func (s *Stack) startTracker(ctx context.Context, cfg Config, log zerolog.Logger, workers func(*kvtracker.Config)) error {
	tc := kvtracker.DefaultConfig()
	workers(&tc)
	tc.NATS.URL = s.natsURL
	tc.Redis.URL = cfg.RedisURL
	tc.ReplicaID = "dev-kvtracker"
	tc.HTTPAddr = cfg.KVTrackerHTTPAddr
	t, err := kvtracker.New(tc, log.With().Str("service", "kvtracker").Logger())
	if err != nil {
		return fmt.Errorf("start kvtracker: %w", err)
	}
	s.tracker = t
	s.trackerRun = runInBackground(ctx, t.Serve)
	return nil
}

func waitReady(ctx context.Context, url string) error {
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w (last: %v)", url, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// APIKey is the key dev made for its first tenant (DevTenant unless
// Config.Tenants says otherwise); empty without Config.Auth.
func (s *Stack) APIKey() string {
	if s.catalog == nil || len(s.catalog.keys) == 0 {
		return ""
	}
	return s.catalog.keys[0].key
}

// APIKeys are the keys dev made, by tenant; nil without Config.Auth.
func (s *Stack) APIKeys() map[string]string {
	if s.catalog == nil || len(s.catalog.keys) == 0 {
		return nil
	}
	out := make(map[string]string, len(s.catalog.keys))
	for _, k := range s.catalog.keys {
		out[k.tenant] = k.key
	}
	return out
}

// GatewayURL is the gateway's base URL (OpenAI clients use GatewayURL()+"/v1").
func (s *Stack) GatewayURL() string { return "http://" + s.gateway.Addr() }

// GatewayMetricsURL is the gateway's /metrics (on a port of its own).
func (s *Stack) GatewayMetricsURL() string { return "http://" + s.gateway.MetricsAddr() + "/metrics" }

// RouterURL is the router's REST base URL.
func (s *Stack) RouterURL() string { return "http://" + s.router.HTTPAddr() }

// RouterGRPCAddr is the router's gRPC address.
func (s *Stack) RouterGRPCAddr() string { return s.router.GRPCAddr() }

// KVTrackerURL is the kvtracker's HTTP base URL (/metrics, /readyz); empty
// when no worker publishes KV events.
func (s *Stack) KVTrackerURL() string {
	if s.tracker == nil {
		return ""
	}
	return "http://" + s.tracker.HTTPAddr()
}

// MeterURL is the meter's HTTP base URL (GET /v1/usage, /metrics); empty
// without Redis.
func (s *Stack) MeterURL() string {
	if s.meter == nil {
		return ""
	}
	return "http://" + s.meter.HTTPAddr()
}

// RedisURL is the Redis the stack uses, empty for none.
func (s *Stack) RedisURL() string { return s.redisURL }

// localRedis is redis://127.0.0.1:6379 when a Redis answers PING there
// within a moment, else "".
func localRedis() string {
	const addr = "127.0.0.1:6379"
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return ""
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return ""
	}
	buf := make([]byte, 7)
	if n, _ := io.ReadAtLeast(c, buf, 5); n < 5 || string(buf[:5]) != "+PONG" {
		return ""
	}
	return "redis://" + addr
}

// NATSURL is the NATS server the stack uses.
func (s *Stack) NATSURL() string { return s.natsURL }

// Workers describes the simulated workers; none when the stack uses
// external endpoints.
func (s *Stack) Workers() []sim.WorkerInfo {
	var out []sim.WorkerInfo
	for _, f := range s.fleets {
		out = append(out, f.Workers()...)
	}
	return out
}

// PolicydAddr is policyd's gRPC address; empty without a catalog.
func (s *Stack) PolicydAddr() string {
	if s.policyd == nil {
		return ""
	}
	return s.policyd.GRPCAddr()
}

// background is a component serving in its own goroutine until stopped.
type background struct {
	cancel context.CancelFunc
	done   chan error
}

// runInBackground runs serve on a context that outlives ctx's cancellation
// (Stop, not the caller's context, decides the shutdown order).
func runInBackground(ctx context.Context, serve func(context.Context) error) *background {
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	b := &background{cancel: cancel, done: make(chan error, 1)}
	go func() { b.done <- serve(bctx) }()
	return b
}

// stop cancels the component and waits for it; a nil background (never
// started) stops at once.
func (b *background) stop() error {
	if b == nil {
		return nil
	}
	b.cancel()
	return <-b.done
}

// Stop shuts everything down in dependency order and returns the first
// error a component reported. It is safe to call more than once.
func (s *Stack) Stop() error {
	s.stopOnce.Do(func() {
		var errs []error
		if s.gatewayRun != nil {
			errs = append(errs, s.gatewayRun.stop())
		} else if s.gateway != nil {
			errs = append(errs, s.gateway.Close())
		}
		// The meter after the gateway, whose last usage events it counts.
		errs = append(errs, s.meterRun.stop(), s.routerRun.stop(), s.policydRun.stop(), s.trackerRun.stop())
		for _, f := range s.fleets {
			errs = append(errs, f.Close())
		}
		for _, b := range s.bedrock {
			b.Close()
		}
		for _, d := range s.tempDirs {
			_ = os.RemoveAll(d)
		}
		if s.nats != nil {
			s.nats.Shutdown()
		}
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}

// Run is `switchyard dev`: Start, print how to use it, wait for ctx, Stop.
func Run(ctx context.Context, cfg Config, log zerolog.Logger, out io.Writer) error {
	s, err := Start(ctx, cfg, log)
	if err != nil {
		return err
	}
	s.PrintBanner(out, cfg)
	<-ctx.Done()
	log.Info().Msg("shutting down")
	return s.Stop()
}
