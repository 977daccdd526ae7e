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
		}
		if orc != nil && name != results.Oracle {
			s.TTFTP50GapToOracle = div(s.TTFTP50, orc.TTFTP50) - 1
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
	get     func(s *results.Summary) results.Num
	note    string
}

var references = []reference{
	{workload.SharedPrefix, "ttft_p50_vs_random", 20, true, func(s *results.Summary) results.Num { return s.TTFTP50VsRandom }, "reference 6.88 s → 0.31 s"},
	{workload.MultiTurn, "ttft_p50_vs_random", 2.9, true, func(s *results.Summary) results.Num { return s.TTFTP50VsRandom }, "reference 1.70 s → 0.59 s"},
	{workload.Control, "ttft_p50_vs_random", 1, true, func(s *results.Summary) results.Num { return s.TTFTP50VsRandom }, "no worse than random (reference 6.92 s → 6.83 s)"},
	{workload.Control, "ttft_p95_vs_random", 1, true, func(s *results.Summary) results.Num { return s.TTFTP95VsRandom }, "reference p95 21.46 s → 12.33 s"},
	{workload.SharedPrefix, "goodput_vs_random", 7.4, true, func(s *results.Summary) results.Num { return s.GoodputVsRandom }, "reference 14.0 → 103.0 rpm"},
	{workload.MultiTurn, "goodput_vs_random", 3.5, true, func(s *results.Summary) results.Num { return s.GoodputVsRandom }, "reference 23.8 → 82.7 rpm"},
	{workload.SharedPrefix, "ttft_p50_gap_to_oracle", 0.15, false, func(s *results.Summary) results.Num { return s.TTFTP50GapToOracle }, "within 15 % of oracle"},
	{workload.MultiTurn, "ttft_p50_gap_to_oracle", 0.15, false, func(s *results.Summary) results.Num { return s.TTFTP50GapToOracle }, "within 15 % of oracle"},
	{workload.Control, "ttft_p50_gap_to_oracle", 0.15, false, func(s *results.Summary) results.Num { return s.TTFTP50GapToOracle }, "within 15 % of oracle"},
}

// Bar checks Switchyard's ratios against the reference's published ones,
// for the workloads and strategies that ran.
func Bar(f *results.File) []results.Check {
	var out []results.Check
	for _, ref := range references {
		byStrategy := f.Workloads[string(ref.workload)]
		sy := byStrategy[results.Switchyard]
		if sy == nil || byStrategy[results.Random] == nil {
			continue
		}
		if ref.metric == "ttft_p50_gap_to_oracle" && byStrategy[results.Oracle] == nil {
			continue
		}
		got := ref.get(sy)
		c := results.Check{Workload: string(ref.workload), Metric: ref.metric, Want: results.Num(ref.want), Got: got, Note: ref.note}
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
