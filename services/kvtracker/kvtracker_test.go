package kvtracker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/kvblock"
	"github.com/switchyard-dev/switchyard/internal/rediskeys"
	"github.com/switchyard-dev/switchyard/internal/sim"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
)

// TestNormalFlow: requests to a simulated worker become deltas whose
// stored hashes are kvblock.Chain over the prompt tokens, and the Redis
// snapshot and summary match them — for each encoding vLLM has shipped.
func TestNormalFlow(t *testing.T) {
	for _, enc := range []string{"map", "array+no-medium+signed-hashes", "array+byte-hashes"} {
		t.Run(enc, func(t *testing.T) {
			e := newEnv(t)
			f := startFleet(t, simConfig(1, enc))
			l := e.collect(t)
			cfg := e.config("r1")
			cfg.Workers = shorthand(f)
			tr := startTracker(t, cfg, nil)

			nc, err := nats.Connect(e.natsURL)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			summaries, err := nc.SubscribeSync(bus.KVSummarySubject(e.pool, "w0"))
			if err != nil {
				t.Fatal(err)
			}

			w := f.Workers()[0]
			p := newPrompter(enc)
			chains := warmUp(t, l, w, "w0", p)
			for range 4 {
				chains = append(chains, sendAndSee(t, l, w, "w0", p))
			}
			v, err := l.view("w0")
			if err != nil {
				t.Fatal(err)
			}
			want := map[uint64]bool{}
			for _, c := range chains {
				for _, h := range c {
					want[uint64(h)] = true
				}
			}
			if len(v.set) != len(want) {
				t.Errorf("worker set holds %d blocks, the prompts have %d", len(v.set), len(want))
			}
			if len(v.epochs) != 1 {
				t.Errorf("%d epochs, want 1", len(v.epochs))
			}
			eventually(t, 10*time.Second, func() error { return e.snapshotMatches(l, "w0") })

			eventually(t, 10*time.Second, func() error {
				data, err := e.rdb.Get(context.Background(), rediskeys.KVSummary(e.pool, "w0")).Bytes()
				if err != nil {
					return err
				}
				var s eventsv1.WorkerKVSummary
				if err := proto.Unmarshal(data, &s); err != nil {
					return err
				}
				if s.CachedBlocks != int64(len(want)) || s.Epoch != v.epochs[0] || s.BlocksStoredTotal < int64(len(want)) {
					return fmt.Errorf("summary %+v, want %d cached blocks", &s, len(want))
				}
				return nil
			})
			if _, err := summaries.NextMsg(5 * time.Second); err != nil {
				t.Errorf("no summary on nats: %v", err)
			}

			if got := tr.metric(t, "switchyard_kvtracker_events_total", "type", "BlockStored"); got < float64(len(chains)) {
				t.Errorf("BlockStored events %v", got)
			}
			checkOnlyStartReset(t, tr)
			if got := tr.metric(t, "switchyard_kvtracker_leases_held"); got != 1 {
				t.Errorf("leases held %v", got)
			}
			for path, want := range map[string]string{"/readyz": "ok", "/healthz": "ok", "/metrics": "switchyard_kvtracker_blocks_stored_total"} {
				resp, err := http.Get("http://" + tr.HTTPAddr() + path)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
					t.Errorf("GET %s: %d %.200s", path, resp.StatusCode, body)
				}
			}
		})
	}
}

// checkOnlyStartReset: the worker's one epoch is its start, counted as
// resets{reason="start"}, and nothing reset it since.
func checkOnlyStartReset(t *testing.T, tr *replica) {
	t.Helper()
	start := tr.metric(t, "switchyard_kvtracker_resets_total", "reason", "start")
	if all := tr.metric(t, "switchyard_kvtracker_resets_total"); start != 1 || all != start {
		t.Errorf("resets: %v at start (want 1), %v for other reasons (want 0)", start, all-start)
	}
}

// TestGapReplay drops one live message before the sequence check, so the
// next one reveals a gap that the real replay socket fills: nothing is
// lost and no new epoch starts. Both of vLLM's replay reply formats.
func TestGapReplay(t *testing.T) {
	for _, format := range []string{"topic", "legacy"} {
		t.Run(format, func(t *testing.T) { testGapReplay(t, format) })
	}
}

func testGapReplay(t *testing.T, format string) {
	e := newEnv(t)
	sc := simConfig(1, "map")
	sc.KVReplayFormat = format
	f := startFleet(t, sc)
	l := e.collect(t)
	cfg := e.config("r1")
	cfg.Workers = shorthand(f)
	var armed atomic.Bool
	var dropped atomic.Uint64
	tr := startTracker(t, cfg, func(tr *Tracker) {
		tr.dropMessage = func(worker string, seq uint64) bool {
			if worker == "w0" && armed.CompareAndSwap(true, false) {
				dropped.Store(seq)
				return true
			}
			return false
		}
	})
	w := f.Workers()[0]
	p := newPrompter("gap")
	chains := warmUp(t, l, w, "w0", p)
	armed.Store(true)
	prompt, lost := p.next()
	complete(t, w, prompt) // its batch is dropped
	eventually(t, 10*time.Second, func() error {
		if armed.Load() {
			return errors.New("nothing dropped yet")
		}
		return nil
	})
	chains = append(chains, lost)
	chains = append(chains, sendAndSee(t, l, w, "w0", p)) // reveals the gap
	v, err := l.view("w0")
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range chains {
		if err := holdsChain(v, c); err != nil {
			t.Errorf("prompt %d: %v", i, err)
		}
	}
	if len(v.epochs) != 1 {
		t.Errorf("%d epochs, want 1 (a replayed gap keeps the epoch)", len(v.epochs))
	}
	if tr.metric(t, "switchyard_kvtracker_gaps_total") < 1 || tr.metric(t, "switchyard_kvtracker_replays_total", "outcome", "covered") < 1 {
		t.Errorf("gaps %v, covered replays %v", tr.metric(t, "switchyard_kvtracker_gaps_total"),
			tr.metric(t, "switchyard_kvtracker_replays_total", "outcome", "covered"))
	}
	checkOnlyStartReset(t, tr)
	t.Logf("dropped engine seq %d", dropped.Load())
	eventually(t, 10*time.Second, func() error { return e.snapshotMatches(l, "w0") })
}

// TestJoinRunningWorker: a tracker started after a worker cached prompts
// (a kvtracker restart) recovers them from the worker's replay socket, in
// either reply format; the start is counted as resets{reason="start"}, no
// replay fails.
func TestJoinRunningWorker(t *testing.T) {
	for _, format := range []string{"topic", "legacy"} {
		t.Run(format, func(t *testing.T) {
			e := newEnv(t)
			sc := simConfig(1, "map")
			sc.KVReplayFormat = format
			f := startFleet(t, sc)
			w := f.Workers()[0]
			p := newPrompter("join-" + format)
			var before [][]kvblock.Hash
			for range 3 {
				prompt, chain := p.next()
				complete(t, w, prompt)
				before = append(before, chain)
			}
			l := e.collect(t)
			cfg := e.config("r1")
			cfg.Workers = shorthand(f)
			tr := startTracker(t, cfg, nil)
			eventually(t, 10*time.Second, func() error {
				v, err := l.view("w0")
				if err != nil {
					return err
				}
				for i, c := range before {
					if err := holdsChain(v, c); err != nil {
						return fmt.Errorf("prompt %d sent before the tracker: %w", i, err)
					}
				}
				return nil
			})
			if got := tr.metric(t, "switchyard_kvtracker_replays_total", "outcome", "failed"); got != 0 {
				t.Errorf("%v failed replays", got)
			}
			if got := tr.metric(t, "switchyard_kvtracker_replays_total", "outcome", "covered"); got < 1 {
				t.Errorf("covered replays %v, want the start's", got)
			}
			checkOnlyStartReset(t, tr)
		})
	}
}

func freePort(t *testing.T) int { return testkit.FreePort(t) }

// TestWorkerRestart stops a simulated worker and starts a new one on the
// same ports, so its numbering starts over. Either the tracker sees the
// sequence go back, or — when the new process's first batches went out
// before the tracker reconnected (forced here by dropping them) — it sees
// a gap right after a reconnect. Both clear the worker's state in a new
// epoch and rebuild it from the new process.
func TestWorkerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end; skipped in -short")
	}
	tests := []struct {
		name       string
		hideStart  bool
		wantReason string
	}{
		{"sequence goes back", false, "restart"},
		{"restart hidden by a reconnect", true, "reconnect_gap"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			kvPort, replayPort := freePort(t), freePort(t)
			cfgSim := simConfig(1, "map")
			cfgSim.KVEventsConfig = kvEventsConfig(fmt.Sprintf("tcp://*:%d", kvPort), fmt.Sprintf("tcp://127.0.0.1:%d", replayPort))
			first, err := sim.StartFleet(context.Background(), cfgSim, testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			l := e.collect(t)
			cfg := e.config("r1")
			cfg.Workers = shorthand(first)
			var hideUpTo atomic.Int64
			hideUpTo.Store(-1)
			tr := startTracker(t, cfg, func(tr *Tracker) {
				tr.dropMessage = func(_ string, seq uint64) bool { return int64(seq) <= hideUpTo.Load() }
			})
			p := newPrompter("restart")
			warmUp(t, l, first.Workers()[0], "w0", p)
			for range 4 {
				sendAndSee(t, l, first.Workers()[0], "w0", p)
			}
			if err := first.Close(); err != nil {
				t.Logf("close first fleet: %v", err)
			}
			if tc.hideStart {
				v, err := l.view("w0")
				if err != nil {
					t.Fatal(err)
				}
				// Up to one past the old numbering: the first batch seen
				// is then a gap, not the batch the old process would
				// have sent next.
				hideUpTo.Store(int64(v.last.EngineSeq) + 1)
			}

			var second *sim.Fleet
			eventually(t, 10*time.Second, func() error {
				second, err = sim.StartFleet(context.Background(), cfgSim, testLogger(t))
				return err
			})
			t.Cleanup(func() { _ = second.Close() })
			w := second.Workers()[0]
			var after [][]kvblock.Hash
			deadline := time.Now().Add(20 * time.Second)
			for tr.metric(t, "switchyard_kvtracker_resets_total", "reason", tc.wantReason) < 1 {
				if time.Now().After(deadline) {
					t.Fatalf("no %s reset; resets: restart %v, reconnect_gap %v", tc.wantReason,
						tr.metric(t, "switchyard_kvtracker_resets_total", "reason", "restart"),
						tr.metric(t, "switchyard_kvtracker_resets_total", "reason", "reconnect_gap"))
				}
				prompt, chain := p.next()
				complete(t, w, prompt)
				after = append(after, chain)
				// One prompt at a time, so the new numbering passes the old
				// one only when the test hides it.
				for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
					if tr.metric(t, "switchyard_kvtracker_resets_total", "reason", tc.wantReason) >= 1 {
						break
					}
				}
			}
			hideUpTo.Store(-1)
			after = append(after, sendAndSee(t, l, w, "w0", p))
			v, err := l.view("w0")
			if err != nil {
				t.Fatal(err)
			}
			if len(v.epochs) != 2 {
				t.Errorf("%d epochs, want 2", len(v.epochs))
			}
			want := map[uint64]bool{}
			for _, c := range after {
				for _, h := range c {
					want[uint64(h)] = true
				}
			}
			// Every block of the new process's prompts, and nothing of the old one.
			for h := range want {
				if !v.set[h] {
					t.Errorf("block %x of the new process missing", h)
				}
			}
			if len(v.set) != len(want) {
				t.Errorf("set holds %d blocks, the new process cached %d", len(v.set), len(want))
			}
			eventually(t, 10*time.Second, func() error { return e.snapshotMatches(l, "w0") })
		})
	}
}

// TestEviction: a worker with a small cache evicts; the deltas carry the
// removed hashes and the set stays what the worker holds.
func TestEviction(t *testing.T) {
	e := newEnv(t)
	cfgSim := simConfig(1, "map")
	cfgSim.NumGPUBlocksOverride = 24
	cfgSim.MaxModelLen = 256
	f := startFleet(t, cfgSim)
	l := e.collect(t)
	cfg := e.config("r1")
	cfg.Workers = shorthand(f)
	cfg.WorkerSpecs = nil
	tr := startTracker(t, cfg, nil)
	w := f.Workers()[0]
	p := newPrompter("evict")
	warmUp(t, l, w, "w0", p)
	var last []kvblock.Hash
	for range 8 {
		last = sendAndSee(t, l, w, "w0", p)
	}
	v, err := l.view("w0")
	if err != nil {
		t.Fatal(err)
	}
	if v.removedTotal == 0 {
		t.Fatal("no removals published")
	}
	if len(v.set) > 23 {
		t.Errorf("set holds %d blocks, the worker only has 23", len(v.set))
	}
	if err := holdsChain(v, last); err != nil {
		t.Errorf("last prompt: %v", err)
	}
	if got := tr.metric(t, "switchyard_kvtracker_blocks_removed_total"); got < float64(v.removedTotal) {
		t.Errorf("blocks removed metric %v < %d removed hashes", got, v.removedTotal)
	}
	eventually(t, 10*time.Second, func() error { return e.snapshotMatches(l, "w0") })
}

// TestReplicaTakeover runs two replicas over three workers: they split
// them, never hold one worker at the same time, and when one is killed
// (leases left to expire) the other takes its workers over within
// seconds, in new epochs.
func TestReplicaTakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end; skipped in -short")
	}
	e := newEnv(t)
	f := startFleet(t, simConfig(3, "map"))
	l := e.collect(t)
	cfg := e.config("replica-a")
	cfg.Workers = shorthand(f)
	a := startTracker(t, cfg, nil)
	cfgB := cfg
	cfgB.ReplicaID = "replica-b"
	b := startTracker(t, cfgB, nil)

	var overlap atomic.Value
	stopWatch := make(chan struct{})
	var watch sync.WaitGroup
	watch.Go(func() {
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(5 * time.Millisecond):
			}
			ka, kb := a.heldKeys(), b.heldKeys()
			for _, k := range ka {
				if slices.Contains(kb, k) {
					overlap.Store(k)
				}
			}
		}
	})
	defer func() {
		close(stopWatch)
		watch.Wait()
	}()

	eventually(t, 20*time.Second, func() error {
		ka, kb := a.heldKeys(), b.heldKeys()
		if len(ka)+len(kb) != 3 || len(ka) == 0 || len(kb) == 0 {
			return fmt.Errorf("a holds %v, b holds %v", ka, kb)
		}
		return nil
	})
	p := newPrompter("takeover")
	for _, w := range f.Workers() {
		warmUp(t, l, w, fmt.Sprintf("w%d", w.ID), p)
	}
	before := map[string][]uint64{}
	for i := range 3 {
		v, err := l.view(fmt.Sprintf("w%d", i))
		if err != nil {
			t.Fatal(err)
		}
		before[fmt.Sprintf("w%d", i)] = v.epochs
	}

	aHeld := a.heldKeys()
	a.skipRelease.Store(true) // killed: nothing released, leases expire
	killed := time.Now()
	a.stop(t)
	eventually(t, bus.KVLeaseTTL+5*time.Second, func() error {
		if kb := b.heldKeys(); len(kb) != 3 {
			return fmt.Errorf("b holds %v", kb)
		}
		return nil
	})
	took := time.Since(killed)
	t.Logf("replica b took over %v in %v (lease ttl %v)", aHeld, took, bus.KVLeaseTTL)

	for _, key := range aHeld {
		worker := key[strings.LastIndexByte(key, '.')+1:]
		var wi sim.WorkerInfo
		for _, w := range f.Workers() {
			if fmt.Sprintf("w%d", w.ID) == worker {
				wi = w
			}
		}
		sendAndSee(t, l, wi, worker, p)
		v, err := l.view(worker)
		if err != nil {
			t.Fatal(err)
		}
		if len(v.epochs) <= len(before[worker]) {
			t.Errorf("worker %s: epochs %v after takeover, %v before", worker, v.epochs, before[worker])
		}
	}
	if k := overlap.Load(); k != nil {
		t.Errorf("worker %v was held by both replicas at once", k)
	}
	for i := range 3 {
		if _, err := l.view(fmt.Sprintf("w%d", i)); err != nil {
			t.Error(err)
		}
	}
}

// TestBoundSocket: workers connect to the tracker's one SUB socket and are
// told apart by topic.
func TestBoundSocket(t *testing.T) {
	e := newEnv(t)
	l := e.collect(t)
	replayPorts := []int{freePort(t), freePort(t)}
	cfg := e.config("r1")
	cfg.Bind = "tcp://127.0.0.1:0"
	for i, port := range replayPorts {
		cfg.WorkerSpecs = append(cfg.WorkerSpecs, WorkerSpec{ID: fmt.Sprintf("b%d", i), Topic: fmt.Sprintf("kv-b%d", i),
			ReplayEndpoint: fmt.Sprintf("tcp://127.0.0.1:%d", port)})
	}
	tr := startTracker(t, cfg, nil)
	if tr.BindEndpoint() == "" || strings.HasSuffix(tr.BindEndpoint(), ":0") {
		t.Fatalf("bind endpoint %q", tr.BindEndpoint())
	}
	var fleets []*sim.Fleet
	for i, port := range replayPorts {
		c := simConfig(1, "map")
		c.KVEventsConfig = fmt.Sprintf(`{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":%q,"replay_endpoint":"tcp://127.0.0.1:%d","topic":"kv-b%d"}`,
			tr.BindEndpoint(), port, i)
		fleets = append(fleets, startFleet(t, c))
	}
	// A publisher whose topic nobody configured is counted and ignored.
	stray := simConfig(1, "map")
	stray.KVEventsConfig = fmt.Sprintf(`{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":%q,"topic":"stray"}`, tr.BindEndpoint())
	strayFleet := startFleet(t, stray)

	p := newPrompter("bound")
	for i, f := range fleets {
		warmUp(t, l, f.Workers()[0], fmt.Sprintf("b%d", i), p)
		sendAndSee(t, l, f.Workers()[0], fmt.Sprintf("b%d", i), p)
	}
	eventually(t, 10*time.Second, func() error {
		prompt, _ := p.next()
		complete(t, strayFleet.Workers()[0], prompt)
		if tr.metric(t, "switchyard_kvtracker_bound_dropped_total", "reason", "unknown_topic") < 1 {
			return errors.New("stray topic not counted")
		}
		return nil
	})
	for i := range fleets {
		v, err := l.view(fmt.Sprintf("b%d", i))
		if err != nil {
			t.Fatal(err)
		}
		for j := range fleets {
			if j == i {
				continue
			}
			w, _ := l.view(fmt.Sprintf("b%d", j))
			for h := range w.set {
				if v.set[h] {
					t.Errorf("worker b%d holds b%d's block %x", i, j, h)
				}
			}
		}
	}
}
