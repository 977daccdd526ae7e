// Package piirules is the classifier of an operator's own kinds of
// personal data: the patterns and dictionaries of the GatewayBackend's
// spec.pii (package internal/piirules says how they match and why it is
// cheap). A prompt holding one is tagged pii-detected, the tag the
// shipped PII guard keeps in the cluster on, and pii:<kind>, as the
// built-in pii classifier tags the kinds it knows; both can run, and a
// request carries each tag once.
//
// It reads the prompt only when some rule of the request's program reads
// pii-detected or pii:<one of the backend's kinds>, and cannot fail: an
// unreadable prompt gets no tags.
package piirules

import (
	"context"
	"slices"

	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify"
)

// Name is the classifier's name in --classifiers.
const Name = "pii-rules"

// Classifier implements classify.Classifier.
type Classifier struct{}

var _ classify.Classifier = Classifier{}

// New is the classifier's factory.
func New() (classify.Classifier, error) { return Classifier{}, nil }

// Classify appends pii-detected and pii:<kind> for each of the backend's
// kinds found in the prompt, when the request's program reads any.
func (Classifier) Classify(_ context.Context, req *classify.Request, tags []string) ([]string, error) {
	if req.Program == nil || req.Program.PII == nil {
		return tags, nil
	}
	rules := req.Program.PII
	if !rules.Reads(req.Program) {
		return tags, nil
	}
	segs, err := req.Text()
	if err != nil {
		return tags, nil
	}
	kinds := rules.Set.Kinds()
	var buf [128]bool // 64 patterns and 64 dictionaries at most
	hit := buf[:len(kinds)]
	for _, s := range segs {
		rules.Set.Scan(s.Text, hit)
	}
	if !slices.Contains(hit, true) {
		return tags, nil
	}
	tags = append(tags, policy.TagPII)
	for i, h := range hit {
		if h {
			tags = append(tags, policy.TagPIIPrefix+kinds[i])
		}
	}
	return tags, nil
}
