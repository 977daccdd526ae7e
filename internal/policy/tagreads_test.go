package policy

import (
	"strings"
	"testing"
)

// ReadsTag sees the tags a program's rules match on and its filters'
// conditions, in Route and Guard policies alike, and nothing else.
func TestReadsTag(t *testing.T) {
	s := mustLoad(t, append(catalogFiles, examplePolicy("../gateway-backend.yaml"),
		examplePolicy("model-alias.yaml"), examplePolicy("smart-semantic-routing.yaml"), examplePolicy("batch-to-idle.yaml"),
		examplePolicy("burst-policy.yaml"), examplePolicy("pii-stays-local.yaml"))...)
	prog := s.Program("dev")
	is := func(tag string) func(string) bool { return func(t string) bool { return t == tag } }
	for tag, want := range map[string]bool{
		"pii-detected":    true, // the Guard's filter condition
		"complexity-low":  true, // a Route rule's match
		"batch":           true,
		"complexity-high": false,
		"pii:card":        false,
	} {
		if got := prog.ReadsTag(is(tag)); got != want {
			t.Errorf("ReadsTag(%s) = %v, want %v", tag, got, want)
		}
	}
	if !prog.ReadsTag(func(t string) bool { return strings.HasPrefix(t, "pii") }) {
		t.Error("a prefix predicate does not see pii-detected")
	}
	for name, p := range map[string]*Program{"default": DefaultProgram(), "nil": nil} {
		if p.ReadsTag(func(string) bool { return true }) {
			t.Errorf("%s program reads a tag", name)
		}
	}
	// Over the wire, the same.
	wire, err := FromProto(ToProto(s, 1))
	if err != nil {
		t.Fatal(err)
	}
	if !wire.Program("dev").ReadsTag(is("pii-detected")) || wire.Program("dev").ReadsTag(is("complexity-high")) {
		t.Error("the wire program reads other tags")
	}
}
