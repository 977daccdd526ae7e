// Package policysource is the fleet.Source that follows policyd. Every
// snapshot policyd serves (through policy/watch, which reconnects and keeps
// the last snapshot while policyd is away) becomes a catalog: the workers
// of every InferenceWorkerSet (its static addresses, or in Kubernetes the
// ready endpoints of its Service, which policyd resolves into the same
// list) and every InferenceProvider that serves a model, behind the static
// catalog given by flags.
//
// The router and the kvtracker both follow policyd through it, so a worker
// that appears in a worker set is routed to and has its KV events
// ingested, and one that leaves it is dropped by both, with the same id.
//
// An entry the id rule refuses (policyd validates with the same rule, so
// this takes a policyd of another version, or one that clashes with the
// flags) is left out of the catalog and logged; the rest is served.
package policysource

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/fleet"
	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/internal/policy/watch"
)

// Options configure a Source; the zero value follows policyd alone.
type Options struct {
	// Static is the flags' catalog (checked, as fleet.NewCatalog returns
	// it). It is reported before the first snapshot arrives, and its
	// entries win over the snapshot's with the same id.
	Static fleet.Catalog
	// OnSnapshot, when set, is called with every new snapshot before the
	// catalog it yields is reported: the router swaps its policies there,
	// from the same stream.
	OnSnapshot func(watch.Current)
	// Watch tunes the reconnection backoff (its OnUpdate is not used).
	Watch watch.Options
	Log   zerolog.Logger
}

// Source follows policyd's snapshots as catalogs.
type Source struct {
	client watch.Client
	opts   Options
}

// New returns a Source reading from client (a policyv1.PolicyServiceClient).
func New(client watch.Client, opts Options) *Source {
	return &Source{client: client, opts: opts}
}

// Watch reports the static catalog (when it has entries), then the catalog
// of every new snapshot, until ctx ends.
func (s *Source) Watch(ctx context.Context, update func(fleet.Catalog)) error {
	if s.opts.Static.Len() > 0 {
		update(s.opts.Static.Clone())
	}
	log := s.opts.Log.With().Str("component", "fleet-source").Logger()
	wo := s.opts.Watch
	wo.OnUpdate = func(c watch.Current) {
		if s.opts.OnSnapshot != nil {
			s.opts.OnSnapshot(c)
		}
		cat, dropped := fleet.Join(s.opts.Static, Catalog(c.Snapshot))
		for _, err := range dropped {
			log.Warn().Err(err).Int64("revision", c.Revision).Msg("policyd's catalog entry left out")
		}
		update(cat)
	}
	return watch.New(s.client, s.opts.Log, wo).Run(ctx)
}

// Catalog is the fleet a snapshot describes, unchecked: each worker set's
// workers in order, then each provider that serves a model.
func Catalog(snap *policy.Snapshot) fleet.Catalog {
	var c fleet.Catalog
	for _, ws := range snap.WorkerSets {
		for _, st := range ws.Static {
			c.Workers = append(c.Workers, fleet.Worker{
				ID:             st.ID,
				Pool:           ws.Pool,
				Group:          ws.Name,
				Models:         []string{ws.Model},
				URL:            st.URL,
				MetricsPath:    ws.MetricsPath,
				KVEndpoint:     st.KVEventsEndpoint,
				ReplayEndpoint: st.KVReplayEndpoint,
				Topic:          ws.KVTopic,
				BlockSize:      int(ws.BlockSize),
			})
		}
	}
	for _, p := range snap.Providers {
		if len(p.Models) == 0 {
			continue
		}
		models := make([]string, 0, len(p.Models))
		for _, m := range p.Models {
			models = append(models, m.Name)
		}
		c.Providers = append(c.Providers, fleet.Provider{Name: p.Name, Type: p.Type, BaseURL: p.BaseURL, Models: models,
			MaxConcurrency: int(p.MaxConcurrency), BreakerFailures: int(p.Breaker.Failures), BreakerOpenFor: p.Breaker.OpenFor})
	}
	return c
}
