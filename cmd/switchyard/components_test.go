package main

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/switchyard-dev/switchyard/internal/flagenv"
)

// TestComponentsSetRealFlags: every SWITCHYARD_* variable a kustomize
// component's Deployment patch sets is a flag of the command its container
// runs (containers are named for their command), with a value the flag
// accepts, so a misspelt variable fails here and not in a cluster.
func TestComponentsSetRealFlags(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "deploy", "kustomize", "components", "*", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, file := range files {
		if filepath.Base(file) == "kustomization.yaml" {
			continue
		}
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(f)
		for {
			var doc struct {
				Spec struct {
					Template struct {
						Spec struct{ Containers []container }
					}
				}
			}
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			for _, c := range doc.Spec.Template.Spec.Containers {
				fs := commandFlags(t, c.Name)
				for _, e := range c.Env {
					if !strings.HasPrefix(e.Name, flagenv.Prefix) {
						continue
					}
					var f *flag.Flag
					fs.VisitAll(func(ff *flag.Flag) {
						if flagenv.EnvName(ff.Name) == e.Name {
							f = ff
						}
					})
					if f == nil {
						t.Errorf("%s: %s: %s sets no flag of switchyard %s", file, c.Name, e.Name, c.Name)
						continue
					}
					if e.ValueFrom == nil {
						if err := fs.Set(f.Name, e.Value); err != nil {
							t.Errorf("%s: %s=%q: %v", file, e.Name, e.Value, err)
						}
					}
					checked++
				}
			}
		}
		f.Close()
	}
	if checked < 10 {
		t.Fatalf("checked %d variables in %q", checked, files)
	}
}
