package load

import "math"

// Step clocks
//
// A request routed to a worker waits for the engine step under way there
// to end before its prefill can start (see Step clocks in package
// predict). A gateway relaying the worker's streams sees its steps end and
// sends that clock with the request (Request.Steps): the clock says how
// much of the step is left. How much of that to believe depends on the
// deployment, not the worker: the clock is read at the gateway, the
// request reaches the worker a moment after the decision, and the
// network's and the gateway's jitter between them decide whether it lands
// in the step the clock saw or the next. On a fleet of real engines,
// steps of 30–60 ms against a millisecond of jitter, the clock is nearly
// the truth; on a simulator run ten times faster than real time, a step
// lasts 5.6 ms of wall time and the jitter is about as long: there the
// clock's remainder is nearly unrelated to the wait (a slope of 0.08 on a
// shared-prefix run), while at three times real time it cuts the median
// error of the predictions by a third.
//
// So the table learns it (clockFit). A decision with a clock shifts the
// prediction by weight × the clock's deviation from the endpoint's average
// remainder (Features.StepShift; the average itself is in the learned
// fixed cost, as it is without clocks), and each completion of such a
// decision adds its deviation and its TTFT's deviation from the
// prediction without the shift to a least-squares fit of the weight, over
// every endpoint (the jitter is the deployment's), within [0, 1]. A weight
// of 0 predicts exactly as without clocks.

// StepClock is an endpoint's engine step timing at a decision, as a
// gateway relaying its streams saw it: its last step ended Since seconds
// ago and took Step seconds (0: unknown).
type StepClock struct {
	Since, Step float64
}

// maxStep bounds a step clock's figures: a clock outside [0, maxStep] is
// not a worker's (package predict bounds StepLeft the same way).
const maxStep = 60.0

// left is what is left of the step under way: the step's length less the
// time since the last one ended, ok false for a clock that cannot be
// real.
func (c StepClock) left() (float64, bool) {
	if !(c.Since >= 0 && c.Since <= maxStep) || !(c.Step >= 0 && c.Step <= maxStep) {
		return 0, false
	}
	return max(0, c.Step-c.Since), true
}

// stepLeftAlpha is the weight of a new remainder in an endpoint's average.
const stepLeftAlpha = 0.05

// stepShift is how a decision's prediction used a step clock
// (Estimate.StepShift).
type stepShift struct {
	// Left is the clock's remainder, Dev that less the endpoint's
	// average, Weight the share of Dev believed: the prediction is
	// shifted by Weight × Dev.
	Left, Dev, Weight float64
	Clocked           bool
}

func (s stepShift) shift() float64 { return s.Weight * s.Dev }

// stepShiftFor is how much later than on average ep's engine step under
// way ends at a decision for req, by the gateway's clock when req has one,
// as far as the table believes it (clockFit); zero without a clock.
func (t *Table) stepShiftFor(ep *endpoint, req *Request) stepShift {
	var s stepShift
	if req == nil || req.Steps == nil {
		return s
	}
	c, ok := req.Steps(ep.spec.ID)
	if !ok {
		return s
	}
	left, ok := c.left()
	if !ok {
		return s
	}
	s.Clocked, s.Left, s.Dev = true, left, left-ep.stepLeft
	if ep.stepClocks > 0 {
		// The first clock here only starts the average (noteStep).
		s.Weight = t.clock.weight()
	}
	return s
}

// noteStep takes the remainder a committed decision here had by a clock
// into the endpoint's average.
func (ep *endpoint) noteStep(s stepShift) {
	if !s.Clocked {
		return
	}
	ep.stepClocks++
	ep.stepLeft += max(stepLeftAlpha, 1/float64(ep.stepClocks)) * (s.Left - ep.stepLeft)
}

// clockFit is the exponentially weighted least-squares fit, through the
// origin, of the TTFT's deviation from the prediction without the clock
// on the clock's deviation from the average remainder: how much of what
// the clock says shows in the TTFT.
type clockFit struct {
	sxy, sxx, n float64
}

const (
	// clockForget is the per-completion decay: about 1/(1-clockForget)
	// = 100 completions make the weight.
	clockForget = 0.99
	// clockPrior is the weight before any completion, and
	// clockPriorWeight how many completions of average deviation it is
	// worth.
	clockPrior       = 0.5
	clockPriorWeight = 4.0
)

// StepClockWeight is the share of a step clock's deviation from an
// endpoint's average remainder that predictions add, in [0, 1].
func (t *Table) StepClockWeight() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.clock.weight()
}

// weight is the share of a clock's deviation believed, in [0, 1].
func (f *clockFit) weight() float64 {
	if f.n == 0 || f.sxx <= 0 {
		return clockPrior
	}
	prior := clockPriorWeight * f.sxx / f.n // the prior, at the deviations seen
	w := (f.sxy + clockPrior*prior) / (f.sxx + prior)
	return min(1, max(0, w))
}

// observe adds a completion of a decision with a clock: its clock's
// deviation dev from the average, and its TTFT's deviation from the
// prediction without it, resid. resid is bounded by bound: a TTFT far off
// for other reasons (a request that shared its step with later ones) says
// nothing of the clock and would swamp what does.
func (f *clockFit) observe(dev, resid, bound float64) {
	if math.IsNaN(dev) || math.IsNaN(resid) || math.IsInf(dev, 0) {
		return
	}
	resid = min(bound, max(-bound, resid))
	f.sxy = clockForget*f.sxy + dev*resid
	f.sxx = clockForget*f.sxx + dev*dev
	f.n = clockForget*f.n + 1
}
