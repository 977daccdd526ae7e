package report

import (
	"fmt"
	"html"
	"slices"
	"strings"

	"github.com/switchyard-dev/switchyard/loadtest/internal/results"
)

// Open-loop rates: one row per offered rate and strategy, and, in the
// HTML page, TTFT p90, output tokens per second and goodput against the
// offered rate, one line per strategy — the open-loop counterparts of the
// concurrency sweep's curves. The offered rate is the x axis (linear: the
// sweep spaces its rates evenly) so every strategy's point at a rate sits
// on the same vertical; where TTFT p90 turns up and output tokens per
// second stops following the rate is where the fleet saturates under that
// strategy.

// ratePoints are a workload's strategies' open-loop points, when it ran
// at offered rates.
func ratePoints(bs map[string]*results.Summary) (rates []float64, ok bool) {
	for _, st := range Strategies(bs) {
		for _, p := range bs[st].Sweep {
			if p.Rate > 0 && !slices.Contains(rates, p.Rate) {
				rates = append(rates, p.Rate)
			}
		}
	}
	slices.Sort(rates)
	return rates, len(rates) > 0
}

// rateColumns are the per-rate table's columns.
var rateColumns = []string{"rate", "strategy", "achieved", "TTFT growth", "TTFT p50", "TTFT p90", "TTFT p99", "ITL p50", "E2E p50",
	"goodput rpm", "SLO met", "output tok/s", "over bound"}

// rateRow is one point's row, as text cells. A point that ran more than
// once (compare --repeat) shows its medians, and the range of its runs
// beside TTFT p90 and goodput, the figures the bar and the goodput
// headline read.
func rateRow(st string, p results.Point) []string {
	p90, good := Sec(p.TTFTP90), Number(p.GoodputRPM, 1)
	if len(p.Runs) > 1 {
		lo, hi := runRange(p.Runs, func(r results.RunFigures) results.Num { return r.TTFTP90 })
		p90 += fmt.Sprintf(" (%s–%s)", Sec(lo), Sec(hi))
		lo, hi = runRange(p.Runs, func(r results.RunFigures) results.Num { return r.GoodputRPM })
		good += fmt.Sprintf(" (%s–%s)", Number(lo, 1), Number(hi, 1))
	}
	return []string{fmt.Sprintf("%g/s", p.Rate), st, Number(p.AchievedRate, 3) + "/s", Number(p.TTFTGrowth, 2), Sec(p.TTFTP50), p90, Sec(p.TTFTP99),
		Sec(p.ITLP50), Sec(p.E2EP50), good, Pct(p.SLOAttainment), Number(p.OutputTokensPerS, 1),
		fmt.Sprintf("%d of %d", p.ArrivalsOverBound, p.Arrivals)}
}

// runRange is the lowest and highest of a figure over runs; NaN for a
// figure no run has.
func runRange(runs []results.RunFigures, get func(results.RunFigures) results.Num) (lo, hi results.Num) {
	lo, hi = results.NaN, results.NaN
	for _, r := range runs {
		v := get(r)
		if !v.Valid() {
			continue
		}
		if !lo.Valid() || v < lo {
			lo = v
		}
		if !hi.Valid() || v > hi {
			hi = v
		}
	}
	return lo, hi
}

// rateRows lists a workload's points by rate, then strategy, so the
// strategies at one rate sit together.
func rateRows(bs map[string]*results.Summary, rates []float64) [][]string {
	var out [][]string
	for _, r := range rates {
		for _, st := range Strategies(bs) {
			for _, p := range bs[st].Sweep {
				if p.Rate == r {
					out = append(out, rateRow(st, p))
				}
			}
		}
	}
	return out
}

const rateNote = "Rate: offered sessions per model second (requests; conversations for multi-turn), arriving on the clock whatever the fleet does. Achieved: successful requests per model second over the run (first request to last answer) in the same unit; the drain at the end lowers it in a short run even when nothing queued. TTFT growth: the slope of TTFT against send time, seconds per second of the run: about 0 when the fleet keeps up; when it does not, its queue grows, by about offered / sustained − 1 (so it sustains about rate / (1 + growth)). Over bound: arrivals not sent because the in-flight bound was full (counted, never waited for), of all arrivals. Goodput: requests per model minute within the TTFT SLO; SLO met: the share of requests within it. With repeated runs: medians, and in brackets the range of the runs."

// writeRates adds the per-rate table of each workload that ran at rates.
func writeRates(b *strings.Builder, f *results.File) {
	first := true
	for _, wl := range Workloads(f) {
		bs := f.Workloads[wl]
		rates, ok := ratePoints(bs)
		if !ok {
			continue
		}
		if first {
			b.WriteString("\n" + rateNote + "\n")
			first = false
		}
		fmt.Fprintf(b, "\n%s by offered rate (TTFT SLO %g s)", wl, f.Params.SLOTTFTS[wl])
		if sat, ok := f.Params.Saturation[wl]; ok {
			fmt.Fprintf(b, "; saturation rate %s/s (%s, c=%d)", Number(sat.Rate, 3), sat.Strategy, sat.Concurrency)
		}
		b.WriteString(":\n\n")
		writeHeader(b, rateColumns, 2)
		for _, r := range rateRows(bs, rates) {
			fmt.Fprintf(b, "| %s |\n", strings.Join(r, " | "))
		}
	}
}

// rateCharts are a workload's open-loop charts and table for the HTML page.
func rateCharts(b *strings.Builder, bs map[string]*results.Summary, rates []float64, slo float64) {
	p90 := chart{title: "TTFT p90 vs offered rate", xlabel: "offered rate, sessions per model second", ylabel: "TTFT p90, model seconds (log)", logY: true, xTicks: rates}
	tok := chart{title: "Output tokens/s vs offered rate", xlabel: "offered rate, sessions per model second", ylabel: "output tokens per model second", yFrom0: true, xTicks: rates}
	good := chart{title: "Goodput vs offered rate", xlabel: "offered rate, sessions per model second", ylabel: fmt.Sprintf("requests/min with TTFT ≤ %g s", slo), yFrom0: true, xTicks: rates}
	for _, st := range Strategies(bs) {
		a, c, g := strategySeries(st), strategySeries(st), strategySeries(st)
		a.markers, c.markers, g.markers = true, true, true
		for _, p := range bs[st].Sweep {
			if p.Rate <= 0 {
				continue
			}
			a.xs, a.ys = append(a.xs, p.Rate), append(a.ys, float64(p.TTFTP90))
			c.xs, c.ys = append(c.xs, p.Rate), append(c.ys, float64(p.OutputTokensPerS))
			g.xs, g.ys = append(g.xs, p.Rate), append(g.ys, float64(p.GoodputRPM))
		}
		p90.series, tok.series, good.series = append(p90.series, a), append(tok.series, c), append(good.series, g)
	}
	b.WriteString(`<div class="charts">`)
	b.WriteString(p90.svg())
	b.WriteString(tok.svg())
	b.WriteString(good.svg())
	b.WriteString("</div>\n<table><tr>")
	for _, c := range rateColumns {
		fmt.Fprintf(b, "<th>%s</th>", html.EscapeString(c))
	}
	b.WriteString("</tr>")
	for _, r := range rateRows(bs, rates) {
		fmt.Fprintf(b, `<tr class="%s">`, html.EscapeString(r[1]))
		for _, c := range r {
			fmt.Fprintf(b, "<td>%s</td>", html.EscapeString(c))
		}
		b.WriteString("</tr>")
	}
	b.WriteString("</table>\n")
	fmt.Fprintf(b, `<p class="note">%s</p>`, html.EscapeString(rateNote))
}
