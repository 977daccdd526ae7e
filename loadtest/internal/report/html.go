package report

import (
	"fmt"
	"html"
	"io"
	"slices"
	"strings"

	"github.com/switchyard-dev/switchyard/loadtest/internal/results"
)

// colors per strategy; Switchyard is drawn bold, oracle dashed.
var colors = map[string]string{
	results.Random:      "#7f7f7f",
	results.RoundRobin:  "#1f77b4",
	results.LeastQueue:  "#ff7f0e",
	results.Switchyard:  "#2ca02c",
	results.Approximate: "#bcbd22",
	results.Oracle:      "#9467bd",
	results.Direct:      "#d62728",
}

// levelLabel names a summary's load: c=8, or 0.5/s for an offered rate.
func levelLabel(s *results.Summary) string {
	if s.Concurrency == 0 && s.Rate > 0 {
		return level(0, s.Rate)
	}
	return "c=" + level(s.Concurrency, s.Rate)
}

func strategySeries(name string) series {
	c, ok := colors[name]
	if !ok {
		c = "#8c564b"
	}
	return series{name: name, color: c, bold: name == results.Switchyard, dashed: name == results.Oracle}
}

// WriteHTML writes a self-contained report page: parameters, the tables
// and, per workload, the TTFT distribution at the headline load and
// goodput and median TTFT against concurrency.
func WriteHTML(w io.Writer, f *results.File, title string) error {
	var b strings.Builder
	esc := html.EscapeString
	fmt.Fprintf(&b, `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>%s</title>
<style>
body{font-family:sans-serif;margin:24px;color:#222;max-width:1450px}
table{border-collapse:collapse;margin:8px 0 18px;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:right;white-space:nowrap}
th:first-child,td:first-child,th:nth-child(2),td:nth-child(2){text-align:left}
tr.switchyard td{font-weight:bold;background:#eef8ee}
.charts{display:flex;flex-wrap:wrap;gap:12px}
.pass{color:#1a7f1a;font-weight:bold}.fail{color:#b00;font-weight:bold}
.note{color:#555;font-size:13px}
</style></head><body>
<h1>%s</h1>
`, esc(title), esc(title))
	p := f.Params
	fmt.Fprintf(&b, `<p class="note">%s. Generated %s by <code>loadtest %s</code>; %d cores, %s; %.0f s of wall time.</p>`,
		esc("Times are "+p.TimeUnit), esc(p.Started.Format("2006-01-02 15:04 UTC")), esc(p.Command), p.Cores, esc(p.GoVersion), p.WallSeconds)
	fmt.Fprintf(&b, `<p class="note">Model %s; time scale %g×; `, esc(p.Model), p.TimeScale)
	if p.Workers > 0 {
		fmt.Fprintf(&b, "%d simulated workers, restarted before every run; ", p.Workers)
	}
	if p.Target != "" {
		fmt.Fprintf(&b, "target %s; ", esc(p.Target))
	}
	var load strings.Builder
	writeLoad(&load, f)
	if len(p.Sweep) > 0 {
		fmt.Fprintf(&b, "mode %s, levels %v.%s TTFT SLOs: ", esc(p.Mode), p.Sweep, esc(load.String()))
	} else {
		fmt.Fprintf(&b, "mode %s.%s TTFT SLOs: ", esc(p.Mode), esc(load.String()))
	}
	first := true
	for _, wl := range Workloads(f) {
		if !first {
			b.WriteString(", ")
		}
		first = false
		fmt.Fprintf(&b, "%s %g s", esc(wl), p.SLOTTFTS[wl])
	}
	b.WriteString(".</p>\n")

	b.WriteString(`<h2>Summary</h2><table><tr><th>workload</th><th>strategy</th><th>TTFT p50</th><th>TTFT p95</th><th>TTFT p99</th><th>E2E p50</th><th>ITL p50</th><th>goodput rpm</th><th>SLO met</th><th>shed</th><th>errors</th><th>cache hit</th><th>TTFT p50 vs random</th><th>goodput vs random</th><th>vs oracle</th><th>requests</th><th>sim TTFT p50</th><th>projected TTFT p50</th><th>sim lag p95</th></tr>`)
	projected := p.TTFTBasis == results.BasisProjected
	for _, wl := range Workloads(f) {
		bs := f.Workloads[wl]
		for _, st := range Strategies(bs) {
			s := bs[st]
			vsRandom, gap := s.TTFTP50VsRandom, s.TTFTP50GapToOracle
			if projected {
				vsRandom, gap = s.ProjectedTTFTP50VsRandom, s.ProjectedTTFTP50GapToOracle
			}
			fmt.Fprintf(&b, `<tr class="%s"><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td>%s</td><td>%s</td><td>%s</td></tr>`,
				esc(st), esc(wl), esc(st+" ("+levelLabel(s)+")"), Sec(s.TTFTP50), Sec(s.TTFTP95), Sec(s.TTFTP99), Sec(s.E2EP50), Sec(s.ITLP50),
				Number(s.GoodputRPM, 1), Pct(s.SLOAttainment), Pct(s.ShedRate), Pct(s.ErrorRate), Pct(s.CacheHitRatio),
				Ratio(vsRandom), Ratio(s.GoodputVsRandom), Gap(gap), s.Requests, Sec(s.SimTTFTP50), Sec(s.ProjectedTTFTP50), Sec(s.SimLagP95))
		}
	}
	b.WriteString("</table>\n")
	if len(f.Tenants) > 0 {
		b.WriteString(`<h2>Per tenant</h2><p class="note">Each tenant's requests alone. Refused: answered with a status other than 200; 429 reasons from x-switchyard-shed-reason, else the error's code.</p><table><tr>`)
		for _, c := range []string{"tenant", "workload", "priority", "c", "ok", "429", "429 reasons", "other refusals", "failed", "TTFT p50", "TTFT p90", "TTFT p99", "E2E p50", "output tok/s"} {
			fmt.Fprintf(&b, "<th>%s</th>", esc(c))
		}
		b.WriteString("</tr>")
		for _, t := range f.Tenants {
			b.WriteString("<tr>")
			for _, c := range TenantRow(t) {
				fmt.Fprintf(&b, "<td>%s</td>", esc(c))
			}
			b.WriteString("</tr>")
		}
		b.WriteString("</table>\n")
	}
	if lagging := Lagging(f); len(lagging) > 0 {
		fmt.Fprintf(&b, `<p class="fail">Fidelity warning: first tokens reached the client much later than the simulator produced them in %s; the machine could not keep up with time scale %g.</p>`,
			esc(strings.Join(lagging, ", ")), p.TimeScale)
	}
	if len(f.Bar) > 0 {
		b.WriteString(`<h2>The bar</h2><table><tr><th>workload</th><th>metric</th><th>at</th><th>bar</th><th>Switchyard</th><th>pass</th><th>note</th></tr>`)
		for _, c := range f.Bar {
			want, got := "≥ "+Ratio(c.Want), Ratio(c.Got)
			if strings.Contains(c.Metric, "gap") {
				want, got = "≤ "+Gap(c.Want), Gap(c.Got)
			}
			cls, pass := "fail", "no"
			if c.Pass {
				cls, pass = "pass", "yes"
			}
			fmt.Fprintf(&b, `<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td class="%s">%s</td><td style="text-align:left">%s</td></tr>`,
				esc(c.Workload), esc(c.Metric), esc(level(c.Concurrency, c.Rate)), want, got, cls, pass, esc(c.Note))
		}
		b.WriteString("</table>\n")
	}
	if note, cols, rows := goodputTable(f); rows != nil {
		b.WriteString("<h2>Goodput at the SLO</h2><table><tr>")
		for _, c := range cols {
			fmt.Fprintf(&b, "<th>%s</th>", esc(c))
		}
		b.WriteString("</tr>")
		for _, r := range rows {
			fmt.Fprintf(&b, `<tr class="%s">`, esc(r[1]))
			for _, c := range r {
				fmt.Fprintf(&b, "<td>%s</td>", esc(c))
			}
			b.WriteString("</tr>")
		}
		fmt.Fprintf(&b, "</table>\n<p class=\"note\">%s</p>\n", esc(note))
	}

	for _, wl := range Workloads(f) {
		bs := f.Workloads[wl]
		fmt.Fprintf(&b, "<h2>%s</h2>\n<div class=\"charts\">", esc(wl))
		headline := p.Concurrency
		if h, ok := p.Headline[wl]; ok {
			headline = h.Concurrency
		}
		cdfTitle := fmt.Sprintf("TTFT distribution (concurrency %d)", headline)
		if h, ok := p.Headline[wl]; ok && h.Rate > 0 {
			cdfTitle = fmt.Sprintf("TTFT distribution (offered rate %g/s)", h.Rate)
		}
		cdf := chart{title: cdfTitle, xlabel: "TTFT, model seconds (log)", ylabel: "fraction of requests", logX: true}
		var levels []float64
		for _, st := range Strategies(bs) {
			for _, pt := range bs[st].Sweep {
				if x := float64(pt.Concurrency); x > 0 && !slices.Contains(levels, x) {
					levels = append(levels, x)
				}
			}
		}
		slices.Sort(levels)
		good := chart{title: "Goodput vs concurrency", xlabel: "concurrency (log)", ylabel: fmt.Sprintf("requests/min with TTFT ≤ %g s", p.SLOTTFTS[wl]),
			yFrom0: true, logX: true, xTicks: levels}
		med := chart{title: "Median TTFT vs concurrency", xlabel: "concurrency (log)", ylabel: "TTFT p50, model seconds (log)", logY: true, logX: true, xTicks: levels}
		sweep := false
		for _, st := range Strategies(bs) {
			s := bs[st]
			c := strategySeries(st)
			for i, q := range s.TTFTQuantiles {
				c.xs = append(c.xs, float64(q))
				c.ys = append(c.ys, float64(i)/float64(len(s.TTFTQuantiles)-1))
			}
			cdf.series = append(cdf.series, c)
			g, m := strategySeries(st), strategySeries(st)
			g.markers, m.markers = true, true
			for _, pt := range s.Sweep {
				if pt.Concurrency <= 0 {
					continue
				}
				x := float64(pt.Concurrency)
				g.xs, g.ys = append(g.xs, x), append(g.ys, float64(pt.GoodputRPM))
				m.xs, m.ys = append(m.xs, x), append(m.ys, float64(pt.TTFTP50))
			}
			if len(g.xs) > 1 {
				sweep = true
			}
			good.series, med.series = append(good.series, g), append(med.series, m)
		}
		b.WriteString(cdf.svg())
		if sweep {
			b.WriteString(good.svg())
			b.WriteString(med.svg())
		}
		b.WriteString("</div>\n")
		if rates, ok := ratePoints(bs); ok {
			rateCharts(&b, bs, rates, p.SLOTTFTS[wl])
		}
		if sweep {
			b.WriteString(`<table><tr><th>strategy</th><th>concurrency</th><th>TTFT p50</th><th>TTFT p95</th><th>E2E p50</th><th>goodput rpm</th><th>SLO met</th><th>shed</th><th>cache hit</th></tr>`)
			for _, st := range Strategies(bs) {
				for _, pt := range bs[st].Sweep {
					if pt.Concurrency <= 0 {
						continue
					}
					fmt.Fprintf(&b, `<tr><td>%s</td><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>`,
						esc(st), pt.Concurrency, Sec(pt.TTFTP50), Sec(pt.TTFTP95), Sec(pt.E2EP50), Number(pt.GoodputRPM, 1),
						Pct(pt.SLOAttainment), Pct(pt.ShedRate), Pct(pt.CacheHitRatio))
				}
			}
			b.WriteString("</table>\n")
		}
	}
	b.WriteString(`<p class="note">Goodput: successful requests whose TTFT met the workload's SLO, per model minute. Cache hit: cached prompt tokens over prompt tokens, from the usage each response reported. Shed: requests refused with 429 or 503. Sim TTFT: the simulator's own account of the TTFT (model time, free of client and network noise); sim lag: how much later the client saw the first token than that account.</p>`)
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
