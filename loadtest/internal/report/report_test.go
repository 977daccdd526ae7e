package report

import (
	"bytes"
	"encoding/xml"
	"math"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/loadtest/internal/results"
)

func sample() *results.File {
	mk := func(p50 float64, conc ...int) *results.Summary {
		s := &results.Summary{Latency: results.Latency{TTFTP50: results.Num(p50), TTFTP95: results.Num(p50 * 3), E2EP50: 10, ITLP50: 0.05},
			GoodputRPM: results.Num(60 / p50), ShedRate: 0, CacheHitRatio: 0.5, SLOTTFTS: 8, Requests: 10, Concurrency: 16}
		for i := 0; i <= 50; i++ {
			s.TTFTQuantiles = append(s.TTFTQuantiles, results.Num(p50*math.Pow(10, float64(i-25)/25)))
		}
		for _, c := range conc {
			s.Sweep = append(s.Sweep, results.Point{Concurrency: c, TTFTP50: results.Num(p50 * float64(c) / 16), GoodputRPM: results.Num(float64(c))})
		}
		return s
	}
	return &results.File{
		Schema: results.Schema,
		Params: results.Params{Command: "compare", Mode: "concurrent", TimeScale: 10, TimeUnit: results.TimeUnit, Model: "m", Workers: 3,
			Concurrency: 16, Sweep: []int{8, 16}, Requests: 10, SLOTTFTS: map[string]float64{"shared-prefix": 8, "multi-turn": 4}},
		Workloads: map[string]map[string]*results.Summary{
			"shared-prefix": {"random": mk(6.9, 8, 16), "switchyard": mk(0.3, 8, 16), "oracle": mk(0.28, 8, 16)},
			"multi-turn":    {"random": mk(1.7, 8, 16), "switchyard": mk(0.6, 8, 16)},
		},
		Bar: []results.Check{{Workload: "shared-prefix", Metric: "ttft_p50_vs_random", Want: 20, Got: 23, Pass: true, Concurrency: 16},
			{Workload: "shared-prefix", Metric: "ttft_p50_gap_to_oracle", Want: 0.15, Got: results.NaN}},
	}
}

// sampleCompare is sample as compare fills it in: headlines chosen per
// workload, projected TTFTs, goodput headlines.
func sampleCompare() *results.File {
	f := sample()
	f.Params.Concurrency = 0
	f.Params.TTFTBasis = results.BasisProjected
	f.Params.Requests, f.Params.RequestsByWorkload = 200, map[string]int{"multi-turn": 80, "shared-prefix": 160}
	f.Params.Headline = map[string]results.Headline{
		"shared-prefix": {Concurrency: 16, Rule: "reference", RandomTTFTP50: 6.9, ReferenceTTFTP50: 6.88},
		"multi-turn":    {Concurrency: 8, Rule: "fixed"},
	}
	for _, bs := range f.Workloads {
		for st, s := range bs {
			s.ProjectedTTFTP50, s.ProjectedTTFTP95 = s.TTFTP50*0.9, s.TTFTP95*0.9
			s.ProjectedTTFTP50VsRandom, s.TTFTP50VsRandom = 2, 1.5
			s.SLOAttainmentTarget, s.SLOMetConcurrency, s.GoodputAtSLOConcurrency, s.GoodputAtSLORPM, s.GoodputAtSLOVsRandom = 0.9, 16, 16, 16, 1
			s.GoodputBestConcurrency, s.GoodputBestRPM, s.GoodputBestVsRandom = 16, 16, 1
			if st == "random" {
				s.SLOMetConcurrency = 0
			}
		}
	}
	return f
}

func TestTable(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, sample()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| shared-prefix | random | 16 | 6.90 s |",
		"| shared-prefix | switchyard | 16 | 300 ms |",
		"| multi-turn | switchyard | 16 | 600 ms |",
		"| shared-prefix | ttft_p50_vs_random | 16 | ≥ 20× | 23× | yes |",
		"| ≤ +15 % | – | no |",
		"Concurrency 16.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, absent := range []string{"projected", "Goodput:"} {
		if strings.Contains(out, absent) {
			t.Errorf("table mentions %q without the figures:\n%s", absent, out)
		}
	}
	// Shared prefix comes first, and random before switchyard.
	if strings.Index(out, "| multi-turn |") < strings.Index(out, "| shared-prefix | oracle") ||
		strings.Index(out, "| shared-prefix | switchyard") < strings.Index(out, "| shared-prefix | random") {
		t.Errorf("rows out of order:\n%s", out)
	}
}

// TestTableCompare checks what compare adds: the headline of each workload
// and why, projected TTFTs and the ratios on them, the goodput table.
func TestTableCompare(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, sampleCompare()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Headline concurrency (column c): shared-prefix 16, multi-turn 8; chosen from the sweep as the level at which random's median TTFT is closest to the reference Service baseline's (shared-prefix 6.90 s at 6.88 s).",
		"200 requests per run (shared-prefix 160, multi-turn 80).",
		"| projected TTFT p50 | projected TTFT p95 |",
		"| shared-prefix | random | 16 | 6.90 s | 20.7 s | 6.21 s | 18.6 s |",
		"| 2.00× |", // the projected ratio, not the client one
		"The TTFT ratios compare projected TTFTs.",
		"at least 90 % of its requests",
		"| shared-prefix | random | 8 s | none | 16.0 (c=16) | 1.00× | 16.0 (c=16) | 1.00× |",
		"| shared-prefix | switchyard | 8 s | c=16 | 16.0 (c=16) |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "| 1.50× |") {
		t.Errorf("table shows client-basis ratios on a projected basis:\n%s", out)
	}
}

// TestHTML checks the page is well-formed and carries a chart per
// workload: the TTFT distribution and, with a sweep, the curves.
func TestHTML(t *testing.T) {
	var b bytes.Buffer
	if err := WriteHTML(&b, sampleCompare(), "Bench <1>"); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if !strings.Contains(page, "<title>Bench &lt;1&gt;</title>") {
		t.Error("title not escaped")
	}
	if n := strings.Count(page, "<svg"); n != 6 {
		t.Errorf("%d charts, want 3 per workload", n)
	}
	// Every SVG must parse as XML: browsers refuse malformed inline SVG.
	for rest := page; ; {
		i := strings.Index(rest, "<svg")
		if i < 0 {
			break
		}
		j := strings.Index(rest[i:], "</svg>") + i + len("</svg>")
		dec := xml.NewDecoder(strings.NewReader(rest[i:j]))
		for {
			if _, err := dec.Token(); err != nil {
				if err.Error() != "EOF" {
					t.Fatalf("malformed svg: %v", err)
				}
				break
			}
		}
		rest = rest[j:]
	}
	if strings.Contains(page, "NaN") || strings.Contains(page, "Inf") {
		t.Error("page shows NaN or Inf")
	}
}

func TestAxis(t *testing.T) {
	a := newAxis([]float64{0.23, 31.9}, true, false)
	if a.lo != 0.1 || a.hi != 100 {
		t.Errorf("log axis %v-%v, want 0.1-100", a.lo, a.hi)
	}
	l := newAxis([]float64{3, 47}, false, true)
	if l.lo != 0 || l.hi != 50 {
		t.Errorf("linear axis %v-%v, want 0-50", l.lo, l.hi)
	}
	vs, _ := l.ticks()
	if len(vs) < 3 || vs[0] != 0 || vs[len(vs)-1] != 50 {
		t.Errorf("ticks %v", vs)
	}
	e := newAxis([]float64{math.NaN()}, true, false)
	if !(e.hi > e.lo) {
		t.Errorf("empty axis %v-%v", e.lo, e.hi)
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{Sec(0.0123), "12.3 ms"}, {Sec(0.31), "310 ms"}, {Sec(6.88), "6.88 s"}, {Sec(21.46), "21.5 s"}, {Sec(results.NaN), "–"},
		{Ratio(22.2), "22×"}, {Ratio(2.94), "2.94×"}, {Ratio(results.Num(math.Inf(1))), "∞"},
		{Gap(0.123), "+12 %"}, {Pct(0.05), "5.0 %"}, {Number(results.NaN, 1), "–"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestGapZero(t *testing.T) {
	if got := Gap(-0.001); got != "+0 %" {
		t.Errorf("Gap(-0.001) = %q", got)
	}
}

func TestTablePredictor(t *testing.T) {
	f := sample()
	var b bytes.Buffer
	if err := WriteTable(&b, f); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "TTFT predictor") {
		t.Fatal("a predictor table without predictions")
	}
	sy := f.Workloads["shared-prefix"]["switchyard"]
	sy.PredictorSamples, sy.PredictorMAPE, sy.PredictorMedianAPE, sy.PredictorP90AbsErr = 160, 0.084, 0.05, 0.12
	sy.PredictorMeasuredMAPE, sy.PredictorMeasuredMedianAPE, sy.PredictorRouterMAPE = 0.061, 0.04, 0.072
	b.Reset()
	if err := WriteTable(&b, f); err != nil {
		t.Fatal(err)
	}
	if want := "| shared-prefix | switchyard | 16 | 160 | 8.4 % | 5.0 % | 120 ms | 6.1 % | 4.0 % | 7.2 % |"; !strings.Contains(b.String(), want) {
		t.Fatalf("no row %q in\n%s", want, b.String())
	}
}
