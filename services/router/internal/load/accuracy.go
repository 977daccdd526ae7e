package load

import "math"

// accuracy is how well an endpoint's decisions predicted their time to
// first token: the prediction each request was routed on (not one made
// again at its completion, with what the router learned since) against
// the TTFT its completion reports. Averages are exponential, over about
// the last 1/accuracyAlpha completions, so Explain shows the predictor as
// it is now; the absolute percentage error is averaged per request (its
// mean is the MAPE a benchmark reports over a run).
type accuracy struct {
	predicted, observed float64 // seconds
	absPctErr           float64 // |predicted − observed| / observed
	samples             int
}

const accuracyAlpha = 0.1

// add takes in one completion; observed must be positive.
func (a *accuracy) add(predicted, observed float64) {
	pct := math.Abs(predicted-observed) / observed
	if a.samples == 0 {
		a.predicted, a.observed, a.absPctErr = predicted, observed, pct
	} else {
		a.predicted += accuracyAlpha * (predicted - a.predicted)
		a.observed += accuracyAlpha * (observed - a.observed)
		a.absPctErr += accuracyAlpha * (pct - a.absPctErr)
	}
	a.samples++
}
