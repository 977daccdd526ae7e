// Package classifytest helps test classifiers: a GatewayBackend's program
// with tag settings, and a run of one classifier.
package classifytest

import (
	"context"
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

// Run classifies req with c after the tags already there, failing the
// test on an error.
func Run(t testing.TB, c classify.Classifier, req *classify.Request, tags ...string) []string {
	t.Helper()
	out, err := c.Classify(context.Background(), req, tags)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
