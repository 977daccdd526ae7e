package kvtracker

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

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
				srv, err := natsembed.Start(natsembed.Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer srv.Shutdown()
				nc, err := nats.Connect(srv.URL())
				if err != nil {
					b.Fatal(err)
				}
				defer nc.Close()
				if js, err = jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(maxPendingAcks)); err != nil {
					b.Fatal(err)
				}
				if err := bus.EnsureKVStream(context.Background(), js); err != nil {
					b.Fatal(err)
				}
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
