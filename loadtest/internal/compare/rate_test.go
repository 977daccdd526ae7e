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
	// The open loop's bar: control against the best simple strategy at
	// each of its two rates and at the top rate's p90, nothing of the
	// closed loop's.
	if len(f.Bar) != 3 {
		t.Errorf("open-loop bar %+v, want 3 checks", f.Bar)
	}
	for _, c := range f.Bar {
		if c.Workload != string(workload.Control) || !strings.HasSuffix(c.Metric, "_gap_to_best_simple") || strings.HasPrefix(c.Metric, "ttft_p50") || c.Rate <= 0 {
			t.Errorf("open-loop bar check %+v", c)
		}
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

// rp is an open-loop point: offered rate, TTFT p90, goodput, SLO
// attainment, and arrivals of which over were not sent.
func rp(rate, p90, good, attain float64, arrivals, over int) results.Point {
	return results.Point{Rate: rate, TTFTP90: results.Num(p90), GoodputRPM: results.Num(good), SLOAttainment: results.Num(attain),
		Arrivals: arrivals, ArrivalsOverBound: over}
}

// TestOpenGoodput: in the open loop the goodput headline is taken over
// the offered rates — the highest rate at which the strategy met the SLO
// (an arrival over the bound a miss), and its best — against random at
// the same rate, or, without random, against the better of round-robin
// and least-queue there.
func TestOpenGoodput(t *testing.T) {
	sum := func(points ...results.Point) *results.Summary { return &results.Summary{Sweep: points} }
	mk := func() map[string]*results.Summary {
		return map[string]*results.Summary{
			// Meets it up to 0.5/s; best at 1/s.
			results.RoundRobin: sum(rp(0.25, 3, 15, 1, 80, 0), rp(0.5, 6, 29, 0.92, 80, 0), rp(1, 20, 31, 0.5, 80, 0)),
			// Meets it up to 0.25/s; better than round-robin at 1/s.
			results.LeastQueue: sum(rp(0.25, 3, 15, 1, 80, 0), rp(0.5, 9, 26, 0.8, 80, 0), rp(1, 18, 34, 0.55, 80, 0)),
			// 95 % within the SLO at 1/s of the requests sent, but 8 of
			// its 80 arrivals were not sent: 85.5 %, a miss.
			results.Switchyard: sum(rp(0.25, 3, 15, 1, 80, 0), rp(0.5, 5, 30, 0.95, 80, 0), rp(1, 7, 57, 0.95, 80, 8)),
		}
	}
	byStrategy := mk()
	Goodput(byStrategy, 0.9)
	for _, tc := range []struct {
		strat                  string
		met, atRate, bestRate  float64
		at, atVs, best, bestVs float64
	}{
		{results.RoundRobin, 0.5, 0.5, 1, 29, 1, 31, 31.0 / 34},
		{results.LeastQueue, 0.25, 0.25, 1, 15, 1, 34, 1},
		{results.Switchyard, 0.5, 0.5, 1, 30, 30.0 / 29, 57, 57.0 / 34},
	} {
		s := byStrategy[tc.strat]
		if s.SLOMetRate != tc.met || s.GoodputAtSLORate != tc.atRate || s.GoodputBestRate != tc.bestRate ||
			!near(s.GoodputAtSLORPM, tc.at) || !near(s.GoodputAtSLOVsBestSimple, tc.atVs) || !near(s.GoodputBestRPM, tc.best) || !near(s.GoodputBestVsBestSimple, tc.bestVs) {
			t.Errorf("%s: met %v, at %v/s %v (%v× best simple), best %v/s %v (%v×); want %+v", tc.strat, s.SLOMetRate,
				s.GoodputAtSLORate, s.GoodputAtSLORPM, s.GoodputAtSLOVsBestSimple, s.GoodputBestRate, s.GoodputBestRPM, s.GoodputBestVsBestSimple, tc)
		}
		if s.SLOMetConcurrency != 0 || s.GoodputAtSLOConcurrency != 0 || s.GoodputBestConcurrency != 0 || s.GoodputAtSLOVsRandom.Valid() {
			t.Errorf("%s: closed-loop fields set on an open loop: %+v", tc.strat, s)
		}
	}
	// With random, the ratios are against random, and the best-simple
	// ones are left out.
	byStrategy = mk()
	byStrategy[results.Random] = sum(rp(0.25, 4, 14, 0.9, 80, 0), rp(0.5, 12, 20, 0.6, 80, 0), rp(1, 30, 10, 0.2, 80, 0))
	Goodput(byStrategy, 0.9)
	if s := byStrategy[results.Switchyard]; !near(s.GoodputAtSLOVsRandom, 1.5) || !near(s.GoodputBestVsRandom, 57.0/20) || s.GoodputAtSLOVsBestSimple.Valid() {
		t.Errorf("switchyard against random: %v× at the SLO, %v× best, %v× best simple", s.GoodputAtSLOVsRandom, s.GoodputBestVsRandom, s.GoodputAtSLOVsBestSimple)
	}
	// A strategy that met it at no rate is taken at its best.
	none := map[string]*results.Summary{results.Switchyard: sum(rp(0.5, 9, 20, 0.7, 80, 0), rp(1, 20, 25, 0.4, 80, 0))}
	Goodput(none, 0.9)
	if s := none[results.Switchyard]; s.SLOMetRate != 0 || s.GoodputAtSLORate != 1 || !near(s.GoodputAtSLORPM, 25) || s.GoodputBestVsBestSimple.Valid() {
		t.Errorf("met nowhere: met %v, at %v/s %v, %v× best simple", s.SLOMetRate, s.GoodputAtSLORate, s.GoodputAtSLORPM, s.GoodputBestVsBestSimple)
	}
}

// TestBestSimpleRateChecks: in the open loop, on control, Switchyard's
// goodput at each rate must be within 5 % of the better simple strategy's
// there and its TTFT p90 at the top rate within 15 % of theirs; with
// repeats, no run's goodput more than 15 % below. Each check can fail.
func TestBestSimpleRateChecks(t *testing.T) {
	head := func(p90 float64, points ...results.Point) *results.Summary {
		s := &results.Summary{Rate: 1, Sweep: points}
		s.TTFTP90, s.ProjectedTTFTP90 = results.Num(p90), results.Num(p90-1)
		return s
	}
	rr := head(20, rp(0.5, 6, 29, 0.92, 80, 0), rp(1, 20, 31, 0.5, 80, 0))
	lq := head(18, rp(0.5, 9, 26, 0.8, 80, 0), rp(1, 18, 34, 0.55, 80, 0))
	withRuns := func(p results.Point, goods ...float64) results.Point {
		for _, g := range goods {
			p.Runs = append(p.Runs, results.RunFigures{GoodputRPM: results.Num(g)})
		}
		return p
	}
	for _, tc := range []struct {
		name      string
		sy        *results.Summary
		projected bool
		want      []bool // goodput at 0.5/s, at 1/s, TTFT p90, worst run
	}{
		// 28 of 29 (−3.4 %), 33 of 34 (−2.9 %), p90 19 against 18 (+5.6 %).
		{"as good", head(19, rp(0.5, 6, 28, 0.9, 80, 0), rp(1, 19, 33, 0.5, 80, 0)), false, []bool{true, true, true}},
		{"better", head(10, rp(0.5, 5, 30, 0.95, 80, 0), rp(1, 10, 50, 0.8, 80, 0)), false, []bool{true, true, true}},
		// 31 of 34 is −8.8 %; p90 21.5 against 18 is +19 %.
		{"loses at the top rate", head(21.5, rp(0.5, 6, 29, 0.9, 80, 0), rp(1, 21.5, 31, 0.5, 80, 0)), false, []bool{true, false, false}},
		// Projected: 20 against 17 is +18 %; the client's 21 against 18, +17 %.
		{"projected basis", head(21, rp(0.5, 6, 29, 0.9, 80, 0), rp(1, 21, 34, 0.5, 80, 0)), true, []bool{true, true, false}},
		// Medians pass, but one run at 0.5/s had 24 of 29 (−17 %).
		{"one bad run", head(18, withRuns(rp(0.5, 6, 29, 0.9, 80, 0), 29, 24, 30), withRuns(rp(1, 18, 34, 0.5, 80, 0), 34, 33, 35)), false,
			[]bool{true, true, true, false}},
		{"good runs", head(18, withRuns(rp(0.5, 6, 29, 0.9, 80, 0), 29, 28, 30), withRuns(rp(1, 18, 34, 0.5, 80, 0), 34, 31, 35)), false,
			[]bool{true, true, true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &results.File{Workloads: map[string]map[string]*results.Summary{string(workload.Control): {
				results.Switchyard: tc.sy, results.RoundRobin: rr, results.LeastQueue: lq,
			}}}
			if tc.projected {
				f.Params.TTFTBasis = results.BasisProjected
			}
			got := OpenBar(f)
			if len(got) != len(tc.want) {
				t.Fatalf("%d checks %+v, want %d", len(got), got, len(tc.want))
			}
			metrics := []string{"goodput_gap_to_best_simple", "goodput_gap_to_best_simple", "ttft_p90_gap_to_best_simple", "worst_run_goodput_gap_to_best_simple"}
			rates := []float64{0.5, 1, 1, 0.5}
			for i, c := range got {
				if c.Metric != metrics[i] || c.Pass != tc.want[i] || c.Workload != string(workload.Control) || c.Concurrency != 0 {
					t.Errorf("check %d: %s got %v pass %v, want %s pass %v", i, c.Metric, c.Got, c.Pass, metrics[i], tc.want[i])
				}
				if i < 3 && c.Rate != rates[i] {
					t.Errorf("check %d (%s) at %v/s, want %v/s", i, c.Metric, c.Rate, rates[i])
				}
			}
			if tc.name == "one bad run" && (got[3].Rate != 0.5 || !near(got[3].Got, 1-24.0/29)) {
				t.Errorf("worst run: %v at %v/s, want the 0.5/s run's shortfall", got[3].Got, got[3].Rate)
			}
		})
	}
	// Without both baselines there is nothing to check.
	f := &results.File{Workloads: map[string]map[string]*results.Summary{string(workload.Control): {results.Switchyard: rr, results.RoundRobin: rr}}}
	if got := OpenBar(f); got != nil {
		t.Fatalf("checks without least-queue: %+v", got)
	}
}

// TestCompareRateRepeat runs a tiny rate sweep twice over against real
// fleets: the saturation run once per workload, each rate point the
// median of its two runs, with both runs' figures kept.
func TestCompareRateRepeat(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real fleets")
	}
	cfg := DefaultConfig()
	cfg.Bin = switchyardBin(t)
	cfg.TimeScale, cfg.Calibrate, cfg.Progress = 100, false, false
	cfg.Load, cfg.Arrivals, cfg.Repeat = LoadRateSweep, runner.Constant, 2
	cfg.RateSweep = ratesweep.Config{Points: 2, Low: 0.5, High: 1, Concurrency: 2}
	cfg.Workloads = []workload.Kind{workload.Control}
	cfg.Strategies = []string{results.RoundRobin, results.LeastQueue}
	cfg.Requests = 6
	clear(cfg.RequestsFor)
	cfg.LogDir = t.TempDir()
	cfg.Spec.OutputTokens, cfg.Spec.PromptTokens = workload.Const(4), workload.Const(300)
	f, recs := runFleets(t, cfg, 3*time.Minute)
	if f.Params.Repeat != 2 || f.Params.Saturation["control"].Requests != 6 {
		t.Errorf("repeat %d, saturation %+v: want 2 and one run of 6 requests", f.Params.Repeat, f.Params.Saturation["control"])
	}
	for _, strat := range cfg.Strategies {
		s := f.Workloads["control"][strat]
		if len(s.Sweep) != 2 {
			t.Fatalf("%s: sweep %+v", strat, s.Sweep)
		}
		for _, p := range s.Sweep {
			if len(p.Runs) != 2 || p.Requests != 12 {
				t.Fatalf("%s at %v/s: %d runs, %d requests; want 2 and 12", strat, p.Rate, len(p.Runs), p.Requests)
			}
			a, b := p.Runs[0], p.Runs[1]
			if !near(p.TTFTP90, float64(a.TTFTP90+b.TTFTP90)/2) || !near(p.GoodputRPM, float64(a.GoodputRPM+b.GoodputRPM)/2) ||
				!near(p.OutputTokensPerS, float64(a.OutputTokensPerS+b.OutputTokensPerS)/2) {
				t.Errorf("%s at %v/s: p90 %v goodput %v tok/s %v are not the medians of %+v and %+v", strat, p.Rate, p.TTFTP90, p.GoodputRPM, p.OutputTokensPerS, a, b)
			}
			// Each run's arrivals are its own (at least its 6 requests'); the
			// point's are their sum, as its requests are.
			if a.Arrivals < 6 || b.Arrivals < 6 || p.Arrivals != a.Arrivals+b.Arrivals {
				t.Errorf("%s at %v/s: arrivals %d and %d, %d in all; want at least 6 each, summed", strat, p.Rate, a.Arrivals, b.Arrivals, p.Arrivals)
			}
		}
		if !(s.GoodputAtSLORate > 0) || !s.GoodputAtSLOVsBestSimple.Valid() {
			t.Errorf("%s: no open-loop goodput headline: at %v/s, %v× best simple", strat, s.GoodputAtSLORate, s.GoodputAtSLOVsBestSimple)
		}
	}
	// One saturation run of 6 requests, then 2 strategies × 2 rates × 2 runs.
	if n := strings.Count(recs.String(), "\n"); n != 6+2*2*2*6 {
		t.Errorf("%d records, want %d", n, 6+2*2*2*6)
	}
}
