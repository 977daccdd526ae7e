package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/loadtest/internal/fakeoai"
	"github.com/switchyard-dev/switchyard/loadtest/internal/ratesweep"
	"github.com/switchyard-dev/switchyard/loadtest/internal/results"
	"github.com/switchyard-dev/switchyard/loadtest/internal/workload"
)

// TestRunAndReport drives `loadtest run` in each load mode against a
// scripted server, then re-renders the result with `loadtest report`.
func TestRunAndReport(t *testing.T) {
	srv := fakeoai.New(func(r fakeoai.Request) fakeoai.Script {
		sc := fakeoai.Echo(r)
		sc.CachedTokens = sc.PromptTokens / 2
		return sc
	})
	defer srv.Close()
	tests := []struct {
		name     string
		args     []string
		requests int
		sweep    int
	}{
		{"concurrent", []string{"--mode", "concurrent", "--concurrency", "3", "--workload", "control"}, 10, 0},
		{"poisson", []string{"--mode", "poisson", "--rate", "500", "--workload", "multi-turn"}, 10, 0},
		{"sweep", []string{"--mode", "sweep", "--sweep", "1,2", "--concurrency", "2", "--workload", "shared-prefix"}, 20, 2},
		{"constant", []string{"--mode", "constant", "--rate", "500", "--max-in-flight", "64", "--workload", "control"}, 10, 0},
		// The saturation run's 10 requests, then 10 at each of two rates.
		{"rate-sweep", []string{"--mode", "rate-sweep", "--saturation-concurrency", "2", "--rate-points", "2", "--arrivals", "constant", "--workload", "multi-turn"}, 30, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "res.json")
			args := append([]string{"run", "--url", srv.URL + "/v1", "--requests", "10", "--output-tokens", "4",
				"--prompt-tokens", "200", "--prefix-tokens", "200", "--suffix-tokens", "10", "--system-tokens", "50", "--user-tokens", "10", "--turns", "2", "--answer-tokens", "4",
				"--time-scale", "10", "--slo", "1h", "--out", out}, tc.args...)
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d\n%s", code, stderr.String())
			}
			var f results.File
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &f); err != nil {
				t.Fatal(err)
			}
			if len(f.Workloads) != 1 {
				t.Fatalf("workloads %v", f.Workloads)
			}
			for _, bs := range f.Workloads {
				s := bs[results.Direct]
				if s == nil || s.Succeeded != 10 || len(s.Sweep) != tc.sweep {
					t.Fatalf("summary %+v", s)
				}
				if float64(s.CacheHitRatio) < 0.45 || float64(s.CacheHitRatio) > 0.55 || s.SLOAttainment != 1 {
					t.Errorf("cache hit %v, SLO attainment %v", s.CacheHitRatio, s.SLOAttainment)
				}
			}
			switch tc.name {
			case "constant":
				s := f.Workloads["control"][results.Direct]
				if f.Params.Mode != "constant" || f.Params.MaxInFlight != 64 || s.Rate != 500 || s.MaxInFlight != 64 || s.Arrivals < 10 || !s.AchievedRate.Valid() {
					t.Errorf("constant: params %+v, summary rate %v bound %d arrivals %d achieved %v", f.Params, s.Rate, s.MaxInFlight, s.Arrivals, s.AchievedRate)
				}
			case "rate-sweep":
				s := f.Workloads["multi-turn"][results.Direct]
				sat := f.Params.Saturation["multi-turn"]
				rates := f.Params.RatesByWorkload["multi-turn"]
				if f.Params.Load != "rate-sweep" || f.Params.Arrivals != "constant" || !sat.Rate.Valid() || sat.Concurrency != 2 || len(rates) != 2 {
					t.Fatalf("rate sweep params: load %q arrivals %q saturation %+v rates %v", f.Params.Load, f.Params.Arrivals, sat, rates)
				}
				if s.Rate != rates[1] || s.Sweep[0].Rate != rates[0] || s.Sweep[1].Rate != rates[1] || rates[1] != ratesweepTop(float64(sat.Rate)) {
					t.Errorf("headline rate %v, sweep %+v, rates %v from saturation %v", s.Rate, s.Sweep, rates, sat.Rate)
				}
				if !strings.Contains(stdout.String(), "multi-turn by offered rate") {
					t.Errorf("no per-rate table:\n%s", stdout.String())
				}
				// The goodput headline over the rates, with nothing to compare it with.
				if !(s.GoodputAtSLORate > 0) || !(s.GoodputBestRate > 0) || !s.GoodputBestRPM.Valid() || !strings.Contains(stdout.String(), "highest offered rate at which it met the SLO") {
					t.Errorf("goodput headline: at %v/s, best %v/s %v rpm", s.GoodputAtSLORate, s.GoodputBestRate, s.GoodputBestRPM)
				}
			}
			if f.Params.Model != "fake-model" {
				t.Errorf("model %q, want the one the server lists", f.Params.Model)
			}
			recs, err := os.ReadFile(filepath.Join(dir, "res.requests.jsonl"))
			if err != nil || strings.Count(string(recs), "\n") != tc.requests {
				t.Errorf("records: %d lines (%v), want %d", strings.Count(string(recs), "\n"), err, tc.requests)
			}
			if !strings.Contains(stdout.String(), "| direct |") {
				t.Errorf("no table on stdout:\n%s", stdout.String())
			}
			html := filepath.Join(dir, "again.html")
			stdout.Reset()
			if code := run(context.Background(), []string{"report", "--in", out, "--html", html}, &stdout, &stderr); code != 0 {
				t.Fatalf("report exit %d: %s", code, stderr.String())
			}
			if page, err := os.ReadFile(html); err != nil || !strings.Contains(string(page), "<svg") {
				t.Errorf("report page: %v", err)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"bogus"},
		{"run"}, // no --url
		{"run", "--url", "http://x", "--mode", "x"}, // bad mode
		{"run", "--url", "http://x", "--mode", "sweep"},
		{"compare", "--workers", "0"},
		{"compare", "--strategies", "fastest"},
		{"run", "--url", "http://x", "extra"},
		{"run", "--url", "http://x", "--mode", "poisson", "--concurrency", "4"},
		{"run", "--url", "http://x", "--mode", "concurrent", "--max-in-flight", "4"},
		{"run", "--url", "http://x", "--mode", "rate-sweep", "--rate", "2"},
		{"run", "--url", "http://x", "--mode", "constant", "--rate-points", "3"},
		{"run", "--url", "http://x", "--mode", "constant", "--rate", "0"},
		{"run", "--url", "http://x", "--mode", "rate-sweep", "--arrivals", "bursty"},
		{"run", "--url", "http://x", "--mode", "rate-sweep", "--rate-low", "2", "--rate-high", "1"},
		{"compare", "--load", "rate"},
		{"compare", "--load", "rate-sweep", "--concurrency", "8"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 2 {
			t.Errorf("%q: exit %d, want 2 (stderr %q)", args, code, stderr.String())
		}
	}
}

// TestOutputsNone: "-" means no file for every output flag, and the
// defaults derived from --out follow it.
func TestOutputsNone(t *testing.T) {
	for _, tc := range []struct {
		in, want outputs
	}{
		{outputs{json: "-"}, outputs{}},
		{outputs{json: "-", records: "r.jsonl"}, outputs{records: "r.jsonl"}},
		{outputs{json: "b/x.json", html: "-"}, outputs{json: "b/x.json", records: "b/x.requests.jsonl"}},
		{outputs{json: "b/x.json", records: "-"}, outputs{json: "b/x.json", html: "b/x.html"}},
	} {
		got := tc.in
		got.resolve()
		if got != tc.want {
			t.Errorf("resolve(%+v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

// ratesweepTop is the default sweep's top rate for saturation rate sat.
func ratesweepTop(sat float64) float64 { return ratesweep.Round3(ratesweep.DefaultHigh * sat) }

// TestRunValidateOpenLoop: every misuse of the open-loop flags is named,
// all at once.
func TestRunValidateOpenLoop(t *testing.T) {
	cfg := runConfig{urls: []string{"http://x"}, mode: "rate-sweep", rate: 2, arrivals: "bursty", maxInFlight: 0, requests: 8,
		slo: time.Second, rateSweep: ratesweep.Config{Points: 0, Low: 0.2, High: 1, Concurrency: 16},
		set: map[string]bool{"rate": true, "concurrency": true, "sweep": true}}
	cfg.spec = workload.DefaultSpec(workload.Control)
	cfg.kind = workload.Control
	err := cfg.validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{`arrivals "bursty"`, "rate-points 0", "rate: --mode rate-sweep finds its rates", "requests 8 cannot fill",
		"concurrency: closed-loop clients", "max-in-flight 0", "sweep: only with --mode sweep"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
