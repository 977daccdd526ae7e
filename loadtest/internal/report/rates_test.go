package report

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/loadtest/internal/results"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// sampleRates is a compare rate sweep as Run fills it in: two strategies
// at three rates below control's saturation rate; round-robin falls
// behind at the top rate and hits the in-flight bound.
func sampleRates() *results.File {
	rates := []float64{0.5, 1, 1.5}
	mk := func(base float64, over int) *results.Summary {
		s := &results.Summary{SLOTTFTS: 8, Requests: 60, TimeScale: 10}
		for i, r := range rates {
			k := float64(i + 1)
			p := results.Point{Rate: r, Requests: 60,
				TTFTP50: results.Num(base * k), TTFTP90: results.Num(base * k * k * 2), TTFTP95: results.Num(base * k * k * 3), TTFTP99: results.Num(base * k * k * 4),
				E2EP50: results.Num(base*k + 5), E2EP90: results.Num(base*k + 8), ITLP50: 0.04, ITLP90: 0.06,
				OutputTokensPerS: results.Num(128 * r), AchievedRate: results.Num(r), GoodputRPM: results.Num(60 * r / k), SLOAttainment: results.Num(1 / k),
				Arrivals: 60}
			if i == 2 {
				p.AchievedRate, p.ArrivalsOverBound, p.Arrivals = results.Num(r*0.8), over, 60+over
				p.TTFTGrowth = 0.25 // 1.5/s offered, 1.2/s sustained
			} else {
				p.TTFTGrowth = results.Num(0.01 * k)
			}
			s.Sweep = append(s.Sweep, p)
		}
		last := s.Sweep[2]
		s.Rate, s.TTFTP50, s.TTFTP90, s.TTFTP95, s.E2EP50, s.ITLP50 = last.Rate, last.TTFTP50, last.TTFTP90, last.TTFTP95, last.E2EP50, last.ITLP50
		s.AchievedRate, s.Arrivals, s.ArrivalsOverBound, s.MaxInFlight = last.AchievedRate, last.Arrivals, last.ArrivalsOverBound, 64
		s.ProjectedTTFTP50, s.ProjectedTTFTP95, s.ShedRate, s.CacheHitRatio = results.NaN, results.NaN, 0, 0
		// The goodput headline as compare.Goodput fills it in: the SLO
		// met (attainment 1/k) at the lowest rate alone, where the
		// goodput is also at its best (ties go to the lower rate); no
		// random, so against round-robin, the best simple strategy here.
		s.SLOAttainmentTarget, s.SLOMetRate, s.GoodputAtSLORate, s.GoodputBestRate = 0.9, 0.5, 0.5, 0.5
		s.GoodputAtSLORPM, s.GoodputBestRPM, s.GoodputAtSLOVsBestSimple, s.GoodputBestVsBestSimple = 30, 30, 1, 1
		for i := 0; i <= 50; i++ {
			s.TTFTQuantiles = append(s.TTFTQuantiles, results.Num(base*(1+float64(i)/10)))
		}
		return s
	}
	return &results.File{
		Schema: results.Schema,
		Params: results.Params{Command: "compare", Mode: "poisson", Load: "rate-sweep", Arrivals: "poisson", TimeScale: 10, TimeUnit: results.TimeUnit,
			Model: "m", Workers: 3, Requests: 60, MaxInFlight: 64, SLOTTFTS: map[string]float64{"control": 8},
			RatesByWorkload: map[string][]float64{"control": rates},
			RateSweep:       &results.RateSweep{Points: 3, Low: 1.0 / 3, High: 1, Strategy: "round-robin", Concurrency: 32},
			Saturation: map[string]results.Saturation{"control": {Strategy: "round-robin", Concurrency: 32, Requests: 60,
				RequestsPerS: 1.5, Window: "full", Rate: 1.5}},
			Headline: map[string]results.Headline{"control": {Rate: 1.5, Rule: "top-rate"}}},
		Bar: []results.Check{
			{Workload: "control", Metric: "goodput_gap_to_best_simple", Want: 0.05, Got: 0, Pass: true, Rate: 0.5, Note: "at this rate"},
			{Workload: "control", Metric: "ttft_p90_gap_to_best_simple", Want: 0.15, Got: -0.5, Pass: true, Rate: 1.5, Note: "at the top rate"},
		},
		Workloads: map[string]map[string]*results.Summary{
			"control": {"round-robin": mk(2, 7), "switchyard": mk(1, 0)},
		},
	}
}

// TestRateTableGolden pins the Markdown of a rate sweep; go test -update
// rewrites it.
func TestRateTableGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, sampleRates()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "rate_sweep.md")
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("table differs from %s (go test -update rewrites it):\n%s", path, got)
	}
	for _, row := range []string{
		"| 1.5/s | round-robin | 1.200/s | 0.25 | 6.00 s | 36.0 s | 72.0 s |",
		"| 7 of 67 |",
		"saturation rate 1.500/s (round-robin, c=32)",
		"by a closed loop of round-robin at 32 clients (control 1.500/s)",
		"| control | switchyard | 8 s | 0.5/s | 30.0 (0.5/s) | 1.00× | 30.0 (0.5/s) | 1.00× |",
		"| vs best simple there |",
		"each strategy is taken at the highest offered rate at which it met the SLO",
		"| control | ttft_p90_gap_to_best_simple | 1.5/s | ≤ +15 % | -50 % | yes |",
	} {
		if !strings.Contains(b.String(), row) {
			t.Errorf("table lacks %q", row)
		}
	}
	if strings.Contains(b.String(), "c=0") {
		t.Errorf("open-loop points listed as concurrency 0:\n%s", b.String())
	}
}

// TestRateHTML checks the open-loop charts: TTFT p90, output tokens/s
// and goodput against the offered rate, one line per strategy, and the
// per-rate table.
func TestRateHTML(t *testing.T) {
	var b bytes.Buffer
	if err := WriteHTML(&b, sampleRates(), "rates"); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"TTFT p90 vs offered rate", "Output tokens/s vs offered rate", "Goodput vs offered rate",
		"TTFT distribution (offered rate 1.5/s)", "<td>7 of 67</td>", "round-robin (1.5/s)",
		"<h2>Goodput at the SLO</h2>", "<th>best vs best simple&#39;s best</th>", "<td>30.0 (0.5/s)</td>",
		"<td>goodput_gap_to_best_simple</td><td>0.5/s</td>"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// The CDF and three rate charts; no concurrency charts.
	if n := strings.Count(page, "<svg"); n != 4 {
		t.Errorf("%d charts, want 4", n)
	}
	if strings.Contains(page, "vs concurrency") || strings.Contains(page, "NaN") {
		t.Error("concurrency charts or NaN on an open-loop page")
	}
	// One polyline per strategy in each rate chart (each has three points).
	if n := strings.Count(page, "<polyline"); n != 4*2 {
		t.Errorf("%d lines, want 2 per chart", n)
	}
}

// TestRateRepeats: a point that ran more than once shows the range of
// its runs beside its median TTFT p90 and goodput.
func TestRateRepeats(t *testing.T) {
	f := sampleRates()
	f.Params.Repeat = 3
	p := &f.Workloads["control"]["switchyard"].Sweep[1]
	for _, x := range []float64{7, 8, 11} {
		p.Runs = append(p.Runs, results.RunFigures{TTFTP90: results.Num(x), GoodputRPM: results.Num(40 - x)})
	}
	var b bytes.Buffer
	if err := WriteTable(&b, f); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 1/s | switchyard | 1.000/s | 0.02 | 2.00 s | 8.00 s (7.00 s–11.0 s) | 16.0 s |", "| 30.0 (29.0–33.0) |",
		"Medians over 3 runs", "| 1/s | round-robin | 1.000/s | 0.02 | 4.00 s | 16.0 s | 32.0 s |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
