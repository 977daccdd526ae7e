// Package rediskeys owns every Redis key Switchyard uses. Each key says who
// writes it, who reads it, and how long it lives; nothing else spells a key.
// All keys start with "switchyard:".
package rediskeys

import (
	"time"
)

const prefix = "switchyard:"

// KVSnapshot is one worker's cached blocks (eventsv1.WorkerKVSnapshot,
// protobuf). Writer: the kvtracker replica holding the worker's lease,
// periodically and on epoch change. Readers: routers at start and when
// they resynchronise. TTL KVSnapshotTTL, refreshed on every write, so a
// worker nobody tracks any more disappears.
func KVSnapshot(pool, worker string) string {
	return prefix + "kv:snapshot:" + pool + ":" + worker
}

// KVSnapshotPattern matches every KVSnapshot key (SCAN pattern).
const KVSnapshotPattern = prefix + "kv:snapshot:*"

// KVSnapshotTTL is the lifetime of a KVSnapshot key.
const KVSnapshotTTL = 10 * time.Minute

// KVSummary is one worker's eventsv1.WorkerKVSummary (protobuf). Writer:
// kvtracker; readers: routers, yardctl. TTL KVSummaryTTL.
func KVSummary(pool, worker string) string {
	return prefix + "kv:summary:" + pool + ":" + worker
}

// KVSummaryTTL is the lifetime of a KVSummary key.
const KVSummaryTTL = 5 * time.Minute

// RateLimitPrefix starts every rate-limit key (the gateway's tests use a
// prefix of their own).
const RateLimitPrefix = prefix + "rl:"

// RateLimit is one limit of a tenant, or of a tenant on one model (model
// empty: the tenant's own). Writer and reader: every gateway replica, only
// through the limiter's Lua script (services/gateway/ratelimit). limit is
// "requests", "input_tokens" or "output_tokens" — a hash {l: level, t:
// last update in ms} living until its bucket has drained (at most a minute
// and a second after the last request) — or "day:YYYYMMDD" /
// "month:YYYYMM", a token counter living until an hour after its UTC
// window ends. The tenant is a hash tag: one request's keys share a Redis
// Cluster slot, as the script needs.
func RateLimit(keyPrefix, tenant, model, limit string) string {
	return keyPrefix + "{" + tenant + "}:" + model + ":" + limit
}
