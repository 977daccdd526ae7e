package router

import (
	"github.com/switchyard-dev/switchyard/internal/policy"
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
