package kvzmq

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/vllm/kvevents"
)

// stepBatch is a busy engine step: 16 BlockStored events of one 16-token
// block each.
func stepBatch(rng *rand.Rand) kvevents.Batch {
	gpu := kvevents.MediumGPU
	var b kvevents.Batch
	for i := 0; i < 16; i++ {
		ev := &kvevents.BlockStored{BlockHashes: []kvevents.EngineHash{kvevents.EngineHash(rng.Uint64())}, BlockSize: 16, Medium: &gpu}
		for j := 0; j < 16; j++ {
			ev.TokenIDs = append(ev.TokenIDs, uint32(rng.IntN(150000)))
		}
		b.Events = append(b.Events, ev)
	}
	return b
}

func benchPair(b *testing.B) (*Publisher, *Subscriber, context.Context) {
	ctx := ctxT(b)
	cfg := testConfig("tcp://127.0.0.1:*")
	cfg.HWM = 0 // a long stream run must not hit the drop limit
	p, err := NewPublisher(cfg, kvevents.EncodingMap, zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	s, err := DialSubscriber(ctx, p.Endpoint(), "")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	waitLive(b, ctx, p, s)
	// Drain probes still in flight: publish a fence and read up to it.
	if err := p.Publish(kvevents.Batch{TS: -2}); err != nil {
		b.Fatal(err)
	}
	var d kvevents.Decoder
	var out kvevents.Batch
	for out.TS != -2 {
		m, err := s.Recv(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := d.Decode(m.Payload, &out); err != nil {
			b.Fatal(err)
		}
	}
	return p, s, ctx
}

// BenchmarkPubSub measures Publish → encode → ZMQ over loopback → Recv →
// Decode. "lockstep" sends one batch at a time and reports its one-way
// latency percentiles; "stream" reports sustained throughput.
func BenchmarkPubSub(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	batch := stepBatch(rng)
	b.Run("lockstep", func(b *testing.B) {
		p, s, ctx := benchPair(b)
		var d kvevents.Decoder
		var out kvevents.Batch
		lat := make([]time.Duration, 0, b.N)
		for b.Loop() {
			start := time.Now()
			if err := p.Publish(batch); err != nil {
				b.Fatal(err)
			}
			m, err := s.Recv(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if err := d.Decode(m.Payload, &out); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	})
	b.Run("stream", func(b *testing.B) {
		p, s, ctx := benchPair(b)
		done := make(chan error, 1)
		n := b.N
		go func() {
			var d kvevents.Decoder
			var out kvevents.Batch
			for i := 0; i < n; i++ {
				m, err := s.Recv(ctx)
				if err != nil {
					done <- err
					return
				}
				if err := d.Decode(m.Payload, &out); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		b.ResetTimer()
		for i := 0; i < n; i++ {
			for {
				err := p.Publish(batch)
				if err == nil {
					break
				}
				if !errors.Is(err, ErrQueueFull) {
					b.Fatal(err)
				}
				runtime.Gosched()
			}
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "batches/s")
		b.ReportMetric(float64(16*n)/b.Elapsed().Seconds(), "blocks/s")
	})
}
