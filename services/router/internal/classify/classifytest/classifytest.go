// Package classifytest helps test classifiers: a GatewayBackend's program
// with tag settings, and a table of requests run through a classifier.
package classifytest

import (
	"context"
	"slices"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify"
)

// gatewayBackend allows three tags and gives tenant payroll a default.
const gatewayBackend = `apiVersion: switchyard.dev/v1alpha1
kind: GatewayBackend
metadata: {name: test, namespace: inference}
spec:
  tags:
    header: x-switchyard-tags
    allowed: [pii-detected, batch, complexity-low]
    tenants:
    - tenant: payroll
      tags: [pii-detected, batch]
`

// Program is the compiled program of a GatewayBackend that allows the
// tags pii-detected, batch and complexity-low in the header and gives
// tenant payroll the tags pii-detected and batch.
func Program(t testing.TB) *policy.Program {
	t.Helper()
	objs, diags := policy.ParseYAML("gateway-backend.yaml", []byte(gatewayBackend))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	snap, diags := policy.Compile(objs)
	if diags.HasErrors() || snap == nil {
		t.Fatalf("compile: %v", diags.Error())
	}
	return snap.Program("test")
}

// Case is a request and the tags a classifier should return for it,
// after the tag "seen" that was there before.
type Case struct {
	Name    string
	Program *policy.Program
	Tenant  string
	Header  []string
	Want    []string
}

// Check runs the cases through the classifier newC builds.
func Check(t *testing.T, newC classify.Factory, cases []Case) {
	t.Helper()
	c, err := newC()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			req := &classify.Request{Tenant: tc.Tenant, Model: "m", HeaderTags: tc.Header, Program: tc.Program}
			got, err := c.Classify(context.Background(), req, []string{"seen"})
			if err != nil {
				t.Fatal(err)
			}
			if want := append([]string{"seen"}, tc.Want...); !slices.Equal(got, want) {
				t.Fatalf("tags %v, want %v", got, want)
			}
		})
	}
}
