package kvzmq

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/vllm/kvevents"
)

// testDeadline bounds every network wait; tests finish far sooner.
const testDeadline = 20 * time.Second

// probeTS marks the batches waitLive publishes.
const probeTS = -1

func testConfig(endpoint string) Config {
	c := DefaultConfig()
	c.Endpoint = endpoint
	c.MaxQueueSize = 1000
	c.BufferSteps = 1000
	return c
}

func testBatch(i int) kvevents.Batch {
	gpu := kvevents.MediumGPU
	return kvevents.Batch{TS: 1752154723 + float64(i), Events: []kvevents.Event{
		&kvevents.BlockStored{
			BlockHashes: []kvevents.EngineHash{kvevents.EngineHash(1000 + i)},
			TokenIDs:    []uint32{uint32(i), 2, 3, 4}, BlockSize: 4, Medium: &gpu,
		},
	}}
}

func newPub(t testing.TB, cfg Config, enc kvevents.Encoding) *Publisher {
	t.Helper()
	p, err := NewPublisher(cfg, enc, zerolog.Nop())
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	t.Cleanup(cancel)
	return ctx
}

// waitLive defeats ZMQ's slow joiner: a subscription reaches the publisher
// some time after the connection, and messages before it are dropped. It
// publishes probe batches until one arrives. Probes already in flight
// arrive before anything published later (one connection keeps order), so
// recvBatches skips them.
func waitLive(t testing.TB, ctx context.Context, p *Publisher, s *Subscriber) {
	t.Helper()
	for {
		if err := p.Publish(kvevents.Batch{TS: probeTS}); err != nil {
			t.Fatalf("publish probe: %v", err)
		}
		rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		_, err := s.Recv(rctx)
		cancel()
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("subscription never became live: %v", ctx.Err())
		}
	}
}

type received struct {
	msg   Message
	batch kvevents.Batch
}

// recvBatches receives n non-probe batches, decoding each.
func recvBatches(t testing.TB, ctx context.Context, s *Subscriber, n int) []received {
	t.Helper()
	var d kvevents.Decoder
	var out []received
	for len(out) < n {
		m, err := s.Recv(ctx)
		if err != nil {
			t.Fatalf("recv after %d of %d batches: %v", len(out), n, err)
		}
		var b kvevents.Batch
		if err := d.Decode(m.Payload, &b); err != nil {
			t.Fatalf("decode seq %d: %v", m.Seq, err)
		}
		if b.TS == probeTS {
			continue
		}
		out = append(out, received{m, copyBatch(b)})
	}
	return out
}

// copyBatch detaches a decoded batch from its Decoder by re-decoding it
// with a fresh one.
func copyBatch(b kvevents.Batch) kvevents.Batch {
	p, err := kvevents.AppendEncode(nil, &b, kvevents.EncodingMap)
	if err != nil {
		panic(err)
	}
	var d kvevents.Decoder
	var c kvevents.Batch
	if err := d.Decode(p, &c); err != nil {
		panic(err)
	}
	return c
}

// checkBatches verifies topic, consecutive seqs and content of batches
// testBatch(0..n-1) published with data-parallel rank dp.
func checkBatches(t testing.TB, got []received, topic string, dp int64) {
	t.Helper()
	for i, r := range got {
		if r.msg.Topic != topic {
			t.Fatalf("batch %d: topic %q, want %q", i, r.msg.Topic, topic)
		}
		if i > 0 && r.msg.Seq != got[i-1].msg.Seq+1 {
			t.Fatalf("batch %d: seq %d after %d, want consecutive", i, r.msg.Seq, got[i-1].msg.Seq)
		}
		want := testBatch(i)
		if r.batch.TS != want.TS {
			t.Fatalf("batch %d: ts %v, want %v", i, r.batch.TS, want.TS)
		}
		if r.batch.DataParallelRank == nil || *r.batch.DataParallelRank != dp {
			t.Fatalf("batch %d: data_parallel_rank %v, want %d", i, r.batch.DataParallelRank, dp)
		}
		ev, ok := r.batch.Events[0].(*kvevents.BlockStored)
		if !ok || len(r.batch.Events) != 1 || ev.BlockHashes[0] != kvevents.EngineHash(1000+i) || ev.TokenIDs[0] != uint32(i) {
			t.Fatalf("batch %d: events %+v", i, r.batch.Events)
		}
	}
}

func TestPublisherBindsSubscriberDials(t *testing.T) {
	for _, enc := range []kvevents.Encoding{kvevents.EncodingMap, kvevents.EncodingArray} {
		t.Run(enc.String(), func(t *testing.T) {
			ctx := ctxT(t)
			cfg := testConfig("tcp://127.0.0.1:*")
			cfg.Topic = "kv@worker-1"
			p := newPub(t, cfg, enc)
			if !strings.HasPrefix(p.Endpoint(), "tcp://127.0.0.1:") || strings.HasSuffix(p.Endpoint(), ":0") {
				t.Fatalf("Endpoint() = %q, want the bound loopback port", p.Endpoint())
			}
			s, err := DialSubscriber(ctx, p.Endpoint(), "kv@worker-1")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			waitLive(t, ctx, p, s)
			const n = 10
			for i := 0; i < n; i++ {
				if err := p.Publish(testBatch(i)); err != nil {
					t.Fatal(err)
				}
			}
			checkBatches(t, recvBatches(t, ctx, s, n), "kv@worker-1", 0)
		})
	}
}

// TestBindHost: vLLM's wildcard endpoint binds the given host only (the
// simulator's --host), a subscriber receives on it, and an endpoint that
// connects by vLLM's rule still connects.
func TestBindHost(t *testing.T) {
	ctx := ctxT(t)
	cfg := testConfig("tcp://*:*")
	cfg.ReplayEndpoint = "tcp://*:*"
	cfg.BindHost = "127.0.0.1"
	p := newPub(t, cfg, kvevents.EncodingMap)
	for name, addr := range map[string]net.Addr{"pub": p.pub.Addr(), "replay": p.router.Addr()} {
		tcp, ok := addr.(*net.TCPAddr)
		if !ok || !tcp.IP.IsLoopback() {
			t.Errorf("%s socket bound on %v, want loopback only", name, addr)
		}
	}
	deliversOne(t, ctx, p, 0)

	tests := []struct{ endpoint, host, want string }{
		{"tcp://*:5557", "127.0.0.1", "tcp://127.0.0.1:5557"},
		{"tcp://*:*", "::1", "tcp://[::1]:*"},
		{"tcp://*:5557", "0.0.0.0", "tcp://*:5557"},
		{"tcp://*:5557", "", "tcp://*:5557"},
		{"tcp://10.0.0.1:5557", "127.0.0.1", "tcp://10.0.0.1:5557"},
		{"ipc:///tmp/kv.sock", "127.0.0.1", "ipc:///tmp/kv.sock"},
	}
	for _, tt := range tests {
		if got := onHost(tt.endpoint, tt.host); got != tt.want {
			t.Errorf("onHost(%q, %q) = %q, want %q", tt.endpoint, tt.host, got, tt.want)
		}
	}
}

func TestSubscriberBindsPublisherConnects(t *testing.T) {
	ctx := ctxT(t)
	s, err := ListenSubscriber(ctx, "tcp://127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cfg := testConfig(s.Endpoint())
	cfg.DataParallelRank = 0
	p := newPub(t, cfg, kvevents.EncodingMap)
	if p.Endpoint() != s.Endpoint() {
		t.Fatalf("publisher endpoint %q, want the subscriber's %q", p.Endpoint(), s.Endpoint())
	}
	waitLive(t, ctx, p, s)
	for i := 0; i < 5; i++ {
		if err := p.Publish(testBatch(i)); err != nil {
			t.Fatal(err)
		}
	}
	checkBatches(t, recvBatches(t, ctx, s, 5), "", 0)
}

// TestPublisherConnectsBeforeSubscriberListens: like libzmq, a connecting
// publisher starts without its peer and delivers once the peer is up.
func TestPublisherConnectsBeforeSubscriberListens(t *testing.T) {
	ctx := ctxT(t)
	ep := "tcp://" + freeAddr(t)
	cfg := testConfig(ep)
	cfg.DataParallelRank = 0
	p := newPub(t, cfg, kvevents.EncodingArray)
	s, err := ListenSubscriber(ctx, ep, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	waitLive(t, ctx, p, s)
	if err := p.Publish(testBatch(0)); err != nil {
		t.Fatal(err)
	}
	checkBatches(t, recvBatches(t, ctx, s, 1), "", 0)
}

func TestDataParallelRankOffsetsAndStamps(t *testing.T) {
	ctx := ctxT(t)
	base := freePort(t)
	cfg := testConfig(fmt.Sprintf("tcp://*:%d", base))
	cfg.DataParallelRank = 1
	p := newPub(t, cfg, kvevents.EncodingMap)
	if want := fmt.Sprintf("tcp://127.0.0.1:%d", base+1); p.Endpoint() != want {
		t.Fatalf("Endpoint() = %q, want %q (port offset by rank)", p.Endpoint(), want)
	}
	deliversOne(t, ctx, p, 1)
}

// deliversOne subscribes to p's endpoint and checks that a batch published
// once the subscription is live arrives, stamped with rank dp.
func deliversOne(t *testing.T, ctx context.Context, p *Publisher, dp int64) {
	t.Helper()
	s, err := DialSubscriber(ctx, p.Endpoint(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	waitLive(t, ctx, p, s)
	if err := p.Publish(testBatch(0)); err != nil {
		t.Fatal(err)
	}
	checkBatches(t, recvBatches(t, ctx, s, 1), "", dp)
}

// TestTopicFiltering sends two topics down one connection from a plain
// PUB socket. Order holds on a connection, so once the final marker
// arrives, anything the filter let through has arrived before it.
func TestTopicFiltering(t *testing.T) {
	ctx := ctxT(t)
	pctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	raw := zmq4.NewPub(pctx)
	defer raw.Close()
	if err := raw.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ep := boundEndpoint("tcp://127.0.0.1:0", raw.Addr())
	b := testBatch(0)
	payload, err := kvevents.AppendEncode(nil, &b, kvevents.EncodingMap)
	if err != nil {
		t.Fatal(err)
	}
	send := func(topic string, seq uint64) {
		t.Helper()
		if err := raw.Send(zmq4.NewMsgFrom([]byte(topic), binary.BigEndian.AppendUint64(nil, seq), payload)); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		name      string
		topic     string
		wantW2    bool
		wantTopic string
	}{
		{name: "exact topic", topic: "kv.w1", wantW2: false},
		{name: "prefix of both", topic: "kv.", wantW2: true},
		{name: "everything", topic: "", wantW2: true},
		{name: "other worker", topic: "kv.w2", wantW2: true},
	}
	subs := make([]*Subscriber, len(tests))
	for i, tt := range tests {
		s, err := DialSubscriber(ctx, ep, tt.topic)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		subs[i] = s
	}
	// Make every subscription live: probe on both topics until each
	// subscriber has seen something (seq 0 marks probes).
	live := make([]bool, len(subs))
	for n := 0; ; n++ {
		send("kv.w1", 0)
		send("kv.w2", 0)
		all := true
		for i, s := range subs {
			if live[i] {
				continue
			}
			rctx, c := context.WithTimeout(ctx, 20*time.Millisecond)
			if _, err := s.Recv(rctx); err == nil {
				live[i] = true
			} else {
				all = false
			}
			c()
		}
		if all {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("subscriptions never became live: %v", live)
		}
	}
	send("kv.w2", 101)
	send("kv.w2", 102)
	send("kv.w1", 200)
	send("kv.w2", 201)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Messages end with w1/200 then w2/201: wait for the last one
			// this subscription can see.
			last := uint64(201)
			if !tt.wantW2 {
				last = 200
			}
			var sawW2 bool
			for {
				m, err := subs[i].Recv(ctx)
				if err != nil {
					t.Fatalf("recv: %v", err)
				}
				if !strings.HasPrefix(m.Topic, tt.topic) {
					t.Fatalf("got topic %q on a %q subscription", m.Topic, tt.topic)
				}
				if m.Topic == "kv.w2" && m.Seq > 100 {
					sawW2 = true
				}
				if m.Seq == last {
					break
				}
			}
			if sawW2 != tt.wantW2 {
				t.Fatalf("saw kv.w2 messages: %v, want %v", sawW2, tt.wantW2)
			}
		})
	}
}

func TestMalformedMessageIsSkipped(t *testing.T) {
	ctx := ctxT(t)
	pctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	raw := zmq4.NewPub(pctx)
	defer raw.Close()
	if err := raw.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	s, err := DialSubscriber(ctx, boundEndpoint("tcp://127.0.0.1:0", raw.Addr()), "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	good := zmq4.NewMsgFrom([]byte("t"), binary.BigEndian.AppendUint64(nil, 7), []byte{0x90})
	for {
		if err := raw.Send(good); err != nil {
			t.Fatal(err)
		}
		rctx, c := context.WithTimeout(ctx, 50*time.Millisecond)
		_, err := s.Recv(rctx)
		c()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("subscription never became live")
		}
	}
	for _, bad := range []zmq4.Msg{
		zmq4.NewMsgFrom([]byte("t"), []byte{1, 2, 3}, []byte{0x90}),
		zmq4.NewMsgFrom([]byte("t"), binary.BigEndian.AppendUint64(nil, 8)),
	} {
		if err := raw.Send(bad); err != nil {
			t.Fatal(err)
		}
	}
	if err := raw.Send(zmq4.NewMsgFrom([]byte("t"), binary.BigEndian.AppendUint64(nil, 9), []byte{0x90})); err != nil {
		t.Fatal(err)
	}
	var malformed int
	for {
		m, err := s.Recv(ctx)
		if errors.Is(err, ErrMalformed) {
			malformed++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if m.Seq == 9 {
			break
		}
	}
	if malformed != 2 {
		t.Fatalf("%d malformed messages reported, want 2", malformed)
	}
}

// publishAndWait publishes testBatch(0..n-1) and waits until the sender has
// sent them all, so the replay buffer holds them.
func publishAndWait(t testing.TB, ctx context.Context, p *Publisher, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if err := p.Publish(testBatch(i)); err != nil {
			t.Fatal(err)
		}
	}
	for p.Stats().Published < uint64(n) {
		if ctx.Err() != nil {
			t.Fatalf("only %d of %d batches sent", p.Stats().Published, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func replayAll(t testing.TB, ctx context.Context, ep string, from uint64) []received {
	t.Helper()
	var d kvevents.Decoder
	var out []received
	err := Replay(ctx, ep, from, func(seq uint64, payload []byte) error {
		var b kvevents.Batch
		if err := d.Decode(payload, &b); err != nil {
			return err
		}
		out = append(out, received{Message{Seq: seq, Payload: payload}, copyBatch(b)})
		return nil
	})
	if err != nil {
		t.Fatalf("Replay from %d: %v", from, err)
	}
	return out
}

// TestReplayLateSubscriber: a consumer that joins after N batches asks the
// replay socket from 0 and gets every one of them, in order, then the end
// marker.
// Both reply formats, the newest first.
func TestReplayLateSubscriber(t *testing.T) {
	for _, format := range []string{ReplayTopic, ReplayLegacy} {
		t.Run(format, func(t *testing.T) { testReplayLateSubscriber(t, format) })
	}
}

func testReplayLateSubscriber(t *testing.T, format string) {
	ctx := ctxT(t)
	cfg := testConfig("tcp://127.0.0.1:*")
	cfg.ReplayEndpoint = "tcp://127.0.0.1:*"
	cfg.ReplayFormat = format
	cfg.Topic = "kv@w0"
	p := newPub(t, cfg, kvevents.EncodingArray)
	const n = 20
	publishAndWait(t, ctx, p, n)

	tests := []struct {
		name      string
		from      uint64
		wantFirst uint64
		wantN     int
	}{
		{"from zero", 0, 0, n},
		{"from the middle", 15, 15, 5},
		{"from the last", n - 1, n - 1, 1},
		{"past the end", 1000, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := replayAll(t, ctx, p.ReplayEndpoint(), tt.from)
			if len(got) != tt.wantN {
				t.Fatalf("replayed %d batches, want %d", len(got), tt.wantN)
			}
			for i, r := range got {
				seq := tt.wantFirst + uint64(i)
				if r.msg.Seq != seq {
					t.Fatalf("replayed seq %d at position %d, want %d", r.msg.Seq, i, seq)
				}
				if want := testBatch(int(seq)).TS; r.batch.TS != want {
					t.Fatalf("seq %d: ts %v, want %v", seq, r.batch.TS, want)
				}
			}
		})
	}
	if got := p.Stats().ReplayRequests; got != uint64(len(tests)) {
		t.Fatalf("ReplayRequests = %d, want %d", got, len(tests))
	}
}

// TestReplayWireFrames pins the frames the publisher's ROUTER sends, as a
// raw DEALER receives them, in each format: vLLM's since #45177
// ([identity, "", topic, seq, payload], end [identity, "", "", END_SEQ,
// ""]) and before it ([identity, "", seq, payload], end [identity, "",
// END_SEQ, ""]); the ROUTER strips the identity, the DEALER keeps "".
func TestReplayWireFrames(t *testing.T) {
	seq := func(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }
	end := binary.BigEndian.AppendUint64(nil, ^uint64(0))
	for _, tt := range []struct {
		format   string
		batch    func(payload []byte) [][]byte
		endFrame [][]byte
	}{
		{"", func(pl []byte) [][]byte { return [][]byte{{}, []byte("kv@w0"), seq(1), pl} }, [][]byte{{}, {}, end, {}}},
		{ReplayTopic, func(pl []byte) [][]byte { return [][]byte{{}, []byte("kv@w0"), seq(1), pl} }, [][]byte{{}, {}, end, {}}},
		{ReplayLegacy, func(pl []byte) [][]byte { return [][]byte{{}, seq(1), pl} }, [][]byte{{}, end, {}}},
	} {
		t.Run("format="+tt.format, func(t *testing.T) {
			ctx := ctxT(t)
			cfg := testConfig("tcp://127.0.0.1:*")
			cfg.ReplayEndpoint = "tcp://127.0.0.1:*"
			cfg.ReplayFormat = tt.format
			cfg.Topic = "kv@w0"
			p := newPub(t, cfg, kvevents.EncodingMap)
			publishAndWait(t, ctx, p, 2)
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			d := zmq4.NewDealer(sctx)
			defer d.Close()
			if err := d.Dial(p.ReplayEndpoint()); err != nil {
				t.Fatal(err)
			}
			if err := d.Send(zmq4.NewMsgFrom([]byte{}, seq(1))); err != nil {
				t.Fatal(err)
			}
			payload, err := kvevents.AppendEncode(nil, func() *kvevents.Batch { b := testBatch(1); b.DataParallelRank = new(int64); return &b }(), kvevents.EncodingMap)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range [][][]byte{tt.batch(payload), tt.endFrame} {
				msg, err := d.Recv()
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprintf("%x", msg.Frames) != fmt.Sprintf("%x", want) {
					t.Fatalf("reply %d: frames %x, want %x", i, msg.Frames, want)
				}
			}
		})
	}
}

// TestReplayFrames: the client reads either reply shape, with or without
// the delimiter, and refuses anything else.
func TestReplayFrames(t *testing.T) {
	seq := binary.BigEndian.AppendUint64(nil, 7)
	pl := []byte{0x92, 0xcb}
	for _, tt := range []struct {
		name   string
		frames [][]byte
		ok     bool
	}{
		{"topic, as a DEALER gets it", [][]byte{{}, []byte("kv@w0"), seq, pl}, true},
		{"topic, empty topic", [][]byte{{}, {}, seq, pl}, true},
		{"topic, no delimiter", [][]byte{[]byte("kv@w0"), seq, pl}, true},
		{"legacy, as a DEALER gets it", [][]byte{{}, seq, pl}, true},
		{"legacy, no delimiter", [][]byte{seq, pl}, true},
		{"one frame", [][]byte{seq}, false},
		{"five frames", [][]byte{{}, {}, []byte("t"), seq, pl}, false},
		{"four frames without delimiter", [][]byte{[]byte("x"), []byte("t"), seq, pl}, false},
		{"short sequence", [][]byte{{}, []byte("kv"), seq[:4], pl}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			gotSeq, gotPayload, err := replayFrames(tt.frames)
			if !tt.ok {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("replayFrames = %x, %x, %v; want ErrMalformed", gotSeq, gotPayload, err)
				}
				return
			}
			if err != nil || string(gotSeq) != string(seq) || string(gotPayload) != string(pl) {
				t.Fatalf("replayFrames = %x, %x, %v; want %x, %x", gotSeq, gotPayload, err, seq, pl)
			}
		})
	}
	end := binary.BigEndian.AppendUint64(nil, ^uint64(0))
	for _, frames := range [][][]byte{{{}, {}, end, {}}, {{}, end, {}}} {
		if got, _, err := replayFrames(frames); err != nil || string(got) != string(end) {
			t.Errorf("end marker %x: seq %x, %v", frames, got, err)
		}
	}
}

// TestReplayBoundedBuffer: asking for a seq the buffer no longer holds
// yields only what is kept; the first seq is above the one asked for, so
// the caller sees the gap.
func TestReplayBoundedBuffer(t *testing.T) {
	ctx := ctxT(t)
	cfg := testConfig("tcp://127.0.0.1:*")
	cfg.ReplayEndpoint = "tcp://127.0.0.1:*"
	cfg.BufferSteps = 5
	p := newPub(t, cfg, kvevents.EncodingMap)
	publishAndWait(t, ctx, p, 12)
	got := replayAll(t, ctx, p.ReplayEndpoint(), 0)
	if len(got) != 5 {
		t.Fatalf("replayed %d batches, want the 5 kept", len(got))
	}
	for i, r := range got {
		if want := uint64(7 + i); r.msg.Seq != want {
			t.Fatalf("replayed seq %d at position %d, want %d", r.msg.Seq, i, want)
		}
	}
}

func TestReplayStopsOnCallbackError(t *testing.T) {
	ctx := ctxT(t)
	cfg := testConfig("tcp://127.0.0.1:*")
	cfg.ReplayEndpoint = "tcp://127.0.0.1:*"
	p := newPub(t, cfg, kvevents.EncodingMap)
	publishAndWait(t, ctx, p, 5)
	errStop := errors.New("stop")
	var calls int
	err := Replay(ctx, p.ReplayEndpoint(), 0, func(uint64, []byte) error {
		calls++
		if calls == 2 {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) || calls != 2 {
		t.Fatalf("Replay = %v after %d calls, want errStop after 2", err, calls)
	}
}

func TestPublishQueueFullAndClose(t *testing.T) {
	cfg := testConfig("tcp://127.0.0.1:*")
	cfg.MaxQueueSize = 3
	p, err := newPublisher(cfg, kvevents.EncodingMap, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	// The sender is not running yet, so the queue fills deterministically.
	for i := 0; i < 3; i++ {
		if err := p.Publish(testBatch(i)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if err := p.Publish(testBatch(3)); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("publish into a full queue: %v, want ErrQueueFull", err)
	}
	p.start()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if st.Published != 3 || st.QueueFull != 1 {
		t.Fatalf("stats %+v, want the 3 queued batches flushed by Close and 1 refused", st)
	}
	if err := p.Publish(testBatch(4)); !errors.Is(err, ErrClosed) {
		t.Fatalf("publish after Close: %v, want ErrClosed", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestNewPublisherRejects(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		enc  kvevents.Encoding
		want string
	}{
		{"bad encoding", testConfig("tcp://127.0.0.1:*"), kvevents.Encoding(9), "invalid encoding"},
		{"bad endpoint", testConfig("udp4://x"), kvevents.EncodingMap, "unsupported transport"},
		{"ipc with a rank", func() Config { c := testConfig("ipc:///tmp/x.sock"); c.DataParallelRank = 1; return c }(), kvevents.EncodingMap, "must contain"},
		{"port in use", testConfig(fmt.Sprintf("tcp://*:%d", busyPort(t))), kvevents.EncodingMap, "bind"},
		{"unknown replay format", func() Config { c := testConfig("tcp://127.0.0.1:*"); c.ReplayFormat = "v2"; return c }(), kvevents.EncodingMap, `replay format "v2": want "topic"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPublisher(tt.cfg, tt.enc, zerolog.Nop())
			if err == nil {
				p.Close()
				t.Fatalf("NewPublisher succeeded, want an error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewPublisher error %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestDialHonoursContext(t *testing.T) {
	ep := "tcp://" + freeAddr(t) // nothing listens there
	t.Run("subscriber", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		s, err := DialSubscriber(ctx, ep, "")
		if err == nil {
			s.Close()
			t.Fatal("DialSubscriber to a closed port succeeded")
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("DialSubscriber: %v, want the context deadline", err)
		}
	})
	t.Run("replay", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		err := Replay(ctx, ep, 0, func(uint64, []byte) error { return nil })
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Replay: %v, want the context deadline", err)
		}
	})
	t.Run("recv", func(t *testing.T) {
		ctx := ctxT(t)
		s, err := ListenSubscriber(ctx, "tcp://127.0.0.1:0", "")
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.Recv(rctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Recv with a cancelled context: %v", err)
		}
		s.Close()
		if _, err := s.Recv(ctx); !errors.Is(err, ErrClosed) {
			t.Fatalf("Recv after Close: %v, want ErrClosed", err)
		}
	})
}

// TestSubscriberReconnects: when the publisher restarts on the same port,
// a dialled subscriber reconnects and resubscribes by itself; seq restarts
// at 0, which is how a consumer tells a restart from a gap.
func TestSubscriberReconnects(t *testing.T) {
	ctx := ctxT(t)
	p1, err := NewPublisher(testConfig("tcp://*:*"), kvevents.EncodingMap, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ep := p1.Endpoint()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(ep, "tcp://"))
	s, err := DialSubscriber(ctx, ep, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	waitLive(t, ctx, p1, s)
	if err := p1.Close(); err != nil {
		t.Fatal(err)
	}

	p2 := newPub(t, testConfig("tcp://*:"+port), kvevents.EncodingMap)
	waitLive(t, ctx, p2, s)
	if err := p2.Publish(testBatch(0)); err != nil {
		t.Fatal(err)
	}
	got := recvBatches(t, ctx, s, 1)
	checkBatches(t, got, "", 0)
	if got[0].msg.Seq >= p2.Stats().Published {
		t.Fatalf("seq %d from the restarted publisher, want one of its own (< %d)", got[0].msg.Seq, p2.Stats().Published)
	}
}

// freeAddr returns a loopback address nothing listens on (it was free a
// moment ago).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// freePort returns a port free on every interface, with the next one free
// too (for the data-parallel offset).
func freePort(t *testing.T) int {
	t.Helper()
	for i := 0; i < 50; i++ {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if l2, err := net.Listen("tcp", fmt.Sprintf(":%d", port+1)); err == nil {
			l2.Close()
			return port
		}
	}
	t.Fatal("no two consecutive free ports")
	return 0
}

// busyPort holds a port open on every interface for the test's duration.
func busyPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().(*net.TCPAddr).Port
}
