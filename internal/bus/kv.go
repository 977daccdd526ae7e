package bus

import "time"

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

// KVLeaseKey is the lease key of a worker in BucketKVLeases.
func KVLeaseKey(pool, worker string) string {
	return Token(pool) + "." + Token(worker)
}
