// Package defaulttenant is the admission step of a gateway without
// authentication: every request not claimed by an earlier step belongs to
// the tenant "default".
package defaulttenant

import (
	"context"

	"github.com/switchyard-dev/switchyard/services/gateway/admission"
)

// Name is the step's name in --admission.
const Name = "default-tenant"

// Tenant is the tenant it assigns.
const Tenant = "default"

// Step assigns Tenant.
type Step struct{}

var (
	_ admission.Step    = Step{}
	_ admission.Factory = New
)

// New is the step's admission.Factory.
func New(admission.Deps) (admission.Step, error) { return Step{}, nil }

// Admit sets the tenant unless an earlier step did.
func (Step) Admit(_ context.Context, r *admission.Request) error {
	if r.Tenant == "" {
		r.Tenant = Tenant
	}
	return nil
}
