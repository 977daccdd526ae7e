package kvsync

import (
	"context"
	"math/rand/v2"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/kvblock"
	"github.com/switchyard-dev/switchyard/internal/natsembed"
	"github.com/switchyard-dev/switchyard/internal/rediskeys"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
)

func redisClient(t testing.TB) *redis.Client {
	_, c := testkit.Redis(t)
	return c
}

// tracker plays the kvtracker: it keeps the truth per worker, publishes
// deltas to the real JetStream and writes snapshots to the real Redis.
type tracker struct {
	t       testing.TB
	pool    string
	js      jetstream.JetStream
	rdb     *redis.Client
	mu      sync.Mutex
	state   map[string]*trackedWorker
	lastSeq uint64 // stream sequence of the last publish
}

type trackedWorker struct {
	epoch, seq uint64
	blocks     map[kvblock.Hash]bool
	streamSeq  uint64 // of the worker's last published delta
}

func newTracker(t testing.TB, nc *nats.Conn, rdb *redis.Client) *tracker {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := bus.EnsureKVStream(ctx, js); err != nil {
		t.Fatal(err)
	}
	tr := &tracker{t: t, pool: "kvsync-test-" + strconv.FormatUint(rand.Uint64(), 36), js: js, rdb: rdb, state: map[string]*trackedWorker{}}
	if rdb != nil {
		t.Cleanup(func() {
			for w := range tr.state {
				rdb.Del(context.Background(), rediskeys.KVSnapshot(tr.pool, w))
			}
		})
	}
	return tr
}

func (tr *tracker) worker(id string) *trackedWorker {
	w := tr.state[id]
	if w == nil {
		w = &trackedWorker{epoch: 1, blocks: map[kvblock.Hash]bool{}}
		tr.state[id] = w
	}
	return w
}

// delta applies a change to the truth and publishes it unless lost.
func (tr *tracker) delta(id string, stored, removed []kvblock.Hash, lost bool) {
	tr.t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	w := tr.worker(id)
	w.seq++
	for _, h := range removed {
		delete(w.blocks, h)
	}
	for _, h := range stored {
		w.blocks[h] = true
	}
	if lost {
		return
	}
	d := &eventsv1.KVBlockDelta{Pool: tr.pool, WorkerId: id, Model: "m", Epoch: w.epoch, Seq: w.seq, BlockSize: 16,
		Stored: wire(stored), Removed: wire(removed)}
	tr.publish(d)
	w.streamSeq = tr.lastSeq
}

func (tr *tracker) publish(d *eventsv1.KVBlockDelta) {
	tr.t.Helper()
	data, err := proto.Marshal(d)
	if err != nil {
		tr.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ack, err := tr.js.Publish(ctx, bus.KVDeltaSubject(d.GetPool(), d.GetWorkerId()), data)
	if err != nil {
		tr.t.Fatalf("publish delta: %v", err)
	}
	tr.lastSeq = ack.Sequence
}

// restart starts a new epoch for the worker: its cache is empty again.
func (tr *tracker) restart(id string, stored []kvblock.Hash) {
	tr.mu.Lock()
	w := tr.worker(id)
	w.epoch++
	w.seq = 0
	clear(w.blocks)
	tr.mu.Unlock()
	tr.delta(id, stored, nil, false)
}

// snapshot writes the worker's current truth to Redis.
func (tr *tracker) snapshot(id string) {
	tr.t.Helper()
	tr.mu.Lock()
	w := tr.worker(id)
	s := &eventsv1.WorkerKVSnapshot{Pool: tr.pool, WorkerId: id, Model: "m", Epoch: w.epoch, Seq: w.seq, BlockSize: 16, StreamSeq: w.streamSeq}
	for h := range w.blocks {
		s.Blocks = append(s.Blocks, uint64(h))
	}
	tr.mu.Unlock()
	data, err := proto.Marshal(s)
	if err != nil {
		tr.t.Fatal(err)
	}
	if err := tr.rdb.Set(context.Background(), rediskeys.KVSnapshot(tr.pool, id), data, time.Minute).Err(); err != nil {
		tr.t.Fatalf("write snapshot: %v", err)
	}
}

// matches reports whether the index holds exactly the truth for id.
func (tr *tracker) matches(x *kvblock.Index, id string) bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	w := tr.worker(id)
	if x.Blocks(id) != len(w.blocks) {
		return false
	}
	var out []int
	for h := range w.blocks {
		out = x.Prefixes([]kvblock.Hash{h}, []string{id}, time.Now(), out)
		if out[0] != 1 {
			return false
		}
	}
	return true
}

func wire(hs []kvblock.Hash) []uint64 {
	out := make([]uint64, len(hs))
	for i, h := range hs {
		out[i] = uint64(h)
	}
	return out
}

// blocks returns n distinct hashes for a worker-specific prompt.
func blocks(seed uint32, n int) []kvblock.Hash {
	toks := make([]uint32, 16*n)
	for i := range toks {
		toks[i] = seed*1_000_000 + uint32(i)
	}
	return kvblock.Chain(nil, kvblock.Root, toks, 16, "")
}

func startNATS(t testing.TB, port int) *natsembed.Server {
	t.Helper()
	ns, err := natsembed.Start(natsembed.Options{Port: port})
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func connect(t testing.TB, u string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(u, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

type running struct {
	r      *Replica
	x      *kvblock.Index
	cancel context.CancelFunc
	done   chan error
}

func startReplica(t testing.TB, nc *nats.Conn, store SnapshotStore) *running {
	t.Helper()
	x := kvblock.NewIndex()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel).With().Timestamp().Logger()
	r, err := New(Config{Conn: nc, Store: store, Index: x, CheckInterval: 50 * time.Millisecond, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rr := &running{r: r, x: x, cancel: cancel, done: make(chan error, 1)}
	go func() { rr.done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-rr.done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("Run did not return")
		}
	})
	return rr
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (tr *tracker) allMatch(x *kvblock.Index, ids ...string) func() bool {
	return func() bool {
		for _, id := range ids {
			if !tr.matches(x, id) {
				return false
			}
		}
		return true
	}
}

// TestStartedLate: deltas and snapshots exist before the router starts; it
// must end up with the tracker's exact state from Redis plus the stream,
// and then follow live deltas.
func TestStartedLate(t *testing.T) {
	rdb := redisClient(t)
	ns := startNATS(t, 0)
	defer ns.Shutdown()
	nc := connect(t, ns.URL())
	tr := newTracker(t, nc, rdb)
	w1, w2, w3 := "w1-"+tr.pool, "w2-"+tr.pool, "w3-"+tr.pool
	p1, p2, p3 := blocks(1, 40), blocks(2, 40), blocks(3, 10)
	for i := range 10 {
		tr.delta(w1, p1[4*i:4*i+4], nil, false)
		tr.delta(w2, p2[4*i:4*i+4], nil, false)
	}
	tr.snapshot(w1) // w1 at seq 10
	tr.delta(w1, nil, p1[36:], false)
	tr.delta(w2, nil, p2[:8], false)
	tr.snapshot(w2) // w2 at seq 11, newer than w1's
	tr.delta(w1, p3, nil, false)
	tr.delta(w3, p3, nil, false) // no snapshot at all: from the stream alone
	rr := startReplica(t, nc, NewRedisStore(rdb))
	waitFor(t, "index equal to the tracker's state", tr.allMatch(rr.x, w1, w2, w3))
	if st := rr.r.Stats(); !st.Bootstrapped || st.SnapshotsLoaded < 2 || rr.r.BlockSize(w1) != 16 {
		t.Fatalf("stats %+v, block size %d", st, rr.r.BlockSize(w1))
	}
	// Live deltas keep flowing.
	tr.delta(w2, blocks(4, 5), p2[8:20], false)
	waitFor(t, "live delta", tr.allMatch(rr.x, w2))
}

func TestEpochChangeDropsTheWorker(t *testing.T) {
	ns := startNATS(t, 0)
	defer ns.Shutdown()
	nc := connect(t, ns.URL())
	tr := newTracker(t, nc, nil)
	w := "w-" + tr.pool
	rr := startReplica(t, nc, nil) // no Redis: deltas only
	tr.delta(w, blocks(1, 20), nil, false)
	tr.delta(w, blocks(2, 5), nil, false)
	waitFor(t, "first epoch", tr.allMatch(rr.x, w))
	tr.restart(w, blocks(3, 3))
	waitFor(t, "second epoch alone", tr.allMatch(rr.x, w))
	if st := rr.r.Stats(); st.EpochChanges != 1 {
		t.Fatalf("epoch changes %d, want 1", st.EpochChanges)
	}
}

func TestSeqHoleResyncs(t *testing.T) {
	rdb := redisClient(t)
	ns := startNATS(t, 0)
	defer ns.Shutdown()
	nc := connect(t, ns.URL())
	tr := newTracker(t, nc, rdb)
	store := NewRedisStore(rdb)
	t.Run("snapshot already covers the hole", func(t *testing.T) {
		w := "a-" + tr.pool
		rr := startReplica(t, nc, store)
		tr.delta(w, blocks(1, 8), nil, false)
		waitFor(t, "first delta", tr.allMatch(rr.x, w))
		tr.delta(w, blocks(2, 8), blocks(1, 8)[4:], true) // lost
		tr.snapshot(w)
		tr.delta(w, blocks(3, 2), nil, false)
		waitFor(t, "repaired", tr.allMatch(rr.x, w))
		if st := rr.r.Stats(); st.Holes != 1 || st.Resyncs != 1 || st.Resyncing != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("snapshot written after the hole is seen", func(t *testing.T) {
		w := "b-" + tr.pool
		rr := startReplica(t, nc, store)
		tr.delta(w, blocks(4, 8), nil, false)
		tr.snapshot(w) // seq 1: too old to repair what comes next
		tr.delta(w, blocks(5, 8), blocks(4, 8)[2:], true)
		tr.delta(w, blocks(6, 4), nil, false)
		waitFor(t, "worker resyncing", func() bool { return rr.r.Stats().Resyncing == 1 })
		tr.delta(w, blocks(7, 4), blocks(6, 4)[1:], false) // applied and buffered meanwhile
		tr.snapshot(w)                                     // now covers everything
		tr.delta(w, blocks(8, 4), nil, false)
		waitFor(t, "repaired from the later snapshot", func() bool {
			return tr.matches(rr.x, w) && rr.r.Stats().Resyncing == 0
		})
	})
}

// TestNATSRestart stops the embedded server under a running replica: the
// index keeps serving, and once the server is back (with a new, empty
// in-memory stream) the replica follows the new stream and repairs the
// deltas lost meanwhile from Redis.
func TestNATSRestart(t *testing.T) {
	rdb := redisClient(t)
	ns := startNATS(t, 0)
	u, _ := url.Parse(ns.URL())
	port, _ := strconv.Atoi(u.Port())
	nc := connect(t, ns.URL())
	pubConn := connect(t, ns.URL())
	tr := newTracker(t, pubConn, rdb)
	w := "w-" + tr.pool
	rr := startReplica(t, nc, NewRedisStore(rdb))
	tr.delta(w, blocks(1, 30), nil, false)
	waitFor(t, "before restart", tr.allMatch(rr.x, w))

	ns.Shutdown()
	waitFor(t, "disconnect", func() bool { return !nc.IsConnected() })
	// Serving on what it has.
	if got := rr.x.Prefixes(blocks(1, 30), []string{w}, time.Now(), nil); got[0] != 30 {
		t.Fatalf("index lost its content while NATS is down: prefix %d", got[0])
	}
	// Deltas produced while NATS is down are lost; the tracker keeps its
	// snapshot current in Redis.
	tr.delta(w, blocks(2, 10), blocks(1, 30)[20:], true)
	tr.snapshot(w)

	ns2 := startNATS(t, port)
	defer ns2.Shutdown()
	waitFor(t, "reconnect", func() bool { return nc.IsConnected() && pubConn.IsConnected() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := bus.EnsureKVStream(ctx, tr.js); err != nil {
		t.Fatal(err)
	}
	tr.delta(w, blocks(3, 5), nil, false) // seq 3 on a fresh stream: a hole
	waitFor(t, "resynchronised after restart", tr.allMatch(rr.x, w))
	if st := rr.r.Stats(); st.StreamResets < 1 {
		t.Fatalf("stream resets %d, want >= 1 (%+v)", st.StreamResets, st)
	}
}

func TestMalformedDeltas(t *testing.T) {
	ns := startNATS(t, 0)
	defer ns.Shutdown()
	nc := connect(t, ns.URL())
	tr := newTracker(t, nc, nil)
	w := "w-" + tr.pool
	rr := startReplica(t, nc, nil)
	ctx := context.Background()
	for _, payload := range [][]byte{{0xff, 0x01}, mustMarshal(t, &eventsv1.KVBlockDelta{Seq: 1})} {
		if _, err := tr.js.Publish(ctx, bus.KVDeltaSubject(tr.pool, "x"), payload); err != nil {
			t.Fatal(err)
		}
	}
	tr.delta(w, blocks(1, 3), nil, false)
	waitFor(t, "valid delta after bad ones", tr.allMatch(rr.x, w))
	if st := rr.r.Stats(); st.Malformed != 2 {
		t.Fatalf("malformed %d, want 2", st.Malformed)
	}
}

func mustMarshal(t testing.TB, m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRedisStoreSkipsUndecodable checks List on real Redis with a corrupt
// entry among good ones.
func TestRedisStoreSkipsUndecodable(t *testing.T) {
	rdb := redisClient(t)
	pool := "kvsync-test-" + strconv.FormatUint(rand.Uint64(), 36)
	ctx := context.Background()
	good := mustMarshal(t, &eventsv1.WorkerKVSnapshot{Pool: pool, WorkerId: "g", Epoch: 1, Seq: 3, Blocks: []uint64{1, 2}})
	for key, val := range map[string][]byte{
		rediskeys.KVSnapshot(pool, "g"): good,
		rediskeys.KVSnapshot(pool, "b"): {0xff, 0xff},
	} {
		if err := rdb.Set(ctx, key, val, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		defer rdb.Del(ctx, key)
	}
	s := NewRedisStore(rdb)
	snaps, bad, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, sn := range snaps {
		if sn.GetPool() == pool && sn.GetWorkerId() == "g" && sn.GetSeq() == 3 {
			found = true
		}
	}
	if !found || bad < 1 {
		t.Fatalf("found %v, bad %d", found, bad)
	}
	if got, err := s.Get(ctx, pool, "g"); err != nil || got.GetSeq() != 3 {
		t.Fatalf("Get = %v, %v", got, err)
	}
	if got, err := s.Get(ctx, pool, "missing"); err != nil || got != nil {
		t.Fatalf("Get missing = %v, %v", got, err)
	}
	if _, err := s.Get(ctx, pool, "b"); err == nil {
		t.Fatal("corrupt snapshot decoded")
	}
}

// FuzzDeltas feeds arbitrary payloads, as they would arrive from the
// stream and from Redis, through the per-worker protocol: nothing may
// panic, and the index must stay consistent with itself.
func FuzzDeltas(f *testing.F) {
	seed := func(ds ...*eventsv1.KVBlockDelta) []byte {
		var out []byte
		for _, d := range ds {
			b, _ := proto.Marshal(d)
			out = append(out, byte(len(b)))
			out = append(out, b...)
		}
		return out
	}
	f.Add(seed(&eventsv1.KVBlockDelta{WorkerId: "a", Epoch: 1, Seq: 1, Stored: []uint64{1, 2, 3}},
		&eventsv1.KVBlockDelta{WorkerId: "a", Epoch: 1, Seq: 3, Removed: []uint64{2}},
		&eventsv1.KVBlockDelta{WorkerId: "a", Epoch: 2, Seq: 1, Cleared: true}))
	f.Add([]byte{3, 0xff, 0x00, 0x12})
	f.Fuzz(func(t *testing.T, data []byte) {
		x := kvblock.NewIndex()
		r, err := New(Config{Conn: &nats.Conn{}, Index: x, MaxBuffered: 4, Log: zerolog.Nop()})
		if err != nil {
			t.Skip(err)
		}
		ctx := context.Background()
		for seq := uint64(1); len(data) > 0; seq++ {
			n := min(int(data[0]), len(data)-1)
			payload := data[1 : 1+n]
			data = data[1+n:]
			var d eventsv1.KVBlockDelta
			if proto.Unmarshal(payload, &d) != nil || d.GetWorkerId() == "" {
				continue
			}
			var s eventsv1.WorkerKVSnapshot
			if seq%5 == 0 && proto.Unmarshal(payload, &s) == nil && s.GetWorkerId() != "" {
				r.adopt(&s, seq%2 == 0)
			}
			r.delta(ctx, &d, seq)
		}
		for _, w := range x.Workers() {
			if x.Blocks(w) < 0 {
				t.Fatalf("worker %s has %d blocks", w, x.Blocks(w))
			}
		}
		if st := r.Stats(); st.Resyncing < 0 || st.Resyncing > st.Workers {
			t.Fatalf("resyncing %d of %d workers", st.Resyncing, st.Workers)
		}
	})
}
