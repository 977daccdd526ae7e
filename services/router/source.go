package router

import (
	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/fleet"
	"github.com/switchyard-dev/switchyard/internal/fleet/policysource"
	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/internal/policy/watch"
	policyv1 "github.com/switchyard-dev/switchyard/proto/switchyard/policy/v1"
)

// followPolicyd is the router's fleet source with policyd: the static
// endpoints, then the snapshot's worker sets and providers; each snapshot
// also swaps the routing program (set) before the endpoint set changes.
func followPolicyd(client policyv1.PolicyServiceClient, static fleet.Catalog, backend string, log zerolog.Logger, set func(*policyState)) fleet.Source {
	return policysource.New(client, policysource.Options{
		Static: static,
		Log:    log,
		OnSnapshot: func(c watch.Current) {
			prog := c.Snapshot.Program(backend)
			if prog == nil {
				log.Warn().Str("gateway_backend", backend).Int64("revision", c.Revision).
					Msg("gateway backend not in the policy snapshot: routing without policies")
				prog = policy.DefaultProgram()
			}
			set(&policyState{revision: c.Revision, snap: c.Snapshot, prog: prog})
		},
	})
}
