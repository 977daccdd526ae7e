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
		Bar: []results.Check{{Workload: "shared-prefix", Metric: "ttft_p50_vs_random", Want: 20, Got: 23, Pass: true},
			{Workload: "shared-prefix", Metric: "ttft_p50_gap_to_oracle", Want: 0.15, Got: results.NaN}},
	}
}

func TestTable(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, sample()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| shared-prefix | random | 6.90 s |",
		"| shared-prefix | switchyard | 300 ms |",
		"| multi-turn | switchyard | 600 ms |",
		"| shared-prefix | ttft_p50_vs_random | ≥ 20× | 23× | yes |",
		"| ≤ +15 % | – | no |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// Shared prefix comes first, and random before switchyard.
	if strings.Index(out, "| multi-turn |") < strings.Index(out, "| shared-prefix | oracle") ||
		strings.Index(out, "| shared-prefix | switchyard") < strings.Index(out, "| shared-prefix | random") {
		t.Errorf("rows out of order:\n%s", out)
	}
}

// TestHTML checks the page is well-formed and carries a chart per
// workload: the TTFT distribution and, with a sweep, the curves.
func TestHTML(t *testing.T) {
	var b bytes.Buffer
	if err := WriteHTML(&b, sample(), "Bench <1>"); err != nil {
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
