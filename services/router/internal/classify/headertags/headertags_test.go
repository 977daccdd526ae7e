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

// A tenant's own allowedTags narrow the GatewayBackend's for its requests
// only.
func TestTenantAllowedTags(t *testing.T) {
	objs, diags := policy.ParseYAML("gb.yaml", []byte(`apiVersion: switchyard.dev/v1alpha1
kind: GatewayBackend
metadata: {name: front, namespace: inference}
spec:
  auth: {mode: APIKey}
  tenants:
  - name: batch-team
    keyDigests: ["sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"]
    allowedTags: [batch]
  - name: open-team
    keyDigests: ["sha256:fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9"]
  tags:
    header: x-switchyard-tags
    allowed: [batch, pii-detected]
`))
	snap, d := policy.Compile(objs)
	if diags.HasErrors() || d.HasErrors() {
		t.Fatal(diags, d)
	}
	prog := snap.Program("front")
	wire, err := policy.FromProto(policy.ToProto(snap, 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*policy.Program{prog, wire.Program("front")} {
		classifytest.Check(t, headertags.New, []classifytest.Case{
			{Name: "a tenant with its own list", Program: p, Tenant: "batch-team", Header: []string{"pii-detected", "batch", "vip"}, Want: []string{"batch"}},
			{Name: "a tenant without: the backend's list", Program: p, Tenant: "open-team", Header: []string{"pii-detected", "batch", "vip"}, Want: []string{"pii-detected", "batch"}},
		})
	}
}
