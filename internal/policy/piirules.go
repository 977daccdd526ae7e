package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
	"github.com/switchyard-dev/switchyard/internal/piirules"
	policyv1 "github.com/switchyard-dev/switchyard/proto/switchyard/policy/v1"
)

// Tags of personal data: the umbrella tag the shipped PII guard
// (deploy/examples/policies/pii-stays-local.yaml) reads, and the prefix of
// each kind's (pii:card, pii:<an operator's kind>).
const (
	TagPII       = "pii-detected"
	TagPIIPrefix = "pii:"
)

// PIIRules are a GatewayBackend's spec.pii, compiled: the router's
// pii-rules classifier scans prompts with Set.
type PIIRules struct {
	Spec piirules.Spec
	Set  *piirules.Set
}

// Reads reports whether the program reads a tag the rules may give a
// request: pii-detected or pii:<one of their kinds>.
func (r *PIIRules) Reads(p *Program) bool {
	return p.ReadsTag(func(tag string) bool {
		if tag == TagPII {
			return true
		}
		kind, ok := strings.CutPrefix(tag, TagPIIPrefix)
		return ok && slices.Contains(r.Set.Kinds(), kind)
	})
}

func piiSpec(in *v1alpha1.PIISpec) piirules.Spec {
	var s piirules.Spec
	for _, p := range in.Patterns {
		s.Patterns = append(s.Patterns, piirules.Pattern{Kind: p.Kind, Regex: p.Regex})
	}
	for _, d := range in.Dictionaries {
		s.Dictionaries = append(s.Dictionaries, piirules.Dictionary{Kind: d.Kind, Terms: slices.Clone(d.Terms)})
	}
	return s
}

// compilePII compiles spec.pii; validation has refused a spec that does
// not compile, so such a one is dropped here rather than half applied.
func compilePII(in *v1alpha1.PIISpec) *PIIRules {
	if in == nil || len(in.Patterns)+len(in.Dictionaries) == 0 {
		return nil
	}
	spec := piiSpec(in)
	set, errs := piirules.Compile(spec)
	if errs != nil {
		return nil
	}
	return &PIIRules{Spec: spec, Set: set}
}

// validatePII checks spec.pii with field paths.
func (c *checker) validatePII(o *Object, in *v1alpha1.PIISpec) {
	if in == nil {
		return
	}
	_, errs := piirules.Compile(piiSpec(in))
	for _, e := range errs {
		c.err(o, "spec.pii."+e.Field, "%s", e.Msg)
	}
}

func piiProto(r *PIIRules) *policyv1.PIIRules {
	if r == nil {
		return nil
	}
	out := &policyv1.PIIRules{}
	for _, p := range r.Spec.Patterns {
		out.Patterns = append(out.Patterns, &policyv1.PIIPattern{Kind: p.Kind, Regex: p.Regex})
	}
	for _, d := range r.Spec.Dictionaries {
		out.Dictionaries = append(out.Dictionaries, &policyv1.PIIDictionary{Kind: d.Kind, Terms: d.Terms})
	}
	return out
}

func piiFromProto(backend string, in *policyv1.PIIRules) (*PIIRules, error) {
	if in == nil {
		return nil, nil
	}
	var spec piirules.Spec
	for _, p := range in.GetPatterns() {
		spec.Patterns = append(spec.Patterns, piirules.Pattern{Kind: p.GetKind(), Regex: p.GetRegex()})
	}
	for _, d := range in.GetDictionaries() {
		spec.Dictionaries = append(spec.Dictionaries, piirules.Dictionary{Kind: d.GetKind(), Terms: d.GetTerms()})
	}
	set, errs := piirules.Compile(spec)
	if errs != nil {
		return nil, fmt.Errorf("gateway backend %s: pii rules: %w", backend, errs[0])
	}
	return &PIIRules{Spec: spec, Set: set}, nil
}
