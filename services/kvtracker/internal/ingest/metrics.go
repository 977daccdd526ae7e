package ingest

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-dev/switchyard/services/kvtracker/internal/blockset"
)

// ResetReason says why a worker's state started afresh (a new epoch).
type ResetReason int

// Reset reasons.
const (
	// ResetStart: the tracker began ingesting the worker (lease acquired,
	// or its pipeline restarted after an error): Start, once per Run.
	ResetStart ResetReason = iota
	// ResetRestart: the sequence went backwards, so the worker restarted
	// (vLLM's numbering starts at 0 in every process).
	ResetRestart
	// ResetGapNotCovered: batches were missed and the worker's replay
	// buffer no longer holds them.
	ResetGapNotCovered
	// ResetReplayFailed: batches were missed and the replay request failed.
	ResetReplayFailed
	// ResetNoReplay: batches were missed and the worker has no replay
	// endpoint.
	ResetNoReplay
	// ResetInconsistent: a block's parent was unknown although every batch
	// since the worker's start was applied; the state is rebuilt.
	ResetInconsistent
	// ResetReconnectGap: the connection to the worker dropped and batches
	// were missed meanwhile. The worker may have restarted without the
	// sequence showing it (its new numbering already passed the old), so
	// the state is rebuilt from its replay buffer.
	ResetReconnectGap
	// ResetProcessRestart: the worker's process start time changed (its
	// metrics said so) before its new process published anything, so its
	// cache is empty: dropped at once rather than at its first event.
	ResetProcessRestart
	numResetReasons
)

var resetReasonNames = [numResetReasons]string{"start", "restart", "gap_not_covered", "replay_failed", "no_replay", "inconsistent", "reconnect_gap", "process_restart"}

func (r ResetReason) String() string { return resetReasonNames[r] }

// Replay outcomes.
const (
	replayCovered    = iota // the replay held every missing batch
	replayNotCovered        // it started after the first missing batch
	replayFailed            // the request failed
	numReplayOutcomes
)

// Metrics are the ingest counters, shared by every worker of a tracker.
type Metrics struct {
	events        [blockset.NumEventKinds]prometheus.Counter
	skipped       [blockset.NumSkipReasons]prometheus.Counter
	blocksStored  prometheus.Counter
	blocksRemoved prometheus.Counter
	orphanBlocks  prometheus.Counter
	unknownRemove prometheus.Counter
	decodeErrors  prometheus.Counter
	malformedMsgs prometheus.Counter
	duplicates    prometheus.Counter
	gaps          prometheus.Counter
	replays       [numReplayOutcomes]prometheus.Counter
	resets        [numResetReasons]prometheus.Counter
	deltas        prometheus.Counter
	publishErrors prometheus.Counter
	lag           prometheus.Histogram
	lagByWorker   *prometheus.GaugeVec
}

// NewMetrics registers the ingest metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	events := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchyard_kvtracker_events_total",
		Help: "vLLM KV events decoded, by type (BlockStored, BlockRemoved, AllBlocksCleared, unknown).",
	}, []string{"type"})
	skipped := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchyard_kvtracker_skipped_events_total",
		Help: "KV events not applied, by reason: medium (not GPU), sliding_window (not a full-attention group), unknown_tag, malformed_event, block_size_mismatch, orphan (parent block unknown).",
	}, []string{"reason"})
	replays := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchyard_kvtracker_replays_total",
		Help: "Replay requests to a worker's replay endpoint, by outcome: covered (every missing batch replayed), not_covered (the buffer had lost some), failed.",
	}, []string{"outcome"})
	resets := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchyard_kvtracker_resets_total",
		Help: "Worker states started in a new epoch, by reason: start (the tracker began ingesting the worker: lease acquired or pipeline restarted), and, cleared and restarted, restart, gap_not_covered, replay_failed, no_replay, inconsistent, reconnect_gap, process_restart.",
	}, []string{"reason"})
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m := &Metrics{
		blocksStored:  counter("switchyard_kvtracker_blocks_stored_total", "Engine blocks stored (BlockStored blocks applied)."),
		blocksRemoved: counter("switchyard_kvtracker_blocks_removed_total", "Engine blocks removed (BlockRemoved blocks applied)."),
		orphanBlocks:  counter("switchyard_kvtracker_orphan_blocks_total", "Stored blocks skipped because their parent block was unknown."),
		unknownRemove: counter("switchyard_kvtracker_unknown_removed_blocks_total", "Removals of blocks the tracker never held (stored before it joined, or skipped)."),
		decodeErrors:  counter("switchyard_kvtracker_decode_errors_total", "KV event payloads that did not decode and were dropped."),
		malformedMsgs: counter("switchyard_kvtracker_malformed_messages_total", "ZMQ messages that were not [topic, 8-byte seq, payload], or carried an unknown topic, and were dropped."),
		duplicates:    counter("switchyard_kvtracker_duplicate_batches_total", "Batches received again after a replay had applied them."),
		gaps:          counter("switchyard_kvtracker_gaps_total", "Sequence gaps detected in a worker's KV event stream."),
		deltas:        counter("switchyard_kvtracker_deltas_published_total", "KVBlockDelta messages published to JetStream."),
		publishErrors: counter("switchyard_kvtracker_publish_errors_total", "KVBlockDelta publishes that failed (routers resynchronise from the next snapshot)."),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "switchyard_kvtracker_lag_seconds",
			Help:    "Time from a batch's engine timestamp to its delta being published (now - batch ts).",
			Buckets: []float64{1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05, 0.1, 0.5, 1, 5, 30},
		}),
		lagByWorker: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchyard_kvtracker_worker_lag_seconds",
			Help: "Lag of the last batch applied for each worker ingested by this replica.",
		}, []string{"pool", "worker"}),
	}
	for k := range m.events {
		m.events[k] = events.WithLabelValues(blockset.EventKind(k).String())
	}
	for r := range m.skipped {
		m.skipped[r] = skipped.WithLabelValues(blockset.SkipReason(r).String())
	}
	for i, name := range [numReplayOutcomes]string{"covered", "not_covered", "failed"} {
		m.replays[i] = replays.WithLabelValues(name)
	}
	for r := range m.resets {
		m.resets[r] = resets.WithLabelValues(ResetReason(r).String())
	}
	reg.MustRegister(events, skipped, replays, resets, m.blocksStored, m.blocksRemoved, m.orphanBlocks,
		m.unknownRemove, m.decodeErrors, m.malformedMsgs, m.duplicates, m.gaps, m.deltas, m.publishErrors,
		m.lag, m.lagByWorker)
	return m
}

// PublishError counts a delta whose publish failed after Publish returned
// (its ack was an error).
func (m *Metrics) PublishError() { m.publishErrors.Inc() }

// MalformedMessage counts a transport-level message that was dropped.
func (m *Metrics) MalformedMessage() { m.malformedMsgs.Inc() }

func (m *Metrics) add(c *blockset.Counts) {
	for k, n := range c.Events {
		if n != 0 {
			m.events[k].Add(float64(n))
		}
	}
	for r, n := range c.Skipped {
		if n != 0 {
			m.skipped[r].Add(float64(n))
		}
	}
	addIf(m.blocksStored, c.BlocksStored)
	addIf(m.blocksRemoved, c.BlocksRemoved)
	addIf(m.orphanBlocks, c.OrphanBlocks)
	addIf(m.unknownRemove, c.UnknownRemoved)
}

func addIf(c prometheus.Counter, n uint64) {
	if n != 0 {
		c.Add(float64(n))
	}
}
