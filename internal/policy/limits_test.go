package policy

import (
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
	"github.com/switchyard-dev/switchyard/internal/tenantlimit"
)

func limitedBackend(t *testing.T, limits *v1alpha1.TenantLimits) *Object {
	t.Helper()
	dA, _ := digestOf("sy-key-of-team-a")
	return tenantsBackend(t, v1alpha1.Tenant{Name: "team-a", KeyDigests: []string{dA}, Limits: limits})
}

// A tenant's limits reach the program, and the gateway, through the wire.
func TestTenantLimits(t *testing.T) {
	gw := limitedBackend(t, &v1alpha1.TenantLimits{
		RateLimits: v1alpha1.RateLimits{RequestsPerMinute: 60, TokensPerDay: 1_000_000},
		Models:     []v1alpha1.ModelLimits{{Model: "llama", RateLimits: v1alpha1.RateLimits{OutputTokensPerMinute: 500}}},
	})
	snap, diags := Compile([]*Object{gw})
	if diags.HasErrors() || snap == nil {
		t.Fatalf("diagnostics: %v", diags)
	}
	wire, err := FromProto(ToProto(snap, 1))
	if err != nil {
		t.Fatal(err)
	}
	want := tenantlimit.Tenant{
		Limits: tenantlimit.Limits{RequestsPerMinute: 60, TokensPerDay: 1_000_000},
		Models: map[string]tenantlimit.Limits{"llama": {OutputTokensPerMinute: 500}},
	}
	for _, s := range []*Snapshot{snap, wire} {
		got, ok := s.Program("front").TenantLimits("team-a")
		if !ok || got.Limits != want.Limits || got.Models["llama"] != want.Models["llama"] || len(got.Models) != 1 {
			t.Errorf("TenantLimits = %+v %v, want %+v", got, ok, want)
		}
		if _, ok := s.Program("front").TenantLimits("team-b"); ok {
			t.Error("limits for a tenant without any")
		}
	}
}

// Bad limits are refused with their field paths, every one at once.
func TestTenantLimitsInvalid(t *testing.T) {
	gw := limitedBackend(t, &v1alpha1.TenantLimits{
		RateLimits: v1alpha1.RateLimits{RequestsPerMinute: -1, InputTokensPerMinute: 1000, OutputTokensPerMinute: 1000, TokensPerDay: 10},
		Models: []v1alpha1.ModelLimits{
			{Model: "llama", RateLimits: v1alpha1.RateLimits{TokensPerDay: 100, TokensPerMonth: 5}},
			{Model: "llama"},
		},
	})
	_, diags := Compile([]*Object{gw})
	if !diags.HasErrors() {
		t.Fatal("bad limits accepted")
	}
	msg := diags.Error()
	for _, want := range []string{
		"spec.tenants[0].limits.requestsPerMinute: -1: want 0 (no limit) to 1099511627776",
		"spec.tenants[0].limits.models[0].tokensPerMonth: 5 is less than tokensPerDay (100)",
		`spec.tenants[0].limits.models[1].model: model "llama" listed twice`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("diagnostics lack %q:\n%s", want, msg)
		}
	}
	// The range errors come first; the budget check runs once they pass.
	gw = limitedBackend(t, &v1alpha1.TenantLimits{RateLimits: v1alpha1.RateLimits{InputTokensPerMinute: 1000, OutputTokensPerMinute: 1000, TokensPerDay: 10}})
	if _, diags := Compile([]*Object{gw}); !strings.Contains(diags.Error(), "spec.tenants[0].limits.tokensPerDay: 10 is less than one minute's input+output tokens (2000)") {
		t.Errorf("budget below a minute: %v", diags)
	}
}

// The CRD schema bounds every limit as policyd does.
func TestTenantLimitsCRD(t *testing.T) {
	data, err := os.ReadFile("../../deploy/kustomize/base/crds/switchyard.dev_gatewaybackends.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema struct {
						Properties struct {
							Spec struct {
								Properties struct {
									Tenants struct {
										Items struct {
											Properties struct {
												Limits struct {
													Properties map[string]struct {
														Minimum *float64 `json:"minimum"`
														Maximum *float64 `json:"maximum"`
													} `json:"properties"`
												} `json:"limits"`
											} `json:"properties"`
										} `json:"items"`
									} `json:"tenants"`
								} `json:"properties"`
							} `json:"spec"`
						} `json:"properties"`
					} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	props := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties.Spec.Properties.Tenants.Items.Properties.Limits.Properties
	for _, f := range []string{"requestsPerMinute", "inputTokensPerMinute", "outputTokensPerMinute", "tokensPerDay", "tokensPerMonth"} {
		p, ok := props[f]
		if !ok || p.Minimum == nil || *p.Minimum != 0 || p.Maximum == nil || *p.Maximum != tenantlimit.MaxLimit {
			t.Errorf("limits.%s in the CRD: %+v, want 0 to %d", f, p, int64(tenantlimit.MaxLimit))
		}
	}
	if _, ok := props["models"]; !ok {
		t.Error("limits.models missing from the CRD")
	}
}
