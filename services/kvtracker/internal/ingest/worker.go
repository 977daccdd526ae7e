// Package ingest is one worker's ordered KV event pipeline: receive, check
// the sequence (replaying or resetting on gaps and restarts), decode,
// re-key to Switchyard block hashes, apply to the worker's block set and
// publish the net change as a KVBlockDelta.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard-dev/switchyard/internal/fleet"
	"github.com/switchyard-dev/switchyard/internal/vllm/kvevents"
	"github.com/switchyard-dev/switchyard/internal/vllm/kvzmq"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
	"github.com/switchyard-dev/switchyard/services/kvtracker/internal/blockset"
)

// ErrLeaseLost stops a worker whose lease is no longer valid: another
// replica may own it now, so nothing more may be published.
var ErrLeaseLost = errors.New("worker lease lost")

// Ack is the pending acknowledgement of a published delta;
// jetstream.PubAckFuture implements it.
type Ack interface {
	Ok() <-chan *jetstream.PubAck
	Err() <-chan error
}

// Sink publishes deltas. It must not keep d after returning.
type Sink interface {
	Publish(d *eventsv1.KVBlockDelta) (Ack, error)
}

// Source delivers a worker's live messages in order; *kvzmq.Subscriber
// implements it.
type Source interface {
	Recv(ctx context.Context) (kvzmq.Message, error)
}

// Reconnecting is a Source that counts the connections it lost
// (kvzmq.Subscriber): a gap right after a reconnect is read as a worker
// restart hidden by the reconnect, not as lost messages.
type Reconnecting interface {
	ConnectionErrors() uint64
}

// Replayer asks the worker's replay endpoint for every batch from start
// on (kvzmq.Replay bound to the endpoint).
type Replayer func(ctx context.Context, start uint64, fn func(seq uint64, payload []byte) error) error

// Options configure a Worker.
type Options struct {
	Spec fleet.Worker
	Sink Sink
	// Replay is nil when the worker has no replay endpoint.
	Replay        Replayer
	ReplayTimeout time.Duration
	// NewEpoch returns a fresh epoch, larger than any this worker had.
	NewEpoch func() uint64
	// Valid reports whether the worker's lease still holds; nil: always.
	Valid func() bool
	// OnEpoch is called after a new epoch's cleared delta, so a snapshot
	// of the fresh state is written soon.
	OnEpoch func()
	// OnPublishError is called when a delta could not be published.
	OnPublishError func()
	// Drop, when set, discards live messages it returns true for, before
	// the sequence check (tests use it to cause a real gap).
	Drop    func(seq uint64) bool
	Metrics *Metrics
	Log     zerolog.Logger
}

// Worker is one worker's pipeline. Run drives it from a single goroutine;
// Snapshot and Summary may be called from others.
type Worker struct {
	opt  Options
	log  zerolog.Logger
	warn zerolog.Logger // sampled: hostile input must not flood the log
	lag  interface{ Set(float64) }

	dec   kvevents.Decoder
	batch kvevents.Batch

	// Pipeline state, owned by the Run goroutine.
	expected     uint64 // next engine seq to apply
	haveExpected bool
	lastLive     uint64
	haveLive     bool
	fresh        bool // nothing applied since the last reset
	complete     bool // every batch since the engine's cache was empty is applied
	replaying    bool // replaying into a fresh state
	rebuild      bool // an inconsistency asks for a rebuild
	reconnected  bool // the source lost its connection since the last message

	// restarts counts the resets for a worker restart, seen in any way;
	// restartSeen is a restart signalled by ProcessRestarted (with the
	// count its caller saw), pending until Run takes it.
	restarts    atomic.Uint64
	restartSeen atomic.Pointer[uint64]
	// interrupt ends the receive Run waits in, for a signalled restart.
	interrupt atomic.Pointer[context.CancelFunc]

	// mu guards what Snapshot and Summary read.
	mu           sync.Mutex
	set          *blockset.Set
	epoch, seq   uint64
	lastAck      Ack
	storedTotal  uint64
	removedTotal uint64
	delta        eventsv1.KVBlockDelta
	ts           timestamppb.Timestamp
}

// New builds a worker pipeline; nothing runs until Run.
func New(opt Options) *Worker {
	if opt.ReplayTimeout <= 0 {
		opt.ReplayTimeout = 10 * time.Second
	}
	if opt.Valid == nil {
		opt.Valid = func() bool { return true }
	}
	if opt.OnEpoch == nil {
		opt.OnEpoch = func() {}
	}
	if opt.OnPublishError == nil {
		opt.OnPublishError = func() {}
	}
	log := opt.Log.With().Str("pool", opt.Spec.Pool).Str("worker", opt.Spec.ID).Logger()
	w := &Worker{
		opt:  opt,
		log:  log,
		warn: log.Sample(&zerolog.BurstSampler{Burst: 20, Period: time.Minute}),
		lag:  opt.Metrics.lagByWorker.WithLabelValues(opt.Spec.Pool, opt.Spec.ID),
		set:  blockset.New(opt.Spec.BlockSize),
	}
	w.delta = eventsv1.KVBlockDelta{
		Pool:      opt.Spec.Pool,
		WorkerId:  opt.Spec.ID,
		Model:     opt.Spec.Model(),
		BlockSize: int32(opt.Spec.BlockSize),
		Ts:        &w.ts,
	}
	return w
}

// Close forgets the worker's per-worker metric series.
func (w *Worker) Close() {
	w.opt.Metrics.lagByWorker.DeleteLabelValues(w.opt.Spec.Pool, w.opt.Spec.ID)
}

// Run starts a new epoch (replaying whatever the worker still buffers) and
// applies src's messages until ctx ends (nil) or the lease is lost
// (ErrLeaseLost). Other receive errors are returned.
func (w *Worker) Run(ctx context.Context, src Source) error {
	if err := w.Start(ctx); err != nil {
		return err
	}
	conns, _ := src.(Reconnecting)
	var lost uint64
	if conns != nil {
		lost = conns.ConnectionErrors()
	}
	// Receives wait on rctx, which ProcessRestarted cancels: an idle
	// worker's restart is handled at once, not at its next message.
	recvCtx := func() context.Context {
		rctx, stop := context.WithCancel(ctx)
		w.interrupt.Store(&stop)
		if w.restartSeen.Load() != nil {
			stop() // signalled before this receive could be interrupted
		}
		return rctx
	}
	defer func() {
		if stop := w.interrupt.Swap(nil); stop != nil {
			(*stop)()
		}
	}()
	rctx := recvCtx()
	for {
		m, err := src.Recv(rctx)
		if conns != nil {
			if n := conns.ConnectionErrors(); n != lost {
				lost, w.reconnected = n, true
			}
		}
		if seen := w.restartSeen.Swap(nil); seen != nil {
			if err := w.processRestarted(ctx, *seen); err != nil {
				return err
			}
		}
		if err != nil && rctx.Err() != nil && ctx.Err() == nil {
			rctx = recvCtx()
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, kvzmq.ErrMalformed) {
				w.opt.Metrics.malformedMsgs.Inc()
				continue
			}
			return fmt.Errorf("receive kv events of %s: %w", w.opt.Spec.Key(), err)
		}
		if err := w.HandleLive(ctx, m.Seq, m.Payload); err != nil {
			return err
		}
	}
}

// Restarts counts the worker restarts the pipeline has acted on (the
// sequence going backwards, a gap across a reconnect, ProcessRestarted).
func (w *Worker) Restarts() uint64 { return w.restarts.Load() }

// ProcessRestarted tells the pipeline that the worker's process restarted
// (its start time changed): its cache is empty, so its blocks are dropped
// now, in a new epoch, without waiting for its first event. seen is what
// Restarts returned when the caller last knew the old process: if the
// pipeline acted on a restart since (the new process's first event came
// first), this one is not acted on twice. Safe from any goroutine.
func (w *Worker) ProcessRestarted(seen uint64) {
	w.restartSeen.Store(&seen)
	if stop := w.interrupt.Load(); stop != nil {
		(*stop)()
	}
}

// processRestarted acts on a signalled restart: a new epoch, rebuilt from
// whatever the new process's replay buffer already holds.
func (w *Worker) processRestarted(ctx context.Context, seen uint64) error {
	if w.restarts.Load() != seen {
		return nil
	}
	w.warn.Warn().Msg("worker process restarted (its start time changed): dropping its blocks")
	return w.startOver(ctx, ResetProcessRestart)
}

// Start opens a new epoch: a cleared delta, then everything the worker's
// replay buffer holds, so joining a running worker recovers as much of
// its cache as the buffer allows.
func (w *Worker) Start(ctx context.Context) error { return w.startOver(ctx, ResetStart) }

// startOver opens a new epoch and replays the worker's buffer from its
// start into it.
func (w *Worker) startOver(ctx context.Context, why ResetReason) error {
	if err := w.reset(0, why); err != nil {
		return err
	}
	w.haveLive = false // numbering starts over with the replay
	if w.opt.Replay == nil {
		return nil
	}
	w.expected, w.haveExpected = 0, true
	if err := w.resync(ctx, 0); err != nil {
		if errors.Is(err, ErrLeaseLost) || ctx.Err() != nil {
			return err
		}
		// Warn: a replay that always fails (an unreachable socket, replies
		// this client cannot read) loses a running worker's index on
		// every tracker restart and resets it on every gap.
		w.warn.Warn().Err(err).Str("reason", why.String()).Msg("initial kv event replay failed: the worker's blocks cached before now are unknown")
		if w.fresh {
			// Nothing replayed: take the first live batch as the start.
			w.haveExpected = false
		}
		// Otherwise the next live batch reveals what is missing, as a gap.
	}
	return nil
}

// HandleLive processes one live message.
func (w *Worker) HandleLive(ctx context.Context, seq uint64, payload []byte) error {
	if w.opt.Drop != nil && w.opt.Drop(seq) {
		return nil
	}
	switch {
	case w.haveLive && seq <= w.lastLive:
		// One publisher's numbers only grow, so a step back is a new engine
		// process whose cache started empty.
		w.warn.Warn().Uint64("seq", seq).Uint64("last_seq", w.lastLive).Msg("kv event sequence went backwards: worker restarted, resetting its state")
		if err := w.reset(seq, ResetRestart); err != nil {
			return err
		}
		w.expected, w.haveExpected = 0, true
	case w.reconnected && w.haveExpected && seq > w.expected && w.opt.Replay != nil:
		w.warn.Warn().Uint64("seq", seq).Uint64("expected_seq", w.expected).Msg("kv events missed across a reconnect: the worker may have restarted, rebuilding its state")
		if err := w.reset(seq, ResetReconnectGap); err != nil {
			return err
		}
		w.expected, w.haveExpected = 0, true
	}
	w.reconnected = false
	w.lastLive, w.haveLive = seq, true
	if !w.haveExpected {
		w.expected, w.haveExpected = seq, true
	}
	if seq < w.expected {
		w.opt.Metrics.duplicates.Inc()
		return nil
	}
	if seq > w.expected {
		if err := w.gap(ctx, seq); err != nil {
			return err
		}
		if seq < w.expected {
			return w.afterStep(ctx) // the replay applied it
		}
	}
	if err := w.apply(seq, payload); err != nil {
		return err
	}
	return w.afterStep(ctx)
}

// gap recovers the batches between w.expected and seq, the live batch
// that revealed the gap.
func (w *Worker) gap(ctx context.Context, seq uint64) error {
	w.opt.Metrics.gaps.Inc()
	missing := w.expected
	w.warn.Info().Uint64("expected_seq", missing).Uint64("seq", seq).Msg("kv event sequence gap")
	if w.opt.Replay == nil {
		return w.restartAt(seq, ResetNoReplay)
	}
	if err := w.resync(ctx, missing); err != nil {
		if errors.Is(err, ErrLeaseLost) || ctx.Err() != nil {
			return err
		}
		w.warn.Warn().Err(err).Uint64("from_seq", missing).Msg("kv event replay failed, resetting the worker's state")
		return w.restartAt(seq, ResetReplayFailed)
	}
	if seq > w.expected {
		// The replay stopped short of a batch already received live.
		return w.restartAt(seq, ResetGapNotCovered)
	}
	return nil
}

// restartAt starts a new epoch whose first batch is seq.
func (w *Worker) restartAt(seq uint64, why ResetReason) error {
	if err := w.reset(seq, why); err != nil {
		return err
	}
	w.expected, w.haveExpected = seq, true
	return nil
}

// resync replays from `from` and applies every batch it gets. A replay
// that starts later than asked lost batches for good: the state restarts
// from the first one replayed (unless it is fresh anyway).
func (w *Worker) resync(ctx context.Context, from uint64) error {
	rctx, cancel := context.WithTimeout(ctx, w.opt.ReplayTimeout)
	defer cancel()
	first := true
	w.replaying = w.fresh
	defer func() { w.replaying = false }()
	outcome := replayCovered
	err := w.opt.Replay(rctx, from, func(seq uint64, payload []byte) error {
		if first {
			first = false
			if seq > from {
				outcome = replayNotCovered
				if !w.fresh {
					w.warn.Warn().Uint64("wanted_seq", from).Uint64("first_seq", seq).Msg("kv event replay buffer no longer covers the gap, resetting the worker's state")
					if err := w.reset(seq, ResetGapNotCovered); err != nil {
						return err
					}
					w.replaying = true
				}
				w.expected = seq
			}
		}
		switch {
		case seq < w.expected:
			w.opt.Metrics.duplicates.Inc()
			return nil
		case seq > w.expected:
			// Replays are contiguous; a hole inside one is a publisher bug.
			if err := w.reset(seq, ResetGapNotCovered); err != nil {
				return err
			}
			w.replaying = true
			w.expected = seq
		}
		return w.apply(seq, payload)
	})
	if err != nil {
		w.opt.Metrics.replays[replayFailed].Inc()
		return err
	}
	w.opt.Metrics.replays[outcome].Inc()
	return nil
}

// afterStep rebuilds the state when an applied batch proved it wrong.
func (w *Worker) afterStep(ctx context.Context) error {
	if !w.rebuild {
		return nil
	}
	w.rebuild = false
	w.warn.Warn().Msg("kv block with an unknown parent in a complete state, rebuilding the worker's state")
	next := w.expected
	if err := w.reset(next-1, ResetInconsistent); err != nil {
		return err
	}
	if w.opt.Replay == nil {
		w.expected, w.haveExpected = next, true
		return nil
	}
	w.expected, w.haveExpected = 0, true
	if err := w.resync(ctx, 0); err != nil {
		if errors.Is(err, ErrLeaseLost) || ctx.Err() != nil {
			return err
		}
		w.warn.Warn().Err(err).Msg("kv event replay failed during rebuild")
	}
	if w.expected < next {
		// The replay ended early; what it did not return is lost.
		w.expected, w.complete = next, false
	}
	return nil
}

// reset empties the state and opens a new epoch with a cleared delta.
func (w *Worker) reset(engineSeq uint64, why ResetReason) error {
	if !w.opt.Valid() {
		return ErrLeaseLost
	}
	w.mu.Lock()
	w.set.Reset()
	w.epoch = w.opt.NewEpoch()
	w.seq = 0
	w.storedTotal, w.removedTotal = 0, 0
	w.publishLocked(engineSeq, nil, nil, true, 0)
	epoch := w.epoch
	w.mu.Unlock()
	w.fresh, w.complete, w.haveExpected, w.rebuild = true, false, false, false
	switch why {
	case ResetRestart, ResetReconnectGap, ResetProcessRestart:
		w.restarts.Add(1)
	}
	// Every epoch is counted, the first included: resets{reason="start"}
	// is how often the tracker began ingesting a worker (Start, once per
	// pipeline: its lease acquired, or its pipeline restarted).
	w.opt.Metrics.resets[why].Inc()
	if why != ResetStart {
		w.warn.Warn().Str("reason", why.String()).Uint64("epoch", epoch).Msg("kv state reset")
	} else {
		w.log.Info().Uint64("epoch", epoch).Msg("kv state started")
	}
	w.opt.OnEpoch()
	return nil
}

// apply decodes one batch, applies it and publishes its net change.
func (w *Worker) apply(seq uint64, payload []byte) error {
	if !w.opt.Valid() {
		return ErrLeaseLost
	}
	w.expected = seq + 1
	if err := w.dec.Decode(payload, &w.batch); err != nil {
		w.opt.Metrics.decodeErrors.Inc()
		w.warn.Warn().Err(err).Uint64("seq", seq).Msg("kv event batch dropped")
		// Its changes are lost: nothing proves the state complete now.
		w.complete, w.fresh = false, false
		return nil
	}
	w.mu.Lock()
	w.set.Begin()
	for _, ev := range w.batch.Events {
		w.set.Apply(ev)
	}
	stored, removed, cleared := w.set.End()
	c := w.set.Counts()
	w.storedTotal += c.BlocksStored
	w.removedTotal += c.BlocksRemoved
	if len(stored) > 0 || len(removed) > 0 || cleared {
		w.publishLocked(seq, stored, removed, cleared, w.batch.TS)
	}
	w.mu.Unlock()

	w.opt.Metrics.add(c)
	if c.Events[blockset.EventCleared] > 0 || (w.fresh && seq == 0) {
		w.complete = true
	}
	w.fresh = false
	if c.Skipped[blockset.SkipOrphan] > 0 {
		if w.complete && !w.replaying {
			w.rebuild = true
		}
		w.complete = false
	}
	if w.batch.TS > 0 {
		lag := max(time.Since(tsTime(w.batch.TS)).Seconds(), 0)
		w.opt.Metrics.lag.Observe(lag)
		w.lag.Set(lag)
	}
	return nil
}

// publishLocked sends the next delta of the epoch. A failed publish leaves
// a hole in the delta numbering, which makes routers reload the snapshot;
// OnPublishError makes sure a fresh one is written.
func (w *Worker) publishLocked(engineSeq uint64, stored, removed []uint64, cleared bool, ts float64) {
	w.seq++
	d := &w.delta
	d.Epoch, d.Seq, d.EngineSeq, d.Cleared = w.epoch, w.seq, engineSeq, cleared
	d.Stored, d.Removed = stored, removed
	t := time.Now()
	if ts > 0 {
		t = tsTime(ts)
	}
	w.ts.Seconds, w.ts.Nanos = t.Unix(), int32(t.Nanosecond())
	ack, err := w.opt.Sink.Publish(d)
	d.Stored, d.Removed = nil, nil
	if err != nil {
		w.opt.Metrics.publishErrors.Inc()
		w.warn.Warn().Err(err).Uint64("epoch", w.epoch).Uint64("seq", w.seq).Msg("kv delta publish failed")
		w.opt.OnPublishError()
		return
	}
	w.opt.Metrics.deltas.Inc()
	w.lastAck = ack
}

func tsTime(ts float64) time.Time {
	sec, frac := math.Modf(ts)
	return time.Unix(int64(sec), int64(frac*1e9))
}

// Snapshot is a worker's whole state at one delta.
type Snapshot struct {
	Epoch, Seq uint64
	Blocks     []uint64
	// Ack is the acknowledgement of the last delta published up to Seq
	// (delta Seq itself unless its publish failed); nil before any. Its
	// stream sequence is where a consumer of the snapshot resumes; deltas
	// it then sees again carry seq <= Seq and are skipped.
	Ack Ack
}

// Snapshot copies the state, appending the blocks to dst.
func (w *Worker) Snapshot(dst []uint64) Snapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	return Snapshot{Epoch: w.epoch, Seq: w.seq, Blocks: w.set.AppendBlocks(dst), Ack: w.lastAck}
}

// Summary is a worker's cache at a glance.
type Summary struct {
	Epoch        uint64
	CachedBlocks int
	// Totals of engine blocks stored and removed since the epoch began.
	StoredTotal, RemovedTotal uint64
}

// Summary reads the current counts.
func (w *Worker) Summary() Summary {
	w.mu.Lock()
	defer w.mu.Unlock()
	return Summary{Epoch: w.epoch, CachedBlocks: w.set.Len(), StoredTotal: w.storedTotal, RemovedTotal: w.removedTotal}
}
