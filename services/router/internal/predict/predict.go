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
// its (features, observed TTFT) and older ones decay by Forget per
// completion, so a worker that slows down (a noisy neighbour, a longer
// context mix) is tracked within a few dozen requests. The prior
// enters as a ridge penalty worth PriorWeight observations that ages like
// an observation down to a floor of MinPriorWeight: a wrong prior is
// forgotten, while a coefficient the data cannot identify (say, perQueued
// on a worker that is never queued) stays at its prior instead of
// drifting. Results are clamped to physically sane ranges. The prefill
// rate is fitted on absolute errors, the fixed and per-request costs given
// that rate on relative errors, weighted by (prediction / TTFT)² within
// bounds (learnWeighted and relativeWeight say why), and constrained to be
// non-negative as a fit, not by clamping (nonNegative). A completion faster
// than the prefill its features count says its features were wrong (the
// work put ahead of it was done), not that the fixed costs are below zero:
// it counts as costs of zero, at no more than unit weight.
//
// # Step clocks
//
// An engine runs steps back to back, and a request that arrives during one
// waits for it to end before its own prefill can start. Where in the step
// under way a request lands is chance: on a worker decoding a batch, the
// step's remainder is anything from 0 to a whole step (about 56 ms for the
// default worker decoding five requests), against a TTFT of about 200 ms
// for a request whose prompt is cached: on the shared-prefix benchmark it
// was most of the error left for cached requests that shared their step
// with no later arrival (9 % of their TTFT, nothing with it known). base
// carries its average. A gateway streaming from the worker sees every step
// end, as the tokens of its running requests arrive together, and tells
// the router; the load table turns that into how much sooner or later
// than average this step ends, believed as far as it has proved right
// (its step clocks say how), and the model adds it as it is
// (Features.StepShift) and learns from the TTFT less it. Without a clock
// the shift is 0 and the model is what it was: a clock can only correct a
// prediction by what it has been seen to explain.
//
// # Robustness
//
// A least-squares fit trusts every sample, and a worker's TTFTs are not
// always about the worker's speed: a worker frozen for 20 s (a SIGSTOP, a
// GPU reset, a paused VM) completes everything it had queued with TTFTs of
// 20 s that the features cannot explain, and a fit that takes them in
// decides the worker prefills at a few hundred tokens per second. The
// router then sends it nothing, so nothing new is ever learned and the
// error is permanent; meanwhile a worker that takes all the traffic can fit
// its queueing to the per-request term and its prefill rate to the
// ceiling. Four identical workers have been seen to end at 446, 2.9k, 26.8k
// and 808k tokens/s this way, with every new prefix on one of them. Four
// defences keep the estimate bounded and let it re-converge:
//
//   - Outlier rejection (Observe). After a warm-up of WarmupSamples, an
//     observation more than OutlierFactor times above or below the
//     prediction (beyond OutlierSlack seconds) is not learned: a stalled
//     or catching-up request moves nothing. The model is wrong rather than
//     the samples when outliers persist: RegimeRun of them in a row in one
//     direction (the worker really became ten times slower, or the model
//     learned a stall during its warm-up), or half of the recent
//     observations (an exponential average over about OutlierWindow). The
//     model then starts over from the prior (the fleet's estimate when it
//     has one) with the last RegimeRun outliers as its first samples, and
//     warms up again; a real change is
//     followed within a few dozen requests, while a burst of stall samples
//     (a frozen worker's queue) shorter than RegimeRun leaves no trace.
//     An observation the fleet's model predicts is learned however far
//     from the worker's prediction (ObserveNear): the worker behaves like
//     its fleet, so it is the worker's model that is wrong; it still counts
//     toward starting over. The caller also
//     withholds samples it knows are disturbed (the load table does for
//     requests in flight while their worker failed a scrape).
//   - Decay toward the fleet (Blend). A worker is predicted with its own
//     coefficients blended with its fleet's (every worker serving the same
//     model), its own weighing as many observations as it has, capped at
//     the forgetting window, and halved for every half-life without a new
//     one: a worker that stops getting samples drifts back to the fleet's
//     estimate instead of keeping a bad one for ever.
//   - Bounds relative to the fleet (Blend). Whatever a worker learned, its
//     prediction's coefficients stay within FleetBound times the fleet's:
//     workers serving one model are rarely more different than that, and
//     an estimate outside says more about its samples than the worker.
//   - Probes (the load table): a worker that has learned nothing for a
//     while is given a request with a new prefix now and then, predicted
//     with the fleet's coefficients, so its estimate can be learned at
//     all.
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

	// WarmupSamples is how many observations a model takes in without
	// outlier rejection: before them the prediction is the prior (or the
	// little data seen), which may be off by any factor.
	WarmupSamples = 8
	// OutlierFactor and OutlierSlack define an outlier: an observation
	// above OutlierFactor × prediction + OutlierSlack, or below
	// (prediction − OutlierSlack) / OutlierFactor.
	OutlierFactor = 4.0
	OutlierSlack  = 0.05 // seconds
	// RegimeRun is how many consecutive outliers in one direction are
	// taken as a real change of the worker (the model starts over from
	// them); an outlier share of OutlierShare, averaged over about
	// OutlierWindow observations, too.
	RegimeRun     = 8
	OutlierShare  = 0.5
	OutlierWindow = 16
	// FleetBound bounds each coefficient of a blended prediction to within
	// this factor of the fleet's (the fixed and per-request costs only
	// from above, and with fleetSlack seconds to spare, as the fleet's may
	// be near zero).
	FleetBound = 4.0
	// WeightBound bounds how much more or less than 1 a sample weighs
	// (as a ratio of prediction to observation; see relativeWeight).
	WeightBound = 4.0
	fleetSlack  = 0.01

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
	maxStepShift   = 60. // seconds; no engine step lasts longer
)

// Features are what a decision knew about the worker.
type Features struct {
	// Queued counts the requests queued or running ahead.
	Queued float64
	// Tokens counts the prefill tokens to compute before the first token:
	// those of requests ahead not yet started, plus the request's own
	// uncached tokens.
	Tokens float64
	// StepShift is how much later (positive) or sooner than on average
	// the engine step under way when the decision was made ends, in
	// seconds: nothing new starts before it does (see Step clocks in the
	// package comment). It is added to the prediction as it is, not
	// learned; 0 when unknown.
	StepShift float64
}

// Model is one worker's predictor. The zero value is not usable; start
// from New. A Model is a value without locks: its owner serialises access.
// Copies (Blend's result) are for predicting: they share the original's
// outlier buffer, so observe only the original.
type Model struct {
	prior [3]float64
	ridge [3]float64
	theta [3]float64
	// sxx and sxy are the absolute-error fit's sums (it gives the
	// prefill rate); rxx, rxy and rxt the relative-error fit's of the
	// fixed costs, rxt the sums against tokens (see learnWeighted).
	sxx     [3][3]float64
	sxy     [3]float64
	rxx     [2][2]float64
	rxy     [2]float64
	rxt     [2]float64
	priorW  float64
	samples int
	avg     float64
	// warm counts the samples learned since the start or the last
	// restart; outliers are rejected once it reaches WarmupSamples.
	warm int
	// run counts the consecutive outliers just seen: positive above the
	// prediction, negative below; share is the recent outlier share.
	run      int
	share    float64
	rejected int
	outliers int // every observation ever rejected, restarts or not
	// recent holds the last RegimeRun outliers, learned if the model
	// starts over; next is where the following one goes. Allocated at the
	// first outlier: a Model is copied on every prediction (Blend), and
	// most never see one.
	recent *[RegimeRun]observation
	nrec   int
	next   int
}

type observation struct {
	f        Features
	y        float64
	rejected bool // counted in Model.rejected
}

// Outcome is what Observe did with an observation.
type Outcome int

// Observe's outcomes.
const (
	// Learned: the observation was taken in.
	Learned Outcome = iota
	// Invalid: the observation cannot be real (a non-positive or absurd
	// TTFT, features out of range) and was dropped.
	Invalid
	// Outlier: the observation is too far from the prediction to be about
	// the worker's speed, and was not learned.
	Outlier
)

func (o Outcome) String() string {
	switch o {
	case Learned:
		return "learned"
	case Invalid:
		return "invalid"
	case Outlier:
		return "outlier"
	}
	return "unknown"
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
	return stepShift(f) + m.theta[0] + m.theta[1]*q + m.theta[2]*t
}

// stepShift is f.StepShift where it can be real.
func stepShift(f Features) float64 {
	if math.IsNaN(f.StepShift) {
		return 0
	}
	return max(-maxStepShift, min(f.StepShift, maxStepShift))
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
// seconds. Observations that cannot be real are ignored, and outliers are
// rejected unless they persist (see Robustness in the package comment).
func (m *Model) Observe(f Features, ttft float64) Outcome {
	return m.ObserveNear(f, ttft, nil)
}

// ObserveNear is Observe for a worker with a reference: its fleet's model.
// An observation the reference predicts (within the outlier band) is not
// an outlier, however far from m's prediction: the worker behaves like its
// fleet, and it is m that is wrong.
func (m *Model) ObserveNear(f Features, ttft float64, ref *Model) Outcome {
	if !(ttft > 0) || ttft > maxTTFT || !valid(f.Queued) || !valid(f.Tokens) || !(math.Abs(f.StepShift) <= maxStepShift) {
		return Invalid
	}
	if m.warm >= WarmupSamples {
		dir := m.outlier(f, ttft)
		if dir == 0 {
			m.run = 0
			m.share -= m.share / OutlierWindow
			m.learn(f, ttft)
			return Learned
		}
		if dir*m.run < 0 {
			m.run = 0 // the other direction: not the same change
		}
		m.run += dir
		m.share += (1 - m.share) / OutlierWindow
		fleetLike := ref != nil && ref.warm >= WarmupSamples && ref.outlier(f, ttft) == 0
		if m.recent == nil {
			m.recent = new([RegimeRun]observation)
		}
		m.recent[m.next] = observation{f: f, y: ttft, rejected: !fleetLike}
		m.next = (m.next + 1) % RegimeRun
		m.nrec = min(m.nrec+1, RegimeRun)
		if !fleetLike {
			// Counted before a restart, which learns it with the
			// others and takes their counts back.
			m.rejected++
			m.outliers++
		}
		if m.run*dir >= RegimeRun || m.share >= OutlierShare {
			if ref != nil && ref.warm >= WarmupSamples {
				m.prior = ref.theta // what its fleet shows is the better prior
			}
			m.restart()
			return Learned
		}
		if !fleetLike {
			return Outlier
		}
	}
	m.learn(f, ttft)
	return Learned
}

// outlier says whether ttft is an outlier for m's prediction: 1 above, -1
// below, 0 not.
func (m *Model) outlier(f Features, ttft float64) int {
	p := m.Predict(f)
	switch {
	case ttft > OutlierFactor*p+OutlierSlack:
		return 1
	case ttft < (p-OutlierSlack)/OutlierFactor:
		return -1
	}
	return 0
}

// restart forgets what the model learned, keeping the prior, and learns
// the recent outliers, which proved it wrong.
func (m *Model) restart() {
	m.sxx, m.sxy = [3][3]float64{}, [3]float64{}
	m.rxx, m.rxy, m.rxt = [2][2]float64{}, [2]float64{}, [2]float64{}
	m.priorW, m.warm, m.run, m.share = PriorWeight, 0, 0, 0
	for i := range m.nrec {
		o := m.recent[(m.next-m.nrec+i+RegimeRun)%RegimeRun]
		m.learnWeighted(o.f, o.y, 1)
		if o.rejected {
			m.rejected--
		} else {
			m.samples-- // learned once already
		}
	}
	m.nrec, m.next = 0, 0
}

// learn takes in an observation, its fixed costs weighted for relative
// error (see relativeWeight).
func (m *Model) learn(f Features, ttft float64) {
	m.learnWeighted(f, ttft, relativeWeight(m.Predict(f), ttft))
}

// relativeWeight is the weight of an observation of ttft predicted p in
// the fit of the fixed costs: the square of p/ttft, bounded to
// [1/WeightBound², WeightBound²]. Least squares on absolute errors lets a
// few long TTFTs (cold 8k prompts, a request that waited for a long
// prefill step) set the fixed cost, and the many short ones are then
// predicted at several times their TTFT: on a shared-prefix run the fit
// was 47 % off on average where fitting relative errors was 22 % off.
// Weighing each sample by 1/ttft² minimises relative error; scaling by p²
// keeps a sample the model predicts at weight 1, so the prior's ridge
// keeps its meaning whatever the worker's speed, and the bound keeps a
// sample far off the prediction (a request whose prefix another computed
// for it) from outweighing the rest.
func relativeWeight(p, ttft float64) float64 {
	r := clamp(p/ttft, 1/WeightBound, WeightBound)
	return r * r
}

// learnWeighted takes in an observation in two fits. The prefill rate comes
// from the joint fit of all three coefficients on absolute errors: the
// cold prompts, whose TTFT is mostly prefill, carry it. Weighted for
// relative error, the many short TTFTs of cached requests (a few hundred
// tokens, their time mostly a step's fixed cost and the wait for the step
// under way) set it instead, too fast (44k against 27k tokens/s on one
// shared-prefix run), and the rate prices every recompute and pressure
// charge: routing then left prefixes' holders more often (multi-turn lost
// a point of cache hit and 3–7 % of TTFT p95). The fixed and per-request
// costs are then fitted on relative errors (weight w), given that rate:
// they are what the short TTFTs are made of.
func (m *Model) learnWeighted(f Features, ttft, w float64) {
	// The coefficients price the TTFT as it would have been with the
	// step under way ending on average: its shift is known, not learned.
	// A shift that leaves nothing was wrong; the rest is then taken as
	// nothing.
	ttft = max(0, ttft-stepShift(f))
	x := [3]float64{1, f.Queued, f.Tokens}
	for i := range 3 {
		for j := range 3 {
			m.sxx[i][j] = Forget*m.sxx[i][j] + x[i]*x[j]
		}
		m.sxy[i] = Forget*m.sxy[i] + x[i]*ttft
	}
	m.samples++
	m.warm++
	m.priorW = max(MinPriorWeight, Forget*m.priorW)
	var a [3][3]float64
	var b [3]float64
	for i := range 3 {
		a[i] = m.sxx[i]
		a[i][i] += m.priorW * m.ridge[i]
		b[i] = m.sxy[i] + m.priorW*m.ridge[i]*m.prior[i]
	}
	theta, ok := solve3(a, b)
	perToken := m.theta[2]
	if ok {
		perToken = clamp(theta[2], 1/MaxPrefillRate, 1/MinPrefillRate)
	}
	tokens := f.Tokens
	if ttft < f.Tokens*perToken {
		// Faster than the prefill its features count, at the rate just
		// fitted with it: what they put ahead of it was done or never
		// there (TestWorkAheadThatWasDone), or the rate is still far off.
		// Either way it shows fixed costs of no more than 0, which they
		// cannot be; fitted as it is, weighted as the over-prediction it
		// is, it drove them below 0. It counts as costs of 0, at weight 1.
		w, tokens = min(w, 1), ttft/perToken
	}
	for i := range 2 {
		for j := range 2 {
			m.rxx[i][j] = Forget*m.rxx[i][j] + w*x[i]*x[j]
		}
		m.rxy[i] = Forget*m.rxy[i] + w*x[i]*ttft
		m.rxt[i] = Forget*m.rxt[i] + w*x[i]*tokens
	}
	if !ok {
		return
	}
	// Given the rate, the fixed costs: a 2×2 system, solved in the third
	// slot's absence (a unit diagonal there pins it to perToken).
	a = [3][3]float64{{m.rxx[0][0], m.rxx[0][1], 0}, {m.rxx[1][0], m.rxx[1][1], 0}, {0, 0, 1}}
	b = [3]float64{m.rxy[0] - perToken*m.rxt[0], m.rxy[1] - perToken*m.rxt[1], perToken}
	for i := range 2 {
		a[i][i] += m.priorW * m.ridge[i]
		b[i] += m.priorW * m.ridge[i] * m.prior[i]
	}
	if fixed, ok := solve3(a, b); ok {
		theta[0], theta[1] = nonNegative(a, b, fixed[0], fixed[1])
	}
	m.theta = [3]float64{
		clamp(theta[0], 0, MaxBase),
		clamp(theta[1], 0, MaxPerQueued),
		perToken,
	}
}

// nonNegative is the least-squares solution of the fixed costs' normal
// equations (the 2×2 system in a and b) under base, perQueued ≥ 0, given
// the unconstrained one (x0, x1). Clamping a negative coefficient to 0
// without refitting the other leaves every prediction off by what was
// clamped away: a fit of base −0.02 s and perQueued 0.008 s, clamped to
// 0 and 0.008, predicted every cached request 20 ms high, twice its TTFT.
// Otherwise the solution lies on a bound, where the other coefficient is
// its one-variable fit: whichever of the two fits better.
func nonNegative(a [3][3]float64, b [3]float64, x0, x1 float64) (float64, float64) {
	if x0 >= 0 && x1 >= 0 {
		return x0, x1
	}
	// The least-squares objective up to a constant, ½xᵀax − bᵀx.
	cost := func(u, v float64) float64 {
		return 0.5*(a[0][0]*u*u+(a[0][1]+a[1][0])*u*v+a[1][1]*v*v) - b[0]*u - b[1]*v
	}
	var u, v float64
	if a[0][0] > 0 {
		u = max(0, b[0]/a[0][0])
	}
	if a[1][1] > 0 {
		v = max(0, b[1]/a[1][1])
	}
	if cost(u, 0) <= cost(0, v) {
		return u, 0
	}
	return 0, v
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

// Rejected is how many observations were rejected as outliers and not
// learned since (a restart learns the last RegimeRun of them).
func (m *Model) Rejected() int { return m.rejected }

// Outliers counts every observation rejected when it arrived, whether a
// restart learned it later or not: a counter for metrics.
func (m *Model) Outliers() int { return m.outliers }

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
// weight is its sample count, capped at the forgetting window, times
// freshness (1 for a worker learning now, halving with every half-life
// without a sample; the caller computes it): a worker that stopped getting
// samples returns to the fleet's estimate. Once the fleet has learned
// anything, the result's coefficients are bounded to within FleetBound of
// the fleet's.
func Blend(own, fleet *Model, k, freshness float64) Model {
	if fleet.samples == 0 {
		return *own
	}
	out := *own
	// Bounded first, so that the blend (between two bounded models) is.
	out.theta[0] = min(out.theta[0], FleetBound*fleet.theta[0]+fleetSlack)
	out.theta[1] = min(out.theta[1], FleetBound*fleet.theta[1]+fleetSlack)
	out.theta[2] = clamp(out.theta[2], fleet.theta[2]/FleetBound, fleet.theta[2]*FleetBound)
	if k > 0 {
		n := min(float64(own.samples), 1/(1-Forget)) * clamp(freshness, 0, 1)
		w := n / (n + k)
		for i := range out.theta {
			out.theta[i] = w*out.theta[i] + (1-w)*fleet.theta[i]
		}
		out.avg = w*own.avg + (1-w)*fleet.avg
	}
	return out
}

// Freshness is the weight Blend gives a worker's own history when its last
// sample is age old: 1 now, halving every halfLife (0 or negative: always
// 1).
func Freshness(age, halfLife float64) float64 {
	if halfLife <= 0 || age <= 0 {
		return 1
	}
	return math.Exp2(-age / halfLife)
}
