package policy

import (
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
)

// tenantsBackend is GatewayBackend inference/front asking for API keys,
// with tenants.
func tenantsBackend(t *testing.T, tenants ...v1alpha1.Tenant) *Object {
	t.Helper()
	gw, err := ObjectOf(&v1alpha1.GatewayBackend{
		Spec: v1alpha1.GatewayBackendSpec{Auth: &v1alpha1.AuthSpec{Mode: v1alpha1.AuthAPIKey}, Tenants: tenants},
	})
	if err != nil {
		t.Fatal(err)
	}
	gw.Namespace, gw.Name = "inference", "front"
	gw.Backend.Namespace, gw.Backend.Name = "inference", "front"
	return gw
}

// A tenant's weight and classes reach the gateway through the wire, with
// defaults for what the entry leaves out.
func TestTenantFlow(t *testing.T) {
	dA, _ := digestOf("sy-key-of-team-a")
	dB, _ := digestOf("sy-key-of-team-b")
	gw := tenantsBackend(t,
		v1alpha1.Tenant{Name: "team-a", KeyDigests: []string{dA}, Weight: 3, Priority: v1alpha1.PrioritySheddable, MaxPriority: v1alpha1.PriorityCritical},
		v1alpha1.Tenant{Name: "team-b", KeyDigests: []string{dB}, Priority: v1alpha1.PriorityCritical})
	snap, diags := Compile([]*Object{gw})
	if diags.HasErrors() || snap == nil {
		t.Fatalf("diagnostics: %v", diags)
	}
	wire, err := FromProto(ToProto(snap, 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Snapshot{snap, wire} {
		p := s.Program("front")
		if got, want := p.TenantFlow("team-a"), (TenantFlow{Weight: 3, Priority: v1alpha1.PrioritySheddable, MaxPriority: v1alpha1.PriorityCritical}); got != want {
			t.Errorf("team-a: %+v, want %+v", got, want)
		}
		if got, want := p.TenantFlow("team-b"), (TenantFlow{Weight: 1, Priority: v1alpha1.PriorityCritical, MaxPriority: v1alpha1.PriorityCritical}); got != want {
			t.Errorf("team-b (max defaults to its priority): %+v, want %+v", got, want)
		}
		if got := p.TenantFlow("nobody"); got != DefaultTenantFlow {
			t.Errorf("unlisted tenant: %+v, want the default", got)
		}
	}
	if got := (*Program)(nil).TenantFlow("x"); got != DefaultTenantFlow {
		t.Errorf("nil program: %+v", got)
	}
}

// Bad flow settings are refused with their field paths.
func TestTenantFlowInvalid(t *testing.T) {
	dA, _ := digestOf("sy-key-of-team-a")
	gw := tenantsBackend(t,
		v1alpha1.Tenant{Name: "team-a", KeyDigests: []string{dA}, Weight: 1001, Priority: "Urgent", MaxPriority: v1alpha1.PriorityStandard},
		v1alpha1.Tenant{Name: "team-b", Priority: v1alpha1.PriorityCritical, MaxPriority: v1alpha1.PrioritySheddable})
	_, diags := Compile([]*Object{gw})
	if !diags.HasErrors() {
		t.Fatal("bad flow settings accepted")
	}
	msg := diags.Error()
	for _, want := range []string{
		"spec.tenants[0].weight: 1001: want 1 to 1000",
		`spec.tenants[0].priority: "Urgent": want Critical, Standard or Sheddable`,
		"spec.tenants[1].maxPriority: Sheddable is below the tenant's priority Critical",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("diagnostics lack %q:\n%s", want, msg)
		}
	}
}
