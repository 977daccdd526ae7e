package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/loadtest/internal/fakeoai"
	"github.com/switchyard-dev/switchyard/loadtest/internal/results"
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
