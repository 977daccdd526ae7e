package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
)

func digestOf(key string) (string, [sha256.Size]byte) {
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:]), sum
}

// A GatewayBackend with API keys compiles to a program that names each
// key's tenant, inline digests and a Secret's alike, and keeps them
// through the wire form the gateway receives.
func TestAPIKeyTenants(t *testing.T) {
	dA, sumA := digestOf("sy-key-of-team-a")
	dB, sumB := digestOf("sy-key-of-team-b")
	_, sumX := digestOf("sy-unknown")
	gw, err := ObjectOf(&v1alpha1.GatewayBackend{
		Spec: v1alpha1.GatewayBackendSpec{
			Auth: &v1alpha1.AuthSpec{Mode: v1alpha1.AuthAPIKey},
			Tenants: []v1alpha1.Tenant{
				{Name: "team-a", KeyDigests: []string{dA}},
				{Name: "team-b", KeysSecret: "team-b-keys"},
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	gw.Namespace, gw.Name = "inference", "front"
	gw.Backend.Namespace, gw.Backend.Name = "inference", "front"
	gw.KeySecrets = map[string]KeySecret{"team-b-keys": {Digests: map[string]string{"k1": dB}}}
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
		if p.AuthMode != string(v1alpha1.AuthAPIKey) || p.AuthKeys() != 2 {
			t.Fatalf("program: mode %s, %d keys", p.AuthMode, p.AuthKeys())
		}
		for sum, want := range map[[sha256.Size]byte]string{sumA: "team-a", sumB: "team-b", sumX: ""} {
			if got, ok := p.KeyTenant(sum); got != want || ok != (want != "") {
				t.Errorf("KeyTenant = %q %v, want %q", got, ok, want)
			}
		}
	}
}

// A Secret the kubernetes source could not read refuses the backend with
// the reason, never an empty key list silently served.
func TestAPIKeySecretUnreadable(t *testing.T) {
	gw, _ := ObjectOf(&v1alpha1.GatewayBackend{Spec: v1alpha1.GatewayBackendSpec{
		Auth:    &v1alpha1.AuthSpec{Mode: v1alpha1.AuthAPIKey},
		Tenants: []v1alpha1.Tenant{{Name: "team-b", KeysSecret: "team-b-keys"}},
	}})
	gw.Namespace, gw.Name = "inference", "front"
	gw.KeySecrets = map[string]KeySecret{"team-b-keys": {Err: "not found"}}
	_, diags := Compile([]*Object{gw})
	want := `GatewayBackend inference/front: spec.tenants[0].keysSecret: Secret inference/team-b-keys: not found`
	var errs []string
	for _, d := range diags {
		if d.Severity == SeverityError {
			errs = append(errs, d.String())
		}
	}
	if len(errs) != 1 || errs[0] != want {
		t.Fatalf("diagnostics %v, want %s", diags, want)
	}
}
