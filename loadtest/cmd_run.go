package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/loadtest/internal/compare"
	"github.com/switchyard-dev/switchyard/loadtest/internal/pick"
	"github.com/switchyard-dev/switchyard/loadtest/internal/ratesweep"
	"github.com/switchyard-dev/switchyard/loadtest/internal/report"
	"github.com/switchyard-dev/switchyard/loadtest/internal/results"
	"github.com/switchyard-dev/switchyard/loadtest/internal/runner"
	"github.com/switchyard-dev/switchyard/loadtest/internal/stream"
	"github.com/switchyard-dev/switchyard/loadtest/internal/workload"
)

// Modes beyond the runner's: modeSweep runs a list of concurrencies one
// after the other; modeRateSweep measures the target's saturation rate in
// a closed loop, then runs open loops at rates spread below it (see the
// ratesweep package).
const (
	modeSweep     = "sweep"
	modeRateSweep = "rate-sweep"
)

// runConfig is `loadtest run`.
type runConfig struct {
	urls        []string
	strategy    string
	label       string
	model       string
	apiKeyEnv   string
	kind        workload.Kind
	spec        workload.Spec
	mode        string
	concurrency int
	sweep       []int
	rate        float64
	// maxInFlight bounds the open loop's sessions in flight; arrivals
	// and rateSweep are --mode rate-sweep's.
	maxInFlight int
	arrivals    string
	rateSweep   ratesweep.Config
	requests    int
	duration    time.Duration
	timeScale   float64
	slo         time.Duration
	calibrate   bool
	ignoreEOS   bool
	timeout     time.Duration
	progress    bool
	// tenants are the --tenant flags; none runs one implicit tenant on
	// --api-key-env and --concurrency / --rate.
	tenants tenantFlag
	// retryAfter waits out 429s with Retry-After up to maxRetryAfter.
	retryAfter    bool
	maxRetryAfter time.Duration
	// set are the flags given on the command line.
	set map[string]bool
	// lookupEnv reads the environment (tests replace it).
	lookupEnv func(string) (string, bool)
}

func (c *runConfig) registerFlags(fs *flag.FlagSet) {
	c.kind = workload.SharedPrefix
	fs.Func("url", "OpenAI base URL of a target, e.g. http://127.0.0.1:8080/v1 (repeatable, or comma-separated; several targets need a --strategy)", func(s string) error {
		for _, u := range strings.Split(s, ",") {
			if u = strings.TrimSpace(u); u != "" {
				c.urls = append(c.urls, u)
			}
		}
		return nil
	})
	fs.StringVar(&c.strategy, "strategy", "", "how to pick among several targets: random, round-robin, least-queue, oracle (default: direct for one target, random for several)")
	fs.StringVar(&c.label, "label", "", "strategy name in the results (default: the strategy)")
	fs.StringVar(&c.model, "model", "", "model name (default: the first model the target lists)")
	fs.StringVar(&c.apiKeyEnv, "api-key-env", "OPENAI_API_KEY", "environment variable holding the API key sent as a bearer token (unset: none)")
	fs.Func("workload", "control, shared-prefix, multi-turn or prefix-pressure (default shared-prefix; prefix-pressure needs --pressure-groups or --pressure-kv-tokens)", func(s string) error {
		k, err := workload.ParseKind(s)
		c.kind = k
		return err
	})
	c.spec.RegisterFlags(fs)
	fs.StringVar(&c.mode, "mode", string(runner.Concurrent), "load mode: concurrent (closed loop: --concurrency clients, each sending its next session when the last ends), constant or poisson (open loop: sessions arrive at --rate per model second, evenly spaced or at exponential gaps, whatever the server's pace), sweep (the --sweep concurrencies in turn) or rate-sweep (a closed loop at --saturation-concurrency measures the saturation rate, then --rate-points open loops of --arrivals run at rates spread below it)")
	fs.IntVar(&c.concurrency, "concurrency", 16, "concurrent clients (concurrent); headline level (sweep); not for the open-loop modes, bounded by --max-in-flight")
	fs.Func("sweep", "comma-separated concurrencies for --mode sweep", func(s string) error {
		v, err := compare.ParseInts(s)
		c.sweep = v
		return err
	})
	fs.Float64Var(&c.rate, "rate", 1, "constant, poisson: offered sessions per (model) second (requests per second; conversations per second for multi-turn)")
	fs.IntVar(&c.maxInFlight, "max-in-flight", runner.DefaultMaxInFlight, "constant, poisson, rate-sweep: bound on sessions in flight; an arrival beyond it is not sent and is counted (arrivals_over_bound), never waited for")
	fs.StringVar(&c.arrivals, "arrivals", string(runner.Poisson), "rate-sweep: the arrival process of its open loops, constant (evenly spaced) or poisson (exponential gaps)")
	c.rateSweep = ratesweep.DefaultConfig()
	c.rateSweep.RegisterFlags(fs)
	fs.IntVar(&c.requests, "requests", 200, "requests per run (0: bound by --duration only)")
	fs.DurationVar(&c.duration, "duration", 0, "(model) time per run (0: bound by --requests only)")
	fs.Float64Var(&c.timeScale, "time-scale", 1, "the server's time scale (switchyard sim --time-scale): reported times are wall × this")
	fs.DurationVar(&c.slo, "slo", 8*time.Second, "TTFT SLO for goodput, in (model) time")
	fs.BoolVar(&c.calibrate, "calibrate", true, "measure the server's characters per token before generating prompts")
	fs.BoolVar(&c.ignoreEOS, "ignore-eos", false, "send vLLM's ignore_eos so every answer has max_tokens tokens")
	fs.DurationVar(&c.timeout, "request-timeout", 10*time.Minute, "wall-time bound of one request")
	fs.BoolVar(&c.progress, "progress", true, "show a progress bar when stderr is a terminal")
	fs.Var(&c.tenants, "tenant", "`"+tenantSyntax+"`: a tenant with its own API key (from the environment variable ENV), load and prompts; repeatable: all run at once, within one --requests / --duration budget, with results per tenant;"+
		" e.g. steady:key-env=STEADY_KEY:concurrency=2. concurrency= is its clients (concurrent) or cap in flight (poisson), rate= its sessions per second (poisson), priority= is sent as x-switchyard-priority, workload= replaces --workload. Replaces --api-key-env, --concurrency and --rate")
	fs.BoolVar(&c.retryAfter, "retry-after", false, "wait out a 429 that carries Retry-After and send the request again, timing it from the first attempt (default: record the 429 as a refusal and move on)")
	fs.DurationVar(&c.maxRetryAfter, "max-retry-after", 30*time.Second, "with --retry-after: the longest Retry-After waited out (wall time); a longer one is recorded as a refusal")
}

func (c *runConfig) validate() error {
	var errs []error
	if len(c.urls) == 0 {
		errs = append(errs, errors.New("url: at least one target is required"))
	}
	switch {
	case c.strategy == "" && len(c.urls) > 1:
		c.strategy = results.Random
	case c.strategy == "":
		c.strategy = results.Direct
	case !slices.Contains(pick.Strategies, c.strategy):
		errs = append(errs, fmt.Errorf("strategy %q: want one of %v", c.strategy, pick.Strategies))
	}
	if c.label == "" {
		c.label = c.strategy
	}
	c.spec.Kind = c.kind
	if err := c.spec.Validate(); err != nil {
		errs = append(errs, err)
	}
	open := false
	switch c.mode {
	case string(runner.Concurrent):
	case string(runner.Constant), string(runner.Poisson):
		open = true
		if !(c.rate > 0) || math.IsInf(c.rate, 0) {
			errs = append(errs, fmt.Errorf("rate %v: --mode %s needs a positive rate", c.rate, c.mode))
		}
	case modeSweep:
		if len(c.sweep) == 0 {
			errs = append(errs, errors.New("mode sweep: give the concurrencies with --sweep"))
		}
	case modeRateSweep:
		open = true
		if _, err := ratesweep.ParseArrivals(c.arrivals); err != nil {
			errs = append(errs, err)
		}
		if err := c.rateSweep.Validate(); err != nil {
			errs = append(errs, err)
		}
		if c.set["rate"] {
			errs = append(errs, errors.New("rate: --mode rate-sweep finds its rates from the saturation run"))
		}
		if c.requests > 0 && c.requests <= c.rateSweep.Concurrency {
			errs = append(errs, fmt.Errorf("requests %d cannot fill the saturation run's %d clients (want more requests than --saturation-concurrency)", c.requests, c.rateSweep.Concurrency))
		}
	default:
		errs = append(errs, fmt.Errorf("mode %q: want concurrent, constant, poisson, sweep or rate-sweep", c.mode))
	}
	if open && c.set["concurrency"] {
		errs = append(errs, fmt.Errorf("concurrency: closed-loop clients; --mode %s is an open loop, bounded by --max-in-flight", c.mode))
	}
	if !open && c.set["max-in-flight"] {
		errs = append(errs, fmt.Errorf("max-in-flight: only in the open-loop modes (constant, poisson, rate-sweep), not %s", c.mode))
	}
	if c.maxInFlight < 1 || c.maxInFlight > 1<<16 {
		errs = append(errs, fmt.Errorf("max-in-flight %d: want 1 to 65536", c.maxInFlight))
	}
	if c.mode != modeSweep && c.set["sweep"] {
		errs = append(errs, fmt.Errorf("sweep: only with --mode sweep (mode is %s)", c.mode))
	}
	if c.mode != modeRateSweep {
		for _, f := range []string{"arrivals", "rate-points", "rate-low", "rate-high", "saturation-concurrency"} {
			if c.set[f] {
				errs = append(errs, fmt.Errorf("%s: only with --mode rate-sweep (mode is %s)", f, c.mode))
			}
		}
	}
	if c.slo <= 0 {
		errs = append(errs, errors.New("slo: must be positive"))
	}
	if c.retryAfter && c.maxRetryAfter <= 0 {
		errs = append(errs, errors.New("max-retry-after: must be positive with --retry-after"))
	}
	if c.set["max-retry-after"] && !c.retryAfter {
		errs = append(errs, errors.New("max-retry-after: only with --retry-after"))
	}
	if len(c.tenants) > 0 {
		if c.mode == modeSweep || c.mode == modeRateSweep {
			errs = append(errs, fmt.Errorf("tenant: not with --mode %s (give each tenant its load instead)", c.mode))
		}
		for _, f := range []string{"api-key-env", "concurrency", "rate", "max-in-flight"} {
			if c.set[f] {
				errs = append(errs, fmt.Errorf("%s: not with --tenant (each tenant gives its own key-env, concurrency and rate; concurrency= bounds its sessions in flight in the open-loop modes)", f))
			}
		}
		lookup := c.lookupEnv
		if lookup == nil {
			lookup = os.LookupEnv
		}
		errs = append(errs, validateTenants(c.tenants, c.mode, c.spec.Seed, lookup))
		for _, t := range c.tenants {
			if t.workload != "" && t.workload != c.kind {
				sp := c.spec
				sp.Kind = t.workload
				if err := sp.Validate(); err != nil {
					errs = append(errs, fmt.Errorf("tenant %s: %w", t.name, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// apiBase normalises a target URL to the OpenAI base (…/v1) and the
// server root.
func apiBase(u string) (base, root string) {
	u = strings.TrimSuffix(u, "/")
	if strings.HasSuffix(u, "/v1") {
		return u, strings.TrimSuffix(u, "/v1")
	}
	return u + "/v1", u
}

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadtest run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg runConfig
	cfg.registerFlags(fs)
	var out outputs
	out.registerFlags(fs, "loadtest")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	cfg.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { cfg.set[f.Name] = true })
	if err := cfg.validate(); err != nil {
		fmt.Fprintf(stderr, "loadtest run: invalid configuration: %v\n", err)
		return 2
	}
	out.resolve()
	log := newLogger(stderr)
	f, err := runLoad(ctx, cfg, &out, stderr)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			log.Warn().Msg("interrupted")
			return 130
		}
		log.Error().Err(err).Msg("exit")
		return 1
	}
	if err := out.write(f, stdout, "Load test: "+string(cfg.kind)); err != nil {
		log.Error().Err(err).Msg("exit")
		return 1
	}
	return 0
}

func runLoad(ctx context.Context, cfg runConfig, out *outputs, status io.Writer) (*results.File, error) {
	started := time.Now()
	var loads []compare.Load
	switch cfg.mode {
	case string(runner.Concurrent):
		loads = []compare.Load{{Mode: runner.Concurrent, Concurrency: cfg.concurrency}}
	case string(runner.Constant), string(runner.Poisson):
		loads = []compare.Load{{Mode: runner.Mode(cfg.mode), Rate: cfg.rate, MaxInFlight: cfg.maxInFlight}}
	case modeSweep:
		for _, c := range cfg.sweep {
			loads = append(loads, compare.Load{Mode: runner.Concurrent, Concurrency: c})
		}
	}
	conns := cfg.concurrency
	for _, l := range loads {
		conns = max(conns, l.Concurrency, l.MaxInFlight)
	}
	if cfg.mode == modeRateSweep {
		conns = max(cfg.rateSweep.Concurrency, cfg.maxInFlight)
	}
	if len(cfg.tenants) > 0 {
		conns = 0
		for _, t := range cfg.tenants {
			conns += t.concurrency
		}
	}
	client := stream.NewClient(max(conns, 1))
	defer client.CloseIdle()
	if env := cfg.apiKeyEnv; env != "" && len(cfg.tenants) == 0 {
		client.APIKey = os.Getenv(env)
	}
	// Each tenant has its own client (key, priority) over the one
	// transport, so tenants share connections as clients behind one
	// proxy would.
	tenantClients := make([]*stream.Client, len(cfg.tenants))
	for i, t := range cfg.tenants {
		c := &stream.Client{HTTP: client.HTTP, APIKey: lookupKey(cfg, t.keyEnv)}
		if t.priority != "" {
			c.Header = http.Header{stream.PriorityHeader: {t.priority}}
		}
		tenantClients[i] = c
	}
	// The model list and the calibration go out with the first tenant's
	// key: a gateway answers them only to a known key.
	setup := client
	if len(tenantClients) > 0 {
		setup = tenantClients[0]
	}
	var targets []runner.Target
	var pts []pick.Target
	for i, u := range cfg.urls {
		base, root := apiBase(u)
		id := fmt.Sprintf("target-%d", i)
		targets = append(targets, runner.Target{ID: id, APIBase: base})
		pts = append(pts, pick.Target{ID: id, URL: root})
	}
	if cfg.model == "" {
		m, err := firstModel(ctx, setup, targets[0].APIBase)
		if err != nil {
			return nil, err
		}
		cfg.model = m
	}
	spec := cfg.spec
	if cfg.calibrate {
		cpt, err := workload.Calibrate(ctx, func(ctx context.Context, text string) (int, error) {
			return setup.CountPrompt(ctx, targets[0].APIBase, cfg.model, text)
		})
		if err != nil {
			return nil, err
		}
		spec.CharsPerToken = cpt
	}
	recsOut, closeRecs, err := out.openRecords()
	if err != nil {
		return nil, err
	}
	defer closeRecs()
	enc := json.NewEncoder(io.Discard)
	if recsOut != nil {
		enc = json.NewEncoder(recsOut)
	}
	slo := cfg.slo.Seconds()
	var tenantSums []*results.TenantSummary
	// runAt runs one load and summarises it.
	runAt := func(ld compare.Load) (*results.Summary, []results.Record, error) {
		bgCtx, stopBG := context.WithCancel(ctx)
		defer stopBG()
		picker, err := pick.New(cfg.strategy, pts, pick.Options{Seed: spec.Seed, HTTP: client.HTTP,
			Background: func(fn func(context.Context)) { go fn(bgCtx) }})
		if err != nil {
			return nil, nil, err
		}
		plan := runner.Plan{
			Workload: string(cfg.kind), Strategy: cfg.label, Mode: ld.Mode, Concurrency: ld.Concurrency, Rate: ld.Rate,
			Requests: cfg.requests, Duration: cfg.duration, TimeScale: cfg.timeScale, Model: cfg.model,
			IgnoreEOS: cfg.ignoreEOS, RequestTimeout: cfg.timeout, Seed: spec.Seed,
			RetryAfter: cfg.retryAfter, MaxRetryAfter: cfg.maxRetryAfter,
		}
		if ld.Mode.Open() {
			plan.Concurrency = ld.MaxInFlight
		}
		tenants, err := runTenants(cfg, spec, tenantClients)
		if err != nil {
			return nil, nil, err
		}
		if len(tenants) > 0 {
			plan.Concurrency, plan.Rate = 0, 0
			for _, t := range tenants {
				plan.Concurrency += t.Concurrency
				plan.Rate += t.Rate
			}
		} else {
			gen, err := workload.NewGenerator(spec)
			if err != nil {
				return nil, nil, err
			}
			tenants = []runner.Tenant{{Client: client, Gen: gen, Concurrency: plan.Concurrency, Rate: plan.Rate, Seed: plan.Seed}}
		}
		label := fmt.Sprintf("%s %s %s", cfg.kind, cfg.label, levelName(plan))
		if len(cfg.tenants) > 0 {
			label = fmt.Sprintf("%s %s %d tenants", cfg.kind, cfg.label, len(tenants))
		}
		bar := compare.NewProgress(status, cfg.progress, label, plan)
		o, err := runner.Execute(ctx, plan, tenants, runner.Env{Client: client, Targets: targets, Picker: picker, OnDone: bar.Done})
		bar.Finish()
		if err != nil {
			return nil, nil, err
		}
		recs := o.Records
		for i := range recs {
			if err := enc.Encode(&recs[i]); err != nil {
				return nil, nil, fmt.Errorf("write records: %w", err)
			}
		}
		s := results.Summarize(recs, cfg.timeScale, slo)
		if ld.Mode.Open() {
			s.Rate = plan.Rate
			compare.AddOpen(s, o.Open)
		} else {
			s.Concurrency = plan.Concurrency
		}
		line := fmt.Sprintf("%s: ttft p50 %s  goodput %s rpm  shed %s  cache hit %s", label,
			report.Sec(s.TTFTP50), report.Number(s.GoodputRPM, 1), report.Pct(s.ShedRate), report.Pct(s.CacheHitRatio))
		if ld.Mode.Open() {
			line += fmt.Sprintf("  achieved %s/s of %g/s  TTFT growth %s  over the in-flight bound %d of %d", report.Number(s.AchievedRate, 3), s.Rate, report.Number(s.TTFTGrowth, 2), s.ArrivalsOverBound, s.Arrivals)
		}
		fmt.Fprintln(status, line)
		if len(cfg.tenants) > 0 {
			tenantSums = summarizeTenants(cfg, tenants, o, slo, ld.Mode)
			for _, ts := range tenantSums {
				fmt.Fprintf(status, "  tenant %s: %d ok, %d refused (%d × 429), ttft p50 %s p99 %s\n", ts.Tenant,
					ts.Succeeded, ts.Refused, ts.Refused429, report.Sec(ts.TTFTP50), report.Sec(ts.TTFTP99))
			}
		}
		return s, recs, nil
	}
	var sat *results.Saturation
	if cfg.mode == modeRateSweep {
		ld := compare.Load{Mode: runner.Concurrent, Concurrency: cfg.rateSweep.Concurrency}
		_, recs, err := runAt(ld)
		if err != nil {
			return nil, err
		}
		m := ratesweep.Measure(recs, cfg.timeScale, cfg.label, ld.Concurrency)
		sat = &m
		rates := cfg.rateSweep.Rates(float64(m.Rate))
		fmt.Fprintf(status, "saturation: %s requests/s (%s window), %s sessions/s; rates %v\n",
			report.Number(m.RequestsPerS, 3), m.Window, report.Number(m.Rate, 3), rates)
		if len(rates) == 0 {
			return nil, errors.New("the saturation run served nothing: no rate to sweep")
		}
		for _, r := range rates {
			loads = append(loads, compare.Load{Mode: runner.Mode(cfg.arrivals), Rate: r, MaxInFlight: cfg.maxInFlight})
		}
	}
	var points []*results.Summary
	for _, ld := range loads {
		s, _, err := runAt(ld)
		if err != nil {
			return nil, err
		}
		points = append(points, s)
	}
	// The headline: the --concurrency level of a sweep, else the last
	// point (a rate sweep's highest rate).
	head := points[len(points)-1]
	if cfg.mode == modeSweep {
		for _, p := range points {
			if p.Concurrency == cfg.concurrency {
				head = p
			}
		}
	}
	if len(points) > 1 {
		for _, p := range points {
			head.Sweep = append(head.Sweep, p.Point())
		}
		// The goodput headline over the levels, or over the offered rates.
		compare.Goodput(map[string]*results.Summary{cfg.label: head}, compare.DefaultSLOAttainment)
	}
	target := strings.Join(cfg.urls, ",")
	params := results.Params{
		Command: "run", Mode: cfg.mode, TimeScale: cfg.timeScale, TimeUnit: results.TimeUnit, Model: cfg.model,
		Target: target, Strategies: []string{cfg.label}, Concurrency: head.Concurrency, Rate: head.Rate,
		Requests: cfg.requests, DurationS: cfg.duration.Seconds(),
		SLOTTFTS:  map[string]float64{string(cfg.kind): slo},
		Workloads: map[string]workload.Spec{string(cfg.kind): spec.Shape()},
		Cores:     runtime.NumCPU(), GoVersion: runtime.Version(), Started: started.UTC().Truncate(time.Second),
		RetryAfter: cfg.retryAfter,
	}
	if runner.Mode(cfg.mode).Open() && len(cfg.tenants) == 0 {
		params.MaxInFlight = cfg.maxInFlight
	}
	if sat != nil {
		params.Load, params.Arrivals, params.MaxInFlight = modeRateSweep, cfg.arrivals, cfg.maxInFlight
		params.RateSweep = &results.RateSweep{Points: cfg.rateSweep.Points, Low: cfg.rateSweep.Low, High: cfg.rateSweep.High,
			Strategy: cfg.label, Concurrency: cfg.rateSweep.Concurrency}
		params.Saturation = map[string]results.Saturation{string(cfg.kind): *sat}
		params.Headline = map[string]results.Headline{string(cfg.kind): {Rate: head.Rate, Rule: "top-rate"}}
		params.RatesByWorkload = map[string][]float64{}
		for _, p := range points {
			params.RatesByWorkload[string(cfg.kind)] = append(params.RatesByWorkload[string(cfg.kind)], p.Rate)
		}
	}
	for _, t := range cfg.tenants {
		kind := cmp.Or(t.workload, cfg.kind)
		params.Tenants = append(params.Tenants, results.Tenant{Name: t.name, KeyEnv: t.keyEnv, Workload: string(kind),
			Concurrency: t.concurrency, Rate: t.rate, Priority: t.priority, Seed: t.seed(spec.Seed)})
		if kind != cfg.kind {
			sp := spec
			sp.Kind = kind
			params.Workloads[string(kind)] = sp.Shape()
			params.SLOTTFTS[string(kind)] = slo
		}
	}
	params.WallSeconds = math.Round(time.Since(started).Seconds())
	if cfg.mode == modeSweep {
		params.Sweep = cfg.sweep
	}
	return &results.File{
		Schema:    results.Schema,
		Params:    params,
		Workloads: map[string]map[string]*results.Summary{string(cfg.kind): {cfg.label: head}},
		Tenants:   tenantSums,
	}, nil
}

// lookupKey reads a tenant's API key (validate checked it is set).
func lookupKey(cfg runConfig, env string) string {
	lookup := cfg.lookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	v, _ := lookup(env)
	return strings.TrimSpace(v)
}

// runTenants builds the runner's tenants: each its own client and its own
// generator, seeded apart so no two tenants send the same text.
func runTenants(cfg runConfig, spec workload.Spec, clients []*stream.Client) ([]runner.Tenant, error) {
	var out []runner.Tenant
	for i, t := range cfg.tenants {
		sp := spec
		sp.Kind = cmp.Or(t.workload, cfg.kind)
		sp.Seed = t.seed(spec.Seed)
		gen, err := workload.NewGenerator(sp)
		if err != nil {
			return nil, fmt.Errorf("tenant %s: %w", t.name, err)
		}
		out = append(out, runner.Tenant{Name: t.name, Client: clients[i], Gen: gen,
			Concurrency: t.concurrency, Rate: t.rate, Seed: sp.Seed})
	}
	return out, nil
}

// summarizeTenants splits a run's records by tenant, in the order of the
// flags.
func summarizeTenants(cfg runConfig, tenants []runner.Tenant, o runner.Outcome, slo float64, mode runner.Mode) []*results.TenantSummary {
	var out []*results.TenantSummary
	for i, t := range tenants {
		var mine []results.Record
		for _, r := range o.Records {
			if r.Tenant == t.Name {
				mine = append(mine, r)
			}
		}
		s := results.Summarize(mine, cfg.timeScale, slo)
		if mode.Open() {
			s.Rate = t.Rate
			for _, op := range o.Open {
				if op.Tenant == t.Name {
					compare.AddOpen(s, []runner.OpenLoop{op})
				}
			}
		} else {
			s.Concurrency = t.Concurrency
		}
		out = append(out, &results.TenantSummary{Tenant: t.Name, Workload: string(t.Gen.Spec().Kind),
			Priority: cfg.tenants[i].priority, Summary: s})
	}
	return out
}

func levelName(p runner.Plan) string {
	if p.Mode.Open() {
		return fmt.Sprintf("rate=%g/s", p.Rate)
	}
	return fmt.Sprintf("c=%d", p.Concurrency)
}

// firstModel asks the target which models it serves.
func firstModel(ctx context.Context, c *stream.Client, base string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/models", nil)
	if err != nil {
		return "", err
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return "", fmt.Errorf("list models at %s: %w", base, err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("list models at %s: status %d (set --model)", base, resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&list); err != nil || len(list.Data) == 0 {
		return "", fmt.Errorf("list models at %s: no model in the answer (set --model)", base)
	}
	return list.Data[0].ID, nil
}
