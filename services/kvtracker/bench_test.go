package kvtracker

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/fleet"
	"github.com/switchyard-dev/switchyard/internal/natsembed"
	"github.com/switchyard-dev/switchyard/internal/vllm/kvevents"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
	"github.com/switchyard-dev/switchyard/services/kvtracker/internal/ingest"
)

const (
	benchBatches     = 2048
	benchBlocks      = 32 // blocks stored per batch (a 512-token prefill step)
	benchBlockSize   = 16
	benchChain       = 16  // batches per prompt chain (8k tokens)
	benchRemoveAfter = 512 // a batch's blocks are evicted this many batches later
)

// benchPayloads is a steady stream of engine steps in vLLM's map encoding:
// each stores 32 blocks continuing a chain and evicts the 32 blocks stored
// 512 steps earlier, so the set holds ~16k blocks, like a busy worker.
func benchPayloads(b *testing.B) [][]byte {
	rng := rand.New(rand.NewPCG(7, 8))
	hashes := make([][]kvevents.EngineHash, benchBatches)
	for i := range hashes {
		for range benchBlocks {
			hashes[i] = append(hashes[i], kvevents.EngineHash(rng.Uint64()))
		}
	}
	gpu := kvevents.MediumGPU
	out := make([][]byte, benchBatches)
	for i := range out {
		st := &kvevents.BlockStored{BlockHashes: hashes[i], BlockSize: benchBlockSize, Medium: &gpu}
		if i%benchChain != 0 {
			st.ParentBlockHash = &hashes[i-1][benchBlocks-1]
		}
		for range benchBlocks * benchBlockSize {
			st.TokenIDs = append(st.TokenIDs, uint32(rng.IntN(150_000)))
		}
		rm := &kvevents.BlockRemoved{BlockHashes: hashes[(i-benchRemoveAfter+benchBatches)%benchBatches], Medium: &gpu}
		p, err := kvevents.AppendEncode(nil, &kvevents.Batch{TS: float64(time.Now().UnixNano()) / 1e9, Events: []kvevents.Event{rm, st}}, kvevents.EncodingMap)
		if err != nil {
			b.Fatal(err)
		}
		out[i] = p
	}
	return out
}

// benchJetStream starts an in-process NATS server with the KV delta
// stream and returns a JetStream client as kvtracker publishes with, and
// the server's URL; both go when the benchmark ends.
func benchJetStream(b *testing.B) (jetstream.JetStream, string) {
	b.Helper()
	srv, err := natsembed.Start(natsembed.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(maxPendingAcks))
	if err != nil {
		b.Fatal(err)
	}
	if err := bus.EnsureKVStream(context.Background(), js); err != nil {
		b.Fatal(err)
	}
	return js, srv.URL()
}

type nopSink struct{}

func (nopSink) Publish(*eventsv1.KVBlockDelta) (ingest.Ack, error) { return nil, nil }

// BenchmarkIngest measures one worker's pipeline — sequence check, decode,
// re-key, apply, publish — on one goroutine, in block events (stored plus
// removed blocks) per second. "jetstream" publishes every delta async to a
// real (in-process, so it shares the CPU) NATS server; "no-publish" stops
// after building the delta.
func BenchmarkIngest(b *testing.B) {
	payloads := benchPayloads(b)
	for _, mode := range []string{"no-publish", "jetstream"} {
		b.Run(mode, func(b *testing.B) {
			var sink ingest.Sink = nopSink{}
			var js jetstream.JetStream
			if mode == "jetstream" {
				js, _ = benchJetStream(b)
				sink = newJSSink(js, bus.KVDeltaSubject("bench", "w0"))
			}
			var epoch uint64
			w := ingest.New(ingest.Options{
				Spec:     fleet.Worker{ID: "w0", Pool: "bench", Models: []string{"m"}, BlockSize: benchBlockSize},
				Sink:     sink,
				NewEpoch: func() uint64 { epoch++; return epoch },
				Metrics:  ingest.NewMetrics(prometheus.NewRegistry()),
				Log:      zerolog.Nop(),
			})
			ctx := context.Background()
			if err := w.Start(ctx); err != nil {
				b.Fatal(err)
			}
			seq := uint64(0)
			// One warm-up cycle fills the set to its steady size.
			for ; seq < benchBatches; seq++ {
				if err := w.HandleLive(ctx, seq, payloads[seq]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(payloads[0])))
			b.ResetTimer()
			for b.Loop() {
				if err := w.HandleLive(ctx, seq, payloads[seq%benchBatches]); err != nil {
					b.Fatal(err)
				}
				seq++
			}
			if js != nil {
				select {
				case <-js.PublishAsyncComplete():
				case <-time.After(30 * time.Second):
					b.Fatal("acks did not arrive")
				}
			}
			b.StopTimer()
			blocks := float64(b.N) * 2 * benchBlocks
			b.ReportMetric(blocks/b.Elapsed().Seconds(), "blocks/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/blocks, "ns/block")
			if n := w.Summary().CachedBlocks; n < benchBlocks*benchRemoveAfter/2 {
				b.Fatalf("set holds %d blocks: the stream is not steady", n)
			}
		})
	}
}

// Eviction storm: every worker of a large fleet evicts its whole cache at
// once (a traffic shift pushing every cached prefix out, or every engine's
// prefix cache reset), and the kvtracker must turn the flood into deltas
// before the routers' view is stale.
const (
	stormWorkers = 128
	// stormBlocks is what a `switchyard sim` worker caches at its
	// defaults (1,781 blocks of 16 tokens, one of them vLLM's null block).
	stormBlocks = 1780
	// stormBatch blocks are removed per event batch: vLLM frees a
	// finished request's blocks in one engine step, and a storm is many
	// such steps in a row.
	stormBatch = 256
)

// BenchmarkEvictionStorm is one kvtracker replica holding stormWorkers
// workers, each with a full cache, when all of them evict everything at
// once: stormWorkers × stormBlocks BlockRemoved events through every
// worker's pipeline (one goroutine each, as the subscribers run) into a
// real JetStream server (in-process, so it shares the two cores). It
// reports the storm's ingest lag — from the first removal handed to the
// pipelines to the last delta acknowledged by JetStream (acked), and to
// the last removal heard by a subscriber on a connection of its own, as a
// router's (heard) — and the blocks per second that makes. Each iteration
// refills the caches first, off the clock.
func BenchmarkEvictionStorm(b *testing.B) {
	js, url := benchJetStream(b)
	ctx := context.Background()
	// A router's connection, subscribed to every worker's deltas: the
	// storm is over for the fleet when it has heard every removal.
	sub, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	var heard atomic.Int64
	var allHeard atomic.Pointer[chan struct{}]
	if _, err := sub.Subscribe(strings.TrimSuffix(bus.KVDeltaSubject("storm", "x"), "x")+"*", func(m *nats.Msg) {
		var d eventsv1.KVBlockDelta
		if err := proto.Unmarshal(m.Data, &d); err != nil {
			return
		}
		if n := int64(len(d.GetRemoved())); n > 0 && heard.Add(n) == stormWorkers*stormBlocks {
			close(*allHeard.Load())
		}
	}); err != nil {
		b.Fatal(err)
	}
	if err := sub.Flush(); err != nil {
		b.Fatal(err)
	}
	metrics := ingest.NewMetrics(prometheus.NewRegistry())
	rng := rand.New(rand.NewPCG(3, 4))
	gpu := kvevents.MediumGPU
	type stormWorker struct {
		w             *ingest.Worker
		seq           uint64
		fill, removes [][]byte
	}
	encode := func(events ...kvevents.Event) []byte {
		p, err := kvevents.AppendEncode(nil, &kvevents.Batch{TS: float64(time.Now().UnixNano()) / 1e9, Events: events}, kvevents.EncodingMap)
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	workers := make([]*stormWorker, stormWorkers)
	for i := range workers {
		id := "w" + strconv.Itoa(i)
		var epoch uint64
		sw := &stormWorker{w: ingest.New(ingest.Options{
			Spec:     fleet.Worker{ID: id, Pool: "storm", Models: []string{"m"}, BlockSize: benchBlockSize},
			Sink:     newJSSink(js, bus.KVDeltaSubject("storm", id)),
			NewEpoch: func() uint64 { epoch++; return epoch },
			Metrics:  metrics,
			Log:      zerolog.Nop(),
		})}
		if err := sw.w.Start(ctx); err != nil {
			b.Fatal(err)
		}
		// The cache: chains of 16 batches of 32 blocks (8k-token
		// prompts), then its removal in stormBatch-block steps.
		var all []kvevents.EngineHash
		var parent *kvevents.EngineHash
		for n := 0; n < stormBlocks; n += benchBlocks {
			st := &kvevents.BlockStored{BlockSize: benchBlockSize, Medium: &gpu}
			if (n/benchBlocks)%benchChain != 0 {
				st.ParentBlockHash = parent
			}
			for range min(benchBlocks, stormBlocks-n) {
				h := kvevents.EngineHash(rng.Uint64())
				st.BlockHashes = append(st.BlockHashes, h)
				for range benchBlockSize {
					st.TokenIDs = append(st.TokenIDs, uint32(rng.IntN(150_000)))
				}
			}
			all = append(all, st.BlockHashes...)
			parent = &st.BlockHashes[len(st.BlockHashes)-1]
			sw.fill = append(sw.fill, encode(st))
		}
		for n := 0; n < len(all); n += stormBatch {
			sw.removes = append(sw.removes, encode(&kvevents.BlockRemoved{BlockHashes: all[n:min(n+stormBatch, len(all))], Medium: &gpu}))
		}
		workers[i] = sw
	}
	handle := func(sw *stormWorker, payloads [][]byte) error {
		for _, p := range payloads {
			if err := sw.w.HandleLive(ctx, sw.seq, p); err != nil {
				return err
			}
			sw.seq++
		}
		return nil
	}
	acked := func() {
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(60 * time.Second):
			b.Fatal("acks did not arrive")
		}
	}
	var lags, heardIn []time.Duration
	for b.Loop() {
		b.StopTimer()
		for _, sw := range workers {
			if err := handle(sw, sw.fill); err != nil {
				b.Fatal(err)
			}
		}
		acked()
		for _, sw := range workers {
			if n := sw.w.Summary().CachedBlocks; n != stormBlocks {
				b.Fatalf("%d blocks cached before the storm, want %d", n, stormBlocks)
			}
		}
		heard.Store(0)
		done := make(chan struct{})
		allHeard.Store(&done)
		b.StartTimer()
		start := time.Now()
		errs := make(chan error, len(workers))
		for _, sw := range workers {
			go func() { errs <- handle(sw, sw.removes) }()
		}
		for range workers {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
		acked()
		lags = append(lags, time.Since(start))
		select {
		case <-done:
			heardIn = append(heardIn, time.Since(start))
		case <-time.After(60 * time.Second):
			b.Fatalf("a subscriber heard %d of %d removals", heard.Load(), stormWorkers*stormBlocks)
		}
		b.StopTimer()
		for _, sw := range workers {
			if n := sw.w.Summary().CachedBlocks; n != 0 {
				b.Fatalf("%d blocks cached after the storm", n)
			}
		}
		b.StartTimer()
	}
	slices.Sort(lags)
	slices.Sort(heardIn)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
	b.ReportMetric(ms(lags[len(lags)/2]), "acked-p50-ms")
	b.ReportMetric(ms(lags[len(lags)-1]), "acked-max-ms")
	b.ReportMetric(ms(heardIn[len(heardIn)/2]), "heard-p50-ms")
	b.ReportMetric(ms(heardIn[len(heardIn)-1]), "heard-max-ms")
	b.ReportMetric(float64(stormWorkers*stormBlocks)/lags[len(lags)/2].Seconds(), "blocks/s")
}
