package load

import (
	"slices"
	"time"
)

// Backend is one (endpoint, model) pair a policy decision may pick: the
// endpoint's load and the request's predicted TTFT and score there, as
// Route would compute them.
type Backend struct {
	EndpointID string
	URL        string
	Kind       string
	Group      string
	Pool       string
	// Model is the public model name the endpoint would serve the request
	// as.
	Model string
	// Unavailable is why the endpoint cannot take the request (unhealthy,
	// excluded by a retry); empty when it can.
	Unavailable  string
	Load         Load
	KVCacheUsage float64
	Estimate     Estimate
	CachedTokens int64
	// LastError and LastScrape are the endpoint's as Endpoints lists them,
	// for Explain.
	LastError  string
	LastScrape time.Time
}

// Backends appends to dst one Backend per endpoint serving each of
// models, in models order and then id order, with the estimate Route
// would make for req (req.Model is ignored: each row is estimated for its
// own model, and the recompute charge is against the best cache among the
// same model's eligible endpoints). It also returns the rotation the next
// Commit advances, so near-ties spread as Route spreads them.
func (t *Table) Backends(req Request, models []string, now time.Time, dst []Backend) ([]Backend, uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	prompt := max(0, req.PromptTokens)
	for _, model := range models {
		cands := t.byModel[model]
		var maxCached int64
		for _, ep := range cands {
			if ep.healthy && !slices.Contains(req.Exclude, ep.spec.ID) {
				maxCached = max(maxCached, req.cached(ep.spec.ID))
			}
		}
		for _, ep := range cands {
			b := Backend{
				EndpointID: ep.spec.ID, URL: ep.spec.URL, Kind: ep.spec.Kind, Group: ep.spec.Group, Pool: ep.spec.Pool,
				Model: model, KVCacheUsage: ep.kvUsage, LastError: ep.lastErr, LastScrape: ep.lastScrape,
			}
			switch {
			case slices.Contains(req.Exclude, ep.spec.ID):
				b.Unavailable = "excluded by request"
			case !ep.healthy:
				b.Unavailable = "unhealthy: " + ep.lastErr
			}
			b.Load = ep.load()
			if b.Unavailable == "" {
				b.CachedTokens = req.cached(ep.spec.ID)
				b.Estimate = t.estimate(ep, model, now, prompt, b.CachedTokens, maxCached-b.CachedTokens)
			}
			dst = append(dst, b)
		}
	}
	return dst, t.rotation
}

// Commit records a decision made over Backends: request req.ID for model
// is in flight on endpointID, with the estimate and cached tokens the
// decision saw. It advances the rotation and reports whether the endpoint
// still exists.
func (t *Table) Commit(req Request, endpointID, model string, est Estimate, cached int64, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	ep := t.byID[endpointID]
	if ep == nil {
		return false
	}
	t.rotation++
	m := t.predictor(ep, model)
	ep.record(req.ID, model, now, uncachedWith(&m, max(0, req.PromptTokens), cached), est)
	return true
}

// Rotation is the current near-tie rotation counter.
func (t *Table) Rotation() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rotation
}
