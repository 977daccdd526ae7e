package ingest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-dev/switchyard/internal/fleet"
	"github.com/switchyard-dev/switchyard/internal/kvblock"
	"github.com/switchyard-dev/switchyard/internal/vllm/kvevents"
	"github.com/switchyard-dev/switchyard/internal/vllm/kvzmq"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
)

// recorder is a Sink keeping copies of every delta.
type recorder struct {
	deltas []*eventsv1.KVBlockDelta
	fail   bool
}

func (r *recorder) Publish(d *eventsv1.KVBlockDelta) (Ack, error) {
	if r.fail {
		return nil, errors.New("nats down")
	}
	r.deltas = append(r.deltas, proto.Clone(d).(*eventsv1.KVBlockDelta))
	return nil, nil
}

// view applies deltas as a router does and checks their numbering.
func (r *recorder) view(t testing.TB) (epochs []uint64, set map[uint64]bool) {
	t.Helper()
	set = map[uint64]bool{}
	var epoch, seq uint64
	for _, d := range r.deltas {
		if d.Epoch != epoch {
			if d.Epoch < epoch {
				t.Fatalf("epoch went back: %d after %d", d.Epoch, epoch)
			}
			epoch, seq = d.Epoch, 0
			epochs = append(epochs, epoch)
			clear(set)
		}
		if d.Seq != seq+1 {
			t.Fatalf("epoch %d: delta seq %d after %d", epoch, d.Seq, seq)
		}
		seq = d.Seq
		if d.Cleared {
			clear(set)
		}
		for _, h := range d.Removed {
			if !set[h] {
				t.Fatalf("removed %x not held", h)
			}
			delete(set, h)
		}
		for _, h := range d.Stored {
			set[h] = true
		}
	}
	return epochs, set
}

// engine is a tiny vLLM stand-in: numbered batches in a replay buffer.
type engine struct {
	batches [][]byte // by seq
	keep    int      // replay buffer size
	next    kvevents.EngineHash
	tok     uint32
	chains  [][]kvblock.Hash
	fail    bool
}

// store publishes one BlockStored of n blocks (block size 4) from the root.
func (e *engine) store(t testing.TB, n int) []byte {
	t.Helper()
	ev := &kvevents.BlockStored{BlockSize: 4}
	var chain []kvblock.Hash
	for i := 0; i < n; i++ {
		e.next++
		ev.BlockHashes = append(ev.BlockHashes, e.next)
		for j := 0; j < 4; j++ {
			e.tok++
			ev.TokenIDs = append(ev.TokenIDs, e.tok)
		}
	}
	chain = kvblock.Chain(chain, kvblock.Root, ev.TokenIDs, 4, "")
	e.chains = append(e.chains, chain)
	return e.publish(t, ev)
}

func (e *engine) publish(t testing.TB, evs ...kvevents.Event) []byte {
	t.Helper()
	p, err := kvevents.AppendEncode(nil, &kvevents.Batch{TS: 1, Events: evs}, kvevents.EncodingMap)
	if err != nil {
		t.Fatal(err)
	}
	e.batches = append(e.batches, p)
	return p
}

func (e *engine) replay(ctx context.Context, start uint64, fn func(uint64, []byte) error) error {
	if e.fail {
		return errors.New("connection refused")
	}
	first := max(0, len(e.batches)-e.keep)
	for seq := max(int(start), first); seq < len(e.batches); seq++ {
		if err := fn(uint64(seq), e.batches[seq]); err != nil {
			return err
		}
	}
	return nil
}

func newWorker(t testing.TB, sink Sink, replay Replayer) (*Worker, *Metrics) {
	m := NewMetrics(prometheus.NewRegistry())
	var epoch uint64
	w := New(Options{
		Spec:     fleet.Worker{ID: "w0", Pool: "p", Models: []string{"m"}, BlockSize: 4},
		Sink:     sink,
		Replay:   replay,
		NewEpoch: func() uint64 { epoch++; return epoch },
		Metrics:  m,
		Log:      zerolog.Nop(),
	})
	return w, m
}

func setOf(chains ...[]kvblock.Hash) map[uint64]bool {
	s := map[uint64]bool{}
	for _, c := range chains {
		for _, h := range c {
			s[uint64(h)] = true
		}
	}
	return s
}

func equalSets(a, b map[uint64]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func TestSequenceHandling(t *testing.T) {
	tests := []struct {
		name       string
		noReplay   bool
		keep       int
		prepublish int // batches the engine published before the tracker started
		deliver    []int
		wantChains []int // indexes of engine chains in the final set
		wantEpochs int
		wantResets map[ResetReason]float64
		wantGaps   float64
	}{
		{
			name:       "start replays the buffer, live continues",
			keep:       100,
			prepublish: 2,
			deliver:    []int{1, 2, 3},
			wantChains: []int{0, 1, 2, 3},
			wantEpochs: 1,
		},
		{
			name:       "gap replayed",
			keep:       100,
			deliver:    []int{0, 1, 4, 5},
			wantChains: []int{0, 1, 2, 3, 4, 5},
			wantEpochs: 1,
			wantGaps:   1,
		},
		{
			name:       "gap beyond the buffer resets",
			keep:       2,
			deliver:    []int{0, 5},
			wantChains: []int{4, 5},
			wantEpochs: 2,
			wantResets: map[ResetReason]float64{ResetGapNotCovered: 1},
			wantGaps:   1,
		},
		{
			name:       "gap without replay resets",
			noReplay:   true,
			deliver:    []int{0, 1, 3},
			wantChains: []int{3},
			wantEpochs: 2,
			wantResets: map[ResetReason]float64{ResetNoReplay: 1},
			wantGaps:   1,
		},
		{
			name:       "joining late without replay starts at the first live batch",
			noReplay:   true,
			prepublish: 3,
			deliver:    []int{3, 4},
			wantChains: []int{3, 4},
			wantEpochs: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := &engine{keep: tc.keep}
			rec := &recorder{}
			var replay Replayer
			if !tc.noReplay {
				replay = e.replay
			}
			w, m := newWorker(t, rec, replay)
			ctx := context.Background()
			for range tc.prepublish {
				e.store(t, 2)
			}
			if err := w.Start(ctx); err != nil {
				t.Fatal(err)
			}
			for _, seq := range tc.deliver {
				for len(e.batches) <= seq {
					e.store(t, 2)
				}
				if err := w.HandleLive(ctx, uint64(seq), e.batches[seq]); err != nil {
					t.Fatal(err)
				}
			}
			var want [][]kvblock.Hash
			for _, i := range tc.wantChains {
				want = append(want, e.chains[i])
			}
			epochs, set := rec.view(t)
			if !equalSets(set, setOf(want...)) {
				t.Errorf("set of %d blocks, want chains %v (%d blocks)", len(set), tc.wantChains, len(setOf(want...)))
			}
			if len(epochs) != tc.wantEpochs {
				t.Errorf("%d epochs, want %d", len(epochs), tc.wantEpochs)
			}
			snap := w.Snapshot(nil)
			if len(snap.Blocks) != len(set) || snap.Epoch != epochs[len(epochs)-1] || snap.Seq != rec.deltas[len(rec.deltas)-1].Seq {
				t.Errorf("snapshot epoch %d seq %d with %d blocks, deltas end at %d/%d with %d", snap.Epoch, snap.Seq, len(snap.Blocks),
					epochs[len(epochs)-1], rec.deltas[len(rec.deltas)-1].Seq, len(set))
			}
			for r := ResetStart; r < numResetReasons; r++ {
				want := tc.wantResets[r]
				if r == ResetStart {
					want = 1 // the one Start, counted like every epoch
				}
				if got := testutil.ToFloat64(m.resets[r]); got != want {
					t.Errorf("resets{%s} = %v, want %v", r, got, want)
				}
			}
			if got := testutil.ToFloat64(m.gaps); got != tc.wantGaps {
				t.Errorf("gaps = %v, want %v", got, tc.wantGaps)
			}
		})
	}
}

func TestRestartResets(t *testing.T) {
	old := &engine{keep: 100}
	rec := &recorder{}
	cur := old
	w, m := newWorker(t, rec, func(ctx context.Context, start uint64, fn func(uint64, []byte) error) error {
		return cur.replay(ctx, start, fn)
	})
	ctx := context.Background()
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for seq := range 5 {
		if err := w.HandleLive(ctx, uint64(seq), old.store(t, 2)); err != nil {
			t.Fatal(err)
		}
	}
	// A new engine process: numbering restarts; its first batch was
	// published before the tracker reconnected.
	cur = &engine{keep: 100, next: 1000, tok: 50000}
	cur.store(t, 3)
	if err := w.HandleLive(ctx, 1, cur.store(t, 1)); err != nil {
		t.Fatal(err)
	}
	epochs, set := rec.view(t)
	if len(epochs) != 2 || !equalSets(set, setOf(cur.chains...)) {
		t.Errorf("%d epochs, %d blocks; want 2 epochs and the new engine's %d blocks", len(epochs), len(set), len(setOf(cur.chains...)))
	}
	if got := testutil.ToFloat64(m.resets[ResetRestart]); got != 1 {
		t.Errorf("restart resets %v", got)
	}
}

// fakeSource delivers queued messages and counts lost connections like
// kvzmq.Subscriber.
type fakeSource struct {
	msgs  chan kvzmq.Message
	conns atomic.Uint64
}

func (f *fakeSource) Recv(ctx context.Context) (kvzmq.Message, error) {
	select {
	case m := <-f.msgs:
		return m, nil
	case <-ctx.Done():
		return kvzmq.Message{}, ctx.Err()
	}
}

func (f *fakeSource) ConnectionErrors() uint64 { return f.conns.Load() }

// TestReconnectGapRebuilds: the connection drops, and the first batch
// after it is beyond the old numbering although the worker restarted (its
// early batches went out before the tracker reconnected). The sequence
// cannot show the restart; the reconnect makes the tracker rebuild.
func TestReconnectGapRebuilds(t *testing.T) {
	old := &engine{keep: 100}
	cur := old
	rec := &recorder{}
	w, m := newWorker(t, rec, func(ctx context.Context, start uint64, fn func(uint64, []byte) error) error {
		return cur.replay(ctx, start, fn)
	})
	src := &fakeSource{msgs: make(chan kvzmq.Message, 100)}
	for seq := range 3 {
		src.msgs <- kvzmq.Message{Seq: uint64(seq), Payload: old.store(t, 2)}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, src) }()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("the old process's batches", func() bool { return testutil.ToFloat64(m.deltas) >= 4 })

	next := &engine{keep: 100, next: 1000, tok: 50000}
	for range 5 {
		next.store(t, 1)
	}
	cur = next
	src.conns.Add(1)
	src.msgs <- kvzmq.Message{Seq: 5, Payload: next.store(t, 1)}
	waitFor("a reconnect reset", func() bool { return testutil.ToFloat64(m.resets[ResetReconnectGap]) == 1 })
	waitFor("the new process's batches", func() bool { return testutil.ToFloat64(m.deltas) >= 11 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	epochs, set := rec.view(t)
	if len(epochs) != 2 || !equalSets(set, setOf(next.chains...)) {
		t.Errorf("%d epochs, %d blocks; want 2 epochs and the new process's %d blocks", len(epochs), len(set), len(setOf(next.chains...)))
	}
	if got := testutil.ToFloat64(m.resets[ResetRestart]); got != 0 {
		t.Errorf("restart resets %v", got)
	}
}

// TestProcessRestartedDropsAtOnce: the worker restarted and is idle (its
// new process has published nothing). Told so, the pipeline drops the old
// process's blocks at once in a new epoch, and the new process's first
// batch then needs no second reset. A restart the pipeline already acted
// on (the sequence went backwards first) is not acted on twice.
func TestProcessRestartedDropsAtOnce(t *testing.T) {
	old := &engine{keep: 100}
	var cur atomic.Pointer[engine]
	cur.Store(old)
	rec := &recorder{}
	w, m := newWorker(t, rec, func(ctx context.Context, start uint64, fn func(uint64, []byte) error) error {
		return cur.Load().replay(ctx, start, fn)
	})
	src := &fakeSource{msgs: make(chan kvzmq.Message, 100)}
	for seq := range 3 {
		src.msgs <- kvzmq.Message{Seq: uint64(seq), Payload: old.store(t, 2)}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, src) }()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("the old process's batches", func() bool { return testutil.ToFloat64(m.deltas) >= 4 })

	// Batches are made before their engine is the one replays read.
	next := &engine{keep: 100, next: 1000, tok: 50000}
	cur.Store(&engine{keep: 100})
	w.ProcessRestarted(w.Restarts())
	waitFor("the restart acted on", func() bool { return testutil.ToFloat64(m.resets[ResetProcessRestart]) == 1 })
	b0, b1 := next.store(t, 1), next.store(t, 1)
	cur.Store(next)
	src.msgs <- kvzmq.Message{Seq: 0, Payload: b0}
	src.msgs <- kvzmq.Message{Seq: 1, Payload: b1}
	waitFor("the new process's batches", func() bool { return testutil.ToFloat64(m.deltas) >= 7 })

	// A third process, whose first batch arrives before the signal does.
	seen := w.Restarts()
	third := &engine{keep: 100, next: 5000, tok: 90000}
	c0, c1 := third.store(t, 1), third.store(t, 1)
	third.batches = third.batches[:1] // c1 not published yet
	cur.Store(third)
	src.msgs <- kvzmq.Message{Seq: 0, Payload: c0}
	waitFor("the sequence going back", func() bool { return testutil.ToFloat64(m.resets[ResetRestart]) == 1 })
	w.ProcessRestarted(seen)
	src.msgs <- kvzmq.Message{Seq: 1, Payload: c1}
	waitFor("the third process's batches", func() bool { return testutil.ToFloat64(m.deltas) >= 10 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.resets[ResetProcessRestart]); got != 1 {
		t.Errorf("process restart resets %v, want 1 (the third process's was already handled)", got)
	}
	epochs, set := rec.view(t)
	if len(epochs) != 3 || !equalSets(set, setOf(third.chains...)) {
		t.Errorf("%d epochs, %d blocks; want 3 epochs and the third process's %d blocks", len(epochs), len(set), len(setOf(third.chains...)))
	}
	if w.Restarts() != 2 {
		t.Errorf("Restarts() = %d, want 2", w.Restarts())
	}
}

func TestDuplicatesMalformedAndRebuild(t *testing.T) {
	e := &engine{keep: 100}
	rec := &recorder{}
	w, m := newWorker(t, rec, e.replay)
	ctx := context.Background()
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	live := func(seq int) {
		t.Helper()
		if err := w.HandleLive(ctx, uint64(seq), e.batches[seq]); err != nil {
			t.Fatal(err)
		}
	}
	e.store(t, 2)
	e.store(t, 2)
	e.store(t, 2)
	live(2) // gap: 0 and 1 replayed, and 2 with them
	live(1) // one publisher's numbers only grow: a step back is a new process
	if got := testutil.ToFloat64(m.resets[ResetRestart]); got != 1 {
		t.Fatalf("a step back on the live socket is a restart, resets %v", got)
	}

	// A malformed payload is counted and skipped.
	e.batches = append(e.batches, []byte{0xc1})
	live(3)
	if got := testutil.ToFloat64(m.decodeErrors); got != 1 {
		t.Errorf("decode errors %v", got)
	}

	// An orphan in a complete state triggers a rebuild from the replay.
	rec2 := &recorder{}
	e2 := &engine{keep: 100}
	w2, m2 := newWorker(t, rec2, e2.replay)
	if err := w2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e2.store(t, 1)
	if err := w2.HandleLive(ctx, 0, e2.batches[0]); err != nil {
		t.Fatal(err)
	}
	orphan := e2.publish(t, &kvevents.BlockStored{BlockHashes: []kvevents.EngineHash{99}, ParentBlockHash: ptr[kvevents.EngineHash](98), TokenIDs: []uint32{1, 2, 3, 4}, BlockSize: 4})
	if err := w2.HandleLive(ctx, 1, orphan); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m2.resets[ResetInconsistent]); got != 1 {
		t.Errorf("inconsistent resets %v", got)
	}
	epochs, set := rec2.view(t)
	if len(epochs) != 2 || !equalSets(set, setOf(e2.chains...)) {
		t.Errorf("after rebuild: %d epochs, %d blocks", len(epochs), len(set))
	}
	// The rebuild met the same orphan; it must not loop.
	e2.store(t, 1)
	if err := w2.HandleLive(ctx, 2, e2.batches[2]); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m2.resets[ResetInconsistent]); got != 1 {
		t.Errorf("inconsistent resets after the rebuild %v", got)
	}
}

func TestLeaseLostStops(t *testing.T) {
	valid := true
	m := NewMetrics(prometheus.NewRegistry())
	rec := &recorder{}
	w := New(Options{
		Spec: fleet.Worker{ID: "w0", Pool: "p", Models: []string{"m"}, BlockSize: 4}, Sink: rec,
		NewEpoch: func() uint64 { return 1 }, Valid: func() bool { return valid },
		Metrics: m, Log: zerolog.Nop(),
	})
	e := &engine{}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	valid = false
	n := len(rec.deltas)
	if err := w.HandleLive(context.Background(), 0, e.store(t, 1)); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("err %v, want ErrLeaseLost", err)
	}
	if len(rec.deltas) != n {
		t.Error("published after the lease was lost")
	}
}

func TestPublishErrorCounted(t *testing.T) {
	rec := &recorder{}
	calls := 0
	m := NewMetrics(prometheus.NewRegistry())
	w := New(Options{
		Spec: fleet.Worker{ID: "w0", Pool: "p", Models: []string{"m"}, BlockSize: 4}, Sink: rec,
		NewEpoch: func() uint64 { return 1 }, OnPublishError: func() { calls++ },
		Metrics: m, Log: zerolog.Nop(),
	})
	e := &engine{}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec.fail = true
	if err := w.HandleLive(context.Background(), 0, e.store(t, 1)); err != nil {
		t.Fatal(err)
	}
	if calls != 1 || testutil.ToFloat64(m.publishErrors) != 1 {
		t.Errorf("publish error callbacks %d, counter %v", calls, testutil.ToFloat64(m.publishErrors))
	}
	if snap := w.Snapshot(nil); snap.Seq != 2 || len(snap.Blocks) != 1 {
		t.Errorf("snapshot after a failed publish: %+v", snap)
	}
}

func ptr[T any](v T) *T { return &v }

// FuzzHandleLive feeds arbitrary payloads and sequence numbers to a worker:
// it must never fail or panic, and its deltas must always reproduce its
// state.
func FuzzHandleLive(f *testing.F) {
	e := &engine{}
	e.store(f, 2)
	e.publish(f, &kvevents.BlockRemoved{BlockHashes: []kvevents.EngineHash{1}})
	e.publish(f, &kvevents.BlockStored{BlockHashes: []kvevents.EngineHash{5}, ParentBlockHash: ptr[kvevents.EngineHash](2), TokenIDs: []uint32{1, 2, 3, 4}, BlockSize: 4})
	e.publish(f, &kvevents.AllBlocksCleared{})
	for i, b := range e.batches {
		f.Add(uint64(i), b, uint64(i+1), e.batches[(i+1)%len(e.batches)])
	}
	f.Add(uint64(7), []byte{0x93, 0xcb}, uint64(0), []byte{})
	f.Fuzz(func(t *testing.T, seq1 uint64, p1 []byte, seq2 uint64, p2 []byte) {
		buf := &engine{keep: 4, batches: [][]byte{p1, p2, p1}}
		rec := &recorder{}
		w, _ := newWorker(t, rec, buf.replay)
		ctx := context.Background()
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		for _, m := range []struct {
			seq uint64
			p   []byte
		}{{seq1, p1}, {seq2, p2}, {seq1 + 1, p2}} {
			if err := w.HandleLive(ctx, m.seq, m.p); err != nil {
				t.Fatal(err)
			}
		}
		_, set := rec.view(t)
		snap := w.Snapshot(nil)
		got := map[uint64]bool{}
		for _, h := range snap.Blocks {
			got[h] = true
		}
		if !equalSets(got, set) {
			t.Fatalf("deltas give %d blocks, state holds %d", len(set), len(got))
		}
	})
}

var _ Ack = jetstream.PubAckFuture(nil)
