package router

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/internal/configcheck"
	"github.com/switchyard-dev/switchyard/internal/fleet"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/services/router/internal/load"
	"github.com/switchyard-dev/switchyard/services/router/internal/predict"
	"github.com/switchyard-dev/switchyard/services/router/internal/prompt"
)

// Config is the router's configuration. The zero value is not valid; start
// from DefaultConfig or RegisterFlags.
type Config struct {
	// Listen: gRPC serves the Router and health services; HTTP serves REST
	// (grpc-gateway), /metrics, /healthz and /readyz.
	lifecycle.Listen
	// Stop: the shutdown timeout and drain delay.
	lifecycle.Stop
	// NATS links replicas (in-flight load, KV deltas); an empty URL runs a
	// single replica without sync.
	NATS lifecycle.NATS
	// RouterID names this replica in published decisions; replicas ignore
	// their own. It must differ between replicas sharing a NATS server.
	RouterID string
	// Endpoints lists workers in the fleet shorthand (fleet.ParseShorthand),
	// "id=url,id=url"; their models are discovered. KV endpoints may be
	// given too (the kvtracker's --workers takes the same line); the
	// router does not read them.
	Endpoints string
	// EndpointsFile is a YAML list of workers (fleet.ParseYAML), the format
	// of the kvtracker's --workers-file too.
	EndpointsFile string
	// PolicydAddr is policyd's gRPC address. Empty routes without
	// policies, on the static endpoints alone; set, the router follows
	// policyd's snapshot: its worker sets and providers join the static
	// endpoints, and its policies decide.
	PolicydAddr string
	// Policyd is how policyd is dialled: TLS, mutual with a client
	// certificate (--policyd-tls-ca, -cert, -key, -server-name).
	Policyd lifecycle.GRPCClient
	// GatewayBackend names the GatewayBackend whose policies apply; empty
	// takes the snapshot's only (or first) one.
	GatewayBackend string
	// Classifiers names the classifiers that derive a request's tags, in
	// order, comma-separated (see package classify for the names); empty
	// gives requests no tags.
	Classifiers string

	ScrapeInterval time.Duration
	ScrapeTimeout  time.Duration
	// InflightTTL expires an in-flight entry whose completion never came.
	InflightTTL time.Duration
	// MaxRecvMsgBytes bounds one gRPC request. Route carries the client's
	// whole body, so it must exceed the gateway's --max-body-bytes.
	MaxRecvMsgBytes int
	// MaxMessages bounds the messages of one chat request: rendering and
	// tokenizing a prompt costs work per message, and a request over the
	// limit is refused (InvalidArgument; the gateway answers 400) before
	// any of it is done. 0: no limit.
	MaxMessages int
	// MaxPromptBytes bounds the prompt text of one request (a chat
	// request's message contents, reasoning, tool calls, names, tools,
	// documents and template arguments; a completions request's prompt
	// texts), refused likewise before it is rendered or tokenized. 0: no
	// limit.
	MaxPromptBytes int
	// MaxTemplateBytes bounds a chat prompt as the model's chat template
	// renders it (markup and tool definitions included): a render that
	// outgrows it stops, and the request is refused likewise. 0: no
	// limit.
	MaxTemplateBytes int

	// Redis is where the kvtracker's snapshots are read at start and on
	// resynchronisation; an empty URL follows the KV deltas on NATS alone.
	Redis lifecycle.Redis
	// Tokenizers selects the tokenizer per model: "model=kind,...", with
	// "*" for every other model. Kinds: "simple" (the simulator's default),
	// "hf:DIR" (a Hugging Face model directory, as vLLM's --tokenizer),
	// "harmony:DIR" (gpt-oss: that directory's tokenizer, with chats in
	// the harmony format vLLM renders for gpt-oss instead of the chat
	// template) and "none" (approximate index on prompt text).
	Tokenizers string
	// TokenizerCheck probes every local worker's POST /tokenize when it
	// appears for a model the router has a tokenizer for, and routes a
	// model whose worker tokenizes differently in approximate mode (see
	// tokcheck.go and docs/tokenization.md).
	TokenizerCheck bool
	// TokenizerCheckInterval spaces the rechecks of a checked worker, and
	// caps the backoff of an unchecked one.
	TokenizerCheckInterval time.Duration
	// TokenizerCheckRetry is the first wait before a worker that could not
	// be checked (no /tokenize, unreachable) is tried again; it doubles up
	// to TokenizerCheckInterval.
	TokenizerCheckRetry time.Duration
	// TokenizerCheckTimeout bounds one check (its two /tokenize requests).
	TokenizerCheckTimeout time.Duration
	// SpeculativeTTL is how long, after its predicted first token, a
	// routed request's blocks are assumed cached on the chosen worker
	// before the worker's own KV events confirm them.
	SpeculativeTTL time.Duration
	// ApproxTTL is how long the approximate index remembers a decision.
	ApproxTTL time.Duration
	// RecomputeWeight scales the charge, added to a candidate's predicted
	// TTFT, for prefilling tokens another candidate already caches: it
	// keeps requests with the worker holding their prefix until its queue
	// costs more than recomputing the prefix elsewhere. 0 ranks on
	// predicted TTFT alone.
	RecomputeWeight float64
	// KVPressureWeight scales the charge, added likewise, for the cached
	// context a request's new blocks would push out of a candidate's KV
	// cache, estimated from its scraped occupancy: it spreads long-lived
	// contexts (conversations) over the fleet's caches instead of piling
	// them onto one worker whose cache then thrashes. 0 leaves occupancy
	// out.
	KVPressureWeight float64
	// Breaker opens the circuit of an external provider whose completions
	// keep failing (load.Breaker explains it): BreakerFailures in a row
	// open it for BreakerOpenFor, then one probe decides. 0 failures turns
	// it off. These are the defaults: a provider's own
	// spec.circuitBreaker.failures and openFor replace them for it (and
	// its failures break it even with 0 here).
	BreakerFailures int
	BreakerOpenFor  time.Duration
	// GCPercent is the Go garbage collector's target (GOGC) for a router
	// run as its own process; 0 keeps Go's default, and a GOGC
	// environment variable wins over it.
	GCPercent int
	// Pprof serves Go's profiles under /debug/pprof/ on the HTTP port.
	// Off by default: a profile shows the process's internals to whoever
	// can reach the port.
	Pprof bool
	// OperatorTokenFile is a file holding the bearer token of the operator
	// role, which Explain and ListEndpoints (gRPC and REST) require once
	// it or OperatorIdentities is set (see operator.go: without either,
	// Explain is served only on a loopback listen address, ListEndpoints
	// to anyone). Gateways need the role for ListEndpoints: give them the
	// token (--router-token-file) or an operator identity. At least 16
	// bytes; read at start.
	OperatorTokenFile string
	// OperatorIdentities lists, comma-separated, the client certificate
	// names (common name, DNS or URI name) that have the operator role
	// over mutual TLS on the gRPC port (--grpc-tls-client-ca).
	OperatorIdentities string
	// Priors of the TTFT predictor, before any completion was observed.
	PrefillRatePrior float64
	QueueCostPrior   time.Duration
	BaseTTFTPrior    time.Duration
}

// DefaultConfig returns the flag defaults, without endpoints. They listen
// on loopback, as `switchyard dev` does: a router started by hand is not
// exposed to the network; a Deployment passes :9090 and :9091.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	return Config{
		Listen:          lifecycle.Listen{GRPCAddr: "127.0.0.1:9090", HTTPAddr: "127.0.0.1:9091"},
		Stop:            lifecycle.DefaultStop,
		NATS:            lifecycle.NATS{URL: "nats://127.0.0.1:4222"},
		RouterID:        host,
		ScrapeInterval:  time.Second,
		ScrapeTimeout:   time.Second,
		InflightTTL:     10 * time.Minute,
		MaxRecvMsgBytes: 16 << 20,
		// Far above any model's context (a million tokens is some 4 MiB
		// of text), and what Route then costs is tens of milliseconds.
		MaxMessages:      10000,
		MaxPromptBytes:   4 << 20,
		MaxTemplateBytes: 8 << 20,

		Classifiers: defaultClassifiers,
		Tokenizers:  "*=" + tokenizerSimple,

		TokenizerCheck:         true,
		TokenizerCheckInterval: 10 * time.Minute,
		TokenizerCheckRetry:    10 * time.Second,
		TokenizerCheckTimeout:  5 * time.Second,
		SpeculativeTTL:         2 * time.Second,
		ApproxTTL:              2 * time.Minute,
		RecomputeWeight:        1,
		KVPressureWeight:       1,
		BreakerFailures:        load.DefaultBreaker.Failures,
		BreakerOpenFor:         load.DefaultBreaker.OpenFor,
		GCPercent:              defaultGCPercent,
		PrefillRatePrior:       prior.PrefillRate,
		QueueCostPrior:         seconds(prior.PerQueued),
		BaseTTFTPrior:          seconds(prior.Base),
	}
}

var prior = predict.DefaultPrior()

// defaultGCPercent: see --gc-percent and the README's Route figures.
const defaultGCPercent = 400

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// limits are the per-request bounds on the prompt's work.
func (c *Config) limits() prompt.Limits {
	return prompt.Limits{MaxMessages: c.MaxMessages, MaxPromptBytes: c.MaxPromptBytes, MaxTemplateBytes: c.MaxTemplateBytes}
}

// predictPrior is the predictor's prior from the flags.
func (c *Config) predictPrior() predict.Prior {
	p := predict.DefaultPrior()
	p.PrefillRate = c.PrefillRatePrior
	p.PerQueued = c.QueueCostPrior.Seconds()
	p.Base = c.BaseTTFTPrior.Seconds()
	return p
}

// RegisterFlags registers the router's flags on fs, with DefaultConfig's
// values as defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	c.Listen.RegisterFlags(fs, d.Listen, "REST /v1/route:explain and /v1/endpoints, /metrics, /healthz, /readyz")
	c.NATS.RegisterFlags(fs, d.NATS.URL, "in-flight load shared between replicas, KV deltas; empty disables both")
	fs.StringVar(&c.RouterID, "router-id", d.RouterID, "this replica's id in published decisions (the host name unless set)")
	fs.StringVar(&c.Endpoints, "endpoints", "", "static workers as id=url,id=url (models discovered from each worker's /v1/models); the kvtracker's --workers syntax: "+fleet.ShorthandSyntax)
	fs.StringVar(&c.EndpointsFile, "endpoints-file", "", "YAML file listing static workers (the kvtracker's --workers-file format): "+fleet.YAMLKeys)
	fs.StringVar(&c.PolicydAddr, "policyd-addr", "", "policyd gRPC address (host:port); empty routes without policies on the static endpoints")
	c.Policyd.RegisterFlags(fs, "policyd", "policyd", "")
	fs.StringVar(&c.GatewayBackend, "gateway-backend", "", "GatewayBackend whose policies apply (default: the snapshot's only or first one)")
	fs.StringVar(&c.Classifiers, "classifiers", d.Classifiers,
		"classifiers deriving each request's tags for policies, in order (of "+strings.Join(classifierRegistry.Names(), ", ")+
			"): header-tags keeps the tags-header tags the GatewayBackend allows, tenant-tags adds the tenant's, pii tags a prompt holding personal data "+
			"(pii-detected, pii:email, pii:phone, pii:card, pii:mynumber, pii:ssn, pii:iban, pii:ip), pii-rules likewise for the GatewayBackend's spec.pii kinds (pii:<kind>), complexity tags it complexity-low or complexity-high; "+
			"pii, pii-rules and complexity read the prompt only when a policy reads their tags; empty: no tags")
	fs.DurationVar(&c.ScrapeInterval, "scrape-interval", d.ScrapeInterval, "how often each worker's /metrics is scraped")
	fs.DurationVar(&c.ScrapeTimeout, "scrape-timeout", d.ScrapeTimeout, "deadline for one scrape; a worker that misses it is unhealthy until it answers")
	fs.DurationVar(&c.InflightTTL, "inflight-ttl", d.InflightTTL, "an in-flight request whose completion never arrives stops counting after this long")
	c.Stop.RegisterFlags(fs, d.Stop)
	fs.IntVar(&c.MaxRecvMsgBytes, "max-recv-msg-bytes", d.MaxRecvMsgBytes,
		"largest gRPC request accepted; Route carries the client's body, so keep it above the gateway's --max-body-bytes")
	fs.IntVar(&c.MaxMessages, "max-messages", d.MaxMessages,
		"most messages one chat request may have; more is refused with 400 before the prompt is rendered (0: no limit)")
	fs.IntVar(&c.MaxPromptBytes, "max-prompt-bytes", d.MaxPromptBytes,
		"most prompt text in bytes one request may carry (chat: message contents, tool calls, tools, documents; completions: the prompt texts); more is refused with 400 (0: no limit)")
	fs.IntVar(&c.MaxTemplateBytes, "max-template-bytes", d.MaxTemplateBytes,
		"largest chat prompt in bytes the model's chat template may render for one request (markup and tools included); a render that outgrows it stops and the request is refused with 400 (0: no limit)")
	c.Redis.RegisterFlags(fs, "", "the kvtracker's KV snapshots; empty follows the NATS KV deltas alone")
	fs.StringVar(&c.Tokenizers, "tokenizers", d.Tokenizers,
		`tokenizer per model, "model=kind,...", "*" for the others; kinds: simple (the simulator's own tokenizer), hf:DIR (Hugging Face tokenizer.json and chat template, as the worker's --tokenizer), harmony:DIR (gpt-oss: the directory's tokenizer.json with chats rendered in harmony's format, as vLLM does for gpt-oss), none (approximate index on prompt text)`)
	fs.BoolVar(&c.TokenizerCheck, "tokenizer-check", d.TokenizerCheck,
		"probe each local worker's POST /tokenize when it appears for a model and compare its token ids with the router's tokenizer; a model whose worker differs is routed in approximate mode (switchyard_router_tokenizer_mismatch, yardctl explain)")
	fs.DurationVar(&c.TokenizerCheckInterval, "tokenizer-check-interval", d.TokenizerCheckInterval,
		"how often a checked worker's tokenizer is checked again; also the longest wait between retries of an unchecked one")
	fs.DurationVar(&c.TokenizerCheckRetry, "tokenizer-check-retry", d.TokenizerCheckRetry,
		"first wait before retrying a worker whose tokenizer could not be checked (no /tokenize, unreachable); doubles up to --tokenizer-check-interval")
	fs.DurationVar(&c.TokenizerCheckTimeout, "tokenizer-check-timeout", d.TokenizerCheckTimeout, "deadline of one tokenizer check of a worker")
	fs.DurationVar(&c.SpeculativeTTL, "kv-speculative-ttl", d.SpeculativeTTL,
		"after a request's predicted first token, how long its blocks are assumed cached on the chosen worker until KV events confirm them")
	fs.DurationVar(&c.ApproxTTL, "approx-ttl", d.ApproxTTL, "how long the approximate index (models without tokenizer, workers without KV events) remembers a routed prefix")
	fs.Float64Var(&c.RecomputeWeight, "recompute-weight", d.RecomputeWeight,
		"weight of the charge for prefilling tokens another worker caches, added to the predicted TTFT (0: predicted TTFT alone)")
	fs.Float64Var(&c.KVPressureWeight, "kv-pressure-weight", d.KVPressureWeight,
		"weight of the charge for the cached context a request would push out of a worker's KV cache (scraped vllm:kv_cache_usage_perc and num_gpu_blocks), added to the predicted TTFT (0: occupancy ignored)")
	fs.IntVar(&c.BreakerFailures, "breaker-failures", d.BreakerFailures,
		"failed requests in a row (no connection, timeout, 429, 5xx, as the gateways report them) that open a provider's circuit: it is not chosen until a probe succeeds (0: never); a provider's spec.circuitBreaker.failures overrides it")
	fs.DurationVar(&c.BreakerOpenFor, "breaker-open-for", d.BreakerOpenFor,
		"how long an open provider circuit waits before one request probes it; a provider's spec.circuitBreaker.openFor overrides it")
	fs.IntVar(&c.GCPercent, "gc-percent", d.GCPercent,
		"Go GC target (GOGC) of the router process: each request's garbage dies with it, and the requests that overlap a collection make Route's tail; higher means fewer collections for more heap (up to 1+N/100 times the live heap); 0 keeps Go's 100; a GOGC environment variable wins")
	fs.BoolVar(&c.Pprof, "pprof", false, "serve Go's CPU, heap and goroutine profiles under /debug/pprof/ on the HTTP port (go tool pprof http://HOST/debug/pprof/profile)")
	fs.StringVar(&c.OperatorTokenFile, "operator-token-file", "",
		"file holding the operator bearer token; set (or --operator-identities), Explain and ListEndpoints need it; unset, Explain is served on a loopback listen address only")
	fs.StringVar(&c.OperatorIdentities, "operator-identities", "",
		"client certificate names (CN, DNS or URI SAN), comma-separated, with the operator role over mutual TLS (--grpc-tls-client-ca)")
	fs.Float64Var(&c.PrefillRatePrior, "prefill-rate-prior", d.PrefillRatePrior, "prefill tokens per second assumed for a worker before its TTFTs are learned")
	fs.DurationVar(&c.QueueCostPrior, "queue-cost-prior", d.QueueCostPrior, "TTFT cost of each request queued or running ahead, before it is learned")
	fs.DurationVar(&c.BaseTTFTPrior, "ttft-base-prior", d.BaseTTFTPrior, "fixed part of a TTFT (one engine step, network), before it is learned")
}

// Validate checks the configuration, including that the endpoints parse.
func (c *Config) Validate() error {
	var errs []error
	errs = append(errs, c.Listen.Validate(), c.Stop.Validate(), c.NATS.Validate(false), c.Redis.Validate(false))
	if strings.TrimSpace(c.RouterID) == "" {
		errs = append(errs, errors.New("router-id: empty (set it, or let it default to the hostname)"))
	}
	errs = append(errs, configcheck.Positive(
		configcheck.Duration{Name: "scrape-interval", Value: c.ScrapeInterval},
		configcheck.Duration{Name: "scrape-timeout", Value: c.ScrapeTimeout},
		configcheck.Duration{Name: "inflight-ttl", Value: c.InflightTTL},
	)...)
	if c.MaxRecvMsgBytes < 1<<20 {
		errs = append(errs, fmt.Errorf("max-recv-msg-bytes: %d is below 1 MiB", c.MaxRecvMsgBytes))
	}
	for _, l := range []struct {
		name string
		v    int
	}{
		{"max-messages", c.MaxMessages},
		{"max-prompt-bytes", c.MaxPromptBytes},
		{"max-template-bytes", c.MaxTemplateBytes},
	} {
		if l.v < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative (0 is no limit), got %d", l.name, l.v))
		}
	}
	if c.MaxPromptBytes > 0 && c.MaxTemplateBytes > 0 && c.MaxTemplateBytes < c.MaxPromptBytes {
		errs = append(errs, fmt.Errorf("max-template-bytes: %d is below max-prompt-bytes %d: a rendered prompt holds its text and markup", c.MaxTemplateBytes, c.MaxPromptBytes))
	}
	if c.OperatorTokenFile != "" {
		if _, err := lifecycle.ReadToken(c.OperatorTokenFile); err != nil {
			errs = append(errs, fmt.Errorf("operator-token-file: %w", err))
		}
	}
	if c.OperatorIdentities != "" && c.GRPCTLS.ClientCA == "" {
		errs = append(errs, errors.New("operator-identities: certificate identities need mutual TLS: set --grpc-tls-client-ca (with --grpc-tls-cert and --grpc-tls-key)"))
	}
	errs = append(errs, c.Policyd.Validate("policyd"))
	if c.PolicydAddr != "" {
		if _, _, err := net.SplitHostPort(c.PolicydAddr); err != nil {
			errs = append(errs, fmt.Errorf("policyd-addr: %q: want host:port: %w", c.PolicydAddr, err))
		}
	}
	if _, err := c.staticCatalog(); err != nil {
		errs = append(errs, err)
	}
	if _, err := classifierRegistry.List(c.Classifiers); err != nil {
		errs = append(errs, fmt.Errorf("classifiers: %w", err))
	}
	if _, err := parseTokenizers(c.Tokenizers); err != nil {
		errs = append(errs, fmt.Errorf("tokenizers: %w", err))
	}
	if c.TokenizerCheck {
		errs = append(errs, configcheck.Positive(
			configcheck.Duration{Name: "tokenizer-check-interval", Value: c.TokenizerCheckInterval},
			configcheck.Duration{Name: "tokenizer-check-retry", Value: c.TokenizerCheckRetry},
			configcheck.Duration{Name: "tokenizer-check-timeout", Value: c.TokenizerCheckTimeout},
		)...)
		if c.TokenizerCheckRetry > c.TokenizerCheckInterval {
			errs = append(errs, fmt.Errorf("tokenizer-check-retry: %s is longer than tokenizer-check-interval %s", c.TokenizerCheckRetry, c.TokenizerCheckInterval))
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"kv-speculative-ttl", c.SpeculativeTTL},
		{"approx-ttl", c.ApproxTTL},
		{"queue-cost-prior", c.QueueCostPrior},
		{"ttft-base-prior", c.BaseTTFTPrior},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative, got %s", d.name, d.v))
		}
	}
	if !(c.RecomputeWeight >= 0 && c.RecomputeWeight <= 100) {
		errs = append(errs, fmt.Errorf("recompute-weight: %v is outside [0, 100]", c.RecomputeWeight))
	}
	if c.BreakerFailures < 0 || c.BreakerFailures > 1000 {
		errs = append(errs, fmt.Errorf("breaker-failures: %d is outside [0, 1000]", c.BreakerFailures))
	}
	if c.BreakerOpenFor <= 0 {
		errs = append(errs, fmt.Errorf("breaker-open-for: must be positive, got %s", c.BreakerOpenFor))
	}
	if c.GCPercent < 0 || c.GCPercent > 10000 {
		errs = append(errs, fmt.Errorf("gc-percent: %d is outside [0, 10000]", c.GCPercent))
	}
	if !(c.KVPressureWeight >= 0 && c.KVPressureWeight <= 100) {
		errs = append(errs, fmt.Errorf("kv-pressure-weight: %v is outside [0, 100]", c.KVPressureWeight))
	}
	if !(c.PrefillRatePrior >= predict.MinPrefillRate && c.PrefillRatePrior <= predict.MaxPrefillRate) {
		errs = append(errs, fmt.Errorf("prefill-rate-prior: %v tokens/s is outside [%v, %v]", c.PrefillRatePrior, predict.MinPrefillRate, predict.MaxPrefillRate))
	}
	return errors.Join(errs...)
}

// staticCatalog reads --endpoints and --endpoints-file together: the
// workers the router routes to besides (or without) policyd's.
func (c *Config) staticCatalog() (fleet.Catalog, error) {
	var short, file []fleet.Worker
	if strings.TrimSpace(c.Endpoints) != "" {
		var err error
		if short, err = fleet.ParseShorthand(c.Endpoints, fleet.Defaults{}); err != nil {
			return fleet.Catalog{}, fmt.Errorf("endpoints: %w", err)
		}
	}
	if c.EndpointsFile != "" {
		data, err := os.ReadFile(c.EndpointsFile)
		if err != nil {
			return fleet.Catalog{}, fmt.Errorf("endpoints-file: %w", err)
		}
		if file, err = fleet.ParseYAML(data, fleet.Defaults{}); err != nil {
			return fleet.Catalog{}, fmt.Errorf("endpoints-file %s: %w", c.EndpointsFile, err)
		}
	}
	cat, err := fleet.NewCatalog(append(short, file...), nil)
	if err != nil {
		return fleet.Catalog{}, fmt.Errorf("endpoints and endpoints-file: %w", err)
	}
	var errs []error
	for _, w := range cat.Workers {
		if w.URL == "" {
			errs = append(errs, fmt.Errorf("endpoints: worker %q has no url (http://...): the router routes to workers over HTTP", w.ID))
		}
	}
	if cat.Len() == 0 && c.PolicydAddr == "" {
		errs = append(errs, errors.New("no endpoints: set --endpoints id=url,... or --endpoints-file, or --policyd-addr"))
	}
	return cat, errors.Join(errs...)
}
