package policy

import (
	"strings"
	"testing"

	policyv1 "github.com/switchyard-dev/switchyard/proto/switchyard/policy/v1"
)

func providerYAML(spec string) string {
	return `apiVersion: switchyard.dev/v1alpha1
kind: InferenceProvider
metadata: {name: p, namespace: inference}
spec:
  baseURL: https://bedrock-runtime.us-east-1.amazonaws.com
  models: [{name: m, servedName: "anthropic.claude-v2:1"}]
` + spec
}

// TestProviderSettings: spec.bedrock is required by type Bedrock and
// refused on every other type, with the field's path; the credentials a
// Bedrock provider cannot use are refused.
func TestProviderSettings(t *testing.T) {
	for _, tc := range []struct {
		name, spec, path, msg string
	}{
		{"bedrock ok", "  type: Bedrock\n  bedrock: {region: us-east-1}\n", "", ""},
		{"bedrock gov ok", "  type: Bedrock\n  bedrock: {region: us-gov-west-1}\n  credentials: {secretRef: {name: aws}}\n", "", ""},
		{"bedrock dir ok", "  type: Bedrock\n  bedrock: {region: eu-central-1}\n  credentials: {file: /etc/aws}\n", "", ""},
		{"bedrock without settings", "  type: Bedrock\n", "spec.bedrock", "required by type Bedrock"},
		{"bedrock without region", "  type: Bedrock\n  bedrock: {}\n", "spec.bedrock.region", "required"},
		{"bad region", "  type: Bedrock\n  bedrock: {region: US_EAST}\n", "spec.bedrock.region", "not an AWS region"},
		{"settings on another type", "  type: OpenAICompatible\n  bedrock: {region: us-east-1}\n", "spec.bedrock", "only for type Bedrock"},
		{"env key", "  type: Bedrock\n  bedrock: {region: us-east-1}\n  credentials: {env: AWS_KEY}\n", "spec.credentials.env", "not for type Bedrock"},
		{"secret key", "  type: Bedrock\n  bedrock: {region: us-east-1}\n  credentials: {secretRef: {name: aws, key: k}}\n", "spec.credentials.secretRef.key", "accessKeyId"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, diags := ParseYAML("p.yaml", []byte(providerYAML(tc.spec)))
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			s, diags := Compile(objs)
			if tc.path == "" {
				if s == nil || diags.HasErrors() {
					t.Fatalf("refused: %s", diags.Error())
				}
				return
			}
			if !strings.Contains(diags.Error(), tc.path+": "+tc.msg) && !strings.Contains(diags.Error(), tc.path) {
				t.Fatalf("diagnostics %q, want %s: %s", diags.Error(), tc.path, tc.msg)
			}
			if !strings.Contains(diags.Error(), tc.msg) {
				t.Fatalf("diagnostics %q, want %q", diags.Error(), tc.msg)
			}
		})
	}
}

// TestProviderSettingsFlow: the region reaches the compiled provider and
// survives the snapshot's proto both ways.
func TestProviderSettingsFlow(t *testing.T) {
	objs, diags := ParseYAML("p.yaml", []byte(providerYAML("  type: Bedrock\n  bedrock: {region: eu-west-3}\n")))
	s, d2 := Compile(objs)
	if s == nil {
		t.Fatal(diags.Error(), d2.Error())
	}
	if got := s.Provider("p").Settings.BedrockRegion; got != "eu-west-3" {
		t.Fatalf("compiled region %q", got)
	}
	pb := ToProto(s, 1)
	var pp *policyv1.Provider
	for _, p := range pb.GetProviders() {
		pp = p
	}
	if pp.GetBedrock().GetRegion() != "eu-west-3" {
		t.Fatalf("proto %v", pp)
	}
	back, err := FromProto(pb)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Provider("p").Settings.BedrockRegion; got != "eu-west-3" {
		t.Fatalf("round trip region %q", got)
	}
}
