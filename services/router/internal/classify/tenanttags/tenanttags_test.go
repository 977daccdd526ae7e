package tenanttags_test

import (
	"testing"

	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify/classifytest"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify/tenanttags"
)

func TestTenantTags(t *testing.T) {
	prog := classifytest.Program(t)
	// Header tags are the header-tags classifier's business: never here.
	header := []string{"vip", "batch"}
	classifytest.Check(t, tenanttags.New, []classifytest.Case{
		{Name: "the tenant's defaults", Program: prog, Tenant: "payroll", Header: header, Want: []string{"pii-detected", "batch"}},
		{Name: "a tenant without defaults", Program: prog, Tenant: "team-a", Header: header},
		{Name: "no tenant", Program: prog, Header: header},
		{Name: "without a GatewayBackend no tenant has any", Program: policy.DefaultProgram(), Tenant: "payroll", Header: header},
	})
}
