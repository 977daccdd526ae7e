package piirules_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/policy"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify/piirules"
)

// program compiles a GatewayBackend with spec.pii whose policy reads the
// tag read (pii-detected, or a kind's).
func program(t testing.TB, read string) *policy.Program {
	t.Helper()
	objs, diags := policy.ParseYAML("p.yaml", []byte(`apiVersion: switchyard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: guard, namespace: inference}
spec:
  rules:
  - name: serve
    route:
      exclude:
      - name: keep-local
        if: {tag: `+read+`}
        drop: {backend: {type: Provider}}
---
apiVersion: switchyard.dev/v1alpha1
kind: GatewayBackend
metadata: {name: gb, namespace: inference}
spec:
  policies:
  - {name: guard, mode: Guard}
  pii:
    patterns:
    - {kind: employee-id, regex: "EMP-[0-9]{6}"}
    dictionaries:
    - {kind: codename, terms: [Project Falcon, 青い鳥]}
`))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	snap, diags := policy.Compile(objs)
	if diags.HasErrors() || snap == nil {
		t.Fatalf("compile: %v", diags.Error())
	}
	return snap.Program("gb")
}

func chat(t testing.TB, msgs ...string) []byte {
	t.Helper()
	type m struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	var ms []m
	for _, c := range msgs {
		ms = append(ms, m{"user", c})
	}
	b, err := json.Marshal(map[string]any{"model": "m", "messages": ms})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func classifyWith(t testing.TB, prog *policy.Program, body []byte) []string {
	t.Helper()
	c, _ := piirules.New()
	tags, err := c.Classify(context.Background(), &classify.Request{Program: prog, API: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: body}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tags
}

func TestClassify(t *testing.T) {
	guard := program(t, "pii-detected")
	for _, tc := range []struct {
		name string
		body []byte
		want []string
	}{
		{"a pattern", chat(t, "ask EMP-123456 about it"), []string{"pii-detected", "pii:employee-id"}},
		{"both, across messages", chat(t, "EMP-000042", "status of project  FALCON?"), []string{"pii-detected", "pii:employee-id", "pii:codename"}},
		{"a term in Japanese", chat(t, "この青い鳥は"), []string{"pii-detected", "pii:codename"}},
		{"near misses", chat(t, "EMP-1234567, falconry, project"), nil},
		{"not JSON", []byte(`{"model":`), nil},
	} {
		if got := classifyWith(t, guard, tc.body); !slices.Equal(got, tc.want) {
			t.Errorf("%s: tags %v, want %v", tc.name, got, tc.want)
		}
	}
	// A rule reading one kind's tag is enough to scan.
	if got := classifyWith(t, program(t, "pii:codename"), chat(t, "Project Falcon")); !slices.Equal(got, []string{"pii-detected", "pii:codename"}) {
		t.Errorf("read pii:codename: tags %v", got)
	}
}

// Nothing is read for a program whose rules read no pii tag, or that has
// no rules.
func TestClassifyOnlyWhenRead(t *testing.T) {
	body := chat(t, "EMP-123456")
	for name, p := range map[string]*policy.Program{
		"reads another tag":   program(t, "batch"),
		"reads another kind":  program(t, "pii:card"),
		"the default program": policy.DefaultProgram(),
		"no program":          nil,
	} {
		if got := classifyWith(t, p, body); got != nil {
			t.Errorf("%s: tags %v", name, got)
		}
	}
}
