package gateway

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/internal/configcheck"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/internal/registry"
	"github.com/switchyard-dev/switchyard/services/gateway/admission"
	"github.com/switchyard-dev/switchyard/services/gateway/admission/apikey"
	"github.com/switchyard-dev/switchyard/services/gateway/admission/defaulttenant"
	"github.com/switchyard-dev/switchyard/services/gateway/admission/jwt"
	"github.com/switchyard-dev/switchyard/services/gateway/flowcontrol"
	"github.com/switchyard-dev/switchyard/services/gateway/ratelimit"
)

// Config is the gateway's configuration. Flags are registered by
// RegisterFlags; every flag can also be set from the environment through
// internal/flagenv (e.g. --router-addr from SWITCHYARD_ROUTER_ADDR).
type Config struct {
	// Addr is the HTTP listen address: the public port, serving the API
	// and /healthz and /readyz.
	Addr string
	// MetricsAddr is where /metrics is served, never on the public port;
	// loopback by default (a Deployment passes :9094 for Prometheus).
	MetricsAddr string
	// RouterAddr names the router replicas: a comma-separated list of
	// host:port, or one gRPC target (host:port, or
	// dns:///router.switchyard:9090 for a headless Service). Calls are
	// spread round-robin over the healthy replicas, and a call a replica
	// fails as unavailable is retried on another (routerconn.go).
	RouterAddr string
	// NATS is where usage and route completion events go; an empty URL
	// disables them (nothing is metered and routers never see completions).
	NATS lifecycle.NATS
	// MaxBodyBytes caps a request body; larger requests get 413.
	MaxBodyBytes int64
	// BodyReadTimeout bounds the upload of a request body (there is no
	// server-wide read timeout: streams run for minutes). A body not in by
	// then is answered 408 and its connection closed, so a client sending
	// a byte a second holds a connection this long at most.
	BodyReadTimeout time.Duration
	// RouteTimeout bounds each Route and ListEndpoints call.
	RouteTimeout time.Duration
	// UpstreamHeaderTimeout bounds the wait for a streaming response's
	// headers. vLLM sends them before it starts generating, so this catches
	// a stuck or unreachable worker early, and the request is retried
	// elsewhere. Non-streamed responses only arrive when generation ends,
	// so they have UpstreamResponseTimeout instead.
	UpstreamHeaderTimeout time.Duration
	// UpstreamResponseTimeout bounds the wait for a non-streamed
	// response's headers, which an upstream sends only once the whole
	// answer is generated: an attempt without them by then fails as one
	// that could not connect, retried elsewhere (nothing reached the
	// client) or answered 504. It must cover the longest generation a
	// client may ask for; 0 is no bound (the client's own timeout).
	UpstreamResponseTimeout time.Duration
	// StreamIdleTimeout ends a response whose upstream sends nothing for
	// this long after its headers (a frozen worker, a host gone without
	// closing the connection): a stream gets an error event, then the
	// connection closes. Normal inter-token gaps are tens of milliseconds
	// and a long prefill happens before the headers, so the default leaves
	// a wide margin; raise it for upstreams that pause longer mid-answer.
	StreamIdleTimeout time.Duration
	// MaxAttempts bounds the attempts of one request: the router's first
	// choice, then the next eligible target each time one fails before
	// anything reached the client (no connection, no headers in time,
	// 429 or 5xx). After the first byte there is no retry.
	MaxAttempts int
	// RetryWindow bounds the time over which a request may start new
	// attempts, from its arrival: a request whose targets fail slowly
	// gets its error, not a long chain of timeouts.
	RetryWindow time.Duration
	// MaxStreamsPerClient caps the completion requests (streamed or not)
	// one client may have in flight; the next gets 429 with Retry-After.
	// The client is its IP address, so behind a proxy that does not keep
	// it every client is one: set it where clients connect directly, or
	// high enough for the proxy's share. 0 is no cap.
	MaxStreamsPerClient int
	// Stop: ShutdownTimeout is how long in-flight requests (streams
	// included) may run on after shutdown starts (event flushing gets a few
	// seconds more); DrainDelay how long the gateway stays up, not ready,
	// before it stops accepting requests.
	lifecycle.Stop
	// AllowTagsHeader accepts routing tags from clients in TagsHeader.
	// Policies match on tags, so only enable it when clients are trusted to
	// choose them. A GatewayBackend that names a tags header (seen through
	// PolicydAddr) turns the header on by itself, under its own name; the
	// router keeps only its allowed tags and adds the tenant's defaults.
	AllowTagsHeader bool
	// DecisionHeaders puts the routing decision on every routed answer:
	// the target in TargetHeader and the router's predicted time to first
	// token in PredictedTTFTHeader (seconds). For benchmarks (loadtest
	// records them and reports the predictor's error) and debugging; off
	// by default, since it tells clients which worker served them.
	DecisionHeaders bool
	// PolicydAddr is policyd's gRPC address. Set, the gateway follows the
	// policy snapshot for providers' credentials (it can then forward to
	// provider targets) and the GatewayBackend's tags header.
	PolicydAddr string
	// Router and Policyd are how the router replicas and policyd are
	// dialled: TLS, mutual with a client certificate
	// (--router-tls-ca, -cert, -key, -server-name; --policyd-tls-*), and
	// for the routers the operator token (--router-token-file), which
	// ListEndpoints needs once a router has --operator-token-file.
	Router, Policyd lifecycle.GRPCClient
	// GatewayBackend names the GatewayBackend this gateway serves; empty
	// takes the snapshot's only (or first) one.
	GatewayBackend string
	// Admission names the admission steps every request goes through, in
	// order, comma-separated (package admission; a step must set the
	// tenant). The default, jwt,apikey,default-tenant, checks bearer JWTs
	// when the GatewayBackend names an identity provider (spec.auth.jwt)
	// or the --jwt-* flags do, API keys when its auth mode is APIKey, and
	// gives every request tenant "default" when it is None. A
	// GatewayBackend accepting credentials that no step of the chain
	// checks (keys without apikey, JWTs without jwt) gets every request
	// refused.
	Admission string
	// ProviderSecretsDir is where Kubernetes Secrets named by providers'
	// credentials.secretRef are mounted, one directory per Secret.
	ProviderSecretsDir string
	// Redis holds the tenants' rate-limit counters, shared by every
	// replica (--redis-url, --redis-tls-*); required when --admission
	// names the ratelimit step.
	Redis lifecycle.Redis
	// RateLimit configures the ratelimit admission step: the limits file,
	// what to do while Redis is unreachable (--ratelimit-redis-down), the
	// replicas sharing the limits, the output tokens reserved when a
	// request sets no max_tokens (package ratelimit).
	RateLimit ratelimit.Config
	// JWT configures the jwt admission step locally (bearer JWTs from an
	// identity provider, --jwt-*): issuer, audience, the tenant claim, the
	// JWKS file or URL and the clock skew (package jwt). A GatewayBackend
	// names its identity provider in spec.auth.jwt, which wins over these
	// (they are then ignored, with a warning); they serve a gateway
	// without policyd (every request then needs a token) and a
	// GatewayBackend with auth mode APIKey that names none. Refused
	// without the jwt step in --admission, which must come before apikey.
	JWT jwt.Config
	// Flow is the gateway's flow control (--queue-*): when every worker
	// that could serve a request has the queue threshold of requests
	// waiting, the request waits in the gateway's queue, released by
	// priority and fairly across tenants (package flowcontrol).
	Flow flowcontrol.Config
	// UsageSpoolDir, when set, is where usage events wait on disk until
	// JetStream acks them (package publish and spool): a NATS outage
	// fills it instead of memory, and a gateway restarted, or killed,
	// sends what it held when it starts again. One directory per gateway
	// (it is locked); in Kubernetes an emptyDir, which outlives the
	// container's restarts. Empty holds them in memory (32,768 at most;
	// lost if the process dies).
	UsageSpoolDir string
	// UsageSpoolMaxBytes bounds the spool; beyond it events are dropped,
	// counted as lost (reason spool_full) and logged.
	UsageSpoolMaxBytes int64
}

// DefaultConfig returns the configuration the flags default to. Unlike the
// other services' ports, the gateway's is public: it listens on every
// interface.
func DefaultConfig() Config {
	return Config{
		Addr:                    ":8080",
		MetricsAddr:             "127.0.0.1:9094",
		RouterAddr:              "127.0.0.1:9090",
		NATS:                    lifecycle.NATS{URL: "nats://127.0.0.1:4222"},
		MaxBodyBytes:            8 << 20,
		BodyReadTimeout:         time.Minute,
		RouteTimeout:            2 * time.Second,
		UpstreamHeaderTimeout:   30 * time.Second,
		UpstreamResponseTimeout: 10 * time.Minute,
		StreamIdleTimeout:       30 * time.Second,
		MaxAttempts:             3,
		RetryWindow:             60 * time.Second,
		Stop:                    lifecycle.Stop{ShutdownTimeout: 30 * time.Second},
		ProviderSecretsDir:      "/var/run/secrets/switchyard/providers",
		Admission:               "jwt,apikey,default-tenant",
		RateLimit:               ratelimit.DefaultConfig(),
		JWT:                     jwt.DefaultConfig(),
		Flow:                    flowcontrol.DefaultConfig(),
		UsageSpoolMaxBytes:      1 << 30,
	}
}

// RegisterFlags registers the gateway's flags on fs, defaulting to
// DefaultConfig.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	fs.StringVar(&c.Addr, "addr", d.Addr, "HTTP listen address (the public API port)")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", d.MetricsAddr, "/metrics listen address, apart from the public port; :9094 for every interface")
	fs.StringVar(&c.RouterAddr, "router-addr", d.RouterAddr, "router replicas: host:port[,host:port...] or one gRPC target (dns:///name:port); calls go round-robin to the healthy ones")
	c.NATS.RegisterFlags(fs, d.NATS.URL, "usage and route completion events; empty disables them")
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", d.MaxBodyBytes, "largest accepted request body in bytes")
	fs.DurationVar(&c.BodyReadTimeout, "body-read-timeout", d.BodyReadTimeout, "longest a request body may take to arrive; slower ones get 408 and their connection closed")
	fs.DurationVar(&c.RouteTimeout, "route-timeout", d.RouteTimeout, "timeout of each router call")
	fs.DurationVar(&c.UpstreamHeaderTimeout, "upstream-header-timeout", d.UpstreamHeaderTimeout,
		"how long to wait for a streaming response's headers before retrying elsewhere")
	fs.DurationVar(&c.UpstreamResponseTimeout, "upstream-response-timeout", d.UpstreamResponseTimeout,
		"how long to wait for a non-streamed response (sent when generation ends) before retrying elsewhere or answering 504; must cover the longest generation (0: no bound)")
	fs.DurationVar(&c.StreamIdleTimeout, "stream-idle-timeout", d.StreamIdleTimeout,
		"end a response whose upstream sends nothing for this long after its headers (streams get an error event)")
	fs.IntVar(&c.MaxAttempts, "max-attempts", d.MaxAttempts,
		"attempts per request: the first target, then the next the router allows each time one fails before the first byte (connection, header timeout, 429, 5xx)")
	fs.DurationVar(&c.RetryWindow, "retry-window", d.RetryWindow, "no new attempt starts this long after the request arrived")
	fs.IntVar(&c.MaxStreamsPerClient, "max-streams-per-client", d.MaxStreamsPerClient,
		"most completion requests (streamed or not) one client IP may have in flight; more get 429 with Retry-After (0: no cap)")
	c.Stop.RegisterFlags(fs, d.Stop)
	fs.StringVar(&c.PolicydAddr, "policyd-addr", "", "policyd gRPC address (host:port) for provider credentials and the tags header; empty: local workers only")
	c.Router.RegisterFlags(fs, "router", "the routers", "their --operator-token-file: ListEndpoints, for /v1/models and worker health, needs it once set")
	c.Policyd.RegisterFlags(fs, "policyd", "policyd", "")
	fs.StringVar(&c.GatewayBackend, "gateway-backend", "", "GatewayBackend this gateway serves (default: the snapshot's only or first one)")
	fs.StringVar(&c.ProviderSecretsDir, "provider-secrets-dir", d.ProviderSecretsDir, "where the Secrets named by providers' credentials.secretRef are mounted (<dir>/<secret>/<key>)")
	fs.StringVar(&c.Admission, "admission", d.Admission, "admission steps every request goes through, in order, comma-separated (who is calling, whether they may); known: "+strings.Join(admission.Steps.Names(), ", "))
	c.Redis.RegisterFlags(fs, "", "the tenants' rate-limit counters, shared by the replicas; needed by the ratelimit admission step")
	c.RateLimit.RegisterFlags(fs)
	c.JWT.RegisterFlags(fs)
	c.Flow.RegisterFlags(fs)
	fs.StringVar(&c.UsageSpoolDir, "usage-spool-dir", "", "directory where usage events wait on disk until JetStream acks them, so a NATS outage or a restart loses none (one per gateway; empty: in memory, lost if the process dies)")
	fs.Int64Var(&c.UsageSpoolMaxBytes, "usage-spool-max-bytes", d.UsageSpoolMaxBytes, "most bytes the usage spool holds; beyond, events are dropped and counted (at ~300 bytes an event, a GiB is over three million)")
	fs.BoolVar(&c.AllowTagsHeader, "allow-tags-header", d.AllowTagsHeader, "accept routing tags from clients in the "+TagsHeader+" header")
	fs.BoolVar(&c.DecisionHeaders, "decision-headers", d.DecisionHeaders, "put the target and the router's predicted TTFT on every routed answer ("+TargetHeader+", "+PredictedTTFTHeader+" in seconds), for benchmarks and debugging")
}

// Validate reports every invalid field at once.
func (c *Config) Validate() error {
	var errs []error
	if err := configcheck.ListenAddr(c.Addr); err != nil {
		errs = append(errs, fmt.Errorf("addr: %w", err))
	}
	if err := configcheck.ListenAddr(c.MetricsAddr); err != nil {
		errs = append(errs, fmt.Errorf("metrics-addr: %w", err))
	}
	if strings.TrimSpace(c.RouterAddr) == "" || strings.ContainsAny(c.RouterAddr, " \t\n") {
		errs = append(errs, fmt.Errorf("router-addr %q: want host:port or a gRPC target", c.RouterAddr))
	} else if _, err := routerAddrs(c.RouterAddr); err != nil {
		errs = append(errs, fmt.Errorf("router-addr: %w", err))
	}
	errs = append(errs, c.NATS.Validate(false), c.Stop.Validate(), c.Router.Validate("router"), c.Policyd.Validate("policyd"))
	if c.MaxStreamsPerClient < 0 {
		errs = append(errs, fmt.Errorf("max-streams-per-client %d: want 0 (no cap) or more", c.MaxStreamsPerClient))
	}
	if c.MaxBodyBytes <= 0 || c.MaxBodyBytes > 1<<30 {
		errs = append(errs, fmt.Errorf("max-body-bytes %d: want 1 byte to 1 GiB", c.MaxBodyBytes))
	}
	errs = append(errs, configcheck.Positive(
		configcheck.Duration{Name: "body-read-timeout", Value: c.BodyReadTimeout},
		configcheck.Duration{Name: "route-timeout", Value: c.RouteTimeout},
		configcheck.Duration{Name: "upstream-header-timeout", Value: c.UpstreamHeaderTimeout},
		configcheck.Duration{Name: "stream-idle-timeout", Value: c.StreamIdleTimeout},
		configcheck.Duration{Name: "retry-window", Value: c.RetryWindow},
	)...)
	if c.UpstreamResponseTimeout < 0 {
		errs = append(errs, fmt.Errorf("upstream-response-timeout %s: want 0 (no bound) or more", c.UpstreamResponseTimeout))
	}
	if c.MaxAttempts < 1 || c.MaxAttempts > 10 {
		errs = append(errs, fmt.Errorf("max-attempts %d: want 1 to 10", c.MaxAttempts))
	}
	if steps, err := admission.Steps.List(c.Admission); err != nil {
		errs = append(errs, fmt.Errorf("admission: %w", err))
	} else if len(steps) == 0 {
		errs = append(errs, errors.New("admission: name at least one step (default-tenant when nothing authenticates)"))
	} else if c.rateLimited() {
		if err := rateLimitAfterTenant(steps); err != nil {
			errs = append(errs, err)
		}
		if c.Redis.URL == "" {
			errs = append(errs, errors.New("redis-url: required by the ratelimit admission step"))
		}
		errs = append(errs, c.RateLimit.Validate())
	}
	errs = append(errs, c.Redis.Validate(false))
	errs = append(errs, c.validateJWT(), c.Flow.Validate())
	if c.UsageSpoolDir != "" {
		if c.UsageSpoolMaxBytes < 1<<20 || c.UsageSpoolMaxBytes > 1<<40 {
			errs = append(errs, fmt.Errorf("usage-spool-max-bytes %d: want 1 MiB to 1 TiB", c.UsageSpoolMaxBytes))
		}
		if c.NATS.URL == "" {
			errs = append(errs, errors.New("usage-spool-dir: usage events are published to NATS, and --nats-url is empty"))
		}
	}
	return errors.Join(errs...)
}

// rateLimited reports whether the admission chain names the ratelimit step.
func (c *Config) rateLimited() bool {
	for n := range strings.SplitSeq(c.Admission, ",") {
		if strings.TrimSpace(n) == ratelimit.Name {
			return true
		}
	}
	return false
}

// rateLimitAfterTenant checks that the ratelimit step comes after every
// step that may set the tenant: it limits the tenant they chose.
func rateLimitAfterTenant(steps []registry.Entry[admission.Factory]) error {
	seenRL := false
	for i, s := range steps {
		switch {
		case s.Name == ratelimit.Name && i == 0:
			return errors.New("admission: ratelimit must come after the step that identifies the tenant (e.g. apikey,default-tenant,ratelimit)")
		case s.Name == ratelimit.Name:
			seenRL = true
		case seenRL && (s.Name == defaulttenant.Name || s.Name == apikey.Name || s.Name == jwt.Name):
			return fmt.Errorf("admission: ratelimit must come after %s, which sets the tenant it limits", s.Name)
		}
	}
	return nil
}

// validateJWT checks the order of the steps that identify the caller and
// the jwt step's flags. jwt comes before apikey (it leaves API keys to
// apikey, and apikey would refuse a JWT as a malformed key), and
// default-tenant after both (they leave a request that an earlier step
// claimed alone, so default-tenant first would let every request through
// as "default"). The flags are refused without the jwt step, and checked
// when set; unset, the step takes its identity provider from the
// GatewayBackend.
func (c *Config) validateJWT() error {
	at := map[string]int{}
	i := 0
	for n := range strings.SplitSeq(c.Admission, ",") {
		if _, ok := at[strings.TrimSpace(n)]; !ok {
			at[strings.TrimSpace(n)] = i
		}
		i++
	}
	pos := func(name string) int {
		if p, ok := at[name]; ok {
			return p
		}
		return -1
	}
	jwtAt, apikeyAt, defaultAt := pos(jwt.Name), pos(apikey.Name), pos(defaulttenant.Name)
	var errs []error
	if defaultAt >= 0 {
		for _, st := range []struct {
			name string
			at   int
		}{{jwt.Name, jwtAt}, {apikey.Name, apikeyAt}} {
			if st.at > defaultAt {
				errs = append(errs, fmt.Errorf("admission: default-tenant must come after %s (it claims every request still unclaimed)", st.name))
			}
		}
	}
	switch {
	case jwtAt < 0 && c.JWT.Set():
		errs = append(errs, errors.New("jwt-*: set, but --admission does not name the jwt step (e.g. --admission jwt,apikey,default-tenant)"))
	case jwtAt < 0:
	case apikeyAt >= 0 && apikeyAt < jwtAt:
		errs = append(errs, errors.New("admission: jwt must come before apikey (apikey refuses a JWT as a malformed key)"))
	}
	if jwtAt >= 0 && c.JWT.Set() {
		errs = append(errs, c.JWT.Validate())
	}
	return errors.Join(errs...)
}
