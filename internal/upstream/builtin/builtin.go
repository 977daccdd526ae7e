// Package builtin registers the upstream adapters Switchyard ships, by
// type. Everything that must know the types — the gateway that uses the
// adapters, and the policy checks that refuse a provider type without one
// — imports it. A new provider type is one adapter package and one line
// here.
package builtin

import (
	"github.com/switchyard-dev/switchyard/api/v1alpha1"
	"github.com/switchyard-dev/switchyard/internal/upstream"
	"github.com/switchyard-dev/switchyard/internal/upstream/anthropic"
	"github.com/switchyard-dev/switchyard/internal/upstream/azure"
	"github.com/switchyard-dev/switchyard/internal/upstream/bedrock"
	"github.com/switchyard-dev/switchyard/internal/upstream/databricks"
	"github.com/switchyard-dev/switchyard/internal/upstream/openai"
)

func init() {
	upstream.Types.Register(upstream.TypeWorker, openai.New)
	upstream.Types.Register(string(v1alpha1.ProviderOpenAICompatible), openai.New)
	upstream.Types.Register(string(v1alpha1.ProviderBedrock), bedrock.New)
	upstream.Types.Register(string(v1alpha1.ProviderAnthropic), anthropic.New)
	upstream.Types.Register(string(v1alpha1.ProviderAzureOpenAI), azure.New)
	upstream.Types.Register(string(v1alpha1.ProviderDatabricks), databricks.New)
}

// ProviderTypes lists the provider types with an adapter (every registered
// type but local workers').
func ProviderTypes() []string {
	var out []string
	for _, n := range upstream.Types.Names() {
		if n != upstream.TypeWorker {
			out = append(out, n)
		}
	}
	return out
}
