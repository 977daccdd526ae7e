package load

import (
	"slices"
	"strconv"
	"time"

	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/services/router/internal/endpoints"
)

// Backend is one (endpoint, model) pair a decision may pick: the
// endpoint's state and the request's predicted TTFT and score there.
type Backend struct {
	EndpointID string
	URL        string
	Kind       string
	Group      string
	Pool       string
	// Type is the API the endpoint speaks (endpoints.Spec.Type).
	Type string
	// Model is the public model name the endpoint would serve the request
	// as.
	Model string
	// Healthy is the endpoint's last scrape; Excluded, the request's
	// exclusion (a gateway retrying elsewhere). Either makes the backend
	// unavailable: it is not estimated and never picked.
	Healthy  bool
	Excluded bool
	// Full: the endpoint is at its concurrency cap, MaxInFlight requests
	// in flight across the routers (a provider's spec.maxConcurrency); it
	// is unavailable, as if saturated, until one completes.
	Full        bool
	MaxInFlight int
	Load        Load
	// KVCacheUsage is the last scraped vllm:kv_cache_usage_perc, 0..1.
	KVCacheUsage float64
	// KVCapacity is the endpoint's KV cache in tokens (scraped
	// vllm:cache_config_info), 0 when unknown.
	KVCapacity int64
	// Estimate and CachedTokens are set when the backend is available.
	Estimate     Estimate
	CachedTokens int64
	// LastError and LastScrape are the endpoint's as Endpoints lists them.
	LastError  string
	LastScrape time.Time
}

// Available reports whether the backend may take the request.
func (b *Backend) Available() bool { return b.Healthy && !b.Excluded && !b.Full }

// Unavailable says why the backend may not take the request, "" when it
// may.
func (b *Backend) Unavailable() string {
	switch {
	case b.Excluded:
		return "excluded by request"
	case !b.Healthy:
		return "unhealthy: " + b.LastError
	case b.Full:
		return "at its concurrency cap: " + strconv.FormatInt(b.Load.InFlight, 10) + " in flight across the routers, maxConcurrency " + strconv.Itoa(b.MaxInFlight)
	}
	return ""
}

// Policy is the backend as a policy program sees it. Its PredictedTTFT is
// the score (the predicted TTFT plus the recompute and pressure charges):
// what default routing minimises is what the KV-aware model ranks by.
// Price is the provider's, which the table does not know: 0 here.
func (b *Backend) Policy() policy.Backend {
	pb := policy.Backend{
		ID: b.EndpointID, Model: b.Model, Type: policy.TypeLocal, Group: b.Group, Pool: b.Pool,
		// The instant view, not the scrape alone: a burst between two
		// scrapes is counted as it is routed (Load.WaitingNow).
		QueuedPrompts:   b.Load.WaitingNow(),
		RunningRequests: b.Load.Running,
		InFlight:        b.Load.InFlight,
		KVCacheUsage:    b.KVCacheUsage,
		PredictedTTFT:   b.Estimate.Score,
		CachedTokens:    b.CachedTokens,
	}
	if b.Kind == endpoints.KindProvider {
		pb.Type = policy.TypeProvider
	}
	// Constant reasons: the program only needs to know that it may not
	// pick the backend, and building the unhealthy reason would allocate
	// on every decision. Unavailable has the whole reason for Explain.
	switch {
	case b.Excluded:
		pb.Unavailable = "excluded by request"
	case !b.Healthy:
		pb.Unavailable = "unhealthy"
	case b.Full:
		pb.Unavailable = "at concurrency cap"
	}
	return pb
}

// Picker chooses the backend that takes a request: the router's policy
// program. rotation advances with every committed decision, for near-ties
// to spread over equal backends. Pick returns an index into rows, of an
// available backend, or -1 for none.
type Picker interface {
	Pick(rows []Backend, rotation uint64) int
}

// A Committer is a Picker told, still under the table's lock, which row
// a committed decision took: what it records then (the router's
// speculative cache entries) is seen by every decision after it.
type Committer interface {
	Committed(row *Backend, now time.Time)
}

// Decide scores the request on one Backend per endpoint serving each of
// models (in models order, then id order; req.Model is not used: each
// row is estimated for its own model, and the recompute charge is against
// the best cache among the same model's available endpoints), appending
// them to dst, and asks p which one takes it. With commit, the chosen
// endpoint then holds req.ID in flight, with the estimate and cached
// tokens it was chosen on, and the rotation advances.
//
// All of it happens under the table's lock, so that decisions made
// concurrently see each other as if made one after another: two requests
// arriving together do not both take the endpoint that was idle. Decide
// returns the rows and the chosen index, -1 when p chose none.
func (t *Table) Decide(req Request, models []string, now time.Time, dst []Backend, p Picker, commit bool) ([]Backend, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	prompt := max(0, req.PromptTokens)
	for _, model := range models {
		cands := t.byModel[model]
		var maxCached int64
		for _, ep := range cands {
			if ep.usable(now) && !slices.Contains(req.Exclude, ep.spec.ID) {
				maxCached = max(maxCached, req.cached(ep.spec.ID))
			}
		}
		// A prompt cached nowhere costs the same prefill everywhere: the
		// cheapest moment to probe an endpoint that learned nothing lately.
		var probe *endpoint
		if maxCached == 0 {
			for _, ep := range cands {
				if !slices.Contains(req.Exclude, ep.spec.ID) && t.probeDue(ep, now) &&
					(probe == nil || ep.probeAt.Before(probe.probeAt)) {
					probe = ep
				}
			}
		}
		for _, ep := range cands {
			dst = append(dst, Backend{}) // filled in place: a row is a few hundred bytes
			b := &dst[len(dst)-1]
			b.EndpointID, b.URL, b.Kind, b.Group, b.Pool, b.Type = ep.spec.ID, ep.spec.URL, ep.spec.Kind, ep.spec.Group, ep.spec.Pool, ep.spec.Type
			b.Model, b.Healthy, b.Excluded = model, ep.usable(now), slices.Contains(req.Exclude, ep.spec.ID)
			b.Full, b.MaxInFlight = ep.full(), ep.spec.MaxInFlight
			b.KVCacheUsage, b.LastError, b.LastScrape = ep.kvUsage, ep.lastErr, ep.lastScrape
			if !b.Healthy {
				b.LastError = ep.unusable(now)
			}
			b.KVCapacity = ep.kvCapacity()
			if b.Available() {
				b.CachedTokens = req.cached(ep.spec.ID)
				if ep == probe {
					m := t.fleetOnly(ep, model)
					b.Estimate = t.estimateWith(ep, &m, now, &req, prompt, 0, 0)
					b.Estimate.Probe, b.Estimate.Score = true, 0
				} else {
					b.Estimate = t.estimate(ep, model, now, &req, prompt, b.CachedTokens, maxCached-b.CachedTokens)
				}
			}
			b.Load = ep.load() // after the estimate settled what has started
		}
	}
	i := p.Pick(dst, t.rotation)
	if i < 0 || !commit {
		return dst, i
	}
	b := &dst[i]
	if ep := t.byID[b.EndpointID]; ep != nil {
		t.rotation++
		m := t.predictor(ep, b.Model, now)
		if b.Estimate.Probe {
			m = t.fleetOnly(ep, b.Model)
			ep.probeAt = now
			ep.probes++
		}
		ep.record(req.ID, b.Model, now, uncachedWith(&m, prompt, b.CachedTokens), req.OutputTokens, b.Estimate)
		ep.noteStep(b.Estimate.step)
		if e := ep.entries[req.ID]; e != nil && req.PromptExact && b.Model == req.Model {
			e.prompt = prompt
		}
		if ep.spec.Kind == endpoints.KindProvider {
			ep.brk.picked(now, ep.brkCfg)
		}
		if c, ok := p.(Committer); ok {
			c.Committed(b, now)
		}
	}
	return dst, i
}
