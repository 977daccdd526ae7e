package router

import (
	"fmt"

	"github.com/switchyard-dev/switchyard/internal/registry"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify/complexity"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify/external"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify/headertags"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify/pii"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify/piirules"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify/tenanttags"
)

// classifierRegistry holds every classifier --classifiers may name. A new
// classifier is a package under internal/classify, registered here.
var classifierRegistry = func() *registry.Registry[classify.Factory] {
	r := registry.New[classify.Factory]("classifier")
	r.Register(headertags.Name, headertags.New)
	r.Register(tenanttags.Name, tenanttags.New)
	r.Register(pii.Name, pii.New)
	r.Register(piirules.Name, piirules.New)
	r.Register(complexity.Name, complexity.New)
	r.Register(external.Name, external.New)
	return r
}()

// defaultClassifiers are every built-in: the allowed header tags, the
// tenant's, then what the prompt's text says (pii, complexity). The
// content classifiers are on by default because they cost nothing unless
// a policy asks: each first checks whether some rule of the request's
// program reads a tag it gives (policy.Program.ReadsTag), and returns at
// once when none does; only then does it parse the body and scan the
// text. So a prompt holding a card number is tagged pii-detected whenever
// a policy such as pii-stays-local reads that tag, whether or not the
// client or its tenant labelled it; pii-rules does the same for the
// GatewayBackend's own kinds (spec.pii). None of them can fail.
//
// external asks the GatewayBackend's spec.classifiers, likewise only for
// a program that reads their tags, and fails closed: a classifier that
// errors or is late gives its failTag.
const defaultClassifiers = headertags.Name + "," + tenanttags.Name + "," + pii.Name + "," + piirules.Name + "," + complexity.Name + "," + external.Name

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
