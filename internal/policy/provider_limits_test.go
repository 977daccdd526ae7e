package policy

import (
	"os"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	policyv1 "github.com/switchyard-dev/switchyard/proto/switchyard/policy/v1"
)

// TestProviderLimits: spec.maxConcurrency and spec.circuitBreaker are
// accepted in range and refused outside it, each with its field's path;
// every bad field of one provider is reported, not the first alone.
func TestProviderLimits(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		want       []string // "path: message" fragments; none: accepted
	}{
		{"unset", "", nil},
		{"in range", "  maxConcurrency: 1\n  circuitBreaker: {failures: 1, openFor: 1s}\n", nil},
		{"upper bounds", "  maxConcurrency: 1000000\n  circuitBreaker: {failures: 1000, openFor: 1h}\n", nil},
		{"breaker partly set", "  circuitBreaker: {openFor: 90s}\n", nil},
		{"empty breaker", "  circuitBreaker: {}\n", nil},
		{"zero cap", "  maxConcurrency: 0\n", []string{"spec.maxConcurrency: 0: want 1 to 1000000"}},
		{"negative cap", "  maxConcurrency: -3\n", []string{"spec.maxConcurrency: -3: want 1 to 1000000"}},
		{"cap too high", "  maxConcurrency: 1000001\n", []string{"spec.maxConcurrency: 1000001"}},
		{"zero failures", "  circuitBreaker: {failures: 0}\n", []string{"spec.circuitBreaker.failures: 0: want 1 to 1000"}},
		{"too many failures", "  circuitBreaker: {failures: 1001}\n", []string{"spec.circuitBreaker.failures: 1001"}},
		{"open too short", "  circuitBreaker: {openFor: 500ms}\n", []string{"spec.circuitBreaker.openFor: 500ms: want 1s to 1h0m0s"}},
		{"open too long", "  circuitBreaker: {openFor: 2h}\n", []string{"spec.circuitBreaker.openFor: 2h0m0s: want 1s to 1h0m0s"}},
		{"negative open", "  circuitBreaker: {openFor: -5s}\n", []string{"spec.circuitBreaker.openFor: -5s"}},
		{"not a duration", "  circuitBreaker: {openFor: soon}\n", []string{`p.yaml:8:29: InferenceProvider inference/p: spec.circuitBreaker.openFor: invalid value "soon"`}},
		{"not a number", "  maxConcurrency: many\n", []string{"spec.maxConcurrency"}},
		{"all bad", "  maxConcurrency: 0\n  circuitBreaker: {failures: -1, openFor: 0s}\n",
			[]string{"spec.maxConcurrency: 0", "spec.circuitBreaker.failures: -1", "spec.circuitBreaker.openFor: 0s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, diags := ParseYAML("p.yaml", []byte(providerYAML("  type: OpenAICompatible\n"+tc.spec)))
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			s, diags := Compile(objs)
			if len(tc.want) == 0 {
				if s == nil || diags.HasErrors() {
					t.Fatalf("refused: %s", diags.Error())
				}
				return
			}
			if s != nil {
				t.Fatalf("accepted, want %v", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(diags.Error(), w) {
					t.Errorf("diagnostics %q, want %q", diags.Error(), w)
				}
			}
		})
	}
}

// TestProviderLimitsFlow: the cap and thresholds reach the compiled
// provider and survive the snapshot's proto both ways; unset, they stay
// zero (the router's defaults) and the proto carries no breaker.
func TestProviderLimitsFlow(t *testing.T) {
	objs, diags := ParseYAML("p.yaml", []byte(providerYAML("  type: OpenAICompatible\n  maxConcurrency: 7\n  circuitBreaker: {failures: 2, openFor: 45s}\n")))
	s, d2 := Compile(objs)
	if s == nil {
		t.Fatal(diags.Error(), d2.Error())
	}
	want := Breaker{Failures: 2, OpenFor: 45 * time.Second}
	if p := s.Provider("p"); p.MaxConcurrency != 7 || p.Breaker != want {
		t.Fatalf("compiled %d %+v", p.MaxConcurrency, p.Breaker)
	}
	back, err := FromProto(ToProto(s, 1))
	if err != nil {
		t.Fatal(err)
	}
	if p := back.Provider("p"); p.MaxConcurrency != 7 || p.Breaker != want {
		t.Fatalf("round trip %d %+v", p.MaxConcurrency, p.Breaker)
	}

	objs, _ = ParseYAML("p.yaml", []byte(providerYAML("  type: OpenAICompatible\n")))
	s, _ = Compile(objs)
	pb := ToProto(s, 1)
	var pp *policyv1.Provider
	for _, p := range pb.GetProviders() {
		pp = p
	}
	if pp.GetMaxConcurrency() != 0 || pp.GetCircuitBreaker() != nil {
		t.Fatalf("unset limits in the proto: %v", pp)
	}
	if back, _ := FromProto(pb); back.Provider("p").MaxConcurrency != 0 || back.Provider("p").Breaker != (Breaker{}) {
		t.Fatalf("unset limits round trip: %+v", back.Provider("p"))
	}
}

// TestProviderLimitsCRD: the CRD schema bounds spec.maxConcurrency and
// spec.circuitBreaker as policyd does, so the API server and files mode
// refuse the same values.
func TestProviderLimitsCRD(t *testing.T) {
	data, err := os.ReadFile("../../deploy/kustomize/base/crds/switchyard.dev_inferenceproviders.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	v := any(crd)
	for _, p := range []any{"spec", "versions", 0, "schema", "openAPIV3Schema", "properties", "spec", "properties"} {
		switch k := p.(type) {
		case string:
			v = v.(map[string]any)[k]
		case int:
			v = v.([]any)[k]
		}
	}
	spec := v.(map[string]any)
	field := func(m map[string]any, name string) map[string]any {
		f, _ := m[name].(map[string]any)
		if f == nil {
			t.Fatalf("the CRD has no %s", name)
		}
		return f
	}
	mc := field(spec, "maxConcurrency")
	if mc["minimum"] != float64(1) || mc["maximum"] != float64(maxProviderConcurrency) {
		t.Errorf("maxConcurrency bounds %v..%v, want 1..%d", mc["minimum"], mc["maximum"], maxProviderConcurrency)
	}
	cb := field(field(spec, "circuitBreaker"), "properties")
	f := field(cb, "failures")
	if f["minimum"] != float64(1) || f["maximum"] != float64(maxBreakerFailures) {
		t.Errorf("failures bounds %v..%v, want 1..%d", f["minimum"], f["maximum"], maxBreakerFailures)
	}
	of := field(cb, "openFor")
	rules, _ := of["x-kubernetes-validations"].([]any)
	if len(rules) != 1 || !strings.Contains(rules[0].(map[string]any)["rule"].(string), "duration('"+minBreakerOpenFor.String()+"')") ||
		!strings.Contains(rules[0].(map[string]any)["rule"].(string), "duration('1h')") {
		t.Errorf("openFor rules %v, want 1s to 1h", rules)
	}
}
