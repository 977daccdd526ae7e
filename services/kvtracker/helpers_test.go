package kvtracker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/kvblock"
	"github.com/switchyard-dev/switchyard/internal/natsembed"
	"github.com/switchyard-dev/switchyard/internal/rediskeys"
	"github.com/switchyard-dev/switchyard/internal/sim"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	"github.com/switchyard-dev/switchyard/internal/tokenizer"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
)

// env is one test's servers: an embedded NATS, the shared Redis, and a
// pool name no other test run uses.
type env struct {
	natsURL  string
	redisURL string
	rdb      *redis.Client
	js       jetstream.JetStream
	pool     string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{redisURL: redisURL(t)}
	srv, err := natsembed.Start(natsembed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	e.natsURL = srv.URL()
	nc, err := nats.Connect(e.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if e.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	opt, err := redis.ParseURL(e.redisURL)
	if err != nil {
		t.Fatal(err)
	}
	e.rdb = redis.NewClient(opt)
	t.Cleanup(func() { _ = e.rdb.Close() })
	var b [4]byte
	_, _ = rand.Read(b[:])
	e.pool = "test-" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		keys, _ := e.rdb.Keys(ctx, "switchyard:kv:*:"+e.pool+":*").Result()
		if len(keys) > 0 {
			_ = e.rdb.Del(ctx, keys...).Err()
		}
	})
	return e
}

func redisURL(t *testing.T) string {
	u, _ := testkit.Redis(t)
	return u
}

func (e *env) config(replica string) Config {
	c := DefaultConfig()
	c.NATS.URL = e.natsURL
	c.Redis.URL = e.redisURL
	c.Pool = e.pool
	c.Model = sim.DefaultServedModelName
	c.ReplicaID = replica
	c.HTTPAddr = "127.0.0.1:0"
	c.SnapshotInterval = 100 * time.Millisecond
	c.SummaryInterval = 100 * time.Millisecond
	c.ReplayTimeout = 5 * time.Second
	c.ShutdownTimeout = 5 * time.Second
	return c
}

// simConfig is a fast fleet publishing KV events with a replay socket on
// free loopback ports.
func simConfig(workers int, encoding string) sim.Config {
	c := sim.DefaultConfig()
	c.Port = 0
	c.Workers = workers
	c.TimeScale = 1000
	c.DefaultMaxTokens = 1
	c.ShutdownTimeout = 5 * time.Second
	c.KVEventsEncoding = encoding
	c.KVEventsConfig = kvEventsConfig("tcp://127.0.0.1:*", "tcp://127.0.0.1:*")
	return c
}

func kvEventsConfig(endpoint, replay string) string {
	return fmt.Sprintf(`{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":%q,"replay_endpoint":%q,"topic":"kv"}`, endpoint, replay)
}

func startFleet(t *testing.T, cfg sim.Config) *sim.Fleet {
	t.Helper()
	f, err := sim.StartFleet(context.Background(), cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// shorthand lists a fleet's workers as w0, w1, ... for --workers.
func shorthand(f *sim.Fleet) string {
	var parts []string
	for _, w := range f.Workers() {
		parts = append(parts, fmt.Sprintf("w%d=%s|%s", w.ID, w.KVEndpoint, w.ReplayEndpoint))
	}
	return strings.Join(parts, ",")
}

// replica is a running tracker.
type replica struct {
	*Tracker
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

func startTracker(t *testing.T, cfg Config, tune func(*Tracker)) *replica {
	t.Helper()
	tr, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	tr.leaseTick = 100 * time.Millisecond
	if tune != nil {
		tune(tr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{Tracker: tr, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- tr.Serve(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *replica) stop(t *testing.T) {
	t.Helper()
	r.once.Do(func() {
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("tracker did not stop")
		}
	})
}

// heldKeys lists the lease keys the replica ingests.
func (t *Tracker) heldKeys() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for k := range t.runs {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// metric reads a counter or gauge from the tracker's registry; labels as
// name=value pairs.
func (t *Tracker) metric(tb testing.TB, name string, labels ...string) float64 {
	tb.Helper()
	mfs, err := t.metrics.reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if labelValue(m, labels[i]) != labels[i+1] {
					continue next
				}
			}
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// eventually polls cond until it returns nil or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// deltaLog collects every delta on the KV stream from its start.
type deltaLog struct {
	mu     sync.Mutex
	deltas []streamDelta
}

type streamDelta struct {
	*eventsv1.KVBlockDelta
	streamSeq uint64
}

func (e *env) collect(t *testing.T) *deltaLog {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := bus.EnsureKVStream(ctx, e.js); err != nil {
		t.Fatal(err)
	}
	cons, err := e.js.OrderedConsumer(ctx, bus.StreamKV, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	l := &deltaLog{}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		var d eventsv1.KVBlockDelta
		if err := proto.Unmarshal(m.Data(), &d); err != nil {
			t.Errorf("undecodable delta: %v", err)
			return
		}
		md, err := m.Metadata()
		if err != nil {
			t.Errorf("metadata: %v", err)
			return
		}
		l.mu.Lock()
		l.deltas = append(l.deltas, streamDelta{&d, md.Sequence.Stream})
		l.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
	return l
}

// workerView is a worker's state as a router rebuilds it from deltas.
type workerView struct {
	epochs []uint64
	set    map[uint64]bool
	last   streamDelta
	stored map[uint64]bool // every hash ever stored, any epoch
	// removedTotal counts removed hashes in the current epoch.
	removedTotal int
}

// view replays the worker's deltas, checking their numbering: epochs never
// go back, seq counts 1, 2, 3... within an epoch, and every removal names
// a held block.
func (l *deltaLog) view(worker string) (workerView, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := workerView{set: map[uint64]bool{}, stored: map[uint64]bool{}}
	var epoch, seq uint64
	for _, d := range l.deltas {
		if d.WorkerId != worker {
			continue
		}
		if d.Epoch != epoch {
			if d.Epoch < epoch {
				return v, fmt.Errorf("worker %s: epoch %d after %d (two writers?)", worker, d.Epoch, epoch)
			}
			epoch, seq = d.Epoch, 0
			v.epochs = append(v.epochs, epoch)
			clear(v.set)
			v.removedTotal = 0
		}
		if d.Seq != seq+1 {
			return v, fmt.Errorf("worker %s epoch %d: delta seq %d after %d", worker, epoch, d.Seq, seq)
		}
		seq = d.Seq
		if d.Cleared {
			clear(v.set)
		}
		for _, h := range d.Removed {
			if !v.set[h] {
				return v, fmt.Errorf("worker %s: removed %x not held", worker, h)
			}
			delete(v.set, h)
			v.removedTotal++
		}
		for _, h := range d.Stored {
			v.set[h] = true
			v.stored[h] = true
		}
		v.last = d
	}
	return v, nil
}

// prompter makes distinct prompts, tokenised as the simulator does.
type prompter struct {
	tok  *tokenizer.Simple
	salt string
	n    int
}

func newPrompter(salt string) *prompter { return &prompter{tok: tokenizer.NewSimple(), salt: salt} }

// next returns a prompt of about 100 tokens and the chain of its full
// blocks. Its length avoids 15 mod 16, so the one generated token never
// completes a block whose hash the test would not know.
func (p *prompter) next() (string, []kvblock.Hash) {
	p.n++
	words := []string{"alpha", "river", "stone", "maple", "cloud", "ember", "harbor", "lantern", "meadow", "quartz"}
	var b strings.Builder
	fmt.Fprintf(&b, "request %s number %d:", p.salt, p.n)
	for i := 0; ; i++ {
		fmt.Fprintf(&b, " %s%d", words[(p.n*7+i*3)%len(words)], i)
		if toks := p.tok.Encode(b.String()); len(toks) >= 100 && len(toks)%16 != 15 {
			return b.String(), kvblock.Chain(nil, kvblock.Root, toks, 16, "")
		}
	}
}

func complete(t *testing.T, w sim.WorkerInfo, prompt string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": w.Model, "prompt": prompt, "max_tokens": 1})
	resp, err := http.Post(w.URL+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("completion: %d %s", resp.StatusCode, data)
	}
}

func holdsChain(v workerView, chain []kvblock.Hash) error {
	for i, h := range chain {
		if !v.set[uint64(h)] {
			return fmt.Errorf("block %d of %d (%x) not in the worker's set of %d", i, len(chain), uint64(h), len(v.set))
		}
	}
	return nil
}

// warmUp sends prompts until one shows up in the deltas: a SUB socket's
// subscription reaches the publisher a moment after it connects. It
// returns the chains sent.
func warmUp(t *testing.T, l *deltaLog, w sim.WorkerInfo, worker string, p *prompter) [][]kvblock.Hash {
	t.Helper()
	var chains [][]kvblock.Hash
	deadline := time.Now().Add(20 * time.Second)
	for {
		prompt, chain := p.next()
		complete(t, w, prompt)
		chains = append(chains, chain)
		for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			v, err := l.view(worker)
			if err != nil {
				t.Fatal(err)
			}
			if holdsChain(v, chain) == nil {
				return chains
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no deltas for worker %s", worker)
		}
	}
}

// sendAndSee sends one prompt and waits for its blocks in the deltas.
func sendAndSee(t *testing.T, l *deltaLog, w sim.WorkerInfo, worker string, p *prompter) []kvblock.Hash {
	t.Helper()
	prompt, chain := p.next()
	complete(t, w, prompt)
	eventually(t, 10*time.Second, func() error {
		v, err := l.view(worker)
		if err != nil {
			t.Fatal(err)
		}
		return holdsChain(v, chain)
	})
	return chain
}

func (e *env) snapshot(worker string) (*eventsv1.WorkerKVSnapshot, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	data, err := e.rdb.Get(ctx, rediskeys.KVSnapshot(e.pool, worker)).Bytes()
	if err != nil {
		return nil, fmt.Errorf("get snapshot: %w", err)
	}
	var s eventsv1.WorkerKVSnapshot
	if err := proto.Unmarshal(data, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// snapshotMatches checks the Redis snapshot equals the view at its last
// delta, stream position included.
func (e *env) snapshotMatches(l *deltaLog, worker string) error {
	v, err := l.view(worker)
	if err != nil {
		return err
	}
	s, err := e.snapshot(worker)
	if err != nil {
		return err
	}
	if s.Epoch != v.last.Epoch || s.Seq != v.last.Seq {
		return fmt.Errorf("snapshot at %d/%d, deltas at %d/%d", s.Epoch, s.Seq, v.last.Epoch, v.last.Seq)
	}
	if s.StreamSeq != v.last.streamSeq {
		return fmt.Errorf("snapshot stream_seq %d, last delta's %d", s.StreamSeq, v.last.streamSeq)
	}
	if len(s.Blocks) != len(v.set) {
		return fmt.Errorf("snapshot holds %d blocks, deltas %d", len(s.Blocks), len(v.set))
	}
	for _, h := range s.Blocks {
		if !v.set[h] {
			return fmt.Errorf("snapshot block %x not in the deltas' set", h)
		}
	}
	if s.Pool != e.pool || s.WorkerId != worker || s.Model != sim.DefaultServedModelName || s.BlockSize != 16 {
		return fmt.Errorf("snapshot header %+v", s)
	}
	return nil
}

// testLogger logs to the test output only with -v.
func testLogger(t *testing.T) zerolog.Logger {
	if !testing.Verbose() {
		return zerolog.Nop()
	}
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
}
