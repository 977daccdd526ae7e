package policy

import (
	"math"
	"slices"
)

// Request is what a decision needs to know about one request.
type Request struct {
	// Model is the model the client asked for (possibly an alias).
	Model  string
	Tenant string
	// Tags from the allowed header, tenant defaults and classifiers.
	Tags []string
	// Rotation chooses where the scan for the best backend starts, so that
	// near-ties spread over equal backends (the router passes a counter
	// that advances with every decision). Same rotation, same answer.
	Rotation uint64
}

// Backend is one candidate as the router sees it for this request. The
// router fills one per (endpoint, model) for the models ConsiderModels
// returns: its load table row maps field for field.
type Backend struct {
	// ID is the endpoint id (worker) or the provider's endpoint id.
	ID string
	// Model is the public model name this row would serve the request as.
	Model string
	Type  BackendType
	// Group is the InferenceWorkerSet or InferenceProvider name, what
	// order lists and backend.names select.
	Group string
	Pool  string
	// Unavailable, when set, is why the backend cannot take the request
	// (unhealthy, excluded by a retry); it is never chosen.
	Unavailable string

	QueuedPrompts   int64   // vllm:num_requests_waiting at the last scrape plus what was routed there since, not yet scheduled
	RunningRequests int64   // vllm:num_requests_running
	InFlight        int64   // routed here and not completed
	KVCacheUsage    float64 // 0..1
	// PredictedTTFT is in seconds; NaN when unknown (never satisfies a
	// predicate, and loses every comparison).
	PredictedTTFT float64
	CachedTokens  int64
	// Price per million prompt tokens (Price objective); 0 for local.
	Price float64
}

// Outcome of a decision.
type Outcome uint8

// Outcomes.
const (
	// Routed: Decision.Chosen is the backend.
	Routed Outcome = iota
	// Rejected: a rule (or guard) with onEmpty: Reject found no backend.
	Rejected
	// NoBackend: nothing serves the request, even by default routing.
	NoBackend
)

func (o Outcome) String() string {
	switch o {
	case Routed:
		return "routed"
	case Rejected:
		return "rejected"
	}
	return "no_backend"
}

// Status is what became of one backend in a decision.
type Status uint8

// Statuses.
const (
	// NotConsidered: the backend serves none of the models considered.
	NotConsidered Status = iota
	// Unavailable: Backend.Unavailable was set.
	Unavailable
	// Dropped by an exclude filter (Verdict.By names it).
	Dropped
	// Candidate: eligible, but not in the tier that picked.
	Candidate
	// Lost: in the tier that picked, not chosen.
	Lost
	// Chosen.
	Chosen
)

func (s Status) String() string {
	return [...]string{"not considered", "unavailable", "dropped", "candidate", "lost", "chosen"}[s]
}

// Verdict is one backend's fate in a decision.
type Verdict struct {
	Status Status
	// By is the filter ("policy/rule/filter") that dropped the backend, or
	// the reason it was unavailable.
	By string
	// Guard is set when By is a guard policy's filter.
	Guard bool
	// Score is the tier's objective value, for Lost and Chosen.
	Score float64
}

// Decision is the result of Evaluate. Reuse one per goroutine: after
// warm-up, evaluating allocates nothing.
type Decision struct {
	Outcome Outcome
	// Chosen indexes the backends slice; -1 unless Routed.
	Chosen int
	// RunnerUp indexes the best backend the picking scan passed over (its
	// status is Lost); -1 when the chosen one had no competitor.
	RunnerUp int
	// Rule decided (nil when default routing did); Tier is its tier that
	// picked (nil for default routing or when nothing was picked).
	Rule *Rule
	Tier *Tier
	// Objective and Score of the pick.
	Objective Objective
	Score     float64
	// Fallbacks counts matching rules that found no backend before the
	// one that decided.
	Fallbacks int
	// Rejector is the rule whose onEmpty: Reject rejected the request.
	Rejector *Rule
	// Guards are the guard rules that applied to the request.
	Guards []*Rule
	// Candidates is how many backends were eligible in the last attempt.
	Candidates int
	// Trace has one verdict per backend, for the last attempt.
	Trace []Verdict

	filters []*Filter // active filters of the attempt
	guardF  []*Filter // active guard filters
}

// Policy names the policy that decided, "" for default routing.
func (d *Decision) Policy() string {
	switch {
	case d.Rejector != nil:
		return d.Rejector.Policy
	case d.Rule != nil:
		return d.Rule.Policy
	}
	return ""
}

// RuleName names the rule that decided, "" for default routing.
func (d *Decision) RuleName() string {
	switch {
	case d.Rejector != nil:
		return d.Rejector.Name
	case d.Rule != nil:
		return d.Rule.Name
	}
	return ""
}

// TierLabel labels the tier that picked, "default" for default routing,
// "" when nothing was picked.
func (d *Decision) TierLabel() string {
	switch {
	case d.Outcome != Routed:
		return ""
	case d.Tier != nil:
		return d.Tier.label
	}
	return "default"
}

// defaultRule is default routing: the requested model's backends, lowest
// predicted TTFT.
var defaultRule = &Rule{Name: "", label: "default", Tiers: []Tier{{Type: TypeAny, Minimize: PredictedTTFT, label: "default"}}}

// Evaluate decides where req goes among bs: the first matching route rule
// runs consider → exclude → select tiers; when every tier is empty its
// onEmpty either rejects or falls back to the next matching rule, and
// after the last one to default routing. Guard policies' exclusions apply
// throughout. The result is written to d; the same snapshot, request and
// backends always give the same decision.
func (p *Program) Evaluate(req *Request, bs []Backend, d *Decision) {
	d.Outcome, d.Chosen, d.RunnerUp, d.Rule, d.Tier = NoBackend, -1, -1, nil, nil
	d.Objective, d.Score, d.Fallbacks, d.Rejector, d.Candidates = PredictedTTFT, 0, 0, nil, 0
	d.Guards, d.guardF = d.Guards[:0], d.guardF[:0]
	if cap(d.Trace) < len(bs) {
		d.Trace = make([]Verdict, len(bs))
	}
	d.Trace = d.Trace[:len(bs)]

	var guardReject *Rule
	for _, rules := range p.guards {
		for _, r := range rules {
			if !r.matches(req) {
				continue
			}
			d.Guards = append(d.Guards, r)
			active := false
			for i := range r.Filters {
				if f := &r.Filters[i]; f.If == nil || f.If.matches(req) {
					d.guardF = append(d.guardF, f)
					active = true
				}
			}
			if active && r.OnEmpty == Reject && guardReject == nil {
				guardReject = r
			}
			break // a guard policy applies its first matching rule
		}
	}

	for _, ri := range p.rulesFor(req.Model) {
		r := p.route[ri]
		if !r.matches(req) {
			continue
		}
		if d.attempt(r, req, bs) {
			return
		}
		if r.OnEmpty == Reject {
			d.Outcome, d.Rejector = Rejected, r
			return
		}
		d.Fallbacks++
	}
	if d.attempt(defaultRule, req, bs) {
		d.Rule = nil
		return
	}
	d.Rule = nil
	if guardReject != nil {
		d.Outcome, d.Rejector = Rejected, guardReject
	}
}

// attempt runs one rule; it reports whether it picked a backend.
func (d *Decision) attempt(r *Rule, req *Request, bs []Backend) bool {
	d.filters = d.filters[:0]
	for i := range r.Filters {
		if f := &r.Filters[i]; f.If == nil || f.If.matches(req) {
			d.filters = append(d.filters, f)
		}
	}
	n := 0
	for i := range bs {
		b := &bs[i]
		v := &d.Trace[i]
		*v = Verdict{}
		if !r.considers(b.Model, req.Model) {
			continue
		}
		if b.Unavailable != "" {
			v.Status, v.By = Unavailable, b.Unavailable
			continue
		}
		if f := firstDrop(d.filters, b); f != nil {
			v.Status, v.By = Dropped, f.ref
			continue
		}
		if f := firstDrop(d.guardF, b); f != nil {
			v.Status, v.By, v.Guard = Dropped, f.ref, true
			continue
		}
		v.Status = Candidate
		n++
	}
	d.Candidates = n
	if n == 0 {
		return false
	}
	tiers := r.Tiers
	if len(tiers) == 0 {
		tiers = defaultRule.Tiers
	}
	start := 0
	if len(bs) > 0 {
		start = int(req.Rotation % uint64(len(bs)))
	}
	for ti := range tiers {
		t := &tiers[ti]
		best, second, obj := -1, -1, t.Minimize
		if len(t.Order) == 0 {
			best, second = d.pick(bs, start, t.Type, "", false, obj)
		} else {
			obj = PredictedTTFT
			for _, g := range t.Order {
				if best, second = d.pick(bs, start, t.Type, g, true, obj); best >= 0 {
					break
				}
			}
		}
		if best < 0 {
			continue
		}
		d.Outcome, d.Chosen, d.RunnerUp, d.Rule, d.Objective = Routed, best, second, r, obj
		d.Score = d.Trace[best].Score
		d.Trace[best].Status = Chosen
		if r != defaultRule {
			d.Tier = t
		}
		return true
	}
	return false
}

// pick scans candidates of type typ (and group, when byGroup) from start
// and returns the one with the lowest objective, -1 if none, and the
// runner-up. Near-ties on predicted TTFT (within a millisecond or 1%)
// keep the first in scan order: as Request.Rotation advances with every
// decision, a burst against equally idle backends spreads over them. The
// runner-up is the best of the others: the former best when a later one
// beat it, else the lowest of those that did not.
//
// This is the router's only picker: default routing is this scan too.
func (d *Decision) pick(bs []Backend, start int, typ BackendType, group string, byGroup bool, obj Objective) (best, second int) {
	best, second = -1, -1
	var bestV, secondV float64
	n := len(bs)
	for k := range n {
		i := start + k
		if i >= n {
			i -= n
		}
		v := &d.Trace[i]
		if v.Status != Candidate {
			continue
		}
		b := &bs[i]
		if typ != TypeAny && b.Type != typ {
			continue
		}
		if byGroup && b.Group != group {
			continue
		}
		s := objective(b, obj)
		v.Status, v.Score = Lost, s
		switch {
		case best < 0:
			best, bestV = i, s
		case beats(obj, s, bestV):
			second, secondV = best, bestV
			best, bestV = i, s
		case second < 0 || s < secondV:
			second, secondV = i, s
		}
	}
	return best, second
}

// beats reports whether s is better than best: by more than the near-tie
// tolerance on predicted TTFT, strictly otherwise. An unknown best (+Inf)
// is beaten by any known value; the tolerance would make it a NaN.
func beats(obj Objective, s, best float64) bool {
	if obj == PredictedTTFT && !math.IsInf(best, 1) {
		return s < best-max(1e-3, 0.01*best)
	}
	return s < best
}

// objective is b's value for o; unknown (NaN) values rank last.
func objective(b *Backend, o Objective) float64 {
	var v float64
	switch o {
	case PredictedTTFT:
		v = b.PredictedTTFT
	case QueuedPrompts:
		v = float64(b.QueuedPrompts)
	case RunningRequests:
		v = float64(b.RunningRequests)
	case InFlight:
		v = float64(b.InFlight)
	case KVCacheUsage:
		v = b.KVCacheUsage
	case Price:
		v = b.Price
	}
	if math.IsNaN(v) {
		return math.Inf(1)
	}
	return v
}

func metric(b *Backend, m Metric) float64 {
	switch m {
	case MetricQueuedPrompts:
		return float64(b.QueuedPrompts)
	case MetricRunningRequests:
		return float64(b.RunningRequests)
	case MetricInFlight:
		return float64(b.InFlight)
	case MetricKVCacheUsage:
		return b.KVCacheUsage
	case MetricPredictedTTFT:
		return b.PredictedTTFT
	case MetricCachedTokens:
		return float64(b.CachedTokens)
	}
	return math.NaN()
}

func firstDrop(fs []*Filter, b *Backend) *Filter {
	for _, f := range fs {
		if f.drops(b) {
			return f
		}
	}
	return nil
}

// drops reports whether every selector of f holds for b.
func (f *Filter) drops(b *Backend) bool {
	if f.Type != TypeAny && b.Type != f.Type {
		return false
	}
	if len(f.Names) > 0 && !slices.Contains(f.Names, b.Group) {
		return false
	}
	if len(f.Models) > 0 && !slices.Contains(f.Models, b.Model) {
		return false
	}
	if f.Pool != "" && b.Pool != f.Pool {
		return false
	}
	for _, p := range f.Predicates {
		if !p.holds(metric(b, p.Metric)) {
			return false
		}
	}
	return true
}

// holds compares; NaN (unknown) never holds.
func (p Predicate) holds(v float64) bool {
	switch p.Op {
	case GreaterThan:
		return v > p.Value
	case GreaterThanOrEqual:
		return v >= p.Value
	case LessThan:
		return v < p.Value
	case LessThanOrEqual:
		return v <= p.Value
	}
	return false
}

func (r *Rule) matches(req *Request) bool {
	if len(r.Matches) == 0 {
		return true
	}
	for i := range r.Matches {
		if r.Matches[i].matches(req) {
			return true
		}
	}
	return false
}

func (m *Match) matches(req *Request) bool {
	return (m.Model == "" || m.Model == req.Model) &&
		(m.Tenant == "" || m.Tenant == req.Tenant) &&
		(m.Tag == "" || slices.Contains(req.Tags, m.Tag))
}

// considers reports whether a backend serving model is in the rule's
// candidate set for a request for requested.
func (r *Rule) considers(model, requested string) bool {
	if len(r.Consider) == 0 {
		return model == requested
	}
	return slices.Contains(r.Consider, model)
}
