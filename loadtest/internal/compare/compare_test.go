package compare

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/loadtest/internal/results"
	"github.com/switchyard-dev/switchyard/loadtest/internal/workload"
)

// switchyardBin returns the switchyard binary: $SWITCHYARD_BIN, or one
// built from the repository this module sits in.
func switchyardBin(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("SWITCHYARD_BIN"); bin != "" {
		return bin
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "cmd", "switchyard")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no cmd/switchyard above the test directory: set SWITCHYARD_BIN")
		}
		dir = parent
	}
	bin := filepath.Join(t.TempDir(), "switchyard")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/switchyard")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build switchyard: %v\n%s", err, out)
	}
	return bin
}

// runFleets runs the comparison cfg describes within the time given,
// returning its file and its request records; its status lines are in
// the failure when it fails.
func runFleets(t *testing.T, cfg Config, within time.Duration) (*results.File, *bytes.Buffer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var recs, status bytes.Buffer
	f, err := Run(ctx, cfg, Output{Records: &recs, Status: &status}, zerolog.Nop())
	if err != nil {
		t.Fatalf("%v\nstatus:\n%s", err, status.String())
	}
	return f, &recs
}

// TestCompareEndToEnd runs every strategy on every workload at a tiny
// scale against real `switchyard sim` and `switchyard dev` processes.
func TestCompareEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real fleets")
	}
	cfg := DefaultConfig()
	cfg.Bin = switchyardBin(t)
	cfg.TimeScale = 100
	cfg.Concurrency, cfg.Sweep, cfg.Requests, cfg.Repeat = 2, []int{1}, 4, 2
	clear(cfg.SweepFor)
	clear(cfg.RequestsFor)
	cfg.Progress = false
	cfg.LogDir = t.TempDir()
	cfg.Spec.OutputTokens, cfg.Spec.AnswerTokens = workload.Const(4), workload.Const(4)
	cfg.Spec.PromptTokens = workload.Const(300)
	cfg.Spec.Prefixes, cfg.Spec.PrefixTokens, cfg.Spec.SuffixTokens = 2, workload.Const(300), workload.Const(20)
	cfg.Spec.Turns, cfg.Spec.SystemTokens, cfg.Spec.UserTokens = workload.Const(2), workload.Const(100), workload.Const(20)
	f, recs := runFleets(t, cfg, 3*time.Minute)

	// The file must survive a JSON round trip in the stable shape.
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(b, &generic); err != nil {
		t.Fatal(err)
	}
	wls := generic["workloads"].(map[string]any)
	for _, kind := range workload.DefaultKinds {
		byStrategy, ok := wls[string(kind)].(map[string]any)
		if !ok {
			t.Fatalf("no workloads.%s", kind)
		}
		for _, strat := range DefaultStrategies {
			s, ok := byStrategy[strat].(map[string]any)
			if !ok {
				t.Fatalf("no workloads.%s.%s", kind, strat)
			}
			for _, key := range []string{"ttft_p50_s", "ttft_p95_s", "e2e_p50_s", "itl_p50_s", "goodput_rpm", "shed_rate", "cache_hit_ratio"} {
				if _, isNum := s[key].(float64); !isNum {
					t.Errorf("workloads.%s.%s.%s = %v, want a number", kind, strat, key, s[key])
				}
			}
			sum := f.Workloads[string(kind)][strat]
			if sum.Requests != 8 || sum.Succeeded != 8 {
				t.Errorf("%s/%s: %d requests, %d succeeded (errors: %q); want 2 runs of 4", kind, strat, sum.Requests, sum.Succeeded, sum.ErrorSamples)
			}
			if len(sum.Sweep) != 2 || sum.Sweep[0].Concurrency != 1 || sum.Sweep[1].Concurrency != 2 || sum.Concurrency != 2 {
				t.Errorf("%s/%s: sweep %+v", kind, strat, sum.Sweep)
			}
			if !sum.SimTTFTP50.Valid() {
				t.Errorf("%s/%s: no simulator timings came through", kind, strat)
			}
			if !sum.TTFTP50VsRandom.Valid() || !sum.ProjectedTTFTP50VsRandom.Valid() {
				t.Errorf("%s/%s: no comparison with random", kind, strat)
			}
			if !sum.ProjectedTTFTP50.Valid() || sum.ProjectedTTFTP50 < sum.SimTTFTP50 {
				t.Errorf("%s/%s: projected TTFT p50 %v, simulator's %v", kind, strat, sum.ProjectedTTFTP50, sum.SimTTFTP50)
			}
			if sum.GoodputBestConcurrency == 0 || sum.GoodputAtSLOConcurrency == 0 {
				t.Errorf("%s/%s: no goodput headline: %+v", kind, strat, sum)
			}
		}
		if r := f.Workloads[string(kind)][results.Random].TTFTP50VsRandom; r != 1 {
			t.Errorf("%s: random vs itself %v", kind, r)
		}
	}
	// The references, and control against the better simple strategy:
	// p50, p95 and (two runs each) the worst run.
	if len(f.Bar) != len(references)+3 {
		t.Errorf("%d bar checks, want %d", len(f.Bar), len(references)+3)
	}
	if f.Params.Workloads[string(workload.SharedPrefix)].Prefixes != 2 || f.Params.SLOTTFTS["multi-turn"] != 4 {
		t.Errorf("params %+v", f.Params)
	}
	if h := f.Params.Headline[string(workload.MultiTurn)]; h.Concurrency != 2 || h.Rule != "fixed" {
		t.Errorf("headline %+v, want the fixed --concurrency", h)
	}
	if f.Params.TTFTBasis != results.BasisProjected {
		t.Errorf("TTFT basis %q: every run was against the simulator", f.Params.TTFTBasis)
	}

	// One record per request, from every run.
	n := 0
	sc := bufio.NewScanner(recs)
	for sc.Scan() {
		var r results.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Status != 200 || r.PromptTokens == 0 {
			t.Errorf("record %+v", r)
		}
		if r.Strategy != results.Switchyard && !strings.HasPrefix(r.Target, "sim-") {
			t.Errorf("baseline record without its worker: %q", r.Target)
		}
		n++
	}
	if want := len(workload.DefaultKinds) * len(DefaultStrategies) * 2 * (4 + 4); n != want {
		t.Errorf("%d records, want %d", n, want)
	}
}

// fleetConfig is a compare config for tests that start real fleets
// (skipped with -short): the built binary, a fast time scale, KV events,
// no calibration and no progress bars.
func fleetConfig(t *testing.T) Config {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real fleets")
	}
	cfg := DefaultConfig()
	cfg.Bin = switchyardBin(t)
	cfg.TimeScale, cfg.KVEvents, cfg.Calibrate, cfg.Progress = 100, true, false, false
	cfg.LogDir = t.TempDir()
	return cfg
}

// tinySharedPrefix is fleetConfig on a shared-prefix workload of one
// 300-token prefix and 4-token answers, at one concurrency level and
// request budget, under the given strategies.
func tinySharedPrefix(t *testing.T, level, requests int, strategies ...string) Config {
	t.Helper()
	cfg := fleetConfig(t)
	cfg.Workloads, cfg.Strategies = []workload.Kind{workload.SharedPrefix}, strategies
	cfg.Sweep, cfg.Requests = []int{level}, requests
	clear(cfg.SweepFor)
	clear(cfg.RequestsFor)
	cfg.Spec.OutputTokens = workload.Const(4)
	cfg.Spec.Prefixes, cfg.Spec.PrefixTokens, cfg.Spec.SuffixTokens = 1, workload.Const(300), workload.Const(20)
	return cfg
}

// TestCompareKVEvents runs switchyard as deployed (its own simulated
// workers publishing KV events to a kvtracker) at a tiny scale: a second
// request sharing a prefix must find it cached.
func TestCompareKVEvents(t *testing.T) {
	cfg := tinySharedPrefix(t, 1, 4, results.Switchyard)
	f, _ := runFleets(t, cfg, time.Minute)
	s := f.Workloads[string(workload.SharedPrefix)][results.Switchyard]
	if !f.Params.KVEvents || s.Succeeded != 4 || !(s.CacheHitRatio > 0.5) {
		t.Errorf("kv events %v, %d of 4 succeeded, cache hit %v (errors %q)", f.Params.KVEvents, s.Succeeded, s.CacheHitRatio, s.ErrorSamples)
	}
	cfg.SimArgs = []string{"--max-num-seqs=8"}
	if err := cfg.Validate(); err == nil {
		t.Error("--sim-arg accepted with --kv-events, where switchyard's workers would not get it")
	}
}

// TestBystanders: with --bystanders, a share of the load goes straight to
// the workers of switchyard's own stack (read from its banner) and of a
// baseline's fleet, and only the measured traffic is in the results.
func TestBystanders(t *testing.T) {
	cfg := tinySharedPrefix(t, 2, 6, results.RoundRobin, results.Switchyard)
	cfg.Bystanders = 1
	f, recs := runFleets(t, cfg, 2*time.Minute)
	if f.Params.Bystanders != 1 {
		t.Errorf("params: bystanders %v", f.Params.Bystanders)
	}
	if strings.Contains(recs.String(), `"tenant":"`+bystanderTenant+`"`) {
		t.Error("the bystanders' records are in the results")
	}
	for _, strat := range cfg.Strategies {
		s := f.Workloads[string(workload.SharedPrefix)][strat]
		// The budget of 12 is shared with as many bystanders: the
		// measured clients get some of it, never all.
		if s.Succeeded < 1 || s.Succeeded > 11 || s.ErrorCount > 0 {
			t.Errorf("%s: %d succeeded, errors %q", strat, s.Succeeded, s.ErrorSamples)
		}
	}
	cfg.Bystanders = 5
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "bystanders") {
		t.Errorf("bystanders 5: %v", err)
	}
}

func TestParseHelpers(t *testing.T) {
	slo := map[workload.Kind]float64{}
	if err := ParseSLO("shared-prefix=8s, multi-turn=500ms", slo); err != nil || slo[workload.SharedPrefix] != 8 || slo[workload.MultiTurn] != 0.5 {
		t.Errorf("ParseSLO: %v %v", slo, err)
	}
	for _, bad := range []string{"shared-prefix", "chat=1s", "control=-1s", "control=fast"} {
		if err := ParseSLO(bad, slo); err == nil {
			t.Errorf("ParseSLO(%q) accepted", bad)
		}
	}
	if v, err := ParseInts("8, 16,32"); err != nil || len(v) != 3 || v[2] != 32 {
		t.Errorf("ParseInts: %v %v", v, err)
	}
	if v, err := ParseInts(""); err != nil || v != nil {
		t.Errorf("ParseInts(empty): %v %v", v, err)
	}
	if _, err := ParseInts("4,0"); err == nil {
		t.Error("ParseInts accepted 0")
	}
	cfg := DefaultConfig()
	cfg.Concurrency, cfg.Sweep = 16, []int{32, 8, 16}
	clear(cfg.SweepFor)
	if got := cfg.Levels(workload.MultiTurn); len(got) != 3 || got[0] != 8 || got[2] != 32 {
		t.Errorf("levels %v", got)
	}
}

// parseFlags is compare's flag set parsed from args, as main parses it.
func parseFlags(args ...string) (Config, error) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var c Config
	c.RegisterFlags(fs)
	err := fs.Parse(args)
	c.Parsed(fs)
	return c, err
}

// TestPerWorkloadFlags checks that --sweep and --requests take a plain
// value for every workload and WORKLOAD=VALUE for one, later flags winning.
func TestPerWorkloadFlags(t *testing.T) {
	c, err := parseFlags()
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Levels(workload.Control); !slices.Equal(got, DefaultSweepFor[workload.Control]) {
		t.Errorf("default control levels %v", got)
	}
	if got := c.Levels(workload.SharedPrefix); !slices.Equal(got, DefaultSweep) {
		t.Errorf("default shared-prefix levels %v", got)
	}
	c, err = parseFlags("--sweep", "4,8", "--sweep", "multi-turn=2,16", "--requests", "50", "--requests", "control=10", "--concurrency", "6")
	if err != nil {
		t.Fatal(err)
	}
	for kind, want := range map[workload.Kind][]int{
		workload.Control:      {4, 6, 8}, // the plain list replaced the default override
		workload.SharedPrefix: {4, 6, 8},
		workload.MultiTurn:    {2, 6, 16},
	} {
		if got := c.Levels(kind); !slices.Equal(got, want) {
			t.Errorf("%s levels %v, want %v", kind, got, want)
		}
	}
	if c.RequestsOf(workload.Control) != 10 || c.RequestsOf(workload.MultiTurn) != 50 {
		t.Errorf("requests %d/%d", c.RequestsOf(workload.Control), c.RequestsOf(workload.MultiTurn))
	}
	for _, bad := range [][]string{{"--sweep", "chat=4"}, {"--sweep", "control=0"}, {"--requests", "x"}, {"--requests", "control=-1"}} {
		if _, err := parseFlags(bad...); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	c, _ = parseFlags("--sweep", "", "--workloads", "control")
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "no concurrency level") {
		t.Errorf("no levels: %v", err)
	}
}

func pt(c int, p50, good, attain float64) results.Point {
	return results.Point{Concurrency: c, TTFTP50: results.Num(p50), GoodputRPM: results.Num(good), SLOAttainment: results.Num(attain)}
}

func TestHeadline(t *testing.T) {
	random := []results.Point{pt(8, 3.2, 35, 0.88), pt(16, 9.35, 22, 0.47), pt(32, 22.5, 10, 0.19)}
	tests := []struct {
		name   string
		kind   workload.Kind
		fixed  int
		random []results.Point
		want   results.Headline
	}{
		// ln(9.35/6.88) = 0.31 < ln(6.88/3.2) = 0.77: c=16, though 3.2 s
		// is nearer in seconds.
		{"closest in ratio", workload.SharedPrefix, 0, random,
			results.Headline{Concurrency: 16, Rule: "reference", RandomTTFTP50: 9.35, ReferenceTTFTP50: 6.88}},
		{"multi-turn reference", workload.MultiTurn, 0, []results.Point{pt(8, 1.33, 0, 0), pt(16, 3.69, 0, 0)},
			results.Headline{Concurrency: 8, Rule: "reference", RandomTTFTP50: 1.33, ReferenceTTFTP50: 1.70}},
		{"tie goes to the lower level", workload.MultiTurn, 0, []results.Point{pt(16, 3.4, 0, 0), pt(8, 0.85, 0, 0)},
			results.Headline{Concurrency: 8, Rule: "reference", RandomTTFTP50: 0.85, ReferenceTTFTP50: 1.70}},
		{"fixed wins", workload.SharedPrefix, 32, random, results.Headline{Concurrency: 32, Rule: "fixed", RandomTTFTP50: 22.5}},
		{"no random", workload.SharedPrefix, 0, nil, results.Headline{Concurrency: 16, Rule: "middle"}},
		{"random without latencies", workload.SharedPrefix, 0, []results.Point{{Concurrency: 8, TTFTP50: results.NaN}},
			results.Headline{Concurrency: 16, Rule: "middle"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Headline(tc.kind, tc.fixed, []int{8, 16, 32}, tc.random)
			if got.Concurrency != tc.want.Concurrency || got.Rule != tc.want.Rule ||
				math.Abs(float64(got.RandomTTFTP50-tc.want.RandomTTFTP50)) > 1e-9 || math.Abs(float64(got.ReferenceTTFTP50-tc.want.ReferenceTTFTP50)) > 1e-9 {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestOpenHeadline(t *testing.T) {
	rp := func(rate, p90 float64) results.Point { return results.Point{Rate: rate, TTFTP90: results.Num(p90)} }
	random := []results.Point{rp(0.5, 2.8), rp(0.65, 12.6), rp(0.8, 36.5), rp(1.0, 310)}
	rates := []float64{0.5, 0.65, 0.8, 1.0}
	tests := []struct {
		name   string
		kind   workload.Kind
		random []results.Point
		want   results.Headline
	}{
		// ln(93/36.5) = 0.94 < ln(310/93) = 1.20: 0.8/s, though 310 s is
		// nearer in seconds.
		{"closest in ratio to llm-d's random", workload.PrefixPressure, random,
			results.Headline{Rate: 0.8, Rule: "reference-p90", RandomTTFTP90: 36.5, ReferenceTTFTP90: 93}},
		{"tie goes to the lower rate", workload.PrefixPressure, []results.Point{rp(2, 186), rp(1, 46.5)},
			results.Headline{Rate: 1, Rule: "reference-p90", RandomTTFTP90: 46.5, ReferenceTTFTP90: 93}},
		{"no reference for the workload", workload.Control, random, results.Headline{Rate: 1.0, Rule: "top-rate"}},
		{"no random", workload.PrefixPressure, nil, results.Headline{Rate: 1.0, Rule: "top-rate"}},
		{"random without latencies", workload.PrefixPressure, []results.Point{{Rate: 0.5, TTFTP90: results.NaN}},
			results.Headline{Rate: 1.0, Rule: "top-rate"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := OpenHeadline(tc.kind, rates, tc.random); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestGoodput(t *testing.T) {
	sum := func(points ...results.Point) *results.Summary { return &results.Summary{Sweep: points} }
	byStrategy := map[string]*results.Summary{
		// Random meets the SLO at no level; its best is at c=8.
		results.Random: sum(pt(8, 3.2, 35, 0.88), pt(16, 9.35, 22, 0.47), pt(32, 22.5, 10, 0.19)),
		// Meets it up to c=32, though its best goodput is at c=64.
		results.Switchyard: sum(pt(8, 0.2, 64, 0.99), pt(16, 0.3, 92, 1), pt(32, 0.4, 115, 0.91), pt(64, 3, 120, 0.6)),
		// Meets it at c=8 and c=32 but not at c=16 (noise): the highest
		// level counts.
		results.Oracle: sum(pt(8, 0.2, 61, 0.97), pt(16, 0.2, 91, 0.85), pt(32, 1.9, 66, 0.9)),
		// Meets it nowhere: taken at its best goodput.
		results.LeastQueue: sum(pt(8, 2, 30, 0.8), pt(16, 6, 40, 0.6), pt(32, 20, 5, 0.1)),
	}
	Goodput(byStrategy, 0.9)
	tests := []struct {
		strat                  string
		met, atC, bestC        int
		at, atVs, best, bestVs float64
	}{
		{results.Random, 0, 8, 8, 35, 1, 35, 1},
		{results.Switchyard, 32, 32, 64, 115, 11.5, 120, 120.0 / 35},
		{results.Oracle, 32, 32, 16, 66, 6.6, 91, 91.0 / 35},
		{results.LeastQueue, 0, 16, 16, 40, 40.0 / 22, 40, 40.0 / 35},
	}
	for _, tc := range tests {
		s := byStrategy[tc.strat]
		if s.SLOMetConcurrency != tc.met || s.GoodputAtSLOConcurrency != tc.atC || s.GoodputBestConcurrency != tc.bestC ||
			!near(s.GoodputAtSLORPM, tc.at) || !near(s.GoodputAtSLOVsRandom, tc.atVs) || !near(s.GoodputBestRPM, tc.best) || !near(s.GoodputBestVsRandom, tc.bestVs) {
			t.Errorf("%s: met %d, at c=%d %v (%v× random), best c=%d %v (%v×); want %+v", tc.strat,
				s.SLOMetConcurrency, s.GoodputAtSLOConcurrency, s.GoodputAtSLORPM, s.GoodputAtSLOVsRandom,
				s.GoodputBestConcurrency, s.GoodputBestRPM, s.GoodputBestVsRandom, tc)
		}
	}

	// A strategy at a level random did not run has no ratio there, and
	// random that met the SLO for no request makes the ratio infinite.
	alone := map[string]*results.Summary{
		results.Random:     sum(pt(8, 20, 0, 0), pt(16, 30, 0, 0)),
		results.Switchyard: sum(pt(8, 1, 50, 1), pt(32, 1, 90, 0.95)),
	}
	Goodput(alone, 0.9)
	if s := alone[results.Switchyard]; s.GoodputAtSLOConcurrency != 32 || s.GoodputAtSLOVsRandom.Valid() || !math.IsInf(float64(s.GoodputBestVsRandom), 1) {
		t.Errorf("switchyard at c=%d: %v× random, best %v×", s.GoodputAtSLOConcurrency, s.GoodputAtSLOVsRandom, s.GoodputBestVsRandom)
	}
}

func near(a results.Num, b float64) bool { return math.Abs(float64(a)-b) < 1e-9 }

func TestRelateAndBar(t *testing.T) {
	// proj is the projected TTFT p50 over the client one: the proxy's
	// overhead scaled by the time scale inflates switchyard's client
	// figure only.
	mk := func(p50, p95, proj, good float64) *results.Summary {
		s := &results.Summary{Latency: results.Latency{TTFTP50: results.Num(p50), TTFTP95: results.Num(p95), E2EP50: 1},
			ProjectedTTFTP50: results.Num(p50 * proj), ProjectedTTFTP95: results.Num(p95 * proj), Concurrency: 16}
		s.Sweep = []results.Point{{Concurrency: 16, GoodputRPM: results.Num(good), SLOAttainment: 1}}
		return s
	}
	f := &results.File{Workloads: map[string]map[string]*results.Summary{
		"shared-prefix": {results.Random: mk(6, 20, 1, 0), results.Switchyard: mk(0.33, 1, 0.9, 100), results.Oracle: mk(0.28, 1, 1, 110)},
		"multi-turn":    {results.Random: mk(1.7, 4, 1, 20), results.Switchyard: mk(1, 2, 1, 40)},
	}}
	for _, bs := range f.Workloads {
		Relate(bs)
		Goodput(bs, 0.9)
	}
	sy := f.Workloads["shared-prefix"][results.Switchyard]
	if !near(sy.TTFTP50VsRandom, 6/0.33) || !near(sy.TTFTP95VsRandom, 20) || !near(sy.ProjectedTTFTP50VsRandom, 6/0.297) {
		t.Errorf("ratios %v %v %v", sy.TTFTP50VsRandom, sy.TTFTP95VsRandom, sy.ProjectedTTFTP50VsRandom)
	}
	if !near(sy.TTFTP50GapToOracle, 0.33/0.28-1) || !near(sy.ProjectedTTFTP50GapToOracle, 0.297/0.28-1) {
		t.Errorf("gap to oracle %v, projected %v", sy.TTFTP50GapToOracle, sy.ProjectedTTFTP50GapToOracle)
	}
	for _, tc := range []struct {
		basis string
		want  map[string]bool
	}{
		{results.BasisClient, map[string]bool{
			"shared-prefix ttft_p50_vs_random":       false, // 18×
			"shared-prefix goodput_at_slo_vs_random": true,  // random had no goodput at all
			"shared-prefix ttft_p50_gap_to_oracle":   false, // +18 %
			"multi-turn ttft_p50_vs_random":          false,
			"multi-turn goodput_at_slo_vs_random":    false,
		}},
		{results.BasisProjected, map[string]bool{
			"shared-prefix ttft_p50_vs_random":       true, // 20.2×
			"shared-prefix goodput_at_slo_vs_random": true,
			"shared-prefix ttft_p50_gap_to_oracle":   true, // +6 %
			"multi-turn ttft_p50_vs_random":          false,
			"multi-turn goodput_at_slo_vs_random":    false,
		}},
	} {
		f.Params.TTFTBasis = tc.basis
		bar := Bar(f)
		pass := map[string]bool{}
		for _, c := range bar {
			pass[c.Workload+" "+c.Metric] = c.Pass
			if c.Concurrency != 16 {
				t.Errorf("%s: %s %s at c=%d, want 16", tc.basis, c.Workload, c.Metric, c.Concurrency)
			}
		}
		for k, v := range tc.want {
			if got, ok := pass[k]; !ok || got != v {
				t.Errorf("%s: %s: pass %v (present %v), want %v", tc.basis, k, got, ok, v)
			}
		}
		if len(bar) != len(tc.want) {
			t.Errorf("%d checks, want %d (no oracle for multi-turn, no control)", len(bar), len(tc.want))
		}
	}
	if got := Basis(f); got != results.BasisProjected {
		t.Errorf("basis %q with projected TTFTs everywhere", got)
	}
	f.Workloads["multi-turn"][results.Random].ProjectedTTFTP95 = results.NaN
	if got := Basis(f); got != results.BasisClient {
		t.Errorf("basis %q with a summary lacking projected TTFTs", got)
	}
}

// TestBestSimpleChecks: on control, Switchyard's p50 and p95 must each be
// within 5 % of the better of round-robin's and least-queue's, and no run
// more than 15 % above it, on the file's TTFT basis.
func TestBestSimpleChecks(t *testing.T) {
	sum := func(p50, p95 float64, runs ...float64) *results.Summary {
		s := &results.Summary{Concurrency: 8}
		s.TTFTP50, s.TTFTP95 = results.Num(p50), results.Num(p95)
		s.ProjectedTTFTP50, s.ProjectedTTFTP95 = results.Num(p50-1), results.Num(p95-1)
		for i := 0; i+1 < len(runs); i += 2 {
			s.Runs = append(s.Runs, results.RunFigures{TTFTP50: results.Num(runs[i]), TTFTP95: results.Num(runs[i+1]),
				ProjectedTTFTP50: results.Num(runs[i] - 1), ProjectedTTFTP95: results.Num(runs[i+1] - 1)})
		}
		return s
	}
	for _, tc := range []struct {
		name      string
		sy        *results.Summary
		projected bool
		want      map[string]bool
	}{
		{"as good", sum(3.3, 9.4, 3.2, 9.3, 3.3, 9.4, 3.5, 9.5), false, map[string]bool{
			"ttft_p50_gap_to_best_simple": true, "ttft_p95_gap_to_best_simple": true, "worst_run_ttft_gap_to_best_simple": true}},
		// p50 3.3 against round-robin's 3.2 (+3 %), p95 against least-queue's 9 (+4.4 %).
		{"each figure's better", sum(3.3, 9.4), false, map[string]bool{
			"ttft_p50_gap_to_best_simple": true, "ttft_p95_gap_to_best_simple": true}},
		{"one bad run", sum(3.3, 9.4, 3.2, 9.3, 6.2, 9.4, 3.3, 9.5), false, map[string]bool{
			"ttft_p50_gap_to_best_simple": true, "ttft_p95_gap_to_best_simple": true, "worst_run_ttft_gap_to_best_simple": false}},
		{"least-queue's mode", sum(5.0, 9.4), false, map[string]bool{
			"ttft_p50_gap_to_best_simple": false, "ttft_p95_gap_to_best_simple": true}},
		// Projected: 2.4 against 2.2 is +9 %.
		{"projected basis", sum(3.4, 9.3), true, map[string]bool{
			"ttft_p50_gap_to_best_simple": false, "ttft_p95_gap_to_best_simple": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &results.File{Workloads: map[string]map[string]*results.Summary{string(workload.Control): {
				results.Switchyard: tc.sy, results.RoundRobin: sum(3.2, 9.9), results.LeastQueue: sum(6.2, 9.0),
			}}}
			got := bestSimpleChecks(f, tc.projected)
			if len(got) != len(tc.want) {
				t.Fatalf("%d checks %+v, want %d", len(got), got, len(tc.want))
			}
			for _, c := range got {
				if want, ok := tc.want[c.Metric]; !ok || c.Pass != want {
					t.Errorf("%s: got %v pass %v, want pass %v", c.Metric, c.Got, c.Pass, want)
				}
			}
		})
	}
	// Without the baselines there is nothing to check.
	f := &results.File{Workloads: map[string]map[string]*results.Summary{string(workload.Control): {results.Switchyard: sum(1, 2)}}}
	if got := bestSimpleChecks(f, false); got != nil {
		t.Fatalf("checks without baselines: %+v", got)
	}
}
