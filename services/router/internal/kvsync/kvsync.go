// Package kvsync keeps the router's replica of the KV block index: it
// bootstraps from the kvtracker's per-worker snapshots in Redis, then
// follows the kvtracker's deltas on JetStream (bus.StreamKV) with an
// ordered consumer starting right after the oldest snapshot.
//
// # Per-worker protocol (eventsv1.KVBlockDelta)
//
// Each worker's deltas carry (epoch, seq). For every delta:
//
//   - older than the worker's bootstrap snapshot (stream sequence at or
//     below the snapshot's stream_seq) or a seq already applied: skipped;
//   - a new epoch: the kvtracker started the worker afresh (worker or
//     tracker restart, unrecoverable gap), so the worker's blocks are
//     dropped and the new epoch starts from nothing;
//   - the next seq, or a delta that clears the worker: applied;
//   - a seq hole: some deltas are missing. The worker's snapshot is
//     reloaded from Redis; when it does not cover the hole yet, the worker
//     is marked resyncing: deltas keep being applied (best effort) and are
//     buffered, and the snapshot is polled until the kvtracker writes one
//     that covers the hole, which then replaces the worker's blocks before
//     the buffered deltas are replayed on top.
//
// # Surviving restarts
//
// The index is never emptied because a source went away: routing keeps
// using what it holds. NATS restarts are followed by the client; the KV
// stream is in memory, so a restarted server has a new, empty stream (or
// none until someone creates it): the stream's creation time is checked
// periodically, and a new stream restarts the consumer from its beginning
// after adopting whatever newer snapshots Redis has. Lost deltas show up as
// seq holes and are resynchronised as above. A kvtracker restart shows up
// as new epochs.
package kvsync

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/kvblock"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
)

// Index is where the replica writes (kvblock.Index).
type Index interface {
	Store(worker string, hashes []kvblock.Hash)
	Remove(worker string, hashes []kvblock.Hash)
	Clear(worker string)
	Replace(worker string, hashes []kvblock.Hash)
}

// SnapshotStore reads the kvtracker's snapshots (Redis in production).
type SnapshotStore interface {
	// List returns every snapshot; bad counts entries that did not decode.
	List(ctx context.Context) (snaps []*eventsv1.WorkerKVSnapshot, bad int, err error)
	// Get returns one worker's snapshot, nil when there is none.
	Get(ctx context.Context, pool, worker string) (*eventsv1.WorkerKVSnapshot, error)
}

// Config for New.
type Config struct {
	Conn *nats.Conn
	// Store is nil when there is no Redis: deltas only, and holes cannot be
	// repaired (the worker's next epoch starts it afresh).
	Store SnapshotStore
	Index Index
	// CheckInterval is how often the stream is checked for a reset and
	// resyncing workers poll their snapshot. Default 1s.
	CheckInterval time.Duration
	// MaxBuffered bounds the deltas kept per resyncing worker. Default 4096.
	MaxBuffered int
	Log         zerolog.Logger
}

// Stats are the replica's counters since start.
type Stats struct {
	Deltas          uint64 // applied
	Skipped         uint64 // duplicates and deltas covered by a snapshot
	Malformed       uint64
	EpochChanges    uint64
	Holes           uint64
	Resyncs         uint64 // snapshots that repaired a hole
	StreamResets    uint64
	SnapshotsLoaded uint64
	Bootstrapped    bool
	Workers         int
	Resyncing       int
}

// Replica follows the KV deltas into an Index. Run drives it; BlockSize and
// Stats are safe to call concurrently.
type Replica struct {
	cfg Config
	js  jetstream.JetStream

	// Owned by Run's goroutine.
	workers       map[string]*worker
	streamCreated time.Time
	lastStreamSeq uint64
	buf           []kvblock.Hash

	mu         sync.RWMutex // guards blockSizes and resyncing, read by others
	blockSizes map[string]int
	resyncing  int

	deltas, skipped, malformed, epochs, holes, resyncs, resets, snapshots atomic.Uint64
	nworkers                                                              atomic.Int64
	ready                                                                 atomic.Bool
}

type worker struct {
	pool, model string
	epoch, seq  uint64
	blockSize   int
	// skipUpTo is the stream sequence the bootstrap snapshot covers: older
	// deltas are already in it. Zero after a stream reset.
	skipUpTo uint64
	// resync is set while deltas are missing; the snapshot must reach at
	// least needSeq to repair them.
	resync  bool
	needSeq uint64
	buffer  []*eventsv1.KVBlockDelta
}

// New builds a replica; Run starts it.
func New(cfg Config) (*Replica, error) {
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = time.Second
	}
	if cfg.MaxBuffered <= 0 {
		cfg.MaxBuffered = 4096
	}
	js, err := jetstream.New(cfg.Conn)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return &Replica{cfg: cfg, js: js, workers: map[string]*worker{}, blockSizes: map[string]int{}}, nil
}

// BlockSize is the block size a worker's deltas or snapshot declared; 0
// when unknown.
func (r *Replica) BlockSize(worker string) int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.blockSizes[worker]
}

// Stats returns the counters.
func (r *Replica) Stats() Stats {
	r.mu.RLock()
	resyncing := r.resyncing
	r.mu.RUnlock()
	workers := int(r.nworkers.Load())
	return Stats{
		Deltas: r.deltas.Load(), Skipped: r.skipped.Load(), Malformed: r.malformed.Load(),
		EpochChanges: r.epochs.Load(), Holes: r.holes.Load(), Resyncs: r.resyncs.Load(),
		StreamResets: r.resets.Load(), SnapshotsLoaded: r.snapshots.Load(),
		Bootstrapped: r.ready.Load(), Workers: workers, Resyncing: resyncing,
	}
}

var errStreamReset = errors.New("kv stream was recreated")

// Run follows the deltas until ctx ends. Failures (NATS or Redis down, the
// stream gone) are logged and retried with backoff; Run returns nil when
// ctx ends.
func (r *Replica) Run(ctx context.Context) error {
	const minBackoff = 100 * time.Millisecond
	backoff := minBackoff
	for {
		started := time.Now()
		err := r.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(started) > time.Minute {
			backoff = minBackoff // it worked for a while: not a persistent failure
		}
		switch {
		case errors.Is(err, errStreamReset):
			backoff = minBackoff
		case !r.cfg.Conn.IsConnected():
			// The connection logs its own outage once; do not repeat it
			// every retry.
			r.cfg.Log.Debug().Err(err).Dur("retry_in", backoff).Msg("kv replica waiting for nats")
		default:
			r.cfg.Log.Warn().Err(err).Dur("retry_in", backoff).Msg("kv replica interrupted")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// session bootstraps when needed and consumes until an error.
func (r *Replica) session(ctx context.Context) error {
	info, err := r.streamInfo(ctx, true, 5*time.Second)
	if err != nil {
		return err
	}
	startSeq := r.lastStreamSeq + 1
	if !info.Created.Equal(r.streamCreated) {
		first := r.streamCreated.IsZero()
		if !first {
			r.resets.Add(1)
			r.cfg.Log.Warn().Time("created", info.Created).Msg("kv stream was recreated: restarting from its beginning")
			for _, w := range r.workers {
				w.skipUpTo = 0 // stream sequences of the old stream mean nothing now
			}
		}
		r.streamCreated = info.Created
		if err := r.bootstrap(ctx, first); err != nil {
			// Follow the deltas alone meanwhile; holes resynchronise
			// workers once Redis answers.
			r.cfg.Log.Warn().Err(err).Msg("kv snapshots unavailable: following the deltas alone")
		}
		startSeq = 1
		if first {
			startSeq = r.startAfterSnapshots(info.State.LastSeq)
		}
		r.ready.Store(true)
	}
	cons, err := r.js.OrderedConsumer(ctx, bus.StreamKV, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{bus.KVDeltaSubjectAll},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    max(startSeq, 1),
		// Resets happen inside Next; bound them so this loop keeps its
		// periodic checks and can restart from a fresh stream.
		MaxResetAttempts: 2,
	})
	if err != nil {
		return fmt.Errorf("kv consumer: %w", err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("kv consumer messages: %w", err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	r.cfg.Log.Info().Uint64("start_seq", startSeq).Int("workers", len(r.workers)).Msg("kv replica following deltas")

	nextCheck := time.Now().Add(r.cfg.CheckInterval)
	for {
		msg, err := it.Next(jetstream.NextMaxWait(r.cfg.CheckInterval))
		switch {
		case err == nil:
			r.handle(ctx, msg)
		case errors.Is(err, nats.ErrTimeout):
		default:
			return fmt.Errorf("kv consumer next: %w", err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if now := time.Now(); !now.Before(nextCheck) {
			nextCheck = now.Add(r.cfg.CheckInterval)
			if err := r.check(ctx); err != nil {
				return err
			}
		}
	}
}

// streamInfo returns the KV stream's info, creating the stream when asked
// and missing (routers may start before any kvtracker).
func (r *Replica) streamInfo(ctx context.Context, create bool, timeout time.Duration) (*jetstream.StreamInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	s, err := r.js.Stream(ctx, bus.StreamKV)
	if errors.Is(err, jetstream.ErrStreamNotFound) && create {
		if err := bus.EnsureKVStream(ctx, r.js); err != nil {
			return nil, err
		}
		s, err = r.js.Stream(ctx, bus.StreamKV)
	}
	if err != nil {
		return nil, fmt.Errorf("kv stream info: %w", err)
	}
	return s.CachedInfo(), nil
}

// check detects a recreated stream and retries pending resyncs.
func (r *Replica) check(ctx context.Context) error {
	if !r.cfg.Conn.IsConnected() {
		// A request now would wait in the reconnect buffer for its whole
		// timeout; the next check after the reconnect will do.
		r.resyncPending(ctx)
		return nil
	}
	// Short: a request lost around a reconnect must not hold up the
	// resyncs behind it for long.
	info, err := r.streamInfo(ctx, false, time.Second)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return errStreamReset
	case err != nil:
		// NATS unreachable: keep serving what we have; the client
		// reconnects on its own.
		r.cfg.Log.Debug().Err(err).Msg("kv stream check")
	case !info.Created.Equal(r.streamCreated):
		return errStreamReset
	}
	r.resyncPending(ctx)
	return nil
}

func (r *Replica) resyncPending(ctx context.Context) {
	for id, w := range r.workers {
		if w.resync {
			r.tryResync(ctx, id, w)
		}
	}
}

// startAfterSnapshots returns where the consumer starts after the first
// bootstrap: right after the oldest snapshot's stream sequence, so every
// worker sees the deltas after its own snapshot. A snapshot that claims a
// sequence past the stream's end was taken on an earlier incarnation of the
// stream; its worker then needs the new stream from its beginning.
func (r *Replica) startAfterSnapshots(lastSeq uint64) uint64 {
	var minSeq uint64
	fromStart := len(r.workers) == 0
	for _, w := range r.workers {
		switch {
		case w.skipUpTo == 0 || w.skipUpTo > lastSeq:
			w.skipUpTo = 0
			fromStart = true
		case minSeq == 0 || w.skipUpTo < minSeq:
			minSeq = w.skipUpTo
		}
	}
	if fromStart {
		return 1
	}
	return minSeq + 1
}

// bootstrap adopts the stored snapshots that are news: all of them the
// first time, after a stream reset those ahead of what the replica holds.
func (r *Replica) bootstrap(ctx context.Context, first bool) error {
	if r.cfg.Store == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	snaps, bad, err := r.cfg.Store.List(ctx)
	if bad > 0 {
		r.malformed.Add(uint64(bad))
		r.cfg.Log.Warn().Int("bad", bad).Msg("kv snapshots that do not decode were skipped")
	}
	if err != nil {
		return fmt.Errorf("list kv snapshots: %w", err)
	}
	adopted := 0
	for _, s := range snaps {
		if r.adopt(s, first) {
			adopted++
		}
	}
	r.cfg.Log.Info().Int("snapshots", len(snaps)).Int("adopted", adopted).Msg("kv index bootstrapped")
	return nil
}

// adopt takes a snapshot in when it is news for the worker.
func (r *Replica) adopt(s *eventsv1.WorkerKVSnapshot, first bool) bool {
	id := s.GetWorkerId()
	if id == "" {
		r.malformed.Add(1)
		return false
	}
	w := r.workers[id]
	switch {
	case w == nil:
	case w.resync && s.GetEpoch() == w.epoch && s.GetSeq() >= w.needSeq:
	case s.GetEpoch() == w.epoch && s.GetSeq() > w.seq:
	case s.GetEpoch() != w.epoch && w.resync:
	default:
		return false
	}
	if w == nil {
		w = &worker{}
		r.workers[id] = w
		r.nworkers.Add(1)
	}
	w.pool, w.model = s.GetPool(), s.GetModel()
	r.load(id, w, s)
	if first {
		w.skipUpTo = s.GetStreamSeq()
	}
	return true
}

// load replaces the worker's blocks with snapshot s and replays buffered
// deltas after it.
func (r *Replica) load(id string, w *worker, s *eventsv1.WorkerKVSnapshot) {
	r.cfg.Index.Replace(id, r.hashes(s.GetBlocks()))
	r.snapshots.Add(1)
	w.epoch, w.seq = s.GetEpoch(), s.GetSeq()
	if bs := int(s.GetBlockSize()); bs > 0 {
		w.blockSize = bs
	}
	buffered := w.buffer
	r.setResync(w, false)
	for _, d := range buffered {
		if d.GetEpoch() == w.epoch && d.GetSeq() == w.seq+1 {
			r.apply(id, w, d)
		}
	}
	r.publishBlockSize(id, w)
}

func (r *Replica) setResync(w *worker, on bool) {
	if w.resync == on {
		return
	}
	w.resync = on
	if !on {
		w.buffer, w.needSeq = nil, 0
	}
	r.mu.Lock()
	if on {
		r.resyncing++
	} else {
		r.resyncing--
	}
	r.mu.Unlock()
}

func (r *Replica) publishBlockSize(id string, w *worker) {
	r.mu.RLock()
	cur, known := r.blockSizes[id]
	r.mu.RUnlock()
	if known && cur == w.blockSize {
		return
	}
	r.mu.Lock()
	r.blockSizes[id] = w.blockSize
	r.mu.Unlock()
}

// tryResync reloads a resyncing worker's snapshot and uses it if it covers
// the hole.
func (r *Replica) tryResync(ctx context.Context, id string, w *worker) {
	if r.cfg.Store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := r.cfg.Store.Get(ctx, w.pool, id)
	if err != nil {
		r.cfg.Log.Debug().Err(err).Str("worker", id).Msg("kv snapshot reload")
		return
	}
	if s == nil || s.GetEpoch() != w.epoch || s.GetSeq() < w.needSeq {
		return // not written yet: poll again at the next check
	}
	r.load(id, w, s)
	r.resyncs.Add(1)
	r.cfg.Log.Info().Str("worker", id).Uint64("epoch", w.epoch).Uint64("seq", w.seq).Msg("kv worker resynchronised from its snapshot")
}

// handle applies one message from the stream.
func (r *Replica) handle(ctx context.Context, msg jetstream.Msg) {
	var streamSeq uint64
	if md, err := msg.Metadata(); err == nil {
		streamSeq = md.Sequence.Stream
		r.lastStreamSeq = streamSeq
	}
	var d eventsv1.KVBlockDelta
	if err := proto.Unmarshal(msg.Data(), &d); err != nil || d.GetWorkerId() == "" {
		r.malformed.Add(1)
		r.cfg.Log.Warn().Str("subject", msg.Subject()).Msg("drop malformed kv delta")
		return
	}
	r.delta(ctx, &d, streamSeq)
}

// delta runs the per-worker protocol described in the package comment.
func (r *Replica) delta(ctx context.Context, d *eventsv1.KVBlockDelta, streamSeq uint64) {
	id := d.GetWorkerId()
	w := r.workers[id]
	if w == nil {
		w = &worker{pool: d.GetPool(), model: d.GetModel(), epoch: d.GetEpoch()}
		r.workers[id] = w
		r.nworkers.Add(1)
	}
	if w.skipUpTo > 0 && streamSeq > 0 && streamSeq <= w.skipUpTo {
		r.skipped.Add(1)
		return
	}
	w.pool, w.model = d.GetPool(), d.GetModel()
	if d.GetEpoch() != w.epoch {
		r.epochs.Add(1)
		r.cfg.Log.Info().Str("worker", id).Uint64("old_epoch", w.epoch).Uint64("epoch", d.GetEpoch()).Msg("kv worker restarted: dropping its blocks")
		r.cfg.Index.Clear(id)
		r.setResync(w, false)
		w.epoch, w.seq, w.skipUpTo = d.GetEpoch(), 0, 0
	}
	if d.GetSeq() <= w.seq {
		r.skipped.Add(1)
		return
	}
	if d.GetSeq() != w.seq+1 && !d.GetCleared() {
		r.holes.Add(1)
		r.cfg.Log.Info().Str("worker", id).Uint64("have", w.seq).Uint64("got", d.GetSeq()).Msg("kv delta hole: reloading the worker's snapshot")
		w.needSeq = max(w.needSeq, d.GetSeq()-1)
		r.setResync(w, true)
		r.tryResync(ctx, id, w)
		if d.GetSeq() <= w.seq {
			r.skipped.Add(1)
			return
		}
	}
	r.apply(id, w, d)
}

// apply applies d on top of w's state and buffers it while resyncing.
func (r *Replica) apply(id string, w *worker, d *eventsv1.KVBlockDelta) {
	if d.GetCleared() {
		// A full reset: whatever was missing before it no longer matters.
		r.cfg.Index.Clear(id)
		r.setResync(w, false)
	}
	if len(d.GetRemoved()) > 0 {
		r.cfg.Index.Remove(id, r.hashes(d.GetRemoved()))
	}
	if len(d.GetStored()) > 0 {
		r.cfg.Index.Store(id, r.hashes(d.GetStored()))
	}
	w.seq = d.GetSeq()
	if bs := int(d.GetBlockSize()); bs > 0 && bs != w.blockSize {
		w.blockSize = bs
		r.publishBlockSize(id, w)
	} else if w.blockSize == 0 {
		r.publishBlockSize(id, w)
	}
	r.deltas.Add(1)
	if w.resync {
		if len(w.buffer) >= r.cfg.MaxBuffered {
			// The snapshot will have to cover the dropped one too.
			w.needSeq = max(w.needSeq, w.buffer[0].GetSeq())
			w.buffer = w.buffer[1:]
		}
		w.buffer = append(w.buffer, d)
	}
}

// hashes converts wire hashes for the index, reusing one buffer (the index
// does not keep the slice).
func (r *Replica) hashes(in []uint64) []kvblock.Hash {
	r.buf = r.buf[:0]
	for _, h := range in {
		r.buf = append(r.buf, kvblock.Hash(h))
	}
	return r.buf
}
