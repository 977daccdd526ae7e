package compare

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/loadtest/internal/ratesweep"
	"github.com/switchyard-dev/switchyard/loadtest/internal/results"
	"github.com/switchyard-dev/switchyard/loadtest/internal/runner"
	"github.com/switchyard-dev/switchyard/loadtest/internal/workload"
)

// TestCompareRateSweep runs a tiny rate sweep against real `switchyard
// sim` and `switchyard dev` processes: one saturation run per workload,
// then every strategy at the same two rates below it.
func TestCompareRateSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real fleets")
	}
	cfg := DefaultConfig()
	cfg.Bin = switchyardBin(t)
	cfg.TimeScale, cfg.Calibrate, cfg.Progress = 100, false, false
	cfg.Load, cfg.Arrivals = LoadRateSweep, runner.Poisson
	cfg.RateSweep = ratesweep.Config{Points: 2, Low: 0.5, High: 1, Concurrency: 2}
	cfg.Workloads = []workload.Kind{workload.Control, workload.MultiTurn}
	cfg.Strategies = []string{results.RoundRobin, results.LeastQueue, results.Switchyard}
	cfg.Requests = 6
	clear(cfg.RequestsFor)
	cfg.LogDir = t.TempDir()
	cfg.Spec.OutputTokens, cfg.Spec.AnswerTokens = workload.Const(4), workload.Const(4)
	cfg.Spec.PromptTokens = workload.Const(300)
	cfg.Spec.Turns, cfg.Spec.SystemTokens, cfg.Spec.UserTokens = workload.Const(2), workload.Const(100), workload.Const(20)
	f, recs := runFleets(t, cfg, 3*time.Minute)
	p := f.Params
	if p.Load != LoadRateSweep || p.Mode != "poisson" || p.Arrivals != "poisson" || p.RateSweep == nil || p.RateSweep.Strategy != results.RoundRobin {
		t.Errorf("params: load %q mode %q arrivals %q sweep %+v", p.Load, p.Mode, p.Arrivals, p.RateSweep)
	}
	if len(f.Bar) != 0 {
		t.Errorf("the closed-loop bar was checked on an open loop: %+v", f.Bar)
	}
	for _, kind := range cfg.Workloads {
		sat, ok := p.Saturation[string(kind)]
		if !ok || !sat.Rate.Valid() || !(sat.Rate > 0) || sat.Concurrency != 2 || sat.Strategy != results.RoundRobin {
			t.Fatalf("%s: saturation %+v", kind, sat)
		}
		rates := p.RatesByWorkload[string(kind)]
		if want := cfg.RateSweep.Rates(float64(sat.Rate)); !slices.Equal(rates, want) || len(rates) != 2 {
			t.Fatalf("%s: rates %v, want %v from saturation rate %v", kind, rates, want, sat.Rate)
		}
		if h := p.Headline[string(kind)]; h.Rule != "top-rate" || h.Rate != rates[1] {
			t.Errorf("%s: headline %+v, want the top rate %v", kind, h, rates[1])
		}
		for _, strat := range cfg.Strategies {
			s := f.Workloads[string(kind)][strat]
			if s == nil {
				t.Fatalf("no workloads.%s.%s", kind, strat)
			}
			if s.Rate != rates[1] || s.Concurrency != 0 {
				t.Errorf("%s/%s: headline rate %v concurrency %d", kind, strat, s.Rate, s.Concurrency)
			}
			if len(s.Sweep) != 2 {
				t.Fatalf("%s/%s: sweep %+v", kind, strat, s.Sweep)
			}
			for i, pt := range s.Sweep {
				if pt.Rate != rates[i] || pt.Requests != 6 {
					t.Errorf("%s/%s: point %d at rate %v with %d requests, want %v and 6", kind, strat, i, pt.Rate, pt.Requests, rates[i])
				}
				if !pt.TTFTP90.Valid() || !pt.TTFTP99.Valid() || !pt.ITLP50.Valid() || !pt.E2EP50.Valid() || !pt.OutputTokensPerS.Valid() || !pt.AchievedRate.Valid() || !pt.GoodputRPM.Valid() {
					t.Errorf("%s/%s: point %d lacks figures: %+v", kind, strat, i, pt)
				}
				// Every session sent was an arrival; none hit the bound of 1024.
				if pt.Arrivals < 1 || pt.ArrivalsOverBound != 0 {
					t.Errorf("%s/%s: point %d: %d arrivals, %d over the bound", kind, strat, i, pt.Arrivals, pt.ArrivalsOverBound)
				}
			}
			if s.MaxInFlight != runner.DefaultMaxInFlight || s.Succeeded != 6 {
				t.Errorf("%s/%s: bound %d, %d of 6 succeeded (errors %q)", kind, strat, s.MaxInFlight, s.Succeeded, s.ErrorSamples)
			}
		}
	}
	// Records: the saturation runs (closed loop) and every rate's (open).
	open, closed := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(recs.String()), "\n") {
		switch {
		case strings.Contains(line, `"rate":`):
			open++
		case strings.Contains(line, `"concurrency":2`):
			closed++
		}
	}
	if want := len(cfg.Workloads) * len(cfg.Strategies) * 2 * 6; open != want || closed != len(cfg.Workloads)*6 {
		t.Errorf("%d open-loop and %d saturation records, want %d and %d", open, closed, want, len(cfg.Workloads)*6)
	}
}

// TestRateFlags checks the open-loop flags parse and that Validate names
// every misuse at once.
func TestRateFlags(t *testing.T) {
	c, err := parseFlags("--load", "rate", "--rates", "0.5, 1,2", "--arrivals", "constant", "--max-in-flight", "64")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil || !slices.Equal(c.Rates, []float64{0.5, 1, 2}) || c.Arrivals != runner.Constant || c.MaxInFlight != 64 {
		t.Errorf("rates %v arrivals %q bound %d: %v", c.Rates, c.Arrivals, c.MaxInFlight, err)
	}
	c, err = parseFlags("--load", "rate-sweep", "--rate-points", "3", "--saturation-strategy", "least-queue", "--saturation-concurrency", "16")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil || c.RateSweep.Points != 3 || c.SaturationStrategy != results.LeastQueue || c.RateSweep.Concurrency != 16 {
		t.Errorf("rate sweep %+v by %s: %v", c.RateSweep, c.SaturationStrategy, err)
	}
	for _, bad := range [][]string{{"--rates", "0"}, {"--rates", "fast"}, {"--arrivals", "concurrent"}} {
		if _, err := parseFlags(bad...); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	c, _ = parseFlags("--load", "rate-sweep", "--rates", "1", "--concurrency", "8", "--sweep", "4", "--rate-points", "0",
		"--saturation-strategy", "fastest", "--max-in-flight", "0", "--requests", "control=10", "--saturation-concurrency", "32")
	err = c.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"rates: only with --load rate", "concurrency: the headline level", "sweep: concurrency levels",
		"rate-points 0", `saturation-strategy "fastest"`, "max-in-flight 0", "control: 10 requests per run cannot fill"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	c, _ = parseFlags("--rate-points", "3", "--saturation-strategy", "random", "--arrivals", "constant", "--max-in-flight", "8")
	err = c.Validate()
	for _, want := range []string{"rate-points: only with --load rate-sweep (load is concurrency)", "saturation-strategy: only with --load rate-sweep",
		"arrivals: only with the open-loop loads", "max-in-flight: only with the open-loop loads"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("closed loop with open-loop flags: error lacks %q: %v", want, err)
		}
	}
	c, _ = parseFlags("--load", "rate", "--rates", "1", "--rate-low", "0.5")
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "rate-low: only with --load rate-sweep (load is rate)") {
		t.Errorf("--load rate with --rate-low: %v", err)
	}
	c, _ = parseFlags("--load", "rate")
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "needs at least one rate") {
		t.Errorf("--load rate without rates: %v", err)
	}
	c, _ = parseFlags("--load", "open")
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `load "open"`) {
		t.Errorf("unknown load: %v", err)
	}
}
