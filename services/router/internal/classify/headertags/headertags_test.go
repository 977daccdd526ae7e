package headertags_test

import (
	"slices"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify/classifytest"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify/headertags"
)

func TestHeaderTags(t *testing.T) {
	c, err := headertags.New()
	if err != nil {
		t.Fatal(err)
	}
	prog := classifytest.Program(t)
	tests := []struct {
		name   string
		prog   *policy.Program
		tenant string
		header []string
		want   []string
	}{
		{name: "allowed tags pass in order", prog: prog, header: []string{"batch", "pii-detected"}, want: []string{"seen", "batch", "pii-detected"}},
		{name: "a tag not allowed is dropped", prog: prog, header: []string{"vip", "batch"}, want: []string{"seen", "batch"}},
		{name: "the tenant's defaults are not its business", prog: prog, tenant: "payroll", want: []string{"seen"}},
		{name: "without a GatewayBackend every tag is allowed", prog: policy.DefaultProgram(), header: []string{"vip"}, want: []string{"seen", "vip"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &classify.Request{Tenant: tt.tenant, Model: "m", HeaderTags: tt.header, Program: tt.prog}
			if got := classifytest.Run(t, c, req, "seen"); !slices.Equal(got, tt.want) {
				t.Fatalf("tags %v, want %v", got, tt.want)
			}
		})
	}
}
