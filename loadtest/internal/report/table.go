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
var StrategyOrder = []string{results.Random, results.RoundRobin, results.LeastQueue, results.Approximate, results.Switchyard, results.Oracle, results.Direct}

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
	hasProjected := false
	for _, bs := range f.Workloads {
		for _, s := range bs {
			// Files written before projected TTFTs existed read as 0.
			hasProjected = hasProjected || (s.ProjectedTTFTP50.Valid() && s.ProjectedTTFTP50 > 0)
		}
	}
	projected := p.TTFTBasis == results.BasisProjected
	fmt.Fprintf(&b, "Times are model seconds (wall × %g).", p.TimeScale)
	if p.Workers > 0 {
		fmt.Fprintf(&b, " %d simulated workers (%s).", p.Workers, p.Model)
	} else if p.Target != "" {
		fmt.Fprintf(&b, " Target %s (%s).", p.Target, p.Model)
	}
	writeLoad(&b, f)
	b.WriteString(" Ratios against random: random's latency over the strategy's, the strategy's goodput over random's (higher is better).")
	if p.Repeat > 1 {
		fmt.Fprintf(&b, " Medians over %d runs of each configuration.", p.Repeat)
	}
	if hasProjected {
		b.WriteString(" Projected TTFT: the simulator's own TTFT plus the time outside it (client, network, gateway, router) at wall speed, i.e. what a client of a real fleet would see; the plain TTFT scales that outside time by the time scale too.")
	}
	if projected {
		b.WriteString(" The TTFT ratios compare projected TTFTs.")
	}
	b.WriteString("\n\n")
	hasRandom, hasOracle := false, false
	for _, bs := range f.Workloads {
		_, r := bs[results.Random]
		_, o := bs[results.Oracle]
		hasRandom, hasOracle = hasRandom || r, hasOracle || o
	}
	cols := []string{"workload", "strategy", "c", "TTFT p50", "TTFT p95"}
	if hasProjected {
		cols = append(cols, "projected TTFT p50", "projected TTFT p95")
	}
	cols = append(cols, "E2E p50", "ITL p50", "shed", "cache hit")
	if hasRandom {
		cols = append(cols, "TTFT p50 vs random", "TTFT p95 vs random")
	}
	if hasOracle {
		cols = append(cols, "TTFT p50 vs oracle")
	}
	writeHeader(&b, cols, 2)
	for _, wl := range Workloads(f) {
		bs := f.Workloads[wl]
		for _, st := range Strategies(bs) {
			s := bs[st]
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |", wl, st, level(s.Concurrency, s.Rate), Sec(s.TTFTP50), Sec(s.TTFTP95))
			if hasProjected {
				fmt.Fprintf(&b, " %s | %s |", Sec(s.ProjectedTTFTP50), Sec(s.ProjectedTTFTP95))
			}
			fmt.Fprintf(&b, " %s | %s | %s | %s |", Sec(s.E2EP50), Sec(s.ITLP50), Pct(s.ShedRate), Pct(s.CacheHitRatio))
			if hasRandom {
				p50, p95 := s.TTFTP50VsRandom, s.TTFTP95VsRandom
				if projected {
					p50, p95 = s.ProjectedTTFTP50VsRandom, s.ProjectedTTFTP95VsRandom
				}
				fmt.Fprintf(&b, " %s | %s |", Ratio(p50), Ratio(p95))
			}
			if hasOracle {
				gap := s.TTFTP50GapToOracle
				if projected {
					gap = s.ProjectedTTFTP50GapToOracle
				}
				fmt.Fprintf(&b, " %s |", Gap(gap))
			}
			b.WriteString("\n")
		}
	}
	writeTenants(&b, f)
	writePredictor(&b, f)
	writeGoodput(&b, f)
	writeSweep(&b, f)
	writeRates(&b, f)
	if lagging := Lagging(f); len(lagging) > 0 {
		fmt.Fprintf(&b, "\nFidelity warning: the client saw first tokens much later than the simulator's own account in %s (sim lag p95 above max(0.5 s, 10 %% of TTFT p50)): the machine could not keep up with time scale %g; rerun on a quiet machine or a lower --time-scale.\n",
			strings.Join(lagging, ", "), p.TimeScale)
	}
	if len(f.Bar) > 0 {
		heading := "\nAgainst the reference system's published ratios (Switchyard vs random):\n\n"
		if slices.ContainsFunc(f.Bar, func(c results.Check) bool { return c.Workload == string(workload.PrefixPressure) }) {
			heading = "\nAgainst the reference systems' published ratios (Switchyard vs random; on prefix-pressure, llm-d's precise scorer's vs random and approximate, and the gap to oracle):\n\n"
		}
		want := "reference"
		if p.Load == "rate" || p.Load == "rate-sweep" {
			heading = "\nThe bar in the open loop (column c: the offered rate; on control, Switchyard against the better of round-robin and least-queue, which it must not lose to where nothing is shared; on prefix-pressure, llm-d's ratios):\n\n"
			want = "bar"
		}
		b.WriteString(heading)
		fmt.Fprintf(&b, "| workload | metric | c | %s | Switchyard | pass | note |\n|---|---|---:|---:|---:|:---:|---|\n", want)
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
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", c.Workload, c.Metric, level(c.Concurrency, c.Rate), want, got, pass, c.Note)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writePredictor is the router's TTFT predictor against what happened,
// for the strategies whose answers carried its prediction.
func writePredictor(b *strings.Builder, f *results.File) {
	var rows []string
	for _, wl := range Workloads(f) {
		bs := f.Workloads[wl]
		for _, st := range Strategies(bs) {
			s := bs[st]
			if s.PredictorSamples == 0 {
				continue
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s |\n", wl, st, level(s.Concurrency, s.Rate),
				s.PredictorSamples, Pct(s.PredictorMAPE), Pct(s.PredictorMedianAPE), Sec(s.PredictorP90AbsErr),
				Pct(s.PredictorMeasuredMAPE), Pct(s.PredictorMeasuredMedianAPE), Pct(s.PredictorRouterMAPE)))
		}
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("\nTTFT predictor: the TTFT the router predicted when it routed each request against the simulator's own TTFT for it (mean absolute percentage error, its median, and the 90th percentile of the absolute error), against the TTFT the client measured, and as the router scores itself: against the TTFT the gateway measured from sending upstream, which is what it learns from (at a time scale the milliseconds outside the engine count that many times over: the client's TTFT has more of them than the gateway's, the simulator's none).\n\n")
	b.WriteString("| workload | strategy | c | requests | MAPE | median APE | p90 abs error | MAPE, measured | median APE, measured | MAPE, router's |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		b.WriteString(r)
	}
}

// writeLoad describes the load: the mode, the headline level of each
// workload and why, and the run sizes.
func writeLoad(b *strings.Builder, f *results.File) {
	p := f.Params
	switch {
	case p.Load == "rate" || p.Load == "rate-sweep":
		writeOpenLoad(b, f)
	case p.Mode == "poisson" || p.Mode == "constant":
		fmt.Fprintf(b, " Open loop: %s arrivals at %g sessions per second", p.Mode, p.Rate)
		if p.MaxInFlight > 0 {
			fmt.Fprintf(b, ", at most %d in flight", p.MaxInFlight)
		}
		b.WriteString(".")
	case len(p.Headline) > 0:
		var parts []string
		var refs []string
		for _, wl := range Workloads(f) {
			h, ok := p.Headline[wl]
			if !ok {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %d", wl, h.Concurrency))
			if h.Rule == "reference" {
				refs = append(refs, fmt.Sprintf("%s %s at %s", wl, Sec(h.RandomTTFTP50), Sec(h.ReferenceTTFTP50)))
			}
		}
		fmt.Fprintf(b, " Headline concurrency (column c): %s", strings.Join(parts, ", "))
		if len(refs) > 0 {
			fmt.Fprintf(b, "; chosen from the sweep as the level at which random's median TTFT is closest to the reference Service baseline's (%s)", strings.Join(refs, ", "))
		}
		b.WriteString(".")
	case p.Concurrency > 0:
		fmt.Fprintf(b, " Concurrency %d.", p.Concurrency)
	}
	if p.Requests > 0 || len(p.RequestsByWorkload) > 0 {
		fmt.Fprintf(b, " %d requests per run", p.Requests)
		var others []string
		for _, wl := range Workloads(f) {
			if n, ok := p.RequestsByWorkload[wl]; ok {
				others = append(others, fmt.Sprintf("%s %d", wl, n))
			}
		}
		if len(others) > 0 {
			fmt.Fprintf(b, " (%s)", strings.Join(others, ", "))
		}
		b.WriteString(".")
	}
	if p.DurationS > 0 {
		fmt.Fprintf(b, " At most %g s per run.", p.DurationS)
	}
}

// writeOpenLoad describes compare's open-loop load: the arrivals, the
// bound, and for a rate sweep how its rates were found.
func writeOpenLoad(b *strings.Builder, f *results.File) {
	p := f.Params
	fmt.Fprintf(b, " Open loop: %s arrivals at offered rates (sessions per model second), at most %d sessions in flight.", p.Arrivals, p.MaxInFlight)
	if rs := p.RateSweep; rs != nil {
		var sats []string
		for _, wl := range Workloads(f) {
			if s, ok := p.Saturation[wl]; ok {
				sats = append(sats, fmt.Sprintf("%s %s/s", wl, Number(s.Rate, 3)))
			}
		}
		fmt.Fprintf(b, " Rate sweep: each workload's saturation rate measured once, by a closed loop of %s at %d clients (%s), and every strategy run at %d rates evenly spaced from %.3g to %.3g times it.",
			rs.Strategy, rs.Concurrency, strings.Join(sats, ", "), rs.Points, rs.Low, rs.High)
	}
	var refs []string
	for _, wl := range Workloads(f) {
		if h, ok := p.Headline[wl]; ok && h.Rule == "reference-p90" {
			refs = append(refs, fmt.Sprintf("%s at %g/s, where random's TTFT p90 is %s against the reference's %s", wl, h.Rate, Sec(h.RandomTTFTP90), Sec(h.ReferenceTTFTP90)))
		}
	}
	if len(refs) == 0 {
		b.WriteString(" Headline (column c): each workload's highest rate.")
		return
	}
	fmt.Fprintf(b, " Headline (column c): %s; any other workload's highest rate.", strings.Join(refs, "; "))
}

// writeGoodput adds the goodput headline of each strategy, when the runs
// swept or goodput figures exist.
func writeGoodput(b *strings.Builder, f *results.File) {
	note, cols, rows := goodputTable(f)
	if rows == nil {
		return
	}
	b.WriteString("\n" + note + "\n\n")
	writeHeader(b, cols, 2)
	for _, r := range rows {
		fmt.Fprintf(b, "| %s |\n", strings.Join(r, " | "))
	}
}

// goodputTable is the goodput headline of each workload and strategy (see
// the compare package's Goodput) as a note, columns and text rows, for the
// Markdown table and the HTML page; no rows when no summary has one. The
// load is the concurrency level (c=16) or, in the open loop, the offered
// rate (0.5/s); the ratios are against random, or where it did not run the
// better of round-robin and least-queue.
func goodputTable(f *results.File) (note string, cols []string, rows [][]string) {
	found, open, target := false, false, 0.0
	vsRandom, vsSimple := false, false
	for _, bs := range f.Workloads {
		for st, s := range bs {
			found = found || s.GoodputAtSLOConcurrency > 0 || s.GoodputAtSLORate > 0
			open = open || s.GoodputAtSLORate > 0
			target = max(target, s.SLOAttainmentTarget)
			vsRandom = vsRandom || st == results.Random
			vsSimple = vsSimple || s.GoodputAtSLOVsBestSimple.Valid() || s.GoodputBestVsBestSimple.Valid()
		}
	}
	if !found {
		return "", nil, nil
	}
	vsSimple = vsSimple && !vsRandom
	what, unit, base := "level", "level", "random"
	if open {
		what, unit = "offered rate", "rate"
	}
	if vsSimple {
		base = "the better of round-robin and least-queue"
	}
	article := "A"
	if open {
		article = "An"
	}
	note = fmt.Sprintf("Goodput: requests per minute whose TTFT met the SLO. %s %s meets the SLO when at least %.0f %% of its requests do", article, what, target*100)
	if open {
		note += " (an arrival not sent at the in-flight bound counts as a miss)"
	}
	note += fmt.Sprintf("; each strategy is taken at the highest %s at which it met the SLO (at its best %s when none) and compared with %s at that same %s", what, unit, base, unit)
	if !open {
		note += ", as the reference reported (see the README)"
	}
	note += fmt.Sprintf(". Best: each at its own best %s.", unit)
	cols = []string{"workload", "strategy", "SLO", "met the SLO up to", "goodput rpm there"}
	switch {
	case vsRandom:
		cols = append(cols, "vs random there", "best goodput rpm", "best vs random's best")
	case vsSimple:
		cols = append(cols, "vs best simple there", "best goodput rpm", "best vs best simple's best")
	default:
		cols = append(cols, "best goodput rpm")
	}
	at := func(c int, r float64) string {
		if c == 0 && r > 0 {
			return level(0, r)
		}
		return fmt.Sprintf("c=%d", c)
	}
	for _, wl := range Workloads(f) {
		bs := f.Workloads[wl]
		for _, st := range Strategies(bs) {
			s := bs[st]
			met := "none"
			if s.SLOMetConcurrency > 0 || s.SLOMetRate > 0 {
				met = at(s.SLOMetConcurrency, s.SLOMetRate)
			}
			r := []string{wl, st, fmt.Sprintf("%g s", s.SLOTTFTS), met,
				fmt.Sprintf("%s (%s)", Number(s.GoodputAtSLORPM, 1), at(s.GoodputAtSLOConcurrency, s.GoodputAtSLORate))}
			best := fmt.Sprintf("%s (%s)", Number(s.GoodputBestRPM, 1), at(s.GoodputBestConcurrency, s.GoodputBestRate))
			switch {
			case vsRandom:
				r = append(r, Ratio(s.GoodputAtSLOVsRandom), best, Ratio(s.GoodputBestVsRandom))
			case vsSimple:
				r = append(r, Ratio(s.GoodputAtSLOVsBestSimple), best, Ratio(s.GoodputBestVsBestSimple))
			default:
				r = append(r, best)
			}
			rows = append(rows, r)
		}
	}
	return note, cols, rows
}

// writeTenants adds one row per tenant, when the run had tenants.
func writeTenants(b *strings.Builder, f *results.File) {
	if len(f.Tenants) == 0 {
		return
	}
	b.WriteString("\nPer tenant (each tenant's requests alone; refused: answered with a status other than 200; 429 reasons from x-switchyard-shed-reason, else the error's code):\n\n")
	writeHeader(b, []string{"tenant", "workload", "priority", "c", "ok", "429", "429 reasons", "other refusals", "failed", "TTFT p50", "TTFT p90", "TTFT p99", "E2E p50", "output tok/s"}, 3)
	for _, t := range f.Tenants {
		r := TenantRow(t)
		fmt.Fprintf(b, "| %s |\n", strings.Join(r, " | "))
	}
}

// TenantRow is a tenant's row of the per-tenant table, as text cells.
func TenantRow(t *results.TenantSummary) []string {
	s := t.Summary
	prio := t.Priority
	if prio == "" {
		prio = "–"
	}
	failed := s.Requests - s.Succeeded - s.Refused
	return []string{t.Tenant, t.Workload, prio, level(s.Concurrency, s.Rate), fmt.Sprint(s.Succeeded), fmt.Sprint(s.Refused429),
		Counts(s.Refused429Reasons, ""), Counts(s.RefusedByStatus, "429"), fmt.Sprint(failed),
		Sec(s.TTFTP50), Sec(s.TTFTP90), Sec(s.TTFTP99), Sec(s.E2EP50), Number(s.OutputTokensPerS, 1)}
}

// Counts formats counts by key, largest first ("a 3, b 1"), leaving skip
// out; "–" for none.
func Counts(m map[string]int, skip string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != skip {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return "–"
	}
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// level names a load level for a table cell.
func level(concurrency int, rate float64) string {
	switch {
	case concurrency > 0:
		return fmt.Sprintf("%d", concurrency)
	case rate > 0:
		return fmt.Sprintf("%g/s", rate)
	}
	return "–"
}

// writeSweep adds goodput and median TTFT per concurrency, when runs swept.
func writeSweep(b *strings.Builder, f *results.File) {
	for _, wl := range Workloads(f) {
		bs := f.Workloads[wl]
		var levels []int
		for _, st := range Strategies(bs) {
			for _, p := range bs[st].Sweep {
				if p.Concurrency > 0 && !slices.Contains(levels, p.Concurrency) {
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

// writeHeader writes a Markdown table's header and alignment rows: the
// first left columns left-aligned, the figures after them right-aligned.
func writeHeader(b *strings.Builder, cols []string, left int) {
	b.WriteString("|")
	for _, c := range cols {
		b.WriteString(" " + c + " |")
	}
	b.WriteString("\n|")
	for i := range cols {
		if i < left {
			b.WriteString("---|")
		} else {
			b.WriteString("---:|")
		}
	}
	b.WriteString("\n")
}
