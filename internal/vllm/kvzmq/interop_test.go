package kvzmq

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/vllm/kvevents"
)

// requireLibzmqPeer finds python3 with pyzmq and msgpack. .ci/run installs
// them (python3-zmq, python3-msgpack), so in CI their absence is a failure.
func requireLibzmqPeer(t *testing.T) string {
	t.Helper()
	// Debian's interpreter first: its packages are what .ci/run installs,
	// and a python3 earlier on PATH (pyenv) may not see them.
	var err error
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		var path string
		if path, err = exec.LookPath(py); err == nil {
			if err = exec.Command(path, "-c", "import zmq, msgpack").Run(); err == nil {
				return path
			}
		}
	}
	{
		if os.Getenv("CI") == "true" {
			t.Fatalf("libzmq interop peer unavailable (apt-get install python3-zmq python3-msgpack): %v", err)
		}
		t.Skipf("SKIP libzmq interop: python3 with zmq and msgpack not available (apt-get install python3-zmq python3-msgpack): %v", err)
	}
	return ""
}

// TestInteropLibzmqSubscriber: a libzmq SUB (what vLLM-side tooling and
// other consumers use) receives our publisher's frames, decodes the msgpack
// payload with a generic decoder, and replays through our ROUTER, in both
// reply formats.
func TestInteropLibzmqSubscriber(t *testing.T) {
	py := requireLibzmqPeer(t)
	for _, format := range []string{ReplayTopic, ReplayLegacy} {
		t.Run(format, func(t *testing.T) { testInteropLibzmqSubscriber(t, py, format) })
	}
}

func testInteropLibzmqSubscriber(t *testing.T, py, format string) {
	cfg := DefaultConfig()
	cfg.EnableKVCacheEvents = true
	cfg.Publisher = "zmq"
	cfg.Endpoint = "tcp://127.0.0.1:*"
	cfg.ReplayEndpoint = "tcp://127.0.0.1:*"
	cfg.Topic = "kv@w0"
	cfg.ReplayFormat = format
	pub, err := NewPublisher(cfg, kvevents.EncodingMap, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 5
	cmd := exec.CommandContext(ctx, py, "testdata/libzmq_peer.py", "sub", pub.Endpoint(), pub.ReplayEndpoint(), cfg.Topic, "5")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Wait() }()
	lines := bufio.NewScanner(out)
	lines.Buffer(nil, 1<<20)
	next := func() map[string]any {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("peer ended early: %v", lines.Err())
		}
		var m map[string]any
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			t.Fatalf("peer line %q: %v", lines.Text(), err)
		}
		return m
	}
	if m := next(); m["ready"] != true {
		t.Fatalf("peer: %v", m)
	}
	// Slow joiner: keep publishing until the peer has seen n messages.
	go func() {
		for i := 0; ctx.Err() == nil; i++ {
			gpu := kvevents.MediumGPU
			_ = pub.Publish(kvevents.Batch{TS: float64(i), Events: []kvevents.Event{&kvevents.BlockStored{
				BlockHashes: []kvevents.EngineHash{kvevents.EngineHash(1 << 63), 7}, TokenIDs: []uint32{1, 2, 3, 4, 5, 6, 7, 8},
				BlockSize: 4, Medium: &gpu,
			}}})
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	var lastSeq float64 = -1
	for range n {
		m := next()
		if m["topic"] != cfg.Topic {
			t.Errorf("topic %v", m["topic"])
		}
		seq := m["seq"].(float64)
		if seq <= lastSeq {
			t.Errorf("seq %v after %v", seq, lastSeq)
		}
		lastSeq = seq
		// vLLM's batch is an array, [ts, events, data_parallel_rank], its
		// events maps in the map encoding.
		p := m["payload"].([]any)
		if len(p) != 3 || p[2].(float64) != 0 {
			t.Errorf("batch as libzmq+msgpack sees it: %v", p)
		}
		evs := p[1].([]any)
		ev := evs[0].(map[string]any)
		if ev["type"] != "BlockStored" || ev["medium"] != "GPU" || ev["block_size"].(float64) != 4 {
			t.Errorf("event as libzmq+msgpack sees it: %v", ev)
		}
		hashes := ev["block_hashes"].([]any)
		if hashes[0].(float64) != float64(uint64(1<<63)) {
			t.Errorf("uint64 hash read back as %v", hashes[0])
		}
	}
	replayed := 0
	for {
		m := next()
		if m["replay_end"] == true {
			break
		}
		topic, hasTopic := m["replay_topic"]
		if want := format == ReplayTopic; hasTopic != want || (want && topic != cfg.Topic) {
			t.Errorf("%s reply as libzmq sees it: %v, want the topic frame %v", format, m, want)
		}
		replayed++
	}
	if replayed < n {
		t.Errorf("replay gave %d batches, want at least %d", replayed, n)
	}
}

// startBoundPeer starts the libzmq peer in a mode that binds (pub,
// router) and returns the endpoint it printed; the peer stops, its stdin
// closed, when the test ends.
func startBoundPeer(ctx context.Context, t *testing.T, py string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, py, append([]string{"testdata/libzmq_peer.py"}, args...)...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		t.Fatal("peer printed no endpoint")
	}
	var hello struct{ Endpoint string }
	if err := json.Unmarshal(sc.Bytes(), &hello); err != nil {
		t.Fatal(err)
	}
	return hello.Endpoint
}

// TestInteropLibzmqPublisher: our SUB and decoder read what a libzmq PUB
// (the transport vLLM uses) sends in vLLM's map encoding.
func TestInteropLibzmqPublisher(t *testing.T) {
	py := requireLibzmqPeer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, err := DialSubscriber(ctx, startBoundPeer(ctx, t, py, "pub", "tcp://127.0.0.1:*", "kv", "3"), "kv")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var dec kvevents.Decoder
	var b kvevents.Batch
	seen := map[uint64]bool{}
	for len(seen) < 3 {
		msg, err := sub.Recv(ctx)
		if err != nil {
			t.Fatalf("recv: %v", err)
		}
		if err := dec.Decode(msg.Payload, &b); err != nil {
			t.Fatalf("decode libzmq/msgpack payload: %v", err)
		}
		bs, ok := b.Events[0].(*kvevents.BlockStored)
		if !ok || bs.BlockSize != 4 || len(bs.TokenIDs) != 4 || uint64(bs.BlockHashes[0]) != 1000+msg.Seq {
			t.Fatalf("seq %d decoded as %+v", msg.Seq, b.Events[0])
		}
		seen[msg.Seq] = true
	}
}

// TestInteropLibzmqReplay: our DEALER replays from a libzmq ROUTER that
// answers as vLLM's ZmqEventPublisher does, with the topic frame (vLLM
// #45177 on, and llm-d-inference-sim) and without it (older vLLM).
func TestInteropLibzmqReplay(t *testing.T) {
	py := requireLibzmqPeer(t)
	for _, format := range []string{ReplayTopic, ReplayLegacy} {
		t.Run(format, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			const n = 4
			endpoint := startBoundPeer(ctx, t, py, "router", "tcp://127.0.0.1:*", "kv@w0", format, "4")
			for _, from := range []uint64{0, 2} {
				var dec kvevents.Decoder
				var b kvevents.Batch
				var seqs []uint64
				err := Replay(ctx, endpoint, from, func(seq uint64, payload []byte) error {
					if err := dec.Decode(payload, &b); err != nil {
						return err
					}
					bs, ok := b.Events[0].(*kvevents.BlockStored)
					if !ok || uint64(bs.BlockHashes[0]) != 1000+seq || bs.GroupIdx == nil || *bs.GroupIdx != 0 {
						return fmt.Errorf("seq %d decoded as %+v", seq, b.Events[0])
					}
					seqs = append(seqs, seq)
					return nil
				})
				if err != nil {
					t.Fatalf("Replay from %d: %v", from, err)
				}
				if len(seqs) != n-int(from) || seqs[0] != from || seqs[len(seqs)-1] != n-1 {
					t.Fatalf("Replay from %d gave seqs %v, want %d..%d", from, seqs, from, n-1)
				}
			}
		})
	}
}
