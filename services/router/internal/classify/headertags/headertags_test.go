package headertags_test

import (
	"testing"

	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify/classifytest"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify/headertags"
)

func TestHeaderTags(t *testing.T) {
	prog := classifytest.Program(t)
	classifytest.Check(t, headertags.New, []classifytest.Case{
		{Name: "allowed tags pass in order", Program: prog, Header: []string{"batch", "pii-detected"}, Want: []string{"batch", "pii-detected"}},
		{Name: "a tag not allowed is dropped", Program: prog, Header: []string{"vip", "batch"}, Want: []string{"batch"}},
		{Name: "the tenant's defaults are not its business", Program: prog, Tenant: "payroll"},
		{Name: "without a GatewayBackend every tag is allowed", Program: policy.DefaultProgram(), Header: []string{"vip"}, Want: []string{"vip"}},
	})
}
