// Package tenanttags is the classifier of the tags a tenant always
// carries: the GatewayBackend's tenants list gives each tenant default
// tags (payroll: pii-detected), so a policy can treat every request of a
// tenant alike without the client saying anything.
package tenanttags

import (
	"context"

	"github.com/switchyard-dev/switchyard/services/router/internal/classify"
)

// Name is the classifier's name in --classifiers.
const Name = "tenant-tags"

// Classifier implements classify.Classifier.
type Classifier struct{}

var _ classify.Classifier = Classifier{}

// New is the classifier's factory.
func New() (classify.Classifier, error) { return Classifier{}, nil }

// Classify appends the tenant's default tags.
func (Classifier) Classify(_ context.Context, req *classify.Request, tags []string) ([]string, error) {
	return append(tags, req.Program.TenantTags(req.Tenant)...), nil
}
