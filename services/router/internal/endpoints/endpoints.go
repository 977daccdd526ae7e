// Package endpoints is the router's flat view of a fleet catalog
// (internal/fleet): every worker and every provider as one routable
// endpoint with an id, a URL and the models it serves. The load table and
// the scraper keep one entry per endpoint; the workers themselves are
// described, parsed and validated by the fleet package.
package endpoints

import (
	"time"

	"github.com/switchyard-dev/switchyard/internal/fleet"
	"github.com/switchyard-dev/switchyard/internal/upstream"
)

// Endpoint kinds: KindLocal is a vLLM worker, scraped for its load;
// KindProvider an external provider, never scraped.
const (
	KindLocal    = "local"
	KindProvider = "provider"
)

// Spec is one routable endpoint.
type Spec struct {
	// ID is the worker's id or the provider's endpoint id
	// ("provider/<name>"): metrics labels, NATS payloads, retry
	// exclusions.
	ID string
	// URL is the base URL without a trailing slash.
	URL string
	// MetricsPath is where a worker's metrics are scraped, on URL.
	MetricsPath string
	// Models the endpoint serves. Empty means: discover them from the
	// worker's /v1/models.
	Models []string
	// Group is the InferenceWorkerSet or InferenceProvider the endpoint
	// belongs to, and Pool its InferencePool.
	Group string
	Pool  string
	// Type is the API the endpoint speaks: upstream.TypeWorker for
	// workers, the provider's type for providers.
	Type string
	// Kind is KindLocal or KindProvider.
	Kind string
	// MaxInFlight caps a provider's requests in flight, counted across
	// the routers; 0: no cap.
	MaxInFlight int
	// BreakerFailures and BreakerOpenFor are a provider's own circuit
	// breaker thresholds; 0: the router's (--breaker-failures,
	// --breaker-open-for).
	BreakerFailures int
	BreakerOpenFor  time.Duration
}

// FromCatalog lists the catalog's routable endpoints: every worker with a
// URL (a worker given to the router without one is refused by its
// configuration; one from policyd always has one), then every provider.
func FromCatalog(c fleet.Catalog) []Spec {
	specs := make([]Spec, 0, c.Len())
	for i := range c.Workers {
		w := &c.Workers[i]
		if w.URL == "" {
			continue
		}
		specs = append(specs, Spec{
			ID: w.ID, URL: w.URL, MetricsPath: w.MetricsPath, Models: w.Models,
			Group: w.Group, Pool: w.Pool, Kind: KindLocal, Type: upstream.TypeWorker,
		})
	}
	for i := range c.Providers {
		p := &c.Providers[i]
		specs = append(specs, Spec{ID: p.ID(), URL: p.BaseURL, Models: p.Models, Group: p.Name, Kind: KindProvider, Type: p.Type,
			MaxInFlight: p.MaxConcurrency, BreakerFailures: p.BreakerFailures, BreakerOpenFor: p.BreakerOpenFor})
	}
	return specs
}

// Scraped keeps the endpoints that have metrics to scrape: the workers.
func Scraped(specs []Spec) []Spec {
	out := make([]Spec, 0, len(specs))
	for _, s := range specs {
		if s.Kind != KindProvider {
			out = append(out, s)
		}
	}
	return out
}
