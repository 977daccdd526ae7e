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
