package tenanttags_test

import (
	"slices"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify/classifytest"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify/tenanttags"
)

func TestTenantTags(t *testing.T) {
	c, err := tenanttags.New()
	if err != nil {
		t.Fatal(err)
	}
	prog := classifytest.Program(t)
	tests := []struct {
		name   string
		prog   *policy.Program
		tenant string
		want   []string
	}{
		{name: "the tenant's defaults", prog: prog, tenant: "payroll", want: []string{"seen", "pii-detected", "batch"}},
		{name: "a tenant without defaults", prog: prog, tenant: "team-a", want: []string{"seen"}},
		{name: "no tenant", prog: prog, want: []string{"seen"}},
		{name: "without a GatewayBackend no tenant has any", prog: policy.DefaultProgram(), tenant: "payroll", want: []string{"seen"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Header tags are the header-tags classifier's business.
			req := &classify.Request{Tenant: tt.tenant, Model: "m", HeaderTags: []string{"vip"}, Program: tt.prog}
			if got := classifytest.Run(t, c, req, "seen"); !slices.Equal(got, tt.want) {
				t.Fatalf("tags %v, want %v", got, tt.want)
			}
		})
	}
}
