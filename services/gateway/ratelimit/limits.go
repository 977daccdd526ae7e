package ratelimit

import (
	"math"

	"github.com/switchyard-dev/switchyard/internal/tenantlimit"
)

// Limits are one key's limits (tenantlimit.Limits).
type Limits = tenantlimit.Limits

// TenantLimits are a tenant's limits and its models' (tenantlimit.Tenant).
type TenantLimits = tenantlimit.Tenant

// MaxLimit bounds every limit (tenantlimit.MaxLimit).
const MaxLimit = tenantlimit.MaxLimit

// share is l divided among n replicas, each at least 1 where l limits:
// what one replica admits alone while Redis is unreachable.
func share(l Limits, n int) Limits {
	div := func(v int64) int64 {
		if v == 0 {
			return 0
		}
		return max(1, int64(math.Floor(float64(v)/float64(n))))
	}
	return Limits{
		RequestsPerMinute:     div(l.RequestsPerMinute),
		InputTokensPerMinute:  div(l.InputTokensPerMinute),
		OutputTokensPerMinute: div(l.OutputTokensPerMinute),
		TokensPerDay:          div(l.TokensPerDay),
		TokensPerMonth:        div(l.TokensPerMonth),
	}
}
