package compare

import (
	"math"

	"github.com/switchyard-dev/switchyard/loadtest/internal/results"
	"github.com/switchyard-dev/switchyard/loadtest/internal/workload"
)

// Relate fills each strategy's comparison fields against random and
// oracle of the same workload (when those ran).
func Relate(byStrategy map[string]*results.Summary) {
	rnd, orc := byStrategy[results.Random], byStrategy[results.Oracle]
	for name, s := range byStrategy {
		if rnd != nil {
			s.TTFTP50VsRandom = div(rnd.TTFTP50, s.TTFTP50)
			s.TTFTP95VsRandom = div(rnd.TTFTP95, s.TTFTP95)
			s.E2EP50VsRandom = div(rnd.E2EP50, s.E2EP50)
			s.GoodputVsRandom = div(s.GoodputRPM, rnd.GoodputRPM)
			s.ProjectedTTFTP50VsRandom = div(rnd.ProjectedTTFTP50, s.ProjectedTTFTP50)
			s.ProjectedTTFTP95VsRandom = div(rnd.ProjectedTTFTP95, s.ProjectedTTFTP95)
		}
		if orc != nil && name != results.Oracle {
			s.TTFTP50GapToOracle = div(s.TTFTP50, orc.TTFTP50) - 1
			s.ProjectedTTFTP50GapToOracle = div(s.ProjectedTTFTP50, orc.ProjectedTTFTP50) - 1
		}
	}
}

// div is a/b; +Inf when b is 0 and a is not (a strategy with goodput
// against a baseline with none), NaN when either is missing.
func div(a, b results.Num) results.Num {
	if !a.Valid() || !b.Valid() {
		return results.NaN
	}
	if b == 0 {
		if a == 0 {
			return results.NaN
		}
		return results.Num(math.Inf(1))
	}
	return a / b
}

// reference is one published figure of the reference system against a
// Kubernetes Service (random), from shared/BENCHMARKS.md.
type reference struct {
	workload workload.Kind
	metric   string
	want     float64
	// atLeast: Got must be ≥ Want; otherwise ≤ Want.
	atLeast bool
	// get reads the figure; projected selects the projected-TTFT one
	// where the metric has one.
	get  func(s *results.Summary, projected bool) results.Num
	note string
}

func ttftP50VsRandom(s *results.Summary, projected bool) results.Num {
	if projected {
		return s.ProjectedTTFTP50VsRandom
	}
	return s.TTFTP50VsRandom
}

func ttftP95VsRandom(s *results.Summary, projected bool) results.Num {
	if projected {
		return s.ProjectedTTFTP95VsRandom
	}
	return s.TTFTP95VsRandom
}

func ttftP50GapToOracle(s *results.Summary, projected bool) results.Num {
	if projected {
		return s.ProjectedTTFTP50GapToOracle
	}
	return s.TTFTP50GapToOracle
}

func goodputAtSLOVsRandom(s *results.Summary, _ bool) results.Num { return s.GoodputAtSLOVsRandom }

// Metric names of the bar.
const (
	metricGapToOracle  = "ttft_p50_gap_to_oracle"
	metricGoodputAtSLO = "goodput_at_slo_vs_random"
)

var references = []reference{
	{workload.SharedPrefix, "ttft_p50_vs_random", 20, true, ttftP50VsRandom, "reference 6.88 s → 0.31 s"},
	{workload.MultiTurn, "ttft_p50_vs_random", 2.9, true, ttftP50VsRandom, "reference 1.70 s → 0.59 s"},
	{workload.Control, "ttft_p50_vs_random", 1, true, ttftP50VsRandom, "no worse than random (reference 6.92 s → 6.83 s)"},
	{workload.Control, "ttft_p95_vs_random", 1, true, ttftP95VsRandom, "reference p95 21.46 s → 12.33 s"},
	{workload.SharedPrefix, metricGoodputAtSLO, 7.4, true, goodputAtSLOVsRandom, "reference 14.0 → 103.0 rpm at concurrency 32, where it met the SLO"},
	{workload.MultiTurn, metricGoodputAtSLO, 3.5, true, goodputAtSLOVsRandom, "reference 23.8 → 82.7 rpm at concurrency 8, where it met the SLO"},
	{workload.SharedPrefix, metricGapToOracle, 0.15, false, ttftP50GapToOracle, "within 15 % of oracle"},
	{workload.MultiTurn, metricGapToOracle, 0.15, false, ttftP50GapToOracle, "within 15 % of oracle"},
	{workload.Control, metricGapToOracle, 0.15, false, ttftP50GapToOracle, "within 15 % of oracle"},
}

// Bar checks Switchyard's ratios against the reference's published ones,
// for the workloads and strategies that ran. TTFT figures are on the
// file's TTFT basis.
func Bar(f *results.File) []results.Check {
	projected := f.Params.TTFTBasis == results.BasisProjected
	var out []results.Check
	for _, ref := range references {
		byStrategy := f.Workloads[string(ref.workload)]
		sy := byStrategy[results.Switchyard]
		if sy == nil || byStrategy[results.Random] == nil {
			continue
		}
		if ref.metric == metricGapToOracle && byStrategy[results.Oracle] == nil {
			continue
		}
		got := ref.get(sy, projected)
		c := results.Check{Workload: string(ref.workload), Metric: ref.metric, Want: results.Num(ref.want), Got: got, Note: ref.note}
		if ref.metric == metricGoodputAtSLO {
			c.Concurrency = sy.GoodputAtSLOConcurrency
			if sy.SLOMetConcurrency == 0 {
				c.Note += "; switchyard met the SLO at no level (taken at its best goodput)"
			}
		} else {
			c.Concurrency = sy.Concurrency
		}
		switch {
		case math.IsInf(float64(got), 1):
			c.Pass = ref.atLeast
			c.Note += "; random met the SLO for no request"
		case !got.Valid():
			c.Pass = false
		case ref.atLeast:
			c.Pass = float64(got) >= ref.want
		default:
			c.Pass = float64(got) <= ref.want
		}
		out = append(out, c)
	}
	return out
}
