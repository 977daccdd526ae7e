package engine

import (
	"context"
	"github.com/switchyard-dev/switchyard/internal/vllm/kvevents"
	"testing"
	"time"
)

// benchEngine is a default-sized engine with room for a full decode batch.
func benchEngine(b *testing.B, blocks int) (*Engine, *ManualClock) {
	b.Helper()
	cfg := DefaultConfig()
	cfg.NumGPUBlocks = blocks
	cfg.MaxModelLen = 8192
	cfg.HashSeed = "bench"
	clock := &ManualClock{}
	e, err := New(cfg, Options{Clock: clock, Sink: discard{}})
	if err != nil {
		b.Fatal(err)
	}
	return e, clock
}

type discard struct{}

func (discard) Publish(kvevents.Batch) error { return nil }

// reportScale reports the time scale at which stepping would take all the
// wall time: model seconds simulated per wall second.
func reportScale(b *testing.B, clock *ManualClock, start time.Duration, wall time.Duration) {
	model := (clock.Now() - start).Seconds()
	b.ReportMetric(model/wall.Seconds(), "max-time-scale")
	b.ReportMetric(model/float64(b.N)*1e3, "model-ms/step")
}

// BenchmarkStepDecode256 is a full decode batch: 256 sequences with 2k
// tokens of context each decoding one token per step, finished ones
// replaced by new prompts.
func BenchmarkStepDecode256(b *testing.B) {
	e, clock := benchEngine(b, 256*4200/16+1)
	ctx := context.Background()
	submit := func(i int) {
		if _, err := e.Submit(Request{Prompt: seq(i*10_000, 2000), MaxTokens: 2000}); err != nil {
			b.Fatal(err)
		}
	}
	next := 0
	for ; next < 256; next++ {
		submit(next)
	}
	for e.Stats().Waiting > 0 || e.st.plan != nil || e.Stats().PromptTokens < 256*2000 {
		if _, err := e.Step(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	start := clock.Now()
	b.ResetTimer()
	t0 := time.Now()
	for b.Loop() {
		if _, err := e.Step(ctx); err != nil {
			b.Fatal(err)
		}
		for range 256 - e.Stats().Running - e.Stats().Waiting {
			submit(next)
			next++
		}
	}
	reportScale(b, clock, start, time.Since(t0))
}

// BenchmarkStepPrefill8k runs full 8192-token prefill steps of new 8k
// prompts (hashing, allocating, committing and evicting 512 blocks a step).
func BenchmarkStepPrefill8k(b *testing.B) {
	e, clock := benchEngine(b, DefaultConfig().NumGPUBlocks)
	ctx := context.Background()
	b.ReportAllocs()
	start := clock.Now()
	t0 := time.Now()
	i := 0
	for b.Loop() {
		if _, err := e.Submit(Request{Prompt: seq(i*10_000, 8191), MaxTokens: 1}); err != nil {
			b.Fatal(err)
		}
		i++
		if _, err := e.Step(ctx); err != nil {
			b.Fatal(err)
		}
	}
	reportScale(b, clock, start, time.Since(t0))
}

// BenchmarkEstimate is the oracle's question on a busy worker: 64 running
// and 64 waiting requests.
func BenchmarkEstimate(b *testing.B) {
	e, _ := benchEngine(b, DefaultConfig().NumGPUBlocks)
	ctx := context.Background()
	for i := range 128 {
		if _, err := e.Submit(Request{Prompt: seq(i*10_000, 600), MaxTokens: 300}); err != nil {
			b.Fatal(err)
		}
	}
	for range 20 {
		if _, err := e.Step(ctx); err != nil {
			b.Fatal(err)
		}
	}
	st := e.Stats()
	prompt := seq(5_000_000, 4000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Estimate(prompt, 100); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(st.Running), "running")
	b.ReportMetric(float64(st.Waiting), "waiting")
}
