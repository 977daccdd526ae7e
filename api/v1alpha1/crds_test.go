package v1alpha1

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// The generated CRDs exist for every kind with what the issue asks of
// them: a schema, printer columns and the status subresource.
func TestGeneratedCRDs(t *testing.T) {
	for kind, gvr := range Resources {
		t.Run(kind, func(t *testing.T) {
			path := filepath.Join("..", "..", "deploy", "kustomize", "base", "crds", Group+"_"+gvr.Resource+".yaml")
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go generate ./api/...)", err)
			}
			var crd struct {
				Spec struct {
					Group string `json:"group"`
					Names struct {
						Kind   string `json:"kind"`
						Plural string `json:"plural"`
					} `json:"names"`
					Versions []struct {
						Name         string           `json:"name"`
						Subresources map[string]any   `json:"subresources"`
						Columns      []map[string]any `json:"additionalPrinterColumns"`
						Schema       struct {
							OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
						} `json:"schema"`
					} `json:"versions"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal(data, &crd); err != nil {
				t.Fatal(err)
			}
			s := crd.Spec
			if s.Group != Group || s.Names.Kind != kind || s.Names.Plural != gvr.Resource || len(s.Versions) != 1 {
				t.Fatalf("crd %+v", s)
			}
			v := s.Versions[0]
			if v.Name != Version || v.Subresources["status"] == nil || len(v.Columns) == 0 || v.Schema.OpenAPIV3Schema["properties"] == nil {
				t.Errorf("version %s: status %v, %d columns, schema %v", v.Name, v.Subresources, len(v.Columns), v.Schema.OpenAPIV3Schema != nil)
			}
		})
	}
}

func TestScheme(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, kind := range Kinds {
		if !s.Recognizes(GroupVersion.WithKind(kind)) || !s.Recognizes(GroupVersion.WithKind(kind+"List")) {
			t.Errorf("%s not registered", kind)
		}
	}
}
