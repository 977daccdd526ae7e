// Package compare runs the routing benchmark: the same seeded workloads,
// on the same simulated fleet configuration, under each routing strategy —
// the baselines picking workers inside the load generator, Switchyard
// through its real router and gateway — restarting the fleet before every
// run so that each starts with cold caches.
//
// Switchyard runs twice over where llm-d compared its precise and
// approximate prefix scorers: switchyard (with --kv-events, the router's
// index of the blocks the workers report) and approximate (the same router
// with no KV events, on its approximate index of its own decisions, which
// cannot see evictions). The prefix-pressure workload, whose groups'
// prefixes fill most of the fleet's KV cache, is where the two part: it is
// sized on the KV cache a simulated worker reports (probe), and checked
// against llm-d's ratios in every load (PrefixPressureChecks).
package compare

import (
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
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/loadtest/internal/fleet"
	"github.com/switchyard-dev/switchyard/loadtest/internal/pick"
	"github.com/switchyard-dev/switchyard/loadtest/internal/ratesweep"
	"github.com/switchyard-dev/switchyard/loadtest/internal/report"
	"github.com/switchyard-dev/switchyard/loadtest/internal/results"
	"github.com/switchyard-dev/switchyard/loadtest/internal/runner"
	"github.com/switchyard-dev/switchyard/loadtest/internal/stream"
	"github.com/switchyard-dev/switchyard/loadtest/internal/workload"
)

// Strategies in the order they run and are reported.
var Strategies = []string{results.Random, results.RoundRobin, results.LeastQueue, results.Approximate, results.Switchyard, results.Oracle}

// DefaultStrategies are what runs without --strategies: the routing
// benchmark's baselines, Switchyard and the oracle. approximate — the
// same router without KV events — is for prefix-pressure, where llm-d
// compared its precise scorer with its approximate one; on the default
// fleet without --kv-events it is the switchyard run itself.
var DefaultStrategies = []string{results.Random, results.RoundRobin, results.LeastQueue, results.Switchyard, results.Oracle}

// DefaultSLO is the TTFT SLO per workload, model seconds: the reference
// benchmark's 8 s (shared prefix) and 4 s (multi-turn); control, which it
// gave none, gets the shared-prefix one since its prompts are as long.
var DefaultSLO = map[workload.Kind]float64{
	workload.SharedPrefix: 8,
	workload.MultiTurn:    4,
	workload.Control:      8,
	// llm-d published no SLO for its prefix-pressure case; its prompts
	// (prefix and question) are long, as shared-prefix's are.
	workload.PrefixPressure: 8,
}

// Loads.
const (
	// LoadConcurrency is a closed loop at each concurrency of the sweep.
	LoadConcurrency = "concurrency"
	// LoadRate is an open loop at each of Config.Rates.
	LoadRate = "rate"
	// LoadRateSweep is an open loop at rates spread below each
	// workload's saturation rate.
	LoadRateSweep = "rate-sweep"
)

// Loads are the loads compare runs.
var Loads = []string{LoadConcurrency, LoadRate, LoadRateSweep}

// Config is `loadtest compare`.
type Config struct {
	// Load is LoadConcurrency, LoadRate or LoadRateSweep.
	Load string
	// Rates are LoadRate's offered rates, sessions per model second.
	Rates []float64
	// Arrivals is the open loop's arrival process (constant or poisson).
	Arrivals runner.Mode
	// RateSweep spreads LoadRateSweep's rates; SaturationStrategy is the
	// strategy whose closed loop measures each workload's saturation rate.
	RateSweep          ratesweep.Config
	SaturationStrategy string
	// MaxInFlight bounds the open loop's sessions in flight.
	MaxInFlight int
	// set are the flags given on the command line (see Parsed).
	set map[string]bool
	// Bin is the switchyard binary.
	Bin        string
	Workers    int
	TimeScale  float64
	Model      string
	Workloads  []workload.Kind
	Strategies []string
	// Sweep is the concurrency levels each workload runs at; SweepFor
	// replaces it for some workloads.
	Sweep    []int
	SweepFor map[workload.Kind][]int
	// Concurrency, when positive, is every workload's headline level (and
	// is run); 0 lets Headline choose each workload's from the run.
	Concurrency int
	// Repeat runs each configuration this many times, each on a fresh
	// fleet, and reports medians. In the rate sweep it repeats every rate
	// point, not the saturation run: the saturation rate only places the
	// grid of rates, every strategy and every repeat must run on the same
	// grid for their medians to compare, and a median of repeated
	// saturation runs would cost Repeat−1 more closed loops per workload
	// to move the grid, not to change any comparison on it.
	Repeat int
	// Requests bounds each run (RequestsFor replaces it for some
	// workloads); Duration (model time) too, when set.
	Requests    int
	RequestsFor map[workload.Kind]int
	Duration    time.Duration
	SLO         map[workload.Kind]float64
	// SLOAttainment is the fraction of a run's requests that must meet
	// the TTFT SLO for the run's level to count as meeting the SLO.
	SLOAttainment float64
	// Spec is the workload shape; its Kind is set per workload.
	Spec      workload.Spec
	Calibrate bool
	IgnoreEOS bool
	// SimArgs and DevArgs are extra flags for `switchyard sim` and
	// `switchyard dev`.
	SimArgs, DevArgs []string
	// KVEvents runs switchyard as deployed: `switchyard dev` starts the
	// simulated workers itself (same defaults as `switchyard sim`) with
	// KV events flowing to a kvtracker. Without (the default), switchyard
	// routes over a `switchyard sim` fleet like the baselines', with no KV
	// events, on its approximate index: the same worker processes for
	// every strategy, and on multi-turn at 8 clients no worse (goodput
	// 165, 135, 113 rpm in three runs against 130, 118, 120 with events).
	KVEvents bool
	// Bystanders adds, to every run, that share of its load (sessions in
	// the closed loop, rate in the open one) of the same workload — the
	// same groups' prefixes, other sessions — sent straight to a random
	// worker: traffic the router does not route and, without KV events,
	// does not see, so that its view of the caches drifts from theirs.
	// Only the measured traffic is summarised.
	Bystanders     float64
	LogDir         string
	RequestTimeout time.Duration
	// Progress shows a bar per run on stderr when it is a terminal.
	Progress bool
	// onGateway, when set (tests), is called with each Switchyard stack
	// and the run's workload after its run, before the stack stops.
	onGateway func(ctx context.Context, strategy string, spec workload.Spec, gw *fleet.Gateway) error
}

// DefaultConfig is the full benchmark's configuration.
func DefaultConfig() Config {
	slo := map[workload.Kind]float64{}
	for k, v := range DefaultSLO {
		slo[k] = v
	}
	sweepFor := map[workload.Kind][]int{}
	for k, v := range DefaultSweepFor {
		sweepFor[k] = slices.Clone(v)
	}
	requestsFor := map[workload.Kind]int{}
	for k, v := range DefaultRequestsFor {
		requestsFor[k] = v
	}
	return Config{
		Load:               LoadConcurrency,
		Arrivals:           runner.Poisson,
		RateSweep:          ratesweep.DefaultConfig(),
		SaturationStrategy: results.RoundRobin,
		MaxInFlight:        runner.DefaultMaxInFlight,
		Bin:                "bin/switchyard",
		Workers:            3,
		TimeScale:          10,
		Model:              "qwen-3.6-27b",
		Workloads:          slices.Clone(workload.DefaultKinds),
		Strategies:         slices.Clone(DefaultStrategies),
		Sweep:              slices.Clone(DefaultSweep),
		SweepFor:           sweepFor,
		Requests:           DefaultRequests,
		RequestsFor:        requestsFor,
		Repeat:             1,
		SLO:                slo,
		SLOAttainment:      DefaultSLOAttainment,
		Spec:               workload.DefaultSpec(workload.SharedPrefix),
		Calibrate:          true,
		RequestTimeout:     10 * time.Minute,
		Progress:           true,
	}
}

// Default levels and run sizes. They are calibrated (see the README) so
// that on the default fleet each workload's sweep brackets the load at
// which random's median TTFT is the reference Service baseline's, and
// reaches the load at which the reference said its router still met the
// SLO.
var (
	DefaultSweep    = []int{8, 16, 32}
	DefaultSweepFor = map[workload.Kind][]int{
		// Conversations of ~6k tokens fill the three KV caches at about
		// 16 clients: beyond, every strategy thrashes alike.
		workload.MultiTurn: {8, 16},
		// Unique 8k-token prompts saturate three workers at a few
		// clients; control only has to show no loss where nothing is
		// shared, at the load of the reference's baseline (random's
		// median 8.0 s at 8 clients, 3.3 s at 4, 21 s at 16).
		workload.Control: {8},
	}
	DefaultRequests    = 200
	DefaultRequestsFor = map[workload.Kind]int{
		// Fewer shared-prefix and control requests (each a long prefill,
		// or a full one) keep `make bench-routing` under ten minutes.
		workload.SharedPrefix: 160,
		workload.Control:      60,
	}
)

// DefaultSLOAttainment is the share of requests within the TTFT SLO at
// which a level counts as meeting the SLO: the 90th percentile, since the
// reference's Service baseline "met the SLO at no concurrency level" even
// at the load where its median TTFT was within it, so a median cannot be
// what it meant.
const DefaultSLOAttainment = 0.9

// RegisterFlags registers compare's flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	*c = d
	fs.StringVar(&c.Bin, "switchyard-bin", d.Bin, "the switchyard binary (go build -o bin/switchyard ./cmd/switchyard)")
	fs.IntVar(&c.Workers, "workers", d.Workers, "simulated vLLM workers")
	fs.Float64Var(&c.TimeScale, "time-scale", d.TimeScale, "simulated time runs this many times faster than the wall; reported times are model seconds")
	fs.StringVar(&c.Model, "model", d.Model, "served model name")
	fs.Func("workloads", "comma-separated workloads, of "+joinKinds(workload.Kinds)+"; prefix-pressure's groups fill --pressure-kv-fill of the fleet's KV cache, read from a simulated worker's cache_config_info (default "+joinKinds(d.Workloads)+")", func(s string) error {
		var ks []workload.Kind
		for _, n := range splitList(s) {
			k, err := workload.ParseKind(n)
			if err != nil {
				return err
			}
			ks = append(ks, k)
		}
		c.Workloads = ks
		return nil
	})
	fs.Func("strategies", "comma-separated strategies, of "+strings.Join(Strategies, ",")+"; approximate is switchyard's router without KV events, on its approximate index, over a `switchyard sim` fleet like the baselines' whatever --kv-events says (default "+strings.Join(d.Strategies, ",")+")", func(s string) error {
		var ss []string
		for _, n := range splitList(s) {
			if !slices.Contains(Strategies, n) {
				return fmt.Errorf("unknown strategy %q (want some of %s)", n, strings.Join(Strategies, ","))
			}
			ss = append(ss, n)
		}
		c.Strategies = ss
		return nil
	})
	fs.IntVar(&c.Concurrency, "concurrency", d.Concurrency, "headline concurrency of every workload, added to the levels run (0: per workload, the level at which random's median TTFT is closest to the reference Service baseline's)")
	fs.Func("sweep", "--load concurrency: concurrency levels to run, comma-separated: LEVELS for every workload, WORKLOAD=LEVELS for one; repeatable, later ones win (default "+describeSweep(d)+")", func(s string) error {
		return setPerWorkload(s, ParseInts, &c.Sweep, c.SweepFor)
	})
	fs.StringVar(&c.Load, "load", d.Load, "concurrency (closed loop at each --sweep level: the routing benchmark and its bar), rate (open loop at each --rates rate) or rate-sweep (open loop at --rate-points rates spread below each workload's saturation rate, measured once per workload by a closed loop of --saturation-strategy at --saturation-concurrency clients, so every strategy runs at the same rates)")
	fs.Func("rates", "--load rate: offered rates, comma-separated, in sessions per model second (requests per second; conversations per second for multi-turn)", func(s string) error {
		v, err := ParseRates(s)
		c.Rates = v
		return err
	})
	fs.Func("arrivals", "open-loop arrival process: constant (evenly spaced) or poisson (exponential gaps: the bursts of independent users) (default "+string(d.Arrivals)+")", func(s string) error {
		m, err := ratesweep.ParseArrivals(s)
		c.Arrivals = m
		return err
	})
	c.RateSweep.RegisterFlags(fs)
	fs.StringVar(&c.SaturationStrategy, "saturation-strategy", d.SaturationStrategy, "rate sweep: the strategy whose closed loop measures each workload's saturation rate, for every strategy's rates (round-robin: what a fleet without smart routing sustains)")
	fs.IntVar(&c.MaxInFlight, "max-in-flight", d.MaxInFlight, "open loop: bound on sessions in flight; an arrival beyond it is not sent and is counted (arrivals_over_bound), never waited for")
	fs.Func("requests", "requests per run: N for every workload, WORKLOAD=N for one; repeatable, later ones win; 0: bound by --duration only (default "+describeRequests(d)+")", func(s string) error {
		return setPerWorkload(s, parseRequests, &c.Requests, c.RequestsFor)
	})
	fs.Float64Var(&c.SLOAttainment, "slo-attainment", d.SLOAttainment, "share of a level's requests within the TTFT SLO for the level to meet the SLO (the goodput headline's level)")
	fs.IntVar(&c.Repeat, "repeat", d.Repeat, "run each configuration (each level, or each offered rate) this many times, on a fresh fleet each, and report medians, with every run's figures under runs; a rate sweep's saturation run is not repeated, so every run of a rate is at the same rate")
	fs.DurationVar(&c.Duration, "duration", 0, "model time per run (0: bound by --requests only)")
	fs.Func("slo", "TTFT SLO per workload in model time, e.g. shared-prefix=8s,multi-turn=4s (default shared-prefix=8s,multi-turn=4s,control=8s)", func(s string) error {
		return ParseSLO(s, c.SLO)
	})
	c.Spec.RegisterFlags(fs)
	fs.BoolVar(&c.Calibrate, "calibrate", d.Calibrate, "measure the server's characters per token before generating prompts")
	fs.BoolVar(&c.IgnoreEOS, "ignore-eos", false, "send vLLM's ignore_eos so every answer has max_tokens tokens")
	fs.Func("sim-arg", "extra `switchyard sim` flag, repeatable (e.g. --sim-arg=--kv-events-config=...)", func(s string) error {
		c.SimArgs = append(c.SimArgs, s)
		return nil
	})
	fs.Float64Var(&c.Bystanders, "bystanders", d.Bystanders, "add this share of each run's load (sessions, or rate in the open loop) of the same workload, sent straight to random workers behind the router's back: without KV events its view of the caches drifts (0: none)")
	fs.BoolVar(&c.KVEvents, "kv-events", d.KVEvents, "switchyard: let `switchyard dev` start the simulated workers (same defaults as `switchyard sim`) with KV events and a kvtracker, as deployed (default: route over a `switchyard sim` fleet through --endpoints, without KV events, on the router's approximate index)")
	fs.Func("dev-arg", "extra `switchyard dev` flag, repeatable", func(s string) error {
		c.DevArgs = append(c.DevArgs, s)
		return nil
	})
	fs.StringVar(&c.LogDir, "log-dir", "", "where process logs go (default: a temporary directory, removed on success)")
	fs.DurationVar(&c.RequestTimeout, "request-timeout", d.RequestTimeout, "wall-time bound of one request")
	fs.BoolVar(&c.Progress, "progress", d.Progress, "show a progress bar when stderr is a terminal")
}

// Parsed records which of fs's flags were given, after fs.Parse, so that
// Validate can refuse a flag that the load would ignore.
func (c *Config) Parsed(fs *flag.FlagSet) {
	c.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { c.set[f.Name] = true })
}

// Flags that only some loads use.
var (
	rateSweepFlags = []string{"rate-points", "rate-low", "rate-high", "saturation-concurrency", "saturation-strategy"}
	openLoopFlags  = []string{"arrivals", "max-in-flight"}
)

// Validate reports every unusable setting.
func (c *Config) Validate() error {
	var errs []error
	if c.Bin == "" {
		errs = append(errs, errors.New("switchyard-bin: required"))
	}
	if c.Workers < 1 || c.Workers > 64 {
		errs = append(errs, fmt.Errorf("workers %d: want 1 to 64", c.Workers))
	}
	if !(c.TimeScale > 0) || c.TimeScale > 1000 {
		errs = append(errs, fmt.Errorf("time-scale %v: want (0, 1000]", c.TimeScale))
	}
	if len(c.Workloads) == 0 || len(c.Strategies) == 0 {
		errs = append(errs, errors.New("need at least one workload and one strategy"))
	}
	if c.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("concurrency %d: want a level, or 0 to choose one per workload", c.Concurrency))
	}
	if !(c.Bystanders >= 0 && c.Bystanders <= 4) {
		errs = append(errs, fmt.Errorf("bystanders %v: want a share of the load from 0 to 4", c.Bystanders))
	}
	if c.Repeat < 1 || c.Repeat > 100 {
		errs = append(errs, fmt.Errorf("repeat %d: want 1 to 100", c.Repeat))
	}
	if c.Duration < 0 {
		errs = append(errs, errors.New("duration: must not be negative"))
	}
	if !(c.SLOAttainment > 0 && c.SLOAttainment <= 1) {
		errs = append(errs, fmt.Errorf("slo-attainment %v: want a share in (0, 1]", c.SLOAttainment))
	}
	open := c.Load == LoadRate || c.Load == LoadRateSweep
	if !slices.Contains(Loads, c.Load) {
		errs = append(errs, fmt.Errorf("load %q: want %s", c.Load, strings.Join(Loads, ", ")))
	}
	if c.Load == LoadRate && len(c.Rates) == 0 {
		errs = append(errs, errors.New("rates: --load rate needs at least one rate"))
	}
	if c.set["rates"] && c.Load != LoadRate {
		errs = append(errs, fmt.Errorf("rates: only with --load rate (load is %s)", c.Load))
	}
	for _, r := range c.Rates {
		if !(r > 0) || math.IsInf(r, 0) {
			errs = append(errs, fmt.Errorf("rates: %v is not a positive rate", r))
		}
	}
	if !slices.Contains(ratesweep.Modes, c.Arrivals) {
		errs = append(errs, fmt.Errorf("arrivals %q: want constant or poisson", c.Arrivals))
	}
	if err := c.RateSweep.Validate(); err != nil {
		errs = append(errs, err)
	}
	if !slices.Contains(Strategies, c.SaturationStrategy) {
		errs = append(errs, fmt.Errorf("saturation-strategy %q: want one of %s", c.SaturationStrategy, strings.Join(Strategies, ",")))
	}
	if c.MaxInFlight < 1 || c.MaxInFlight > 1<<16 {
		errs = append(errs, fmt.Errorf("max-in-flight %d: want 1 to 65536", c.MaxInFlight))
	}
	if open && c.Concurrency > 0 {
		errs = append(errs, fmt.Errorf("concurrency: the headline level of --load concurrency; with --load %s the headline is the highest rate", c.Load))
	}
	if open && c.set["sweep"] {
		errs = append(errs, fmt.Errorf("sweep: concurrency levels are for --load concurrency; --load %s runs rates", c.Load))
	}
	for _, f := range rateSweepFlags {
		if c.set[f] && c.Load != LoadRateSweep {
			errs = append(errs, fmt.Errorf("%s: only with --load rate-sweep (load is %s)", f, c.Load))
		}
	}
	for _, f := range openLoopFlags {
		if c.set[f] && !open {
			errs = append(errs, fmt.Errorf("%s: only with the open-loop loads, --load rate or rate-sweep (load is %s)", f, c.Load))
		}
	}
	for _, k := range c.Workloads {
		levels := c.Levels(k)
		if !open && len(levels) == 0 {
			errs = append(errs, fmt.Errorf("%s: no concurrency level to run (set --sweep or --concurrency)", k))
		}
		for _, n := range levels {
			if n < 1 {
				errs = append(errs, fmt.Errorf("%s: concurrency %d: need at least 1", k, n))
			}
		}
		if n := c.RequestsOf(k); c.Load == LoadRateSweep && n > 0 && n <= c.RateSweep.Concurrency {
			errs = append(errs, fmt.Errorf("%s: %d requests per run cannot fill the saturation run's %d clients (want more requests than --saturation-concurrency)", k, n, c.RateSweep.Concurrency))
		}
		if n := c.RequestsOf(k); n < 0 || (n == 0 && c.Duration == 0) {
			errs = append(errs, fmt.Errorf("%s: set --requests or --duration (positive)", k))
		}
		if v, ok := c.SLO[k]; !ok || !(v > 0) {
			errs = append(errs, fmt.Errorf("slo: no positive TTFT SLO for %s", k))
		}
		spec := c.Spec
		spec.Kind = k
		// Run measures prefix-pressure's KV capacity before generating.
		if err := spec.ValidateBeforeKV(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", k, err))
		}
	}
	if c.RequestTimeout <= 0 {
		errs = append(errs, errors.New("request-timeout: must be positive"))
	}
	if c.KVEvents && len(c.SimArgs) > 0 && slices.Contains(c.Strategies, results.Switchyard) {
		errs = append(errs, errors.New("sim-arg: with --kv-events, switchyard's workers are started by `switchyard dev`, which would not get them; drop --kv-events to run every strategy on `switchyard sim`"))
	}
	return errors.Join(errs...)
}

// Levels is the sorted, de-duplicated list of concurrencies kind runs at.
func (c *Config) Levels(kind workload.Kind) []int {
	lv, ok := c.SweepFor[kind]
	if !ok {
		lv = c.Sweep
	}
	lv = slices.Clone(lv)
	if c.Concurrency > 0 {
		lv = append(lv, c.Concurrency)
	}
	slices.Sort(lv)
	return slices.Compact(lv)
}

// RequestsOf is the request bound of kind's runs.
func (c *Config) RequestsOf(kind workload.Kind) int {
	if n, ok := c.RequestsFor[kind]; ok {
		return n
	}
	return c.Requests
}

// perWorkload splits "WORKLOAD=VALUE" into its parts; a value without a
// workload gives an empty kind.
// setPerWorkload applies a per-workload flag: VALUE sets every workload's
// (and drops the per-workload ones, defaults included, so later
// WORKLOAD=VALUE flags refine it), WORKLOAD=VALUE sets one.
func setPerWorkload[T any](s string, parse func(string) (T, error), all *T, per map[workload.Kind]T) error {
	kind, val, err := perWorkload(s)
	if err != nil {
		return err
	}
	v, err := parse(val)
	if err != nil {
		return err
	}
	if kind == "" {
		*all = v
		clear(per)
	} else {
		per[kind] = v
	}
	return nil
}

func parseRequests(val string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(val))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("requests %q: want a count of 0 or more", val)
	}
	return n, nil
}

func perWorkload(s string) (workload.Kind, string, error) {
	name, val, ok := strings.Cut(s, "=")
	if !ok {
		return "", s, nil
	}
	k, err := workload.ParseKind(strings.TrimSpace(name))
	return k, val, err
}

func describeSweep(c Config) string {
	parts := []string{joinInts(c.Sweep)}
	for _, k := range workload.Kinds {
		if v, ok := c.SweepFor[k]; ok {
			parts = append(parts, string(k)+"="+joinInts(v))
		}
	}
	return strings.Join(parts, " ")
}

func describeRequests(c Config) string {
	parts := []string{strconv.Itoa(c.Requests)}
	for _, k := range workload.Kinds {
		if v, ok := c.RequestsFor[k]; ok {
			parts = append(parts, string(k)+"="+strconv.Itoa(v))
		}
	}
	return strings.Join(parts, " ")
}

// Output says where results go; empty paths are skipped.
type Output struct {
	// Records receives one JSON line per request as runs finish.
	Records io.Writer
	// Status receives a line per run and the progress bars.
	Status io.Writer
}

// Run runs the comparison and returns the results.
func Run(ctx context.Context, cfg Config, out Output, log zerolog.Logger) (*results.File, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	started := time.Now()
	if out.Status == nil {
		out.Status = io.Discard
	}
	removeLogs := false
	if cfg.LogDir == "" {
		dir, err := os.MkdirTemp("", "loadtest-logs-")
		if err != nil {
			return nil, fmt.Errorf("log dir: %w", err)
		}
		cfg.LogDir, removeLogs = dir, true
	} else if err := os.MkdirAll(cfg.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("log dir: %w", err)
	}
	spec := cfg.Spec
	measureKV := slices.Contains(cfg.Workloads, workload.PrefixPressure) && spec.PressureGroups == 0 && spec.PressureKVTokens == 0
	if cfg.Calibrate || measureKV {
		cpt, ci, err := probe(ctx, cfg, cfg.Calibrate, measureKV)
		if err != nil {
			return nil, err
		}
		if cfg.Calibrate {
			log.Info().Float64("chars_per_token", cpt).Msg("calibrated prompt text against the simulated worker")
			spec.CharsPerToken = cpt
		}
		if measureKV {
			spec.PressureKVTokens = workload.FleetKVTokens(ci.NumGPUBlocks, ci.BlockSize, cfg.Workers)
			log.Info().Int("num_gpu_blocks", ci.NumGPUBlocks).Int("block_size", ci.BlockSize).Int("fleet_kv_tokens", spec.PressureKVTokens).
				Msg("sized prefix-pressure on the simulated workers' KV cache")
		}
	}
	if slices.Contains(cfg.Workloads, workload.PrefixPressure) {
		ps := spec
		ps.Kind = workload.PrefixPressure
		if err := ps.Validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", ps.Kind, err)
		}
	}
	f := &results.File{
		Schema:    results.Schema,
		Workloads: map[string]map[string]*results.Summary{},
		Params: results.Params{
			Command:         "compare",
			Mode:            string(runner.Concurrent),
			TimeScale:       cfg.TimeScale,
			TimeUnit:        results.TimeUnit,
			Model:           cfg.Model,
			Workers:         cfg.Workers,
			Strategies:      cfg.Strategies,
			Concurrency:     cfg.Concurrency,
			SweepByWorkload: map[string][]int{},
			Requests:        cfg.Requests,
			Repeat:          cfg.Repeat,
			DurationS:       cfg.Duration.Seconds(),
			SLOTTFTS:        map[string]float64{},
			SLOAttainment:   cfg.SLOAttainment,
			Headline:        map[string]results.Headline{},
			Workloads:       map[string]workload.Spec{},
			SimArgs:         cfg.SimArgs,
			KVEvents:        cfg.KVEvents,
			Bystanders:      cfg.Bystanders,
			Cores:           runtime.NumCPU(),
			GoVersion:       runtime.Version(),
			Started:         started.UTC().Truncate(time.Second),
		},
	}
	open := cfg.Load != LoadConcurrency
	if open {
		f.Params.Mode, f.Params.Load, f.Params.Arrivals = string(cfg.Arrivals), cfg.Load, string(cfg.Arrivals)
		f.Params.MaxInFlight, f.Params.RatesByWorkload = cfg.MaxInFlight, map[string][]float64{}
		if cfg.Load == LoadRateSweep {
			f.Params.RateSweep = &results.RateSweep{Points: cfg.RateSweep.Points, Low: cfg.RateSweep.Low, High: cfg.RateSweep.High,
				Strategy: cfg.SaturationStrategy, Concurrency: cfg.RateSweep.Concurrency}
			f.Params.Saturation = map[string]results.Saturation{}
		}
	} else {
		f.Params.Load = LoadConcurrency
	}
	total := 0
	for _, kind := range cfg.Workloads {
		if n := cfg.RequestsOf(kind); n != cfg.Requests {
			if f.Params.RequestsByWorkload == nil {
				f.Params.RequestsByWorkload = map[string]int{}
			}
			f.Params.RequestsByWorkload[string(kind)] = n
		}
		switch cfg.Load {
		case LoadConcurrency:
			levels := cfg.Levels(kind)
			total += len(cfg.Strategies) * len(levels) * cfg.Repeat
			f.Params.Sweep = append(f.Params.Sweep, levels...)
			f.Params.SweepByWorkload[string(kind)] = levels
		case LoadRate:
			total += len(cfg.Strategies) * len(cfg.Rates) * cfg.Repeat
		case LoadRateSweep:
			total += 1 + len(cfg.Strategies)*cfg.RateSweep.Points*cfg.Repeat
		}
	}
	slices.Sort(f.Params.Sweep)
	f.Params.Sweep = slices.Compact(f.Params.Sweep)
	if open {
		f.Params.Sweep, f.Params.SweepByWorkload = nil, nil
	}
	enc := json.NewEncoder(orDiscard(out.Records))
	n := 0
	for _, kind := range cfg.Workloads {
		ws := spec
		ws.Kind = kind
		slo := cfg.SLO[kind]
		f.Params.SLOTTFTS[string(kind)] = slo
		f.Params.Workloads[string(kind)] = ws.Shape()
		var loads []Load
		switch cfg.Load {
		case LoadConcurrency:
			for _, c := range cfg.Levels(kind) {
				loads = append(loads, Load{Mode: runner.Concurrent, Concurrency: c})
			}
		case LoadRate:
			for _, r := range cfg.Rates {
				loads = append(loads, Load{Mode: cfg.Arrivals, Rate: r, MaxInFlight: cfg.MaxInFlight})
			}
		case LoadRateSweep:
			n++
			sat := Load{Mode: runner.Concurrent, Concurrency: cfg.RateSweep.Concurrency}
			label := fmt.Sprintf("[%d/%d] %s %s saturation %s", n, total, kind, cfg.SaturationStrategy, sat.Name())
			o, err := runOne(ctx, cfg, ws, cfg.SaturationStrategy, sat, cfg.RequestsOf(kind), label, out.Status)
			if err != nil {
				return nil, fmt.Errorf("%s saturation run (%s %s): %w (logs in %s)", kind, cfg.SaturationStrategy, sat.Name(), err, cfg.LogDir)
			}
			if err := encodeAll(enc, o.Records); err != nil {
				return nil, err
			}
			m := ratesweep.Measure(o.Records, cfg.TimeScale, cfg.SaturationStrategy, sat.Concurrency)
			f.Params.Saturation[string(kind)] = m
			rates := cfg.RateSweep.Rates(float64(m.Rate))
			fmt.Fprintf(out.Status, "%s: %s requests/s (%s window), saturation rate %s sessions/s; rates %v\n", label,
				report.Number(m.RequestsPerS, 3), m.Window, report.Number(m.Rate, 3), rates)
			if len(rates) == 0 {
				return nil, fmt.Errorf("%s saturation run (%s %s) served nothing: no rate to sweep (logs in %s)", kind, cfg.SaturationStrategy, sat.Name(), cfg.LogDir)
			}
			for _, r := range rates {
				loads = append(loads, Load{Mode: cfg.Arrivals, Rate: r, MaxInFlight: cfg.MaxInFlight})
			}
		}
		var levels []int
		for _, l := range loads {
			if open {
				f.Params.RatesByWorkload[string(kind)] = append(f.Params.RatesByWorkload[string(kind)], l.Rate)
			} else {
				levels = append(levels, l.Concurrency)
			}
		}
		byLevel := map[string][]*results.Summary{}
		for _, strat := range cfg.Strategies {
			var points []*results.Summary
			for _, ld := range loads {
				var runs []*results.Summary
				var all []results.Record
				var opens []runner.OpenLoop
				for rep := range cfg.Repeat {
					n++
					label := fmt.Sprintf("[%d/%d] %s %s %s", n, total, kind, strat, ld.Name())
					if cfg.Repeat > 1 {
						label += fmt.Sprintf(" run %d/%d", rep+1, cfg.Repeat)
					}
					o, err := runOne(ctx, cfg, ws, strat, ld, cfg.RequestsOf(kind), label, out.Status)
					if err != nil {
						return nil, fmt.Errorf("%s %s %s: %w (logs in %s)", kind, strat, ld.Name(), err, cfg.LogDir)
					}
					recs := o.Records
					if err := encodeAll(enc, recs); err != nil {
						return nil, err
					}
					s := results.Summarize(recs, cfg.TimeScale, slo)
					s.PredictorRouterMAPE, s.PredictorRouterSamples = o.routerMAPE, o.routerSamples
					if ld.Mode.Open() {
						AddOpen(s, o.Open)
					}
					runs, all, opens = append(runs, s), append(all, recs...), append(opens, o.Open...)
					line := fmt.Sprintf("%s: ttft p50 %s  goodput %s rpm  shed %s  cache hit %s  sim lag p95 %s", label,
						report.Sec(s.TTFTP50), report.Number(s.GoodputRPM, 1), report.Pct(s.ShedRate), report.Pct(s.CacheHitRatio), report.Sec(s.SimLagP95))
					if ld.Mode.Open() {
						line += fmt.Sprintf("  achieved %s/s of %g/s  TTFT growth %s  over the in-flight bound %d", report.Number(s.AchievedRate, 3), ld.Rate, report.Number(s.TTFTGrowth, 2), s.ArrivalsOverBound)
					}
					fmt.Fprintln(out.Status, line)
				}
				pooled := results.Summarize(all, cfg.TimeScale, slo)
				// The router scores each run: one run's score as it is,
				// several runs' median (Median), their samples summed.
				pooled.PredictorRouterMAPE = runs[0].PredictorRouterMAPE
				for _, r := range runs {
					pooled.PredictorRouterSamples += r.PredictorRouterSamples
				}
				s := results.Median(runs, pooled)
				if len(runs) > 1 {
					for _, r := range runs {
						s.Runs = append(s.Runs, r.Figures())
					}
				}
				if ld.Mode.Open() {
					s.Rate = ld.Rate
					AddOpen(s, opens)
				} else {
					s.Concurrency = ld.Concurrency
				}
				points = append(points, s)
			}
			byLevel[strat] = points
		}
		byStrategy := map[string]*results.Summary{}
		var randomSweep []results.Point
		for _, p := range byLevel[results.Random] {
			randomSweep = append(randomSweep, p.Point())
		}
		if open {
			var rates []float64
			for _, l := range loads {
				rates = append(rates, l.Rate)
			}
			hl := OpenHeadline(kind, rates, randomSweep)
			f.Params.Headline[string(kind)] = hl
			for strat, points := range byLevel {
				byStrategy[strat] = headline(points, func(p *results.Summary) bool { return p.Rate == hl.Rate })
			}
			f.Workloads[string(kind)] = byStrategy
			Relate(byStrategy)
			Goodput(byStrategy, cfg.SLOAttainment)
			continue
		}
		hl := Headline(kind, cfg.Concurrency, levels, randomSweep)
		f.Params.Headline[string(kind)] = hl
		for strat, points := range byLevel {
			byStrategy[strat] = headline(points, func(p *results.Summary) bool { return p.Concurrency == hl.Concurrency })
		}
		f.Workloads[string(kind)] = byStrategy
		Relate(byStrategy)
		Goodput(byStrategy, cfg.SLOAttainment)
	}
	f.Params.TTFTBasis = Basis(f)
	// The bar's reference figures were measured in a closed loop at named
	// concurrencies: the open loop has its own (OpenBar).
	if !open {
		f.Bar = Bar(f)
	} else {
		f.Bar = OpenBar(f)
	}
	f.Params.WallSeconds = math.Round(time.Since(started).Seconds())
	if removeLogs {
		_ = os.RemoveAll(cfg.LogDir)
	}
	return f, nil
}

// Load is one run's load: a closed loop of Concurrency clients, or an open
// loop at Rate sessions per model second with at most MaxInFlight in
// flight.
type Load struct {
	Mode        runner.Mode
	Concurrency int
	Rate        float64
	MaxInFlight int
}

// Name is the load in labels: c=8, or rate=0.5/s.
func (l Load) Name() string {
	if l.Mode.Open() {
		return fmt.Sprintf("rate=%g/s", l.Rate)
	}
	return fmt.Sprintf("c=%d", l.Concurrency)
}

// AddOpen adds the open-loop arrival counts of a level's runs to its
// summary: counts add up over the runs, as Requests do; the bound and the
// peak are the largest.
func AddOpen(s *results.Summary, opens []runner.OpenLoop) {
	for _, o := range opens {
		s.Arrivals += o.Arrivals
		s.ArrivalsOverBound += o.OverBound
		s.MaxInFlight = max(s.MaxInFlight, o.MaxInFlight)
		s.PeakInFlight = max(s.PeakInFlight, o.PeakInFlight)
	}
}

func encodeAll(enc *json.Encoder, recs []results.Record) error {
	for i := range recs {
		if err := enc.Encode(&recs[i]); err != nil {
			return fmt.Errorf("write records: %w", err)
		}
	}
	return nil
}

// headline is the summary of the point is picks (the run at the
// headline level or rate), carrying every point as its sweep.
func headline(points []*results.Summary, is func(*results.Summary) bool) *results.Summary {
	var head *results.Summary
	for _, p := range points {
		if is(p) {
			head = p
		}
	}
	for _, p := range points {
		head.Sweep = append(head.Sweep, p.Point())
	}
	return head
}

// runOne starts a fresh fleet, runs one strategy at one load, and stops
// the fleet.
func runOne(ctx context.Context, cfg Config, spec workload.Spec, strat string, ld Load, requests int, label string, status io.Writer) (_ runResult, err error) {
	name := fmt.Sprintf("%s-%s-c%d", spec.Kind, strat, ld.Concurrency)
	conns := ld.Concurrency
	if ld.Mode.Open() {
		name = fmt.Sprintf("%s-%s-r%g", spec.Kind, strat, ld.Rate)
		conns = ld.MaxInFlight
	}
	startCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	simOpts := fleet.SimOptions{
		Bin: cfg.Bin, Workers: cfg.Workers, TimeScale: cfg.TimeScale, Model: cfg.Model,
		Args: cfg.SimArgs, LogDir: cfg.LogDir, Name: name + "-sim",
	}
	var workers []fleet.Worker
	// Every strategy but switchyard with --kv-events routes over a
	// `switchyard sim` fleet: approximate always, so that its router sees
	// no KV events even when switchyard's does.
	if strat != results.Switchyard || !cfg.KVEvents {
		sim, err := fleet.StartSim(startCtx, simOpts)
		if err != nil {
			return runResult{}, err
		}
		defer func() {
			if serr := sim.Stop(); serr != nil && err == nil {
				err = serr
			}
		}()
		workers = sim.Workers
	}
	client := stream.NewClient(conns)
	defer client.CloseIdle()
	var targets []runner.Target
	var picker pick.Picker
	bgCtx, stopBG := context.WithCancel(ctx)
	defer stopBG()
	var gw *fleet.Gateway
	if strat == results.Switchyard || strat == results.Approximate {
		// switchyard dev --endpoints: the router scrapes the workers but
		// gets no KV events, so it finds prefixes in its approximate
		// index of its own decisions (services/router: kept --approx-ttl,
		// blind to evictions) — llm-d's approximate scorer's regime.
		g, err := fleet.StartGateway(startCtx, fleet.GatewayOptions{
			Bin: cfg.Bin, Workers: workers, Sim: simOpts, Model: cfg.Model, Args: cfg.DevArgs, LogDir: cfg.LogDir, Name: name + "-switchyard",
		})
		if err != nil {
			return runResult{}, err
		}
		gw = g
		defer func() {
			if gerr := gw.Stop(); gerr != nil && err == nil {
				err = gerr
			}
		}()
		targets = []runner.Target{{ID: "gateway", APIBase: gw.URL + "/v1"}}
		if o := cfg.onGateway; o != nil {
			defer func() {
				if oerr := o(ctx, strat, spec, gw); oerr != nil && err == nil {
					err = oerr
				}
			}()
		}
		picker, _ = pick.New(results.Direct, []pick.Target{{ID: "gateway", URL: gw.URL}}, pick.Options{})
	} else {
		pts := make([]pick.Target, len(workers))
		for i, w := range workers {
			pts[i] = pick.Target{ID: w.ID, URL: w.URL}
			targets = append(targets, runner.Target{ID: w.ID, APIBase: w.URL + "/v1"})
		}
		picker, err = pick.New(strat, pts, pick.Options{
			Seed: spec.Seed, HTTP: client.HTTP,
			Background: func(fn func(context.Context)) { go fn(bgCtx) },
		})
		if err != nil {
			return runResult{}, err
		}
	}
	gen, err := workload.NewGenerator(spec)
	if err != nil {
		return runResult{}, err
	}
	tenants := []runner.Tenant{{Client: client, Gen: gen, Concurrency: conns, Rate: ld.Rate, Seed: spec.Seed}}
	if cfg.Bystanders > 0 {
		if workers == nil && gw != nil {
			if workers, err = gw.Workers(startCtx); err != nil {
				return runResult{}, err
			}
		}
		by, err := bystanders(cfg, spec, ld, conns, gen, workers, bgCtx)
		if err != nil {
			return runResult{}, err
		}
		defer by.Client.CloseIdle()
		tenants = append(tenants, by)
		// The run's budget is shared: the measured traffic keeps about
		// its own.
		requests = int(math.Round(float64(requests) * (1 + cfg.Bystanders)))
	}
	plan := runner.Plan{
		Workload: string(spec.Kind), Strategy: strat, Mode: ld.Mode, Concurrency: ld.Concurrency, Rate: ld.Rate,
		Requests: requests, Duration: cfg.Duration, TimeScale: cfg.TimeScale, Model: cfg.Model,
		IgnoreEOS: cfg.IgnoreEOS, RequestTimeout: cfg.RequestTimeout, Seed: spec.Seed,
	}
	if ld.Mode.Open() {
		plan.Concurrency = ld.MaxInFlight
	}
	bar := NewProgress(status, cfg.Progress, label, plan)
	tenants[0].Concurrency, tenants[0].Rate, tenants[0].Seed = plan.Concurrency, plan.Rate, plan.Seed
	o, err := runner.Execute(ctx, plan, tenants,
		runner.Env{Client: client, Targets: targets, Picker: picker, OnDone: bar.Done})
	bar.Finish()
	if err == nil && strat == results.Switchyard && cfg.KVEvents {
		err = kvEventsReached(ctx, client.HTTP, gw, o)
	}
	res := runResult{routerMAPE: results.NaN}
	if err == nil && gw != nil {
		res.routerMAPE, res.routerSamples, err = routerPredictorError(ctx, client.HTTP, gw)
	}
	if len(tenants) > 1 {
		o = measured(o)
	}
	res.Outcome = o
	return res, err
}

// runResult is one run's outcome and, for a run through Switchyard's
// router, the router's own score of its TTFT predictions
// (Summary.PredictorRouterMAPE); NaN for the other strategies.
type runResult struct {
	runner.Outcome
	routerMAPE    results.Num
	routerSamples int
}

// routerPredictionError is the router's histogram of its predictions'
// relative error, whose mean is the run's MAPE as the router scores it.
const routerPredictionError = "switchyard_router_ttft_prediction_relative_error"

// routerPredictorError reads the mean and count of the run's router's
// routerPredictionError (a fresh router per run, so the whole histogram
// is the run's); NaN when it learned from nothing.
func routerPredictorError(ctx context.Context, hc *http.Client, gw *fleet.Gateway) (results.Num, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := fleet.ReadCounters(ctx, hc, gw.RouterURL(), routerPredictionError+"_sum", routerPredictionError+"_count")
	if err != nil {
		return results.NaN, 0, fmt.Errorf("the router's predictor error: %w", err)
	}
	sum, n := v[0], v[1]
	if n <= 0 {
		return results.NaN, 0, nil
	}
	return results.Num(sum / n), int(n), nil
}

// kvEventsReached fails a --kv-events run whose router heard no KV delta
// from the kvtracker although requests were served: the workers' events
// never reached it (say, a --kv-events-config endpoint the workers connect
// from rather than bind), and the router routed on its own guesses alone,
// which is not the configuration the run claims to measure.
func kvEventsReached(ctx context.Context, hc *http.Client, gw *fleet.Gateway, o runner.Outcome) error {
	served := 0
	for _, r := range o.Records {
		if r.OK() {
			served++
		}
	}
	if gw == nil || served == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := fleet.ReadCounter(ctx, hc, gw.RouterURL(), "switchyard_router_kv_deltas_total")
	if err != nil {
		return fmt.Errorf("--kv-events: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("--kv-events: the router applied no KV delta in a run that served %d requests: the workers' KV events never reached it (see %s)", served, gw.LogPath())
	}
	return nil
}

// bystanderTenant names the bystanders' records.
const bystanderTenant = "bystander"

// bystanders is the tenant of --bystanders: cfg.Bystanders of the run's
// load of the same workload (a fork of gen: the same prefixes, other
// sessions), sent to a random one of workers.
func bystanders(cfg Config, spec workload.Spec, ld Load, conns int, gen *workload.Generator, workers []fleet.Worker, bg context.Context) (runner.Tenant, error) {
	if len(workers) == 0 {
		return runner.Tenant{}, errors.New("bystanders: the run's workers are not known")
	}
	pts := make([]pick.Target, len(workers))
	var targets []runner.Target
	for i, w := range workers {
		pts[i] = pick.Target{ID: w.ID, URL: w.URL}
		targets = append(targets, runner.Target{ID: w.ID, APIBase: w.URL + "/v1"})
	}
	n := max(1, int(math.Round(float64(conns)*cfg.Bystanders)))
	client := stream.NewClient(n)
	picker, err := pick.New(results.Random, pts, pick.Options{
		Seed: spec.Seed + 1, HTTP: client.HTTP,
		Background: func(fn func(context.Context)) { go fn(bg) },
	})
	if err != nil {
		return runner.Tenant{}, err
	}
	return runner.Tenant{
		Name: bystanderTenant, Client: client, Gen: gen.Fork(1),
		Concurrency: n, Rate: ld.Rate * cfg.Bystanders, Seed: spec.Seed + 1,
		Targets: targets, Picker: picker,
	}, nil
}

// measured drops the bystanders' records and arrival counts from o.
func measured(o runner.Outcome) runner.Outcome {
	recs := o.Records[:0:0]
	for _, r := range o.Records {
		if r.Tenant != bystanderTenant {
			recs = append(recs, r)
		}
	}
	o.Records = recs
	var open []runner.OpenLoop
	for _, l := range o.Open {
		if l.Tenant != bystanderTenant {
			open = append(open, l)
		}
	}
	o.Open = open
	return o
}

// probe measures, on a one-worker fleet of its own (so no probe lands in a
// measured run's cache) started with the runs' --sim-arg flags, characters
// per token (calibrate) and the worker's KV cache (kv).
func probe(ctx context.Context, cfg Config, calibrate, kv bool) (cpt float64, ci fleet.CacheInfo, err error) {
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	sim, err := fleet.StartSim(sctx, fleet.SimOptions{
		Bin: cfg.Bin, Workers: 1, TimeScale: cfg.TimeScale, Model: cfg.Model, Args: cfg.SimArgs, LogDir: cfg.LogDir, Name: "calibrate-sim",
	})
	if err != nil {
		return 0, ci, err
	}
	defer sim.Stop()
	client := stream.NewClient(1)
	defer client.CloseIdle()
	if kv {
		if ci, err = fleet.ReadCacheInfo(sctx, client.HTTP, sim.Workers[0].URL); err != nil {
			return 0, ci, err
		}
	}
	if calibrate {
		base := sim.Workers[0].URL + "/v1"
		cpt, err = workload.Calibrate(sctx, func(ctx context.Context, text string) (int, error) {
			return client.CountPrompt(ctx, base, cfg.Model, text)
		})
	}
	return cpt, ci, err
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// ParseInts parses a comma-separated list of positive integers.
func ParseInts(s string) ([]int, error) {
	var out []int
	for _, p := range splitList(s) {
		v, err := strconv.Atoi(p)
		if err != nil || v < 1 || v > 1<<16 {
			return nil, fmt.Errorf("%q: want an integer from 1 to 65536", p)
		}
		out = append(out, v)
	}
	return out, nil
}

// ParseRates parses a comma-separated list of positive rates.
func ParseRates(s string) ([]float64, error) {
	var out []float64
	for _, p := range splitList(s) {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%q: want a positive rate (sessions per model second)", p)
		}
		out = append(out, v)
	}
	return out, nil
}

// ParseSLO parses workload=duration pairs into slo (values in seconds).
func ParseSLO(s string, slo map[workload.Kind]float64) error {
	for _, p := range splitList(s) {
		name, val, ok := strings.Cut(p, "=")
		if !ok {
			return fmt.Errorf("slo %q: want workload=duration", p)
		}
		k, err := workload.ParseKind(strings.TrimSpace(name))
		if err != nil {
			return err
		}
		d, err := time.ParseDuration(strings.TrimSpace(val))
		if err != nil || d <= 0 {
			return fmt.Errorf("slo %q: want a positive duration such as 8s", p)
		}
		slo[k] = d.Seconds()
	}
	return nil
}

func joinKinds(ks []workload.Kind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ",")
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
