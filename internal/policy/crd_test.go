package policy

import (
	"os"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestTenantCRDValidation: the API server (the CRD schema) and policyd
// (files mode, yardctl validate) accept the same tenant names and key
// digests: the schema's patterns are the validator's, and both accept and
// refuse the same samples.
func TestTenantCRDValidation(t *testing.T) {
	data, err := os.ReadFile("../../deploy/kustomize/base/crds/switchyard.dev_gatewaybackends.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	at := func(v any, path ...any) any {
		for _, p := range path {
			switch k := p.(type) {
			case string:
				v = v.(map[string]any)[k]
			case int:
				v = v.([]any)[k]
			}
		}
		return v
	}
	tenant := at(crd, "spec", "versions", 0, "schema", "openAPIV3Schema", "properties", "spec", "properties", "tenants", "items", "properties")
	for _, c := range []struct {
		what, schema, ours string
	}{
		{"tenant name", at(tenant, "name", "pattern").(string), tenantRE.String()},
		{"key digest", at(tenant, "keyDigests", "items", "pattern").(string), digestRE.String()},
	} {
		if c.schema != c.ours {
			t.Errorf("%s: the CRD's pattern %q, policyd's %q", c.what, c.schema, c.ours)
		}
	}
	if got := at(tenant, "name", "maxLength"); got != float64(63) {
		t.Errorf("tenant name maxLength %v, want 63 (policyd's)", got)
	}
	for name, ok := range map[string]bool{"team-a": true, "a": true, "ml.research_2": true, "Team-A": false, "-a": false, "a-": false, "": false, "a b": false} {
		if tenantRE.MatchString(name) != ok {
			t.Errorf("tenant name %q accepted: %v, want %v", name, !ok, ok)
		}
	}
	for d, ok := range map[string]bool{
		"sha256:" + "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae": true,
		"sha256:" + "2C26B46B68FFC68FF99B453C1D30413413422D706483BFA0F98A5E886266E7AE": false,
		"2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae":             false,
		"sha256:2c26": false,
		"sy-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA": false,
	} {
		if digestRE.MatchString(d) != ok {
			t.Errorf("digest %q accepted: %v, want %v", d, !ok, ok)
		}
	}
}
