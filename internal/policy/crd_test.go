package policy

import (
	"os"
	"regexp"
	"testing"
	"time"

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

// TestJWTCRDValidation: the CRD schema's pattern for spec.auth.jwt.jwksURL
// and policyd's check accept and refuse the same URLs (https, or http to
// loopback only; no credentials), and its duration pattern admits only
// what policyd can parse.
func TestJWTCRDValidation(t *testing.T) {
	data, err := os.ReadFile("../../deploy/kustomize/base/crds/switchyard.dev_gatewaybackends.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	v := any(crd)
	for _, p := range []any{"spec", "versions", 0, "schema", "openAPIV3Schema", "properties", "spec", "properties", "auth", "properties", "jwt"} {
		switch k := p.(type) {
		case string:
			v = v.(map[string]any)[k]
		case int:
			v = v.([]any)[k]
		}
	}
	jwt := v.(map[string]any)
	props := jwt["properties"].(map[string]any)
	urlRE := regexp.MustCompile(props["jwksURL"].(map[string]any)["pattern"].(string))
	for u, ok := range map[string]bool{
		"https://login.example.com/keys":              true,
		"https://login.example.com":                   true,
		"https://login.example.com:8443/a?b=c":        true,
		"http://127.0.0.1:8080/jwks.json":             true,
		"http://localhost/jwks":                       true,
		"http://[::1]:9000/jwks":                      true,
		"http://login.example.com/keys":               false,
		"http://127.0.0.1.example.com/keys":           false,
		"http://localhost.example.com/keys":           false,
		"https://user:pw@login.example.com/keys":      false,
		"https://login.example.com@evil.example/keys": false,
		"ftp://login.example.com/keys":                false,
		"https://":                                    false,
		"":                                            false,
	} {
		if got := urlRE.MatchString(u); got != ok {
			t.Errorf("CRD pattern on %q: %v, want %v", u, got, ok)
		}
		if got := checkJWKSURL(u) == nil; got != ok {
			t.Errorf("checkJWKSURL(%q) accepted: %v, want %v", u, got, ok)
		}
	}
	for _, f := range []string{"clockSkew", "refreshInterval"} {
		re := regexp.MustCompile(props[f].(map[string]any)["pattern"].(string))
		for d, ok := range map[string]bool{"30s": true, "1m30s": true, "1.5h": true, "500ms": true, "-1s": false, "1d": false, "": false, "10": false} {
			if re.MatchString(d) != ok {
				t.Errorf("%s pattern on %q: %v, want %v", f, d, !ok, ok)
			}
			if _, err := time.ParseDuration(d); ok && err != nil {
				t.Errorf("%s: the CRD admits %q, which policyd cannot parse", f, d)
			}
		}
	}
	if req := jwt["required"].([]any); len(req) != 3 {
		t.Errorf("required %v, want issuer, audiences, jwksURL", req)
	}
}
