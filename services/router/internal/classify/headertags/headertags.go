// Package headertags is the classifier of the tags a client sets itself:
// those it sent in the GatewayBackend's tags header (the gateway reads the
// header) that the GatewayBackend's allowedTags permits (every one when
// the list is empty) and, when the request's tenant has its own
// allowedTags, that list too. A tag a client may not set is dropped, not refused:
// the request is routed as if it had not been sent.
package headertags

import (
	"context"

	"github.com/switchyard-dev/switchyard/services/router/internal/classify"
)

// Name is the classifier's name in --classifiers.
const Name = "header-tags"

// Classifier implements classify.Classifier.
type Classifier struct{}

var _ classify.Classifier = Classifier{}

// New is the classifier's factory.
func New() (classify.Classifier, error) { return Classifier{}, nil }

// Classify appends the allowed header tags.
func (Classifier) Classify(_ context.Context, req *classify.Request, tags []string) ([]string, error) {
	for _, t := range req.HeaderTags {
		if req.Program.TenantTagAllowed(req.Tenant, t) {
			tags = append(tags, t)
		}
	}
	return tags, nil
}
