package report

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strconv"
	"strings"
)

// series is one line of a chart.
type series struct {
	name   string
	color  string
	dashed bool
	bold   bool
	xs, ys []float64
	// markers draws a dot at each point (sparse series).
	markers bool
}

// chart is a line chart rendered as inline SVG.
type chart struct {
	title, xlabel, ylabel string
	logX, logY            bool
	// yFrom0 starts a linear y axis at 0.
	yFrom0 bool
	// xTicks, when set, are the only x ticks (e.g. the concurrencies run),
	// and bound the x axis with a little room on both sides.
	xTicks []float64
	series []series
}

const (
	chartW, chartH                   = 460, 300
	padL, padR, padT, padB           = 58, 12, 30, 44
	plotW, plotH                     = chartW - padL - padR, chartH - padT - padB
	legendRow                        = 15
	fontSize                         = 11
	axisColor, gridColor, labelColor = "#444", "#e4e4e4", "#222"
	minLogValue                      = 1e-4
)

// axis maps data values to pixels.
type axis struct {
	lo, hi float64
	log    bool
}

func (a axis) frac(v float64) float64 {
	if a.log {
		v = math.Max(v, minLogValue)
		return (math.Log10(v) - math.Log10(a.lo)) / (math.Log10(a.hi) - math.Log10(a.lo))
	}
	return (v - a.lo) / (a.hi - a.lo)
}

// newAxis fits an axis around values, with "nice" bounds.
func newAxis(vals []float64, log, from0 bool) axis {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		if math.IsNaN(v) || math.IsInf(v, 0) || (log && v <= 0) {
			continue
		}
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if math.IsInf(lo, 1) {
		lo, hi = 0, 1
		if log {
			lo, hi = 0.01, 1
		}
	}
	if log {
		lo = math.Pow(10, math.Floor(math.Log10(math.Max(lo, minLogValue))))
		hi = math.Pow(10, math.Ceil(math.Log10(math.Max(hi, lo*10))))
		if hi/lo < 10 {
			hi = lo * 10
		}
		return axis{lo: lo, hi: hi, log: true}
	}
	if from0 {
		lo = math.Min(0, lo)
	}
	if hi == lo {
		hi = lo + 1
	}
	step := niceStep((hi - lo) / 5)
	return axis{lo: math.Floor(lo/step) * step, hi: math.Ceil(hi/step) * step}
}

// tickAxis spans explicit ticks with a margin of a tenth of the range.
func tickAxis(ticks []float64, log bool) axis {
	lo, hi := slices.Min(ticks), slices.Max(ticks)
	if log && lo > 0 {
		span := math.Max(math.Log10(hi/lo), 0.3)
		return axis{lo: lo / math.Pow(10, span/10), hi: hi * math.Pow(10, span/10), log: true}
	}
	span := math.Max(hi-lo, 1)
	return axis{lo: lo - span/10, hi: hi + span/10}
}

func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// ticks returns tick values and labels.
func (a axis) ticks() ([]float64, []string) {
	var vs []float64
	var ls []string
	if a.log {
		for e := math.Floor(math.Log10(a.lo)); e <= math.Log10(a.hi)+1e-9; e++ {
			for _, m := range []float64{1, 2, 5} {
				v := m * math.Pow(10, e)
				if v < a.lo*0.999 || v > a.hi*1.001 {
					continue
				}
				vs = append(vs, v)
				ls = append(ls, tickLabel(v))
			}
		}
		return vs, ls
	}
	step := niceStep((a.hi - a.lo) / 5)
	for v := a.lo; v <= a.hi+step/1000; v += step {
		vs = append(vs, v)
		ls = append(ls, tickLabel(v))
	}
	return vs, ls
}

func tickLabel(v float64) string {
	if v != 0 && math.Abs(v) < 0.01 {
		return strconv.FormatFloat(v, 'g', 2, 64)
	}
	return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
}

// svg renders the chart.
func (c chart) svg() string {
	var xs, ys []float64
	for _, s := range c.series {
		xs = append(xs, s.xs...)
		ys = append(ys, s.ys...)
	}
	ax, ay := newAxis(xs, c.logX, false), newAxis(ys, c.logY, c.yFrom0)
	tx, tlx := ax.ticks()
	if len(c.xTicks) > 0 {
		ax = tickAxis(c.xTicks, c.logX)
		tx, tlx = c.xTicks, nil
		for _, v := range c.xTicks {
			tlx = append(tlx, tickLabel(v))
		}
	}
	px := func(v float64) float64 { return padL + ax.frac(v)*plotW }
	py := func(v float64) float64 { return padT + (1-ay.frac(v))*plotH }
	legendH := legendRow*((len(c.series)+2)/3) + 6
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" font-family="sans-serif" font-size="%d">`,
		chartW, chartH+legendH, chartW, chartH+legendH, fontSize)
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="13" font-weight="bold" fill="%s">%s</text>`, padL, labelColor, html.EscapeString(c.title))
	for i, v := range tx {
		x := px(v)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`, x, padT, x, padT+plotH, gridColor)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="%s">%s</text>`, x, padT+plotH+14, labelColor, tlx[i])
	}
	ty, tly := ay.ticks()
	for i, v := range ty {
		y := py(v)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`, padL, y, padL+plotW, y, gridColor)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="%s">%s</text>`, padL-5, y+4, labelColor, tly[i])
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="%s"/>`, padL, padT, plotW, plotH, axisColor)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="%s">%s</text>`, padL+plotW/2, padT+plotH+32, labelColor, html.EscapeString(c.xlabel))
	fmt.Fprintf(&b, `<text transform="translate(14 %d) rotate(-90)" text-anchor="middle" fill="%s">%s</text>`, padT+plotH/2, labelColor, html.EscapeString(c.ylabel))
	for _, s := range c.series {
		var pts []string
		for i := range s.xs {
			if i >= len(s.ys) || !finite(s.xs[i]) || !finite(s.ys[i]) {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", clamp(px(s.xs[i]), padL, padL+plotW), clamp(py(s.ys[i]), padT, padT+plotH)))
		}
		if len(pts) == 0 {
			continue
		}
		width := 1.8
		if s.bold {
			width = 3
		}
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="%.1f"%s points="%s"/>`, s.color, width, dash, strings.Join(pts, " "))
		if s.markers {
			for _, p := range pts {
				x, y, _ := strings.Cut(p, ",")
				fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`, x, y, s.color)
			}
		}
	}
	for i, s := range c.series {
		x := padL + (i%3)*(plotW/3)
		y := chartH + 6 + (i/3)*legendRow
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`, x, y-4, x+18, y-4, s.color)
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">%s</text>`, x+22, y, labelColor, html.EscapeString(s.name))
	}
	b.WriteString(`</svg>`)
	return b.String()
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func clamp(v, lo, hi float64) float64 { return math.Min(math.Max(v, lo), hi) }
