// Package compare runs the routing benchmark: the same seeded workloads,
// on the same simulated fleet configuration, under each routing strategy —
// the baselines picking workers inside the load generator, Switchyard
// through its real router and gateway — restarting the fleet before every
// run so that each starts with cold caches.
package compare

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/loadtest/internal/fleet"
	"github.com/switchyard-dev/switchyard/loadtest/internal/pick"
	"github.com/switchyard-dev/switchyard/loadtest/internal/report"
	"github.com/switchyard-dev/switchyard/loadtest/internal/results"
	"github.com/switchyard-dev/switchyard/loadtest/internal/runner"
	"github.com/switchyard-dev/switchyard/loadtest/internal/stream"
	"github.com/switchyard-dev/switchyard/loadtest/internal/workload"
)

// Strategies in the order they run and are reported.
var Strategies = []string{results.Random, results.RoundRobin, results.LeastQueue, results.Switchyard, results.Oracle}

// DefaultSLO is the TTFT SLO per workload, model seconds: the reference
// benchmark's 8 s (shared prefix) and 4 s (multi-turn); control, which it
// gave none, gets the shared-prefix one since its prompts are as long.
var DefaultSLO = map[workload.Kind]float64{
	workload.SharedPrefix: 8,
	workload.MultiTurn:    4,
	workload.Control:      8,
}

// Config is `loadtest compare`.
type Config struct {
	// Bin is the switchyard binary.
	Bin        string
	Workers    int
	TimeScale  float64
	Model      string
	Workloads  []workload.Kind
	Strategies []string
	// Concurrency is the headline load level; Sweep adds levels for the
	// goodput-vs-concurrency curves.
	Concurrency int
	Sweep       []int
	// Repeat runs each configuration this many times, each on a fresh
	// fleet, and reports medians.
	Repeat int
	// Requests bounds each run; Duration (model time) too, when set.
	Requests int
	Duration time.Duration
	SLO      map[workload.Kind]float64
	// Spec is the workload shape; its Kind is set per workload.
	Spec      workload.Spec
	Calibrate bool
	IgnoreEOS bool
	// SimArgs and DevArgs are extra flags for `switchyard sim` and
	// `switchyard dev`.
	SimArgs, DevArgs []string
	LogDir           string
	RequestTimeout   time.Duration
	// Progress shows a bar per run on stderr when it is a terminal.
	Progress bool
}

// DefaultConfig is the full benchmark's configuration.
func DefaultConfig() Config {
	slo := map[workload.Kind]float64{}
	for k, v := range DefaultSLO {
		slo[k] = v
	}
	return Config{
		Bin:            "bin/switchyard",
		Workers:        3,
		TimeScale:      10,
		Model:          "qwen-3.6-27b",
		Workloads:      slices.Clone(workload.Kinds),
		Strategies:     slices.Clone(Strategies),
		Concurrency:    16,
		Sweep:          []int{4, 8, 16, 32},
		Requests:       200,
		Repeat:         1,
		SLO:            slo,
		Spec:           workload.DefaultSpec(workload.SharedPrefix),
		Calibrate:      true,
		RequestTimeout: 10 * time.Minute,
		Progress:       true,
	}
}

// RegisterFlags registers compare's flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	*c = d
	fs.StringVar(&c.Bin, "switchyard-bin", d.Bin, "the switchyard binary (go build -o bin/switchyard ./cmd/switchyard)")
	fs.IntVar(&c.Workers, "workers", d.Workers, "simulated vLLM workers")
	fs.Float64Var(&c.TimeScale, "time-scale", d.TimeScale, "simulated time runs this many times faster than the wall; reported times are model seconds")
	fs.StringVar(&c.Model, "model", d.Model, "served model name")
	fs.Func("workloads", "comma-separated workloads (default "+joinKinds(d.Workloads)+")", func(s string) error {
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
	fs.Func("strategies", "comma-separated strategies (default "+strings.Join(d.Strategies, ",")+")", func(s string) error {
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
	fs.IntVar(&c.Concurrency, "concurrency", d.Concurrency, "headline concurrency (clients)")
	fs.Func("sweep", "comma-separated extra concurrencies for the goodput curves, empty for none (default "+joinInts(d.Sweep)+")", func(s string) error {
		v, err := ParseInts(s)
		c.Sweep = v
		return err
	})
	fs.IntVar(&c.Requests, "requests", d.Requests, "requests per run (0: bound by --duration only)")
	fs.IntVar(&c.Repeat, "repeat", d.Repeat, "run each configuration this many times (fresh fleet each) and report medians")
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
	fs.Func("dev-arg", "extra `switchyard dev` flag, repeatable", func(s string) error {
		c.DevArgs = append(c.DevArgs, s)
		return nil
	})
	fs.StringVar(&c.LogDir, "log-dir", "", "where process logs go (default: a temporary directory, removed on success)")
	fs.DurationVar(&c.RequestTimeout, "request-timeout", d.RequestTimeout, "wall-time bound of one request")
	fs.BoolVar(&c.Progress, "progress", d.Progress, "show a progress bar when stderr is a terminal")
}

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
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("concurrency %d: need at least 1", c.Concurrency))
	}
	for _, n := range c.Sweep {
		if n < 1 {
			errs = append(errs, fmt.Errorf("sweep: concurrency %d: need at least 1", n))
		}
	}
	if c.Repeat < 1 || c.Repeat > 100 {
		errs = append(errs, fmt.Errorf("repeat %d: want 1 to 100", c.Repeat))
	}
	if c.Requests < 0 || c.Duration < 0 || (c.Requests == 0 && c.Duration == 0) {
		errs = append(errs, errors.New("set --requests or --duration (positive)"))
	}
	for _, k := range c.Workloads {
		if v, ok := c.SLO[k]; !ok || !(v > 0) {
			errs = append(errs, fmt.Errorf("slo: no positive TTFT SLO for %s", k))
		}
		spec := c.Spec
		spec.Kind = k
		if err := spec.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", k, err))
		}
	}
	if c.RequestTimeout <= 0 {
		errs = append(errs, errors.New("request-timeout: must be positive"))
	}
	return errors.Join(errs...)
}

// Levels is the sorted, de-duplicated list of concurrencies run.
func (c *Config) Levels() []int {
	lv := append([]int{c.Concurrency}, c.Sweep...)
	slices.Sort(lv)
	return slices.Compact(lv)
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
	if cfg.Calibrate {
		cpt, err := calibrate(ctx, cfg)
		if err != nil {
			return nil, err
		}
		log.Info().Float64("chars_per_token", cpt).Msg("calibrated prompt text against the simulated worker")
		spec.CharsPerToken = cpt
	}
	f := &results.File{
		Schema:    results.Schema,
		Workloads: map[string]map[string]*results.Summary{},
		Params: results.Params{
			Command:     "compare",
			Mode:        string(runner.Concurrent),
			TimeScale:   cfg.TimeScale,
			TimeUnit:    results.TimeUnit,
			Model:       cfg.Model,
			Workers:     cfg.Workers,
			Strategies:  cfg.Strategies,
			Concurrency: cfg.Concurrency,
			Sweep:       cfg.Levels(),
			Requests:    cfg.Requests,
			Repeat:      cfg.Repeat,
			DurationS:   cfg.Duration.Seconds(),
			SLOTTFTS:    map[string]float64{},
			Workloads:   map[string]workload.Spec{},
			SimArgs:     cfg.SimArgs,
			Cores:       runtime.NumCPU(),
			GoVersion:   runtime.Version(),
			Started:     started.UTC().Truncate(time.Second),
		},
	}
	enc := json.NewEncoder(orDiscard(out.Records))
	levels := cfg.Levels()
	total := len(cfg.Workloads) * len(cfg.Strategies) * len(levels) * cfg.Repeat
	n := 0
	for _, kind := range cfg.Workloads {
		ws := spec
		ws.Kind = kind
		slo := cfg.SLO[kind]
		f.Params.SLOTTFTS[string(kind)] = slo
		f.Params.Workloads[string(kind)] = ws.Shape()
		byStrategy := map[string]*results.Summary{}
		f.Workloads[string(kind)] = byStrategy
		for _, strat := range cfg.Strategies {
			var points []*results.Summary
			for _, level := range levels {
				var runs []*results.Summary
				var all []results.Record
				for rep := range cfg.Repeat {
					n++
					label := fmt.Sprintf("[%d/%d] %s %s c=%d", n, total, kind, strat, level)
					if cfg.Repeat > 1 {
						label += fmt.Sprintf(" run %d/%d", rep+1, cfg.Repeat)
					}
					recs, err := runOne(ctx, cfg, ws, strat, level, label, out.Status)
					if err != nil {
						return nil, fmt.Errorf("%s %s concurrency %d: %w (logs in %s)", kind, strat, level, err, cfg.LogDir)
					}
					for i := range recs {
						if err := enc.Encode(&recs[i]); err != nil {
							return nil, fmt.Errorf("write records: %w", err)
						}
					}
					s := results.Summarize(recs, cfg.TimeScale, slo)
					runs, all = append(runs, s), append(all, recs...)
					fmt.Fprintf(out.Status, "%s: ttft p50 %s  goodput %s rpm  shed %s  cache hit %s  sim lag p95 %s\n", label,
						report.Sec(s.TTFTP50), report.Number(s.GoodputRPM, 1), report.Pct(s.ShedRate), report.Pct(s.CacheHitRatio), report.Sec(s.SimLagP95))
				}
				s := results.Median(runs, results.Summarize(all, cfg.TimeScale, slo))
				s.Concurrency = level
				points = append(points, s)
			}
			var head *results.Summary
			for _, p := range points {
				if p.Concurrency == cfg.Concurrency {
					head = p
				}
			}
			for _, p := range points {
				head.Sweep = append(head.Sweep, p.Point())
			}
			byStrategy[strat] = head
		}
		Relate(byStrategy)
	}
	f.Bar = Bar(f)
	f.Params.WallSeconds = math.Round(time.Since(started).Seconds())
	if removeLogs {
		_ = os.RemoveAll(cfg.LogDir)
	}
	return f, nil
}

// runOne starts a fresh fleet, runs one strategy at one level, and stops
// the fleet.
func runOne(ctx context.Context, cfg Config, spec workload.Spec, strat string, level int, label string, status io.Writer) (_ []results.Record, err error) {
	name := fmt.Sprintf("%s-%s-c%d", spec.Kind, strat, level)
	startCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	sim, err := fleet.StartSim(startCtx, fleet.SimOptions{
		Bin: cfg.Bin, Workers: cfg.Workers, TimeScale: cfg.TimeScale, Model: cfg.Model,
		Args: cfg.SimArgs, LogDir: cfg.LogDir, Name: name + "-sim",
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		if serr := sim.Stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	client := stream.NewClient(level)
	defer client.CloseIdle()
	var targets []runner.Target
	var picker pick.Picker
	bgCtx, stopBG := context.WithCancel(ctx)
	defer stopBG()
	if strat == results.Switchyard {
		gw, err := fleet.StartGateway(startCtx, fleet.GatewayOptions{
			Bin: cfg.Bin, Workers: sim.Workers, Model: cfg.Model, Args: cfg.DevArgs, LogDir: cfg.LogDir, Name: name + "-switchyard",
		})
		if err != nil {
			return nil, err
		}
		defer func() {
			if gerr := gw.Stop(); gerr != nil && err == nil {
				err = gerr
			}
		}()
		targets = []runner.Target{{ID: "gateway", APIBase: gw.URL + "/v1"}}
		picker, _ = pick.New(results.Direct, []pick.Target{{ID: "gateway", URL: gw.URL}}, pick.Options{})
	} else {
		pts := make([]pick.Target, len(sim.Workers))
		for i, w := range sim.Workers {
			pts[i] = pick.Target{ID: w.ID, URL: w.URL}
			targets = append(targets, runner.Target{ID: w.ID, APIBase: w.URL + "/v1"})
		}
		picker, err = pick.New(strat, pts, pick.Options{
			Seed: spec.Seed, HTTP: client.HTTP,
			Background: func(fn func(context.Context)) { go fn(bgCtx) },
		})
		if err != nil {
			return nil, err
		}
	}
	gen, err := workload.NewGenerator(spec)
	if err != nil {
		return nil, err
	}
	plan := runner.Plan{
		Workload: string(spec.Kind), Strategy: strat, Mode: runner.Concurrent, Concurrency: level,
		Requests: cfg.Requests, Duration: cfg.Duration, TimeScale: cfg.TimeScale, Model: cfg.Model,
		IgnoreEOS: cfg.IgnoreEOS, RequestTimeout: cfg.RequestTimeout, Seed: spec.Seed,
	}
	bar := NewProgress(status, cfg.Progress, label, plan)
	recs, err := runner.Run(ctx, plan, gen, runner.Env{Client: client, Targets: targets, Picker: picker, OnDone: bar.Done})
	bar.Finish()
	return recs, err
}

// calibrate measures characters per token on a one-worker fleet of its
// own, so no probe lands in a measured run's cache.
func calibrate(ctx context.Context, cfg Config) (float64, error) {
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	sim, err := fleet.StartSim(sctx, fleet.SimOptions{
		Bin: cfg.Bin, Workers: 1, TimeScale: cfg.TimeScale, Model: cfg.Model, Args: cfg.SimArgs, LogDir: cfg.LogDir, Name: "calibrate-sim",
	})
	if err != nil {
		return 0, err
	}
	defer sim.Stop()
	client := stream.NewClient(1)
	defer client.CloseIdle()
	base := sim.Workers[0].URL + "/v1"
	return workload.Calibrate(sctx, func(ctx context.Context, text string) (int, error) {
		return client.CountPrompt(ctx, base, cfg.Model, text)
	})
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
