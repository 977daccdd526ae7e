// Package stats turns per-request measurements into the summary figures a
// benchmark reports: percentiles, throughput, goodput under a TTFT SLO,
// shed rate and cache hit ratio.
package stats

import (
	"math"
	"slices"
)

// Quantile is the q-quantile (0 ≤ q ≤ 1) of sorted values, interpolating
// linearly between closest ranks (the common "type 7" definition, numpy's
// default). NaN for no values.
func Quantile(sorted []float64, q float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	q = min(max(q, 0), 1)
	pos := q * float64(n-1)
	i := int(math.Floor(pos))
	if i >= n-1 {
		return sorted[n-1]
	}
	frac := pos - float64(i)
	return sorted[i] + frac*(sorted[i+1]-sorted[i])
}

// Percentiles are the figures reported for a latency.
type Percentiles struct {
	P50, P90, P95, P99, Mean, Max float64
	N                             int
}

// Summarize sorts xs in place and computes its percentiles. Every field is
// NaN for no values.
func Summarize(xs []float64) Percentiles {
	if len(xs) == 0 {
		nan := math.NaN()
		return Percentiles{nan, nan, nan, nan, nan, nan, 0}
	}
	slices.Sort(xs)
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return Percentiles{
		P50: Quantile(xs, 0.50), P90: Quantile(xs, 0.90), P95: Quantile(xs, 0.95), P99: Quantile(xs, 0.99),
		Mean: sum / float64(len(xs)), Max: xs[len(xs)-1], N: len(xs),
	}
}

// Quantiles returns the q-quantiles of sorted for q = 0, 1/steps, …, 1: a
// compact picture of a distribution for plots.
func Quantiles(sorted []float64, steps int) []float64 {
	if len(sorted) == 0 || steps < 1 {
		return nil
	}
	out := make([]float64, steps+1)
	for i := range out {
		out[i] = Quantile(sorted, float64(i)/float64(steps))
	}
	return out
}

// Slope is the least-squares slope of ys against xs (pairs by index); NaN
// with fewer than two pairs or when every x is the same.
func Slope(xs, ys []float64) float64 {
	n := min(len(xs), len(ys))
	if n < 2 {
		return math.NaN()
	}
	var mx, my float64
	for i := range n {
		mx += xs[i]
		my += ys[i]
	}
	mx, my = mx/float64(n), my/float64(n)
	var sxy, sxx float64
	for i := range n {
		dx := xs[i] - mx
		sxy += dx * (ys[i] - my)
		sxx += dx * dx
	}
	if sxx == 0 {
		return math.NaN()
	}
	return sxy / sxx
}
