// Package predict estimates a worker's time to first token and learns the
// estimate's coefficients online from the TTFTs the gateway observes.
//
// The model is linear in what the router can see when it decides:
//
//	TTFT ≈ base + perQueued × queued + tokens / prefillRate
//
// where queued is the number of requests queued or running on the worker
// ahead of this one, and tokens the prefill tokens that must be computed
// before this request's first token: the uncached tokens of requests ahead
// that have not started, plus this request's own uncached tokens. base is
// what every request pays (an engine step, the network); perQueued what
// each request ahead costs beyond its prefill (decode steps interleaved
// with ours).
//
// Learning is exponentially weighted least squares: every completion adds
// its (features, observed TTFT) with weight 1 and older ones decay by
// Forget per completion, so a worker that slows down (a noisy neighbour, a
// longer context mix) is tracked within a few dozen requests. The prior
// enters as a ridge penalty worth PriorWeight observations that ages like
// an observation down to a floor of MinPriorWeight: a wrong prior is
// forgotten, while a coefficient the data cannot identify (say, perQueued
// on a worker that is never queued) stays at its prior instead of
// drifting. Results are clamped to physically sane ranges.
package predict

import "math"

// Prior is the belief about a worker before any completion.
type Prior struct {
	// Base is the fixed part of a TTFT, in seconds.
	Base float64
	// PerQueued is the cost of each request queued or running ahead, in
	// seconds, beyond its prefill tokens.
	PerQueued float64
	// PrefillRate is the worker's prefill throughput in tokens per second.
	PrefillRate float64
	// AvgUncached is the uncached prompt size, in tokens, assumed for a
	// waiting request the router knows nothing about (routed elsewhere, or
	// before this replica started).
	AvgUncached float64
}

// DefaultPrior is a 27B model on one 48 GB GPU, the simulator's default:
// about 2,700 prefill tokens per second and a 30 ms decode step.
func DefaultPrior() Prior {
	return Prior{Base: 0.05, PerQueued: 0.01, PrefillRate: 2700, AvgUncached: 1024}
}

// Learning constants.
const (
	// Forget is the per-observation decay of older observations: about
	// 1/(1-Forget) = 33 completions dominate the estimate.
	Forget = 0.97
	// PriorWeight is how many observations the prior is worth at first;
	// MinPriorWeight what it keeps for ever.
	PriorWeight    = 2
	MinPriorWeight = 0.05
	// avgAlpha is the EWMA weight of a new uncached-size sample.
	avgAlpha = 0.1

	// Typical feature magnitudes, to express the prior's weight in the
	// units of each coefficient.
	typicalQueued = 4
	typicalTokens = 2048
)

// Sane ranges. An estimate outside them is a measurement artefact, never
// a worker.
const (
	MinPrefillRate = 10.0  // tokens/s
	MaxPrefillRate = 10e6  // tokens/s (fast GPUs at a simulator's time scale)
	MaxBase        = 60.0  // seconds
	MaxPerQueued   = 60.0  // seconds
	maxTTFT        = 3600. // observations above this are dropped
	maxFeature     = 1e9
)

// Features are what a decision knew about the worker.
type Features struct {
	// Queued counts the requests queued or running ahead.
	Queued float64
	// Tokens counts the prefill tokens to compute before the first token:
	// those of requests ahead not yet started, plus the request's own
	// uncached tokens.
	Tokens float64
}

// Model is one worker's predictor. The zero value is not usable; start
// from New. A Model is a value without locks: its owner serialises access.
type Model struct {
	prior   [3]float64
	ridge   [3]float64
	theta   [3]float64
	sxx     [3][3]float64
	sxy     [3]float64
	priorW  float64
	samples int
	avg     float64
}

// New returns a model holding the prior.
func New(p Prior) Model {
	p = sanitize(p)
	m := Model{
		prior:  [3]float64{p.Base, p.PerQueued, 1 / p.PrefillRate},
		ridge:  [3]float64{1, typicalQueued * typicalQueued, typicalTokens * typicalTokens},
		priorW: PriorWeight,
		avg:    p.AvgUncached,
	}
	m.theta = m.prior
	return m
}

func sanitize(p Prior) Prior {
	d := DefaultPrior()
	if !(p.PrefillRate > 0) || math.IsInf(p.PrefillRate, 0) {
		p.PrefillRate = d.PrefillRate
	}
	p.PrefillRate = clamp(p.PrefillRate, MinPrefillRate, MaxPrefillRate)
	if !(p.Base >= 0) {
		p.Base = d.Base
	}
	p.Base = min(p.Base, MaxBase)
	if !(p.PerQueued >= 0) {
		p.PerQueued = d.PerQueued
	}
	p.PerQueued = min(p.PerQueued, MaxPerQueued)
	if !(p.AvgUncached >= 0) || math.IsInf(p.AvgUncached, 0) {
		p.AvgUncached = d.AvgUncached
	}
	return p
}

// Predict returns the expected TTFT in seconds.
func (m *Model) Predict(f Features) float64 {
	q, t := feature(f.Queued), feature(f.Tokens)
	return m.theta[0] + m.theta[1]*q + m.theta[2]*t
}

// Split returns the two parts of a prediction: the wait for what is ahead
// (base, queued requests, their prefill tokens) and the prefill of own
// uncached tokens.
func (m *Model) Split(f Features, own float64) (wait, prefill float64) {
	own = min(feature(own), feature(f.Tokens))
	total := m.Predict(f)
	prefill = m.theta[2] * own
	return total - prefill, prefill
}

// Observe learns from one completed request: the features its decision saw
// (Tokens holding the uncached tokens it actually had) and its TTFT in
// seconds. Observations that cannot be real are ignored.
func (m *Model) Observe(f Features, ttft float64) {
	if !(ttft > 0) || ttft > maxTTFT || !valid(f.Queued) || !valid(f.Tokens) {
		return
	}
	x := [3]float64{1, f.Queued, f.Tokens}
	for i := range 3 {
		for j := range 3 {
			m.sxx[i][j] = Forget*m.sxx[i][j] + x[i]*x[j]
		}
		m.sxy[i] = Forget*m.sxy[i] + x[i]*ttft
	}
	m.samples++
	m.priorW = max(MinPriorWeight, Forget*m.priorW)
	var a [3][3]float64
	var b [3]float64
	for i := range 3 {
		a[i] = m.sxx[i]
		a[i][i] += m.priorW * m.ridge[i]
		b[i] = m.sxy[i] + m.priorW*m.ridge[i]*m.prior[i]
	}
	theta, ok := solve3(a, b)
	if !ok {
		return
	}
	m.theta = [3]float64{
		clamp(theta[0], 0, MaxBase),
		clamp(theta[1], 0, MaxPerQueued),
		clamp(theta[2], 1/MaxPrefillRate, 1/MinPrefillRate),
	}
}

// ObserveUncached learns the typical uncached size of a request.
func (m *Model) ObserveUncached(tokens float64) {
	if !valid(tokens) {
		return
	}
	m.avg += avgAlpha * (tokens - m.avg)
}

// PrefillRate is the learned prefill throughput, tokens per second.
func (m *Model) PrefillRate() float64 { return 1 / m.theta[2] }

// Base is the learned fixed cost, seconds.
func (m *Model) Base() float64 { return m.theta[0] }

// PerQueued is the learned cost per request ahead, seconds.
func (m *Model) PerQueued() float64 { return m.theta[1] }

// AvgUncached is the typical uncached prompt size, tokens.
func (m *Model) AvgUncached() float64 { return m.avg }

// Samples is how many completions the model learned from.
func (m *Model) Samples() int { return m.samples }

func valid(v float64) bool { return v >= 0 && v <= maxFeature }

func feature(v float64) float64 {
	if !(v > 0) {
		return 0
	}
	return min(v, maxFeature)
}

func clamp(v, lo, hi float64) float64 {
	switch {
	case math.IsNaN(v):
		return lo
	case v < lo:
		return lo
	case v > hi:
		return hi
	}
	return v
}

// solve3 solves a·x = b by Gaussian elimination with partial pivoting.
func solve3(a [3][3]float64, b [3]float64) ([3]float64, bool) {
	for c := range 3 {
		p := c
		for r := c + 1; r < 3; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[p][c]) {
				p = r
			}
		}
		if a[p][c] == 0 || math.IsNaN(a[p][c]) {
			return [3]float64{}, false
		}
		a[c], a[p] = a[p], a[c]
		b[c], b[p] = b[p], b[c]
		for r := c + 1; r < 3; r++ {
			f := a[r][c] / a[c][c]
			for k := c; k < 3; k++ {
				a[r][k] -= f * a[c][k]
			}
			b[r] -= f * b[c]
		}
	}
	var x [3]float64
	for r := 2; r >= 0; r-- {
		s := b[r]
		for k := r + 1; k < 3; k++ {
			s -= a[r][k] * x[k]
		}
		x[r] = s / a[r][r]
	}
	for _, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return x, false
		}
	}
	return x, true
}

// Blend returns own with its coefficients pulled toward fleet's by k
// observations' worth: a worker that has served few requests is predicted
// like the rest of its fleet (same model, same hardware, usually) rather
// than from the static prior, so a new or idle worker neither looks
// hopelessly slow nor magically fast next to well-measured ones. Own's
// weight is its sample count, capped at the forgetting window.
func Blend(own, fleet *Model, k float64) Model {
	if fleet.samples == 0 || k <= 0 {
		return *own
	}
	n := min(float64(own.samples), 1/(1-Forget))
	w := n / (n + k)
	out := *own
	for i := range out.theta {
		out.theta[i] = w*own.theta[i] + (1-w)*fleet.theta[i]
	}
	out.avg = w*own.avg + (1-w)*fleet.avg
	return out
}
