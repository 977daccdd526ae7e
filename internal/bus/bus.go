// Package bus owns every NATS subject, stream and durable name Switchyard
// uses. Nothing outside this package spells a subject: publishers and
// subscribers call the functions and constants here, so a reader can see the
// whole message topology in one file.
//
// Shape: switchyard.v1.<area>.<...>. Payloads are protobuf messages from
// proto/switchyard/events/v1.
package bus

import (
	"strings"
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
