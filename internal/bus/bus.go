// Package bus owns every NATS subject, stream and durable name Switchyard
// uses. Nothing outside this package spells a subject: publishers and
// subscribers call the functions and constants here, so a reader can see the
// whole message topology in one file.
//
// Shape: switchyard.v1.<area>.<...>. Payloads are protobuf messages from
// proto/switchyard/events/v1, except the tenant feeds (JSON, for people).
package bus

import (
	"strings"
	"time"
)

const prefix = "switchyard.v1."

// Route decision and completion traffic keeps router replicas in agreement
// about in-flight requests per endpoint.
const (
	// SubjectRouteDecided: publisher router (each replica, after Route);
	// consumers: every router replica (in-flight +1 on the endpoint, with
	// its KV claim for flow control).
	// Payload: eventsv1.RouteDecision. Core NATS, no persistence: a replica
	// that misses one only under-counts until the entry's TTL would expire.
	SubjectRouteDecided = prefix + "route.decided"
	// SubjectRouteCompleted: publisher gateway (when a routed attempt ends);
	// consumers: every router replica (in-flight -1, TTFT observations).
	// Payload: eventsv1.RouteCompletion. Core NATS.
	SubjectRouteCompleted = prefix + "route.completed"
)

// Usage events: one per client request, durable.
const (
	// StreamUsage is the JetStream stream holding usage events. Publisher
	// gateway with Nats-Msg-Id = request id (server-side de-duplication
	// inside DuplicateWindow); consumer meter through DurableMeter.
	StreamUsage = "SWITCHYARD_USAGE"
	// DurableMeter is meter's durable pull consumer on StreamUsage, explicit
	// ack, so no usage is lost when meter restarts.
	DurableMeter = "meter"
	// usageSubjectPrefix + <tenant>: payload eventsv1.UsageEvent.
	usageSubjectPrefix = prefix + "usage."
)

// Usage event outcomes (eventsv1.UsageEvent.outcome): how a request ended.
// A stream that broke after its 200 was sent carries one of the last three;
// its client was sent an error event before the stream closed, and the
// tokens counted are those it received.
const (
	// UsageOutcomeOK: the response was delivered whole.
	UsageOutcomeOK = "ok"
	// UsageOutcomeError: the client got an error answer (status_code).
	UsageOutcomeError = "error"
	// UsageOutcomeClientClosed: the client went away first.
	UsageOutcomeClientClosed = "client_closed"
	// UsageOutcomeUpstreamBroken: the upstream connection broke
	// mid-response (a worker died).
	UsageOutcomeUpstreamBroken = "upstream_broken"
	// UsageOutcomeUpstreamStalled: the upstream sent nothing for the
	// gateway's stream idle timeout (a frozen worker).
	UsageOutcomeUpstreamStalled = "upstream_stalled"
	// UsageOutcomeEndpointUnhealthy: the router marked the endpoint
	// unhealthy while its stream was silent.
	UsageOutcomeEndpointUnhealthy = "endpoint_unhealthy"
	// UsageOutcomeShed: the fleet was saturated and the gateway's
	// flow-control queue refused the request or gave it up (429).
	UsageOutcomeShed = "shed"
	// UsageOutcomeRejectedAuth: no valid credential (401; the tenant is
	// empty), or a priority the tenant may not ask for (403).
	UsageOutcomeRejectedAuth = "rejected_auth"
	// UsageOutcomeRejectedLimit: a rate limit or budget refused the
	// request (429, or 400 for one larger than a limit allows).
	UsageOutcomeRejectedLimit = "rejected_limit"
	// UsageOutcomeRejectedPolicy: a policy refused the request (onEmpty:
	// Reject).
	UsageOutcomeRejectedPolicy = "rejected_policy"
)

// UsageOutcomes lists every outcome, for consumers that keep one counter
// each (meter); anything else a consumer sees is from a newer gateway.
var UsageOutcomes = []string{
	UsageOutcomeOK, UsageOutcomeError, UsageOutcomeClientClosed, UsageOutcomeUpstreamBroken,
	UsageOutcomeUpstreamStalled, UsageOutcomeEndpointUnhealthy, UsageOutcomeShed,
	UsageOutcomeRejectedAuth, UsageOutcomeRejectedLimit, UsageOutcomeRejectedPolicy,
}

// UsageSubject is the subject a tenant's usage events are published on.
// Tenant names are sanitised so that a tenant can never address another
// tenant's subject with dots or wildcards.
func UsageSubject(tenant string) string {
	return usageSubjectPrefix + Token(tenant)
}

// UsageSubjectAll matches every tenant's usage events (stream subjects and
// meter's filter).
const UsageSubjectAll = usageSubjectPrefix + "*"

// Tenant feeds: what a team may be given access to, and nothing else. Each
// tenant has one subtree, so one permission line grants a team all of its
// own and none of another's:
//
//	subscribe: "switchyard.v1.tenant.team-a.>"
//
// Publisher meter (after de-duplication: each request once, unlike the raw
// usage stream, which may carry a re-sent copy); consumers the tenant's
// own tools. Core NATS, JSON payloads (readable with `nats sub`).
const tenantPrefix = prefix + "tenant."

// TenantUsageSubject carries one TenantUsage per request of tenant for
// model: switchyard.v1.tenant.<tenant>.usage.<model>, each name one token
// (Escape).
func TenantUsageSubject(tenant, model string) string {
	return tenantPrefix + Escape(tenant) + ".usage." + Escape(model)
}

// TenantSummarySubject carries a TenantSummary of tenant every minute:
// switchyard.v1.tenant.<tenant>.summary.
func TenantSummarySubject(tenant string) string {
	return tenantPrefix + Escape(tenant) + ".summary"
}

// TenantSubjects matches everything of tenant's: the subscribe permission
// to give its team.
func TenantSubjects(tenant string) string { return tenantPrefix + Escape(tenant) + ".>" }

// TenantUsage is one request's usage as its tenant sees it (no worker
// addresses, no prompt). Durations in seconds.
type TenantUsage struct {
	RequestID         string    `json:"request_id"`
	Tenant            string    `json:"tenant"`
	Model             string    `json:"model"`
	ServedModel       string    `json:"served_model,omitempty"`
	API               string    `json:"api"`
	TargetKind        string    `json:"target_kind,omitempty"`
	TargetType        string    `json:"target_type,omitempty"`
	Provider          string    `json:"provider,omitempty"`
	Outcome           string    `json:"outcome"`
	StatusCode        int32     `json:"status_code"`
	InputTokens       int64     `json:"input_tokens"`
	CachedInputTokens int64     `json:"cached_input_tokens"`
	OutputTokens      int64     `json:"output_tokens"`
	ReasoningTokens   int64     `json:"reasoning_tokens,omitempty"`
	TTFT              float64   `json:"ttft_seconds,omitempty"`
	ITLMean           float64   `json:"itl_mean_seconds,omitempty"`
	E2E               float64   `json:"e2e_seconds"`
	Queue             float64   `json:"queue_seconds,omitempty"`
	Attempts          int32     `json:"attempts,omitempty"`
	Tags              []string  `json:"tags,omitempty"`
	StartedAt         time.Time `json:"started_at"`
	FinishedAt        time.Time `json:"finished_at"`
}

// TenantSummary is a tenant's usage in one minute, per model, as the
// meter's rollups hold it when the minute is over.
type TenantSummary struct {
	Tenant string               `json:"tenant"`
	Start  time.Time            `json:"start"`
	End    time.Time            `json:"end"`
	Models []TenantModelSummary `json:"models"`
}

// TenantModelSummary is one model's part of a TenantSummary.
type TenantModelSummary struct {
	Model               string           `json:"model"`
	Requests            int64            `json:"requests"`
	Outcomes            map[string]int64 `json:"outcomes"`
	CachedInputTokens   int64            `json:"cached_input_tokens"`
	UncachedInputTokens int64            `json:"uncached_input_tokens"`
	OutputTokens        int64            `json:"output_tokens"`
	ReasoningTokens     int64            `json:"reasoning_tokens"`
	TTFTMean            float64          `json:"ttft_mean_seconds,omitempty"`
	E2EMean             float64          `json:"e2e_mean_seconds,omitempty"`
}

// Escape makes a name one NATS subject token, reversibly and without
// collisions (unlike Token): bytes other than letters, digits, '-' and
// '_' become %XX, so "team.a" is "team%2Ea" and can never be "team_a"'s
// or match a wildcard. Tenant names (lower-case letters, digits, '.',
// '_', '-') only ever escape their dots.
func Escape(s string) string {
	if s == "" {
		return "%"
	}
	clean := true
	for i := 0; i < len(s); i++ {
		if !escapeFree(s[i]) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if escapeFree(c) {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hex[c>>4], hex[c&15])
	}
	return string(b)
}

func escapeFree(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// Token turns an arbitrary name into a single NATS subject token: dots,
// spaces, wildcards and control characters become '_'; an empty name becomes
// "_".
func Token(s string) string {
	if s == "" {
		return "_"
	}
	clean := true
	for i := 0; i < len(s); i++ {
		if !tokenByteOK(s[i]) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if tokenByteOK(c) {
			b.WriteByte(c)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func tokenByteOK(c byte) bool {
	switch {
	case c <= ' ', c == '.', c == '*', c == '>', c >= 0x7f:
		return false
	}
	return true
}
