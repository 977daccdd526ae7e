// Package fleet is the one description of the workers and providers
// Switchyard routes to and reads KV events from. The router and the
// kvtracker both consume a Catalog (a set of Workers and Providers) from a
// Source, so a worker is described, named and validated once:
//
//   - Static: the catalog given by flags. Both services read them with the
//     same two parsers: ParseShorthand (the router's --endpoints and the
//     kvtracker's --workers) and ParseYAML (--endpoints-file and
//     --workers-file).
//   - policysource (a subpackage): policyd's snapshot, followed through
//     policy/watch, whose InferenceWorkerSets (static addresses, or the
//     ready endpoints of a Service in Kubernetes) and InferenceProviders
//     become the catalog, with the static catalog in front of it.
//
// A Source calls update with the whole catalog each time it changes; each
// consumer takes what it needs from it: the router every worker with a URL
// and every provider (it scrapes the workers and routes to all), the
// kvtracker every worker with a KV event endpoint (it leases and ingests
// them). A worker added to an InferenceWorkerSet is therefore routed to and
// ingested, and one removed is dropped by both.
//
// # The id rule
//
// A worker id is 1-128 bytes of letters, digits and . _ - / : (ValidateID).
// It names the worker in the router's decisions and metrics, in the KV
// deltas and Redis keys, and in the kvtracker's lease, so it must be unique
// across the catalog, provider ids ("provider/<name>") included; and
// within a pool two ids may not differ only by '.' against '_', because
// NATS subjects fold '.' into '_' and the two workers' deltas would share a
// subject. A pool name follows the same rule without ':', which separates
// pool and id in Redis keys (ValidatePool). The CRD's pattern for
// InferenceWorkerSet static ids and policyd's validation use this rule too.
package fleet

import (
	"context"
	"slices"
	"time"
)

// Defaults of fields a worker leaves out.
const (
	// DefaultPool is the pool of a worker that names none.
	DefaultPool = "default"
	// DefaultBlockSize is vLLM's default block size on CUDA.
	DefaultBlockSize = 16
	// DefaultMetricsPath is where vLLM serves its Prometheus metrics.
	DefaultMetricsPath = "/metrics"
)

// Worker is one vLLM worker (or a simulator standing in for one). The
// router needs its URL, the kvtracker its KV event endpoint; a worker
// given by flags to one of them may lack the other's.
type Worker struct {
	// ID names the worker everywhere; see the package's id rule.
	ID string
	// Pool is its InferencePool; DefaultPool when empty.
	Pool string
	// Group is the InferenceWorkerSet it belongs to; empty for flags.
	Group string
	// Models are the names it serves. Empty: the router discovers them
	// from the worker's /v1/models; the kvtracker takes the first as the
	// model its deltas carry.
	Models []string
	// URL is the base URL of its OpenAI-compatible API, without a trailing
	// slash (http://10.0.0.5:8000). Empty: not routed to.
	URL string
	// MetricsPath is where the router scrapes its metrics, on URL.
	MetricsPath string
	// KVEndpoint is its KV event PUB socket, which the kvtracker dials
	// (tcp://10.0.0.5:5557). Empty: the worker publishes no KV events, or
	// connects to a kvtracker's --bind socket and is told apart by Topic.
	KVEndpoint string
	// ReplayEndpoint is its replay ROUTER socket; empty: a gap in its
	// events cannot be replayed and resets its state instead.
	ReplayEndpoint string
	// Topic is its kv-events topic (a prefix filter when dialling, its
	// identity on a bound socket).
	Topic string
	// BlockSize is its --block-size in tokens.
	BlockSize int
	// GPUBlocks is its KV cache size in blocks when known (0: unknown);
	// it turns cached blocks into a usage fraction in KV summaries.
	GPUBlocks int
}

// Model is the first model the worker serves, "" when none is listed.
func (w Worker) Model() string {
	if len(w.Models) == 0 {
		return ""
	}
	return w.Models[0]
}

// Key is the worker's identity across the system: pool and id.
func (w Worker) Key() string { return w.Pool + "/" + w.ID }

// Equal reports whether two workers are described alike.
func (w Worker) Equal(o Worker) bool {
	return w.ID == o.ID && w.Pool == o.Pool && w.Group == o.Group && slices.Equal(w.Models, o.Models) &&
		w.URL == o.URL && w.MetricsPath == o.MetricsPath && w.KVEndpoint == o.KVEndpoint &&
		w.ReplayEndpoint == o.ReplayEndpoint && w.Topic == o.Topic && w.BlockSize == o.BlockSize && w.GPUBlocks == o.GPUBlocks
}

// Provider is an external OpenAI-compatible endpoint (an
// InferenceProvider). Only the router routes to providers; their
// credentials and model-name mapping stay in policyd's snapshot, which the
// gateway and the router's policies read.
type Provider struct {
	// Name is the InferenceProvider's name; ID derives the endpoint id.
	Name string
	// Type is the API it speaks (InferenceProvider.spec.type), which picks
	// the gateway's upstream adapter.
	Type string
	// BaseURL is its API base URL, without a trailing slash.
	BaseURL string
	// Models are the public model names it serves.
	Models []string
	// MaxConcurrency is the most requests in flight to it across the
	// routers (InferenceProvider.spec.maxConcurrency); 0: no cap.
	MaxConcurrency int
	// BreakerFailures and BreakerOpenFor are its circuit breaker's
	// thresholds (spec.circuitBreaker); 0: the router's defaults.
	BreakerFailures int
	BreakerOpenFor  time.Duration
}

// ID is the provider's endpoint id in decisions and metrics.
func (p Provider) ID() string { return ProviderID(p.Name) }

// ProviderID is the endpoint id of the provider named name.
func ProviderID(name string) string { return "provider/" + name }

// Catalog is a set of workers and providers, in a stable order.
type Catalog struct {
	Workers   []Worker
	Providers []Provider
}

// Len is how many workers and providers the catalog holds.
func (c Catalog) Len() int { return len(c.Workers) + len(c.Providers) }

// Clone is a deep copy, so a consumer may keep it while its source builds
// the next one.
func (c Catalog) Clone() Catalog {
	out := Catalog{Workers: slices.Clone(c.Workers), Providers: slices.Clone(c.Providers)}
	for i := range out.Workers {
		out.Workers[i].Models = slices.Clone(out.Workers[i].Models)
	}
	for i := range out.Providers {
		out.Providers[i].Models = slices.Clone(out.Providers[i].Models)
	}
	return out
}

// Source supplies the catalog. Watch calls update with the whole catalog
// each time it changes, from one goroutine, until ctx ends; then it
// returns nil. The consumer owns what update gets.
type Source interface {
	Watch(ctx context.Context, update func(Catalog)) error
}

// Static is a Source whose catalog never changes (the flags').
type Static Catalog

// Watch reports the catalog once and waits for ctx to end.
func (s Static) Watch(ctx context.Context, update func(Catalog)) error {
	update(Catalog(s).Clone())
	<-ctx.Done()
	return nil
}
