package policy

import (
	"fmt"
	"net/url"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
	policyv1 "github.com/switchyard-dev/switchyard/proto/switchyard/policy/v1"
)

// Defaults of a GatewayBackend's spec.classifiers entries.
const (
	DefaultClassifierTimeout     = 200 * time.Millisecond
	DefaultClassifierConcurrency = 16
	// DefaultClassifierFailTag is what the shipped PII guard
	// (deploy/examples/policies/pii-stays-local.yaml) reads.
	DefaultClassifierFailTag = TagPII
	// MaxClassifierTimeout bounds a classifier's timeout: it is spent on
	// the request's path before any routing.
	MaxClassifierTimeout = 10 * time.Second
)

// ExternalClassifier is a spec.classifiers entry with its defaults: a
// service the router asks for a request's tags (see the CRD type).
type ExternalClassifier struct {
	Name, URL      string
	Tags           []string
	Timeout        time.Duration
	MaxConcurrency int
	FailTag        string
}

// Reads reports whether the program reads a tag the classifier may give
// a request (its tags or its fail tag): otherwise asking it would change
// no decision.
func (c *ExternalClassifier) Reads(p *Program) bool {
	return p.ReadsTag(func(tag string) bool { return tag == c.FailTag || slices.Contains(c.Tags, tag) })
}

func compileClassifiers(in []v1alpha1.ExternalClassifier) []ExternalClassifier {
	var out []ExternalClassifier
	for _, c := range in {
		ec := ExternalClassifier{Name: c.Name, URL: c.URL, Tags: slices.Clone(c.Tags), Timeout: DefaultClassifierTimeout,
			MaxConcurrency: DefaultClassifierConcurrency, FailTag: DefaultClassifierFailTag}
		if c.Timeout != nil {
			ec.Timeout = c.Timeout.Duration
		}
		if c.MaxConcurrency > 0 {
			ec.MaxConcurrency = int(c.MaxConcurrency)
		}
		if c.FailTag != "" {
			ec.FailTag = c.FailTag
		}
		out = append(out, ec)
	}
	return out
}

// validateClassifiers checks spec.classifiers with field paths.
func (c *checker) validateClassifiers(o *Object, in []v1alpha1.ExternalClassifier) {
	seen := map[string]bool{}
	for i, ec := range in {
		p := idx("spec.classifiers", i)
		switch {
		case ec.Name == "":
			c.err(o, p+".name", "classifier name is required")
		case seen[ec.Name]:
			c.err(o, p+".name", "classifier %q listed twice", ec.Name)
		}
		seen[ec.Name] = true
		if u, err := url.Parse(ec.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			c.err(o, p+".url", "want an http:// or https:// URL, got %q", ec.URL)
		}
		if len(ec.Tags) == 0 {
			c.err(o, p+".tags", "list the tags the classifier may return (at least one)")
		}
		for j, tag := range ec.Tags {
			if tag == "" {
				c.err(o, fmt.Sprintf("%s.tags[%d]", p, j), "empty tag")
			}
		}
		if ec.Timeout != nil && (ec.Timeout.Duration <= 0 || ec.Timeout.Duration > MaxClassifierTimeout) {
			c.err(o, p+".timeout", "want a timeout above 0 and at most %s, got %s", MaxClassifierTimeout, ec.Timeout.Duration)
		}
		if ec.MaxConcurrency < 0 || ec.MaxConcurrency > 1024 {
			c.err(o, p+".maxConcurrency", "want 1 to 1024, got %d", ec.MaxConcurrency)
		}
	}
}

func classifiersProto(in []ExternalClassifier) []*policyv1.ExternalClassifier {
	var out []*policyv1.ExternalClassifier
	for _, c := range in {
		out = append(out, &policyv1.ExternalClassifier{Name: c.Name, Url: c.URL, Tags: c.Tags, Timeout: durationpb.New(c.Timeout),
			MaxConcurrency: int32(c.MaxConcurrency), FailTag: c.FailTag})
	}
	return out
}

func classifiersFromProto(backend string, in []*policyv1.ExternalClassifier) ([]ExternalClassifier, error) {
	var out []ExternalClassifier
	for _, c := range in {
		ec := ExternalClassifier{Name: c.GetName(), URL: c.GetUrl(), Tags: c.GetTags(), Timeout: c.GetTimeout().AsDuration(),
			MaxConcurrency: int(c.GetMaxConcurrency()), FailTag: c.GetFailTag()}
		if ec.Name == "" || ec.URL == "" || len(ec.Tags) == 0 || ec.Timeout <= 0 || ec.MaxConcurrency <= 0 || ec.FailTag == "" {
			return nil, fmt.Errorf("gateway backend %s: incomplete classifier %q", backend, ec.Name)
		}
		out = append(out, ec)
	}
	return out, nil
}
