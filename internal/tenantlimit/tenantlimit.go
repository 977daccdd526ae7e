// Package tenantlimit is the shape of a tenant's rate limits and budgets
// and the rules they obey, shared by the GatewayBackend's validation
// (policyd), the policy snapshot and the gateway that enforces them
// (services/gateway/ratelimit).
package tenantlimit

import (
	"errors"
	"fmt"
)

// Limits are one key's limits (a tenant's, or a tenant's on one model). A
// zero field is no limit of that kind.
type Limits struct {
	// RequestsPerMinute caps admitted requests.
	RequestsPerMinute int64 `json:"requestsPerMinute,omitempty"`
	// InputTokensPerMinute caps prompt tokens, reserved at admission from
	// the router's prompt count.
	InputTokensPerMinute int64 `json:"inputTokensPerMinute,omitempty"`
	// OutputTokensPerMinute caps completion tokens, reserved at admission
	// from max_tokens (or the default) and corrected with the real count.
	OutputTokensPerMinute int64 `json:"outputTokensPerMinute,omitempty"`
	// TokensPerDay and TokensPerMonth are budgets of input plus output
	// tokens per UTC calendar day and month.
	TokensPerDay   int64 `json:"tokensPerDay,omitempty"`
	TokensPerMonth int64 `json:"tokensPerMonth,omitempty"`
}

// MaxLimit bounds every limit: far above any real tenant's, low enough
// that sums and the GCRA's millisecond arithmetic stay exact in the Lua
// script's doubles (2^53).
const MaxLimit = 1 << 40

// IsZero reports whether l limits nothing.
func (l Limits) IsZero() bool { return l == Limits{} }

// Validate checks l; path names it in errors (e.g.
// "spec.tenants[0].limits"). Every error is reported.
func (l Limits) Validate(path string) error {
	var errs []error
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"requestsPerMinute", l.RequestsPerMinute},
		{"inputTokensPerMinute", l.InputTokensPerMinute},
		{"outputTokensPerMinute", l.OutputTokensPerMinute},
		{"tokensPerDay", l.TokensPerDay},
		{"tokensPerMonth", l.TokensPerMonth},
	} {
		if f.v < 0 || f.v > MaxLimit {
			errs = append(errs, fmt.Errorf("%s.%s: %d: want 0 (no limit) to %d", path, f.name, f.v, int64(MaxLimit)))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// A budget smaller than what one minute may use is almost always a
	// unit mistake (a daily figure typed as a monthly one); refuse it
	// rather than have the budget silently be the only limit that counts.
	perMinute := l.InputTokensPerMinute + l.OutputTokensPerMinute
	if l.InputTokensPerMinute == 0 || l.OutputTokensPerMinute == 0 {
		perMinute = 0 // one side unlimited: no per-minute bound on the sum
	}
	if l.TokensPerDay > 0 && perMinute > 0 && l.TokensPerDay < perMinute {
		errs = append(errs, fmt.Errorf("%s.tokensPerDay: %d is less than one minute's input+output tokens (%d)", path, l.TokensPerDay, perMinute))
	}
	if l.TokensPerMonth > 0 && l.TokensPerDay > 0 && l.TokensPerMonth < l.TokensPerDay {
		errs = append(errs, fmt.Errorf("%s.tokensPerMonth: %d is less than tokensPerDay (%d)", path, l.TokensPerMonth, l.TokensPerDay))
	}
	return errors.Join(errs...)
}

// Tenant is a tenant's limits, and its limits on given models (checked on
// top of the tenant's).
type Tenant struct {
	Limits
	Models map[string]Limits `json:"models,omitempty"`
}

// IsZero reports whether t limits nothing.
func (t Tenant) IsZero() bool { return t.Limits.IsZero() && len(t.Models) == 0 }
