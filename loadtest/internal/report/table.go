package report

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/switchyard-dev/switchyard/loadtest/internal/results"
	"github.com/switchyard-dev/switchyard/loadtest/internal/workload"
)

// StrategyOrder is the order strategies are listed in.
var StrategyOrder = []string{results.Random, results.RoundRobin, results.LeastQueue, results.Switchyard, results.Oracle, results.Direct}

// Workloads lists f's workloads in report order.
func Workloads(f *results.File) []string {
	var out []string
	for _, k := range workload.Kinds {
		if _, ok := f.Workloads[string(k)]; ok {
			out = append(out, string(k))
		}
	}
	var rest []string
	for w := range f.Workloads {
		if !slices.Contains(out, w) {
			rest = append(rest, w)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}

// Strategies lists the strategies of one workload in report order.
func Strategies(byStrategy map[string]*results.Summary) []string {
	var out []string
	for _, s := range StrategyOrder {
		if _, ok := byStrategy[s]; ok {
			out = append(out, s)
		}
	}
	var rest []string
	for s := range byStrategy {
		if !slices.Contains(out, s) {
			rest = append(rest, s)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}

// WriteTable writes the results as Markdown tables.
func WriteTable(w io.Writer, f *results.File) error {
	var b strings.Builder
	p := f.Params
	hasSim := false
	for _, bs := range f.Workloads {
		for _, s := range bs {
			hasSim = hasSim || s.SimTTFTP50.Valid()
		}
	}
	fmt.Fprintf(&b, "Times are model seconds (wall × %g).", p.TimeScale)
	if p.Workers > 0 {
		fmt.Fprintf(&b, " %d simulated workers (%s),", p.Workers, p.Model)
	} else if p.Target != "" {
		fmt.Fprintf(&b, " target %s (%s),", p.Target, p.Model)
	}
	if p.Mode == "poisson" {
		fmt.Fprintf(&b, " Poisson arrivals at %g/s", p.Rate)
	} else {
		fmt.Fprintf(&b, " concurrency %d", p.Concurrency)
	}
	if p.Requests > 0 {
		fmt.Fprintf(&b, ", %d requests per run", p.Requests)
	}
	if p.DurationS > 0 {
		fmt.Fprintf(&b, ", %g s per run", p.DurationS)
	}
	b.WriteString(". Ratios against random: random's latency over the strategy's, the strategy's goodput over random's (higher is better).")
	if p.Repeat > 1 {
		fmt.Fprintf(&b, " Medians over %d runs of each configuration.", p.Repeat)
	}
	if hasSim {
		b.WriteString(" Sim TTFT: the simulator's own account, free of client and machine noise.")
	}
	b.WriteString("\n\n")
	hasRandom, hasOracle := false, false
	for _, bs := range f.Workloads {
		_, r := bs[results.Random]
		_, o := bs[results.Oracle]
		hasRandom, hasOracle = hasRandom || r, hasOracle || o
	}
	b.WriteString("| workload | strategy | TTFT p50 | TTFT p95 | E2E p50 | ITL p50 | goodput rpm (SLO) | shed | cache hit |")
	sep := "|---|---|---:|---:|---:|---:|---:|---:|---:|"
	if hasSim {
		b.WriteString(" sim TTFT p50 |")
		sep += "---:|"
	}
	if hasRandom {
		b.WriteString(" TTFT p50 vs random | TTFT p95 vs random | goodput vs random |")
		sep += "---:|---:|---:|"
	}
	if hasOracle {
		b.WriteString(" TTFT p50 vs oracle |")
		sep += "---:|"
	}
	b.WriteString("\n" + sep + "\n")
	for _, wl := range Workloads(f) {
		bs := f.Workloads[wl]
		for _, st := range Strategies(bs) {
			s := bs[st]
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s (%gs) | %s | %s |",
				wl, st, Sec(s.TTFTP50), Sec(s.TTFTP95), Sec(s.E2EP50), Sec(s.ITLP50),
				Number(s.GoodputRPM, 1), s.SLOTTFTS, Pct(s.ShedRate), Pct(s.CacheHitRatio))
			if hasSim {
				fmt.Fprintf(&b, " %s |", Sec(s.SimTTFTP50))
			}
			if hasRandom {
				fmt.Fprintf(&b, " %s | %s | %s |", Ratio(s.TTFTP50VsRandom), Ratio(s.TTFTP95VsRandom), Ratio(s.GoodputVsRandom))
			}
			if hasOracle {
				fmt.Fprintf(&b, " %s |", Gap(s.TTFTP50GapToOracle))
			}
			b.WriteString("\n")
		}
	}
	writeSweep(&b, f)
	if lagging := Lagging(f); len(lagging) > 0 {
		fmt.Fprintf(&b, "\nFidelity warning: the client saw first tokens much later than the simulator's own account in %s (sim lag p95 above max(0.5 s, 10 %% of TTFT p50)): the machine could not keep up with time scale %g; rerun on a quiet machine or a lower --time-scale.\n",
			strings.Join(lagging, ", "), p.TimeScale)
	}
	if len(f.Bar) > 0 {
		b.WriteString("\nAgainst the reference system's published ratios (Switchyard vs random):\n\n")
		b.WriteString("| workload | metric | reference | Switchyard | pass | note |\n|---|---|---:|---:|:---:|---|\n")
		for _, c := range f.Bar {
			want, got := Ratio(c.Want), Ratio(c.Got)
			if strings.Contains(c.Metric, "gap") {
				want, got = "≤ "+Gap(c.Want), Gap(c.Got)
			} else {
				want = "≥ " + want
			}
			pass := "no"
			if c.Pass {
				pass = "yes"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", c.Workload, c.Metric, want, got, pass, c.Note)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeSweep adds goodput and median TTFT per concurrency, when runs swept.
func writeSweep(b *strings.Builder, f *results.File) {
	for _, wl := range Workloads(f) {
		bs := f.Workloads[wl]
		var levels []int
		for _, st := range Strategies(bs) {
			for _, p := range bs[st].Sweep {
				if !slices.Contains(levels, p.Concurrency) {
					levels = append(levels, p.Concurrency)
				}
			}
		}
		if len(levels) < 2 {
			continue
		}
		slices.Sort(levels)
		fmt.Fprintf(b, "\n%s: goodput rpm / median TTFT by concurrency\n\n| strategy |", wl)
		for _, l := range levels {
			fmt.Fprintf(b, " c=%d |", l)
		}
		b.WriteString("\n|---|" + strings.Repeat("---:|", len(levels)) + "\n")
		for _, st := range Strategies(bs) {
			fmt.Fprintf(b, "| %s |", st)
			for _, l := range levels {
				cell := "–"
				for _, p := range bs[st].Sweep {
					if p.Concurrency == l {
						cell = Number(p.GoodputRPM, 1) + " / " + Sec(p.TTFTP50)
					}
				}
				fmt.Fprintf(b, " %s |", cell)
			}
			b.WriteString("\n")
		}
	}
}

// Lagging lists the runs whose first tokens reached the client much later
// than the simulator says it produced them: a sign the simulated fleet (or
// the client) lagged behind its clock, which inflates every wall-derived
// figure of that run.
func Lagging(f *results.File) []string {
	var out []string
	for _, wl := range Workloads(f) {
		bs := f.Workloads[wl]
		for _, st := range Strategies(bs) {
			s := bs[st]
			if s.SimLagP95.Valid() && s.TTFTP50.Valid() && float64(s.SimLagP95) > max(0.5, 0.1*float64(s.TTFTP50)) {
				out = append(out, wl+"/"+st)
			}
		}
	}
	return out
}
