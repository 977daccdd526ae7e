// Package rediskeys owns every Redis key Switchyard uses. Each key says who
// writes it, who reads it, and how long it lives; nothing else spells a key.
// All keys start with "switchyard:".
package rediskeys

import (
	"strconv"
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

// UsagePrefix starts every usage key (tests use a prefix of their own).
const UsagePrefix = prefix + "usage:"

// UsageRollup is a tenant's usage in one bucket of one resolution: a hash
// whose fields are "<counter>|<model>" (package usage names the counters)
// and values integers. res is "m" (minute), "h" (hour), "d" (UTC day) or
// "M" (UTC month); start is the bucket's start in Unix seconds. Writer:
// meter, only
// through its Lua script, which adds each event once (UsageSeen). Readers:
// meter's usage API (yardctl usage), the gateway's budgets (its rate
// limiter's script reads one field of the day and month hashes,
// usage.BudgetField). TTL the resolution's
// retention after the last write (meter's --retention-*; months as days).
// The tenant is a hash tag: one tenant's keys share a Redis Cluster slot.
func UsageRollup(keyPrefix, tenant, res string, start int64) string {
	return keyPrefix + "{" + tenant + "}:" + res + ":" + strconv.FormatInt(start, 10)
}

// UsageSeen is the set of request ids of a tenant's events that finished
// in one hour (start in Unix seconds), which the meter has counted: an
// event redelivered or published twice is found here and not counted
// again. Writer and reader: meter's Lua script. TTL meter's
// --dedup-window after the last write.
func UsageSeen(keyPrefix, tenant string, hourStart int64) string {
	return keyPrefix + "{" + tenant + "}:seen:" + strconv.FormatInt(hourStart, 10)
}

// UsageActive is the set of tenants with events in the minute starting at
// start (Unix seconds): whose summaries to publish. Writer: meter, after
// its script counted them (apart from it: the key is in no tenant's
// slot); reader: the meter replica publishing that minute's summaries.
// TTL UsageActiveTTL.
func UsageActive(keyPrefix string, start int64) string {
	return keyPrefix + "active:" + strconv.FormatInt(start, 10)
}

// UsageActiveTTL is the lifetime of a UsageActive key.
const UsageActiveTTL = time.Hour

// UsageSummaryLock is held (SET NX) by the one meter replica that
// publishes the summaries of the minute starting at start. TTL
// UsageActiveTTL.
func UsageSummaryLock(keyPrefix string, start int64) string {
	return keyPrefix + "summary-lock:" + strconv.FormatInt(start, 10)
}
