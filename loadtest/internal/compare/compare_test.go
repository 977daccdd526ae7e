package compare

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
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
	cfg.Progress = false
	cfg.LogDir = t.TempDir()
	cfg.Spec.OutputTokens = workload.Const(4)
	cfg.Spec.PromptTokens = workload.Const(300)
	cfg.Spec.Prefixes, cfg.Spec.PrefixTokens, cfg.Spec.SuffixTokens = 2, workload.Const(300), workload.Const(20)
	cfg.Spec.Turns, cfg.Spec.SystemTokens, cfg.Spec.UserTokens = workload.Const(2), workload.Const(100), workload.Const(20)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var recs, status bytes.Buffer
	f, err := Run(ctx, cfg, Output{Records: &recs, Status: &status}, zerolog.Nop())
	if err != nil {
		t.Fatalf("%v\nstatus:\n%s", err, status.String())
	}

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
	for _, kind := range workload.Kinds {
		byStrategy, ok := wls[string(kind)].(map[string]any)
		if !ok {
			t.Fatalf("no workloads.%s", kind)
		}
		for _, strat := range Strategies {
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
			if !sum.TTFTP50VsRandom.Valid() {
				t.Errorf("%s/%s: no comparison with random", kind, strat)
			}
		}
		if r := f.Workloads[string(kind)][results.Random].TTFTP50VsRandom; r != 1 {
			t.Errorf("%s: random vs itself %v", kind, r)
		}
	}
	if len(f.Bar) != len(references) {
		t.Errorf("%d bar checks, want %d", len(f.Bar), len(references))
	}
	if f.Params.Workloads[string(workload.SharedPrefix)].Prefixes != 2 || f.Params.SLOTTFTS["multi-turn"] != 4 {
		t.Errorf("params %+v", f.Params)
	}

	// One record per request, from every run.
	n := 0
	sc := bufio.NewScanner(&recs)
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
	if want := len(workload.Kinds) * len(Strategies) * 2 * (4 + 4); n != want {
		t.Errorf("%d records, want %d", n, want)
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
	if got := cfg.Levels(); len(got) != 3 || got[0] != 8 || got[2] != 32 {
		t.Errorf("levels %v", got)
	}
}

func TestRelateAndBar(t *testing.T) {
	mk := func(p50, p95, good float64) *results.Summary {
		return &results.Summary{Latency: results.Latency{TTFTP50: results.Num(p50), TTFTP95: results.Num(p95), E2EP50: 1}, GoodputRPM: results.Num(good)}
	}
	f := &results.File{Workloads: map[string]map[string]*results.Summary{
		"shared-prefix": {results.Random: mk(6, 20, 0), results.Switchyard: mk(0.3, 1, 100), results.Oracle: mk(0.28, 1, 110)},
		"multi-turn":    {results.Random: mk(1.7, 4, 20), results.Switchyard: mk(1, 2, 40)},
	}}
	for _, bs := range f.Workloads {
		Relate(bs)
	}
	sy := f.Workloads["shared-prefix"][results.Switchyard]
	if sy.TTFTP50VsRandom != 20 || sy.TTFTP95VsRandom != 20 {
		t.Errorf("ratios %v %v", sy.TTFTP50VsRandom, sy.TTFTP95VsRandom)
	}
	if gap := float64(sy.TTFTP50GapToOracle); gap < 0.07 || gap > 0.08 {
		t.Errorf("gap to oracle %v", gap)
	}
	bar := Bar(f)
	pass := map[string]bool{}
	for _, c := range bar {
		pass[c.Workload+" "+c.Metric] = c.Pass
	}
	want := map[string]bool{
		"shared-prefix ttft_p50_vs_random":     true,
		"shared-prefix goodput_vs_random":      true, // random had no goodput at all
		"shared-prefix ttft_p50_gap_to_oracle": true,
		"multi-turn ttft_p50_vs_random":        false,
		"multi-turn goodput_vs_random":         false,
	}
	for k, v := range want {
		if got, ok := pass[k]; !ok || got != v {
			t.Errorf("%s: pass %v (present %v), want %v", k, got, ok, v)
		}
	}
	if len(bar) != len(want) {
		t.Errorf("%d checks, want %d (no oracle for multi-turn, no control)", len(bar), len(want))
	}
}
