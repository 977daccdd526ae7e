package gateway

import (
	"github.com/switchyard-dev/switchyard/services/gateway/admission"
	"github.com/switchyard-dev/switchyard/services/gateway/admission/apikey"
	"github.com/switchyard-dev/switchyard/services/gateway/admission/defaulttenant"
	"github.com/switchyard-dev/switchyard/services/gateway/admission/jwt"
	"github.com/switchyard-dev/switchyard/services/gateway/ratelimit"

	// The upstream adapters, by type.
	_ "github.com/switchyard-dev/switchyard/internal/upstream/builtin"
)

// The admission steps a gateway can chain (--admission). A new step is a
// package implementing admission.Step and one line here.
func init() {
	admission.Steps.Register(apikey.Name, apikey.New)
	admission.Steps.Register(defaulttenant.Name, defaulttenant.New)
	admission.Steps.Register(jwt.Name, jwt.New)
	admission.Steps.Register(ratelimit.Name, ratelimit.New)
}
