package bus

import (
	"strings"
	"time"
)

// KV cache state, from kvtracker to routers.
const (
	// StreamKV is the JetStream stream of KV block deltas. Publisher
	// kvtracker (the replica holding the worker's lease), one message per
	// applied vLLM batch; consumers: every router replica, through an
	// ordered consumer starting after the stream_seq of the Redis snapshots
	// it bootstrapped from. Payload eventsv1.KVBlockDelta. Retention is
	// short: a consumer further behind than KVStreamMaxAge resynchronises
	// from the snapshots instead.
	StreamKV = "SWITCHYARD_KV"
	// KVStreamMaxAge bounds how far back a router can replay deltas.
	KVStreamMaxAge = 10 * time.Minute

	kvDeltaPrefix   = prefix + "kv."
	kvSummaryPrefix = prefix + "kvsummary."

	// KVDeltaSubjectAll matches every worker's deltas.
	KVDeltaSubjectAll = kvDeltaPrefix + ">"
	// KVSummarySubjectAll matches every worker's summaries.
	KVSummarySubjectAll = kvSummaryPrefix + ">"

	// BucketKVLeases is the NATS KV bucket in which kvtracker replicas lease
	// workers: key = KVLeaseKey(pool, worker), value = the holder's replica
	// id; entries expire after KVLeaseTTL unless renewed, so a dead
	// replica's workers are taken over within that time.
	BucketKVLeases = "switchyard_kv_leases"
	// KVLeaseTTL is the bucket's TTL.
	KVLeaseTTL = 6 * time.Second
)

// KVDeltaSubject is switchyard.v1.kv.<pool>.<worker>. Publisher kvtracker;
// payload eventsv1.KVBlockDelta.
func KVDeltaSubject(pool, worker string) string {
	return kvDeltaPrefix + Token(pool) + "." + Token(worker)
}

// KVSummarySubject is switchyard.v1.kvsummary.<pool>.<worker>. Publisher
// kvtracker (core NATS, periodic); consumers: routers, dashboards. Payload
// eventsv1.WorkerKVSummary.
func KVSummarySubject(pool, worker string) string {
	return kvSummaryPrefix + Token(pool) + "." + Token(worker)
}

// KVLeaseKey is the lease key of a worker in BucketKVLeases:
// <pool>.<worker>, each escaped by kvKeyToken so that any names give a valid
// and distinct key.
func KVLeaseKey(pool, worker string) string {
	return kvKeyToken(pool) + "." + kvKeyToken(worker)
}

// kvReplicaPrefix starts the presence keys kvtracker replicas keep in
// BucketKVLeases ('=' never starts a lease key); each replica aims for its
// share of the workers among those present.
const kvReplicaPrefix = "=replicas."

// KVReplicaKey is a kvtracker replica's presence key in BucketKVLeases.
func KVReplicaKey(replica string) string { return kvReplicaPrefix + kvKeyToken(replica) }

// KVReplicaKeyFilter matches every replica presence key.
const KVReplicaKeyFilter = kvReplicaPrefix + "*"

// kvKeyToken escapes a name into the characters NATS KV keys allow, without
// dots: letters, digits, '-' and '_' stay; every other byte becomes '/' and
// two hex digits. The mapping is injective ('/' is never kept), so two names
// never share a key.
func kvKeyToken(s string) string {
	if s == "" {
		return "/"
	}
	const hex = "0123456789abcdef"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
			b.WriteByte(c)
		default:
			b.WriteByte('/')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}
