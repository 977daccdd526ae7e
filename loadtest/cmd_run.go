package main

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
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/loadtest/internal/compare"
	"github.com/switchyard-dev/switchyard/loadtest/internal/pick"
	"github.com/switchyard-dev/switchyard/loadtest/internal/report"
	"github.com/switchyard-dev/switchyard/loadtest/internal/results"
	"github.com/switchyard-dev/switchyard/loadtest/internal/runner"
	"github.com/switchyard-dev/switchyard/loadtest/internal/stream"
	"github.com/switchyard-dev/switchyard/loadtest/internal/workload"
)

// modeSweep runs a list of concurrencies one after the other.
const modeSweep = "sweep"

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
	requests    int
	duration    time.Duration
	timeScale   float64
	slo         time.Duration
	calibrate   bool
	ignoreEOS   bool
	timeout     time.Duration
	progress    bool
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
	fs.Func("workload", "control, shared-prefix or multi-turn (default shared-prefix)", func(s string) error {
		k, err := workload.ParseKind(s)
		c.kind = k
		return err
	})
	c.spec.RegisterFlags(fs)
	fs.StringVar(&c.mode, "mode", string(runner.Concurrent), "load mode: concurrent (fixed concurrency), poisson (fixed rate) or sweep (the --sweep concurrencies in turn)")
	fs.IntVar(&c.concurrency, "concurrency", 16, "concurrent clients (concurrent); cap on sessions in flight (poisson, 0: 1024); headline level (sweep)")
	fs.Func("sweep", "comma-separated concurrencies for --mode sweep", func(s string) error {
		v, err := compare.ParseInts(s)
		c.sweep = v
		return err
	})
	fs.Float64Var(&c.rate, "rate", 1, "poisson: sessions per (model) second")
	fs.IntVar(&c.requests, "requests", 200, "requests per run (0: bound by --duration only)")
	fs.DurationVar(&c.duration, "duration", 0, "(model) time per run (0: bound by --requests only)")
	fs.Float64Var(&c.timeScale, "time-scale", 1, "the server's time scale (switchyard sim --time-scale): reported times are wall × this")
	fs.DurationVar(&c.slo, "slo", 8*time.Second, "TTFT SLO for goodput, in (model) time")
	fs.BoolVar(&c.calibrate, "calibrate", true, "measure the server's characters per token before generating prompts")
	fs.BoolVar(&c.ignoreEOS, "ignore-eos", false, "send vLLM's ignore_eos so every answer has max_tokens tokens")
	fs.DurationVar(&c.timeout, "request-timeout", 10*time.Minute, "wall-time bound of one request")
	fs.BoolVar(&c.progress, "progress", true, "show a progress bar when stderr is a terminal")
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
	switch c.mode {
	case string(runner.Concurrent), string(runner.Poisson):
	case modeSweep:
		if len(c.sweep) == 0 {
			errs = append(errs, errors.New("mode sweep: give the concurrencies with --sweep"))
		}
	default:
		errs = append(errs, fmt.Errorf("mode %q: want concurrent, poisson or sweep", c.mode))
	}
	if c.slo <= 0 {
		errs = append(errs, errors.New("slo: must be positive"))
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
	levels := []int{cfg.concurrency}
	mode := runner.Mode(cfg.mode)
	if cfg.mode == modeSweep {
		levels, mode = cfg.sweep, runner.Concurrent
	}
	client := stream.NewClient(slices.Max(levels))
	defer client.CloseIdle()
	if env := cfg.apiKeyEnv; env != "" {
		client.APIKey = os.Getenv(env)
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
		m, err := firstModel(ctx, client, targets[0].APIBase)
		if err != nil {
			return nil, err
		}
		cfg.model = m
	}
	spec := cfg.spec
	if cfg.calibrate {
		cpt, err := workload.Calibrate(ctx, func(ctx context.Context, text string) (int, error) {
			return client.CountPrompt(ctx, targets[0].APIBase, cfg.model, text)
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
	var points []*results.Summary
	for _, level := range levels {
		bgCtx, stopBG := context.WithCancel(ctx)
		picker, err := pick.New(cfg.strategy, pts, pick.Options{Seed: spec.Seed, HTTP: client.HTTP,
			Background: func(fn func(context.Context)) { go fn(bgCtx) }})
		if err != nil {
			stopBG()
			return nil, err
		}
		gen, err := workload.NewGenerator(spec)
		if err != nil {
			stopBG()
			return nil, err
		}
		plan := runner.Plan{
			Workload: string(cfg.kind), Strategy: cfg.label, Mode: mode, Concurrency: level, Rate: cfg.rate,
			Requests: cfg.requests, Duration: cfg.duration, TimeScale: cfg.timeScale, Model: cfg.model,
			IgnoreEOS: cfg.ignoreEOS, RequestTimeout: cfg.timeout, Seed: spec.Seed,
		}
		label := fmt.Sprintf("%s %s %s", cfg.kind, cfg.label, levelName(plan))
		bar := compare.NewProgress(status, cfg.progress, label, plan)
		recs, err := runner.Run(ctx, plan, gen, runner.Env{Client: client, Targets: targets, Picker: picker, OnDone: bar.Done})
		bar.Finish()
		stopBG()
		if err != nil {
			return nil, err
		}
		for i := range recs {
			if err := enc.Encode(&recs[i]); err != nil {
				return nil, fmt.Errorf("write records: %w", err)
			}
		}
		s := results.Summarize(recs, cfg.timeScale, slo)
		if mode == runner.Poisson {
			s.Rate = cfg.rate
		} else {
			s.Concurrency = level
		}
		fmt.Fprintf(status, "%s: ttft p50 %s  goodput %s rpm  shed %s  cache hit %s\n", label,
			report.Sec(s.TTFTP50), report.Number(s.GoodputRPM, 1), report.Pct(s.ShedRate), report.Pct(s.CacheHitRatio))
		points = append(points, s)
	}
	head := points[len(points)-1]
	for _, p := range points {
		if p.Concurrency == cfg.concurrency {
			head = p
		}
	}
	if len(points) > 1 {
		for _, p := range points {
			head.Sweep = append(head.Sweep, p.Point())
		}
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
		WallSeconds: math.Round(time.Since(started).Seconds()),
	}
	if cfg.mode == modeSweep {
		params.Sweep = levels
	}
	return &results.File{
		Schema:    results.Schema,
		Params:    params,
		Workloads: map[string]map[string]*results.Summary{string(cfg.kind): {cfg.label: head}},
	}, nil
}

func levelName(p runner.Plan) string {
	if p.Mode == runner.Poisson {
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
