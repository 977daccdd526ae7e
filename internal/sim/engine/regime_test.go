package engine

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// fleetRun drives workers in model time with closed-loop clients and
// returns the TTFTs. Each client sends a request, waits for its completion,
// then sends the next; route picks the worker.
func fleetRun(t testing.TB, cfg Config, workers, clients, perClient int,
	next func(rng *rand.Rand, client, i int) ([]uint32, int, int),
	route func(rng *rand.Rand, group int) int) []float64 {
	type worker struct {
		e     *Engine
		clock *ManualClock
	}
	rng := rand.New(rand.NewPCG(1, 2))
	ws := make([]worker, workers)
	for i := range ws {
		c := &ManualClock{}
		cfg.HashSeed = "x"
		e, err := New(cfg, Options{Clock: c})
		if err != nil {
			t.Fatal(err)
		}
		ws[i] = worker{e, c}
	}
	type pending struct {
		h      *Handle
		client int
	}
	var inflight []pending
	sent := make([]int, clients)
	submit := func(client int, at time.Duration) {
		prompt, maxTok, group := next(rng, client, sent[client])
		sent[client]++
		w := ws[route(rng, group)]
		if w.clock.Now() < at {
			w.clock.Advance(at - w.clock.Now())
		}
		h, err := w.e.Submit(Request{Prompt: prompt, MaxTokens: maxTok})
		if err != nil {
			t.Fatal(err)
		}
		inflight = append(inflight, pending{h, client})
	}
	for c := range clients {
		submit(c, 0)
	}
	var ttfts []float64
	ctx := context.Background()
	for len(inflight) > 0 {
		// Step the busy worker that is furthest behind in model time.
		best := -1
		for i, w := range ws {
			st := w.e.Stats()
			if st.Running+st.Waiting == 0 {
				continue
			}
			if best < 0 || w.e.st.lastEnd < ws[best].e.st.lastEnd {
				best = i
			}
		}
		if best < 0 {
			t.Fatal("requests in flight but every worker idle")
		}
		if _, err := ws[best].e.Step(ctx); err != nil {
			t.Fatal(err)
		}
		now := ws[best].clock.Now()
		for i := 0; i < len(inflight); {
			p := inflight[i]
			if !p.h.Done() {
				i++
				continue
			}
			r := p.h.Result()
			ttfts = append(ttfts, r.TTFT)
			inflight = slices.Delete(inflight, i, i+1)
			if sent[p.client] < perClient {
				submit(p.client, now)
			}
		}
	}
	slices.Sort(ttfts)
	return ttfts
}

func median(xs []float64) float64 { return xs[len(xs)/2] }

// TestDefaultRegime checks the defaults land where the reference benchmark
// did: long shared-prefix prompts at concurrency take seconds to first token
// when routed at random over three workers, a fraction of a second when each
// prefix stays on one worker.
func TestDefaultRegime(t *testing.T) {
	const (
		prefixes  = 6
		prefixLen = 8000
		suffixLen = 256
		outLen    = 256
		workers   = 3
		clients   = 16
		perClient = 10
	)
	pre := make([][]uint32, prefixes)
	for i := range pre {
		pre[i] = seq(1_000_000*(i+1), prefixLen)
	}
	next := func(rng *rand.Rand, client, i int) ([]uint32, int, int) {
		g := rng.IntN(prefixes)
		return slices.Concat(pre[g], seq(10_000_000+client*100_000+i*1000, suffixLen)), outLen, g
	}
	cfg := DefaultConfig()
	random := fleetRun(t, cfg, workers, clients, perClient, next, func(rng *rand.Rand, _ int) int { return rng.IntN(workers) })
	sticky := fleetRun(t, cfg, workers, clients, perClient, next, func(_ *rand.Rand, g int) int { return g % workers })
	t.Logf("random: median TTFT %.2fs p90 %.2fs; prefix-affine: median %.2fs p90 %.2fs",
		median(random), random[len(random)*9/10], median(sticky), sticky[len(sticky)*9/10])
	// Reference: 6.88 s (Service) and 0.31 s (cache-aware router).
	if m := median(random); m < 3 || m > 15 {
		t.Errorf("random routing median TTFT %.2fs, want several seconds", m)
	}
	if m := median(sticky); m > 1 {
		t.Errorf("prefix-affine median TTFT %.2fs, want a fraction of a second", m)
	}
}
