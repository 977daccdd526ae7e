package router

import (
	"context"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/internal/policy/watch"
	"github.com/switchyard-dev/switchyard/services/router/internal/endpoints"
)

// policyState is what decisions follow: one policyd revision, or none.
// prog is never nil: without policyd, or when the snapshot has no program
// for the configured GatewayBackend, it is policy.DefaultProgram, and
// every decision is default routing.
type policyState struct {
	revision int64
	snap     *policy.Snapshot
	prog     *policy.Program
}

// noPolicies is the state of a router that follows no policyd (yet): the
// default program, and no providers to look up.
func noPolicies() *policyState {
	return &policyState{snap: &policy.Snapshot{}, prog: policy.DefaultProgram()}
}

// policySource follows policyd: each snapshot swaps the routing program
// and yields the endpoint set (static endpoints, then the catalog's).
type policySource struct {
	client  watch.Client
	static  []endpoints.Spec
	backend string
	log     zerolog.Logger
	set     func(*policyState)
}

func (p *policySource) Watch(ctx context.Context, update func([]endpoints.Spec)) error {
	if len(p.static) > 0 {
		update(slices.Clone(p.static))
	}
	w := watch.New(p.client, p.log, watch.Options{OnUpdate: func(c watch.Current) {
		prog := c.Snapshot.Program(p.backend)
		if prog == nil {
			p.log.Warn().Str("gateway_backend", p.backend).Int64("revision", c.Revision).
				Msg("gateway backend not in the policy snapshot: routing without policies")
			prog = policy.DefaultProgram()
		}
		p.set(&policyState{revision: c.Revision, snap: c.Snapshot, prog: prog})
		update(catalogSpecs(p.static, c.Snapshot))
	}})
	return w.Run(ctx)
}

// catalogSpecs is the static endpoints followed by the snapshot's static
// workers and providers; a static endpoint wins over a catalog one with
// the same id.
func catalogSpecs(static []endpoints.Spec, snap *policy.Snapshot) []endpoints.Spec {
	specs := slices.Clone(static)
	have := func(id string) bool {
		return slices.ContainsFunc(specs, func(s endpoints.Spec) bool { return s.ID == id })
	}
	for _, ws := range snap.WorkerSets {
		for _, w := range ws.Static {
			if have(w.ID) {
				continue
			}
			specs = append(specs, endpoints.Spec{
				ID: w.ID, URL: strings.TrimRight(w.URL, "/"), Models: []string{ws.Model},
				Kind: endpoints.KindLocal, Group: ws.Name, Pool: ws.Pool,
			})
		}
	}
	for _, p := range snap.Providers {
		id := policy.ProviderEndpointID(p.Name)
		if have(id) || len(p.Models) == 0 {
			continue
		}
		models := make([]string, 0, len(p.Models))
		for _, m := range p.Models {
			models = append(models, m.Name)
		}
		specs = append(specs, endpoints.Spec{
			ID: id, URL: strings.TrimRight(p.BaseURL, "/"), Models: models,
			Kind: endpoints.KindProvider, Group: p.Name,
		})
	}
	return specs
}

// scraped keeps the endpoints that have metrics to scrape.
func scraped(specs []endpoints.Spec) []endpoints.Spec {
	return slices.DeleteFunc(slices.Clone(specs), func(s endpoints.Spec) bool { return s.Kind == endpoints.KindProvider })
}
