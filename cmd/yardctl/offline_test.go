package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const examples = "../../deploy/examples"

func TestValidateExamples(t *testing.T) {
	code, out, errOut := runCLIFunc(t, runValidate, "", "-f", examples)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	want := "valid: 11 resources (2 InferenceWorkerSet, 1 InferencePool, 2 InferenceProvider, 5 InferencePolicy, 1 GatewayBackend)\n"
	if out != want {
		t.Errorf("output %q, want %q", out, want)
	}
}

func TestValidateListsEveryError(t *testing.T) {
	code, out, errOut := runCLIFunc(t, runValidate, "",
		"-f", examples+"/workers.yaml,"+examples+"/providers.yaml",
		"-f", "../../internal/policy/testdata/broken/bad-references.yaml",
		"-f", "../../internal/policy/testdata/broken/objective-typo.yaml")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		`objective-typo.yaml:16:37: InferencePolicy typo: spec.rules[1].route.select[1].minimize: unknown objective "PredictedTTTF" (did you mean PredictedTTFT?)`,
		`bad-references.yaml:20:36: InferencePolicy refs: spec.rules[2].route.select[1].order[0]: unknown InferenceProvider or InferenceWorkerSet "bedrok" (did you mean bedrock?)`,
		`bad-references.yaml:15:42: InferencePolicy refs: spec.rules[1].route.consider[0].models.names[1]: model "glm-5.4" is served by no InferenceWorkerSet or InferenceProvider (did you mean glm-5.3?)`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks\n%s\n---\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\n"); n != 8 {
		t.Errorf("%d lines, want 6 errors and 2 warnings:\n%s", n, out)
	}
	if !strings.Contains(errOut, "6 errors, 2 warnings") {
		t.Errorf("stderr %q", errOut)
	}
}

func TestValidateStrictAndUsage(t *testing.T) {
	// The seed policies alone: valid, with a warning that nothing they
	// reference could be checked; -strict fails on it.
	if code, out, _ := runCLIFunc(t, runValidate, "", "-f", examples+"/policies"); code != 0 || !strings.Contains(out, "warning:") {
		t.Errorf("exit %d: %s", code, out)
	}
	if code, _, _ := runCLIFunc(t, runValidate, "", "-strict", "-f", examples+"/policies"); code != 1 {
		t.Errorf("-strict exit %d, want 1", code)
	}
	if code, _, errOut := runCLIFunc(t, runValidate, ""); code != 2 || !strings.Contains(errOut, "-f is required") {
		t.Errorf("no -f: exit %d %q", code, errOut)
	}
	if code, _, errOut := runCLIFunc(t, runValidate, "", "-f", "does-not-exist"); code != 1 || !strings.Contains(errOut, "does-not-exist") {
		t.Errorf("missing path: exit %d %q", code, errOut)
	}
}

func TestExplainOffline(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{
			name: "saturated qwen bursts to bedrock",
			args: []string{"-f", examples, "--state", "testdata/state-saturated.yaml", "--request", "testdata/request.json"},
			want: []string{
				"gateway:  dev\n",
				"target:   provider/bedrock (Provider, model qwen-3.6-27b, bedrock)\n",
				"policy:   burst-policy\nrule:     burst-to-cloud\ntier:     select[1] Provider order [bedrock databricks]\n",
				"dropped by burst-policy/burst-to-cloud/drop-overloaded-workers",
				"chosen (0.600s)",
			},
		},
		{
			name: "pii stays local even when saturated",
			args: []string{"-f", examples, "--state", "testdata/state-saturated.yaml", "--request", "testdata/request.json", "--tags", "pii-detected"},
			want: []string{
				"target:   sim-0 (Local, model qwen-3.6-27b, qwen-workers)\n",
				"default routing",
				"guard:    pii-stays-local/serve\n",
				"dropped by pii-stays-local/serve/pii-never-leaves-cluster (guard)",
			},
		},
		{
			name: "the tenant's default tags apply",
			args: []string{"-f", examples, "--state", "testdata/state-saturated.yaml", "--model", "qwen-3.6-27b", "--tenant", "payroll"},
			want: []string{"tenant=payroll tags=pii-detected", "guard:    pii-stays-local/serve\n"},
		},
		{
			name: "alias, idle fleet",
			args: []string{"-f", examples, "--model", "standard-model"},
			want: []string{"rule:     standard-model\n", "target:   sim-2 (Local, model glm-5.3, glm-workers)\n"},
		},
		{
			name: "a model by name: its backends only",
			args: []string{"-f", examples, "--model", "glm-5.3"},
			want: []string{"target:   sim-2 (Local, model glm-5.3, glm-workers)\n", "policy:   burst-policy\n", "qwen-3.6-27b  0       0        0.00  0.000s  0       not considered"},
		},
		{
			name: "batch rejected on busy GPUs",
			args: []string{"-f", examples, "--state", "-", "--model", "qwen-3.6-27b", "--tags", "batch"},
			want: []string{"target:   none: REJECTED\npolicy:   batch-to-idle\nrule:     batch-only-on-idle-gpus (onEmpty: Reject)\n"},
		},
	}
	busy := "backends:\n  sim-0: {kvCacheUsage: 0.9}\n  sim-1: {kvCacheUsage: 0.75}\n"
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLIFunc(t, runExplainAny, busy, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s%s", code, out, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestExplainOfflineErrors(t *testing.T) {
	for _, tc := range []struct {
		name, stdin string
		args        []string
		code        int
		want        string
	}{
		{"--state without -f", "", []string{"--model", "x", "--state", "testdata/state-saturated.yaml"}, 1, "--state is for the offline explain: add -f PATH"},
		{"-o with -f", "", []string{"-f", examples, "--model", "qwen-3.6-27b", "-o", "json"}, 1, "-o is for asking a router"},
		{"no model", "", []string{"-f", examples}, 1, "no model"},
		{"invalid resources", "", []string{"-f", "../../internal/policy/testdata/broken/unreachable.yaml", "--model", "x"}, 1, `rule "batch" is unreachable`},
		{"bad state", "backends:\n  sim-0: {queued: 3}\n", []string{"-f", examples, "--model", "qwen-3.6-27b", "--state", "-"}, 1, `unknown field "queued"`},
		{"unknown gateway backend", "", []string{"-f", examples, "--model", "qwen-3.6-27b", "--gateway-backend", "prod"}, 1, `no GatewayBackend "prod"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLIFunc(t, runExplainAny, tc.stdin, tc.args...)
			if code != tc.code || !strings.Contains(out+errOut, tc.want) {
				t.Errorf("exit %d (want %d), output lacks %q:\n%s%s", code, tc.code, tc.want, out, errOut)
			}
		})
	}
}

// TestValidateKeyedBackend: a GatewayBackend with API keys validates
// offline: a Secret it names is in the cluster, not in the files, so its
// name is accepted; a key pasted where its digest belongs is refused
// without being echoed.
func TestValidateKeyedBackend(t *testing.T) {
	dir := t.TempDir()
	const leaked = "sy-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	write := func(extra string) string {
		p := filepath.Join(dir, "gateway.yaml")
		doc := `apiVersion: switchyard.dev/v1alpha1
kind: GatewayBackend
metadata: {name: front, namespace: inference}
spec:
  auth: {mode: APIKey}
  tenants:
  - name: team-a
    keysSecret: team-a-keys
` + extra
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if code, out, errOut := runCLIFunc(t, runValidate, "", "-f", write("")); code != 0 || !strings.Contains(out, "valid: 1 resource") {
		t.Errorf("exit %d: %s%s", code, out, errOut)
	}
	code, out, _ := runCLIFunc(t, runValidate, "", "-f", write("  - name: team-b\n    keyDigests: ["+leaked+"]\n"))
	if code != 1 || !strings.Contains(out, "this is an API key, not its digest") || strings.Contains(out, leaked) {
		t.Errorf("exit %d: %s", code, out)
	}
}
