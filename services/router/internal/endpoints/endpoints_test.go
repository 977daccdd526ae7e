package endpoints

import (
	"reflect"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/fleet"
)

func TestFromCatalog(t *testing.T) {
	c := fleet.Catalog{
		Workers: []fleet.Worker{
			{ID: "sim-0", Pool: "gpus", Group: "qwen-workers", Models: []string{"qwen"}, URL: "http://a:8000", MetricsPath: "/vllm/metrics", KVEndpoint: "tcp://a:5557"},
			{ID: "kv-only", Pool: "gpus", KVEndpoint: "tcp://b:5557"},
		},
		Providers: []fleet.Provider{{Name: "bedrock", Type: "OpenAICompatible", BaseURL: "https://bedrock/v1", Models: []string{"qwen", "glm"}}},
	}
	got := FromCatalog(c)
	want := []Spec{
		{ID: "sim-0", URL: "http://a:8000", MetricsPath: "/vllm/metrics", Models: []string{"qwen"}, Group: "qwen-workers", Pool: "gpus", Kind: KindLocal, Type: "vLLM"},
		{ID: "provider/bedrock", URL: "https://bedrock/v1", Models: []string{"qwen", "glm"}, Group: "bedrock", Kind: KindProvider, Type: "OpenAICompatible"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	if s := Scraped(got); len(s) != 1 || s[0].ID != "sim-0" {
		t.Fatalf("scraped %+v, want the worker alone", s)
	}
}
