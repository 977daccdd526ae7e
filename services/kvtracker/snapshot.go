package kvtracker

import (
	"context"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/rediskeys"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
	"github.com/switchyard-dev/switchyard/services/kvtracker/internal/ingest"
)

const (
	// ackWait bounds the wait for the ack of a snapshot's last delta.
	ackWait = 5 * time.Second
	// redisWriteTimeout is kept under the lease safety margin, so a write
	// started while the lease was valid lands before a successor can
	// acquire the worker.
	redisWriteTimeout = time.Second
)

// snapshotWriter writes one worker's snapshots, remembering what it wrote.
type snapshotWriter struct {
	t   *Tracker
	r   *run
	w   *ingest.Worker
	d   *deps
	log zerolog.Logger

	buf        []uint64
	wrote      bool
	epoch, seq uint64
	ack        ingest.Ack // the ack streamSeq came from
	streamSeq  uint64
}

func (s *snapshotWriter) write(ctx context.Context) {
	rdb := s.d.rdb
	if rdb == nil {
		return
	}
	m := s.t.metrics.snapshots
	spec := s.r.spec
	key := rediskeys.KVSnapshot(spec.Pool, spec.ID)
	snap := s.w.Snapshot(s.buf[:0])
	s.buf = snap.Blocks
	if s.wrote && snap.Epoch == s.epoch && snap.Seq == s.seq {
		if !s.r.lease.Valid() {
			return
		}
		wctx, cancel := context.WithTimeout(ctx, redisWriteTimeout)
		ok, err := rdb.Expire(wctx, key, rediskeys.KVSnapshotTTL).Result()
		cancel()
		if err == nil && ok {
			m.WithLabelValues("refreshed").Inc()
			return
		}
		// Gone (Redis restarted?): write it again.
	}
	streamSeq := s.streamSeq
	switch {
	case snap.Ack == nil:
	case snap.Ack == s.ack:
		// Same last delta as before (later publishes failed).
	default:
		t := time.NewTimer(ackWait)
		select {
		case a := <-snap.Ack.Ok():
			streamSeq = a.Sequence
			s.ack = snap.Ack
		case <-snap.Ack.Err():
			// Not stored: the previous position is conservative (consumers
			// skip deltas the snapshot already holds).
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		t.Stop()
	}
	msg := &eventsv1.WorkerKVSnapshot{
		Pool:      spec.Pool,
		WorkerId:  spec.ID,
		Model:     spec.Model(),
		Epoch:     snap.Epoch,
		Seq:       snap.Seq,
		BlockSize: int32(spec.BlockSize),
		Blocks:    snap.Blocks,
		StreamSeq: streamSeq,
		Ts:        timestamppb.Now(),
	}
	data, err := proto.Marshal(msg)
	if err != nil {
		m.WithLabelValues("error").Inc()
		s.log.Error().Err(err).Msg("marshal kv snapshot")
		return
	}
	if !s.r.lease.Valid() {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, redisWriteTimeout)
	err = rdb.Set(wctx, key, data, rediskeys.KVSnapshotTTL).Err()
	cancel()
	if err != nil {
		m.WithLabelValues("error").Inc()
		s.log.Warn().Err(err).Msg("kv snapshot write failed")
		return
	}
	m.WithLabelValues("written").Inc()
	s.wrote, s.epoch, s.seq, s.streamSeq = true, snap.Epoch, snap.Seq, streamSeq
}

// writeSummary publishes the worker's summary on NATS and in Redis.
func (t *Tracker) writeSummary(ctx context.Context, r *run, w *ingest.Worker, d *deps, log zerolog.Logger) {
	spec := r.spec
	sum := w.Summary()
	t.metrics.cached.WithLabelValues(spec.Pool, spec.ID).Set(float64(sum.CachedBlocks))
	var usage float64
	if spec.GPUBlocks > 0 {
		usage = float64(sum.CachedBlocks) / float64(spec.GPUBlocks)
	}
	data, err := proto.Marshal(&eventsv1.WorkerKVSummary{
		Pool:               spec.Pool,
		WorkerId:           spec.ID,
		Model:              spec.Model(),
		Epoch:              sum.Epoch,
		CachedBlocks:       int64(sum.CachedBlocks),
		BlockSize:          int32(spec.BlockSize),
		Usage:              usage,
		BlocksStoredTotal:  int64(sum.StoredTotal),
		BlocksRemovedTotal: int64(sum.RemovedTotal),
		Ts:                 timestamppb.Now(),
	})
	if err != nil {
		t.metrics.summaries.WithLabelValues("error").Inc()
		return
	}
	if !r.lease.Valid() {
		return
	}
	failed := false
	if err := d.nc.Publish(bus.KVSummarySubject(spec.Pool, spec.ID), data); err != nil {
		failed = true
		log.Warn().Err(err).Msg("kv summary publish failed")
	}
	if d.rdb != nil {
		wctx, cancel := context.WithTimeout(ctx, redisWriteTimeout)
		err := d.rdb.Set(wctx, rediskeys.KVSummary(spec.Pool, spec.ID), data, rediskeys.KVSummaryTTL).Err()
		cancel()
		if err != nil {
			failed = true
			log.Warn().Err(err).Msg("kv summary write failed")
		}
	}
	if failed {
		t.metrics.summaries.WithLabelValues("error").Inc()
		return
	}
	t.metrics.summaries.WithLabelValues("published").Inc()
}
