package router

import (
	"fmt"

	"github.com/switchyard-dev/switchyard/internal/registry"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify/headertags"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify/tenanttags"
)

// classifierRegistry holds every classifier --classifiers may name. A new
// classifier is a package under internal/classify, registered here.
var classifierRegistry = func() *registry.Registry[classify.Factory] {
	r := registry.New[classify.Factory]("classifier")
	r.Register(headertags.Name, headertags.New)
	r.Register(tenanttags.Name, tenanttags.New)
	return r
}()

// defaultClassifiers derive the tags the router always derived: the
// allowed header tags, then the tenant's.
const defaultClassifiers = headertags.Name + "," + tenanttags.Name

// classifier is one configured classifier with its name, for errors.
type classifier struct {
	name string
	classify.Classifier
}

// newClassifiers builds the classifiers a --classifiers list names, in
// order.
func newClassifiers(names string) ([]classifier, error) {
	entries, err := classifierRegistry.List(names)
	if err != nil {
		return nil, fmt.Errorf("classifiers: %w", err)
	}
	out := make([]classifier, 0, len(entries))
	for _, e := range entries {
		c, err := e.New()
		if err != nil {
			return nil, fmt.Errorf("classifiers: %s: %w", e.Name, err)
		}
		out = append(out, classifier{name: e.Name, Classifier: c})
	}
	return out, nil
}
