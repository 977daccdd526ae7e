package blockset_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/kvblock"
	"github.com/switchyard-dev/switchyard/internal/sim/engine"
	"github.com/switchyard-dev/switchyard/internal/vllm/kvevents"
	"github.com/switchyard-dev/switchyard/services/kvtracker/internal/blockset"
)

// batchSink applies every batch the engine publishes to a Set, the way the
// kvtracker's pipeline does (one Begin/End per batch).
type batchSink struct {
	set     *blockset.Set
	removed *int
}

func (s batchSink) Publish(b kvevents.Batch) error {
	s.set.Begin()
	for _, ev := range b.Events {
		if _, ok := ev.(*kvevents.BlockRemoved); ok {
			*s.removed++
		}
		s.set.Apply(ev)
	}
	s.set.End()
	return nil
}

// TestSetFollowsTheSimulatorsCache drives a simulated engine with groups of
// requests sharing long prefixes on a cache too small for them all, so
// prefixes are evicted tail first and recomputed, and checks after every
// step that the set built from its KV events says what the engine's own
// prefix cache does: for each group's prefix, the blocks a request would
// hit. A difference is a router told the wrong thing about a worker.
func TestSetFollowsTheSimulatorsCache(t *testing.T) {
	const bs = 16
	cfg := engine.DefaultConfig()
	cfg.BlockSize = bs
	cfg.NumGPUBlocks = 1 + 3*64 // three 1k-token prefixes, with questions and outputs: pressure
	cfg.MaxNumBatchedTokens = 512
	cfg.MaxModelLen = 2048
	cfg.HashSeed = "t"
	set := blockset.New(bs)
	clock := &engine.ManualClock{}
	var removed, partial int
	eng, err := engine.New(cfg, engine.Options{Clock: clock, Sink: batchSink{set, &removed}})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const groups = 5
	prefixes := make([][]uint32, groups)
	for g := range prefixes {
		for range 1000 + g*8 {
			prefixes[g] = append(prefixes[g], uint32(256+rng.IntN(1<<16)))
		}
	}
	prompt := func(g int) []uint32 {
		p := append([]uint32(nil), prefixes[g]...)
		for range 20 + rng.IntN(200) {
			p = append(p, uint32(256+rng.IntN(1<<16)))
		}
		return p
	}
	ctx := context.Background()
	for step := 0; step < 3000; step++ {
		if step%7 == 0 {
			for range 1 + rng.IntN(3) {
				if _, err := eng.Submit(engine.Request{Prompt: prompt(rng.IntN(groups)), MaxTokens: 1 + rng.IntN(60), Seed: rng.Uint64()}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := eng.Step(ctx); err != nil {
			t.Fatal(err)
		}
		if step%10 != 0 {
			continue
		}
		for g := range groups {
			p := prompt(g)
			cached := eng.CachedPrefix(p)
			chain := kvblock.Chain(nil, kvblock.Root, p, bs, "")
			held := 0
			for held < len(chain) && set.Contains(chain[held]) {
				held++
			}
			// The engine hits at most (len-1)/bs blocks, as vLLM does.
			held = min(held, (len(p)-1)/bs)
			if held > 0 && held < len(prefixes[g])/bs {
				partial++ // a prefix evicted tail first, part of it left
			}
			if cached != held*bs {
				t.Fatalf("step %d, group %d: the engine would hit %d tokens, the set says %d blocks (%d tokens)",
					step, g, cached, held, held*bs)
			}
		}
	}
	// The run must have evicted prefixes part-way, the case a router gets
	// wrong if removals and re-stores are applied out of step.
	if removed < 1000 || partial < 50 {
		t.Fatalf("%d evictions, %d part-evicted prefixes seen: the cache was under too little pressure to test anything", removed, partial)
	}
	t.Logf("%d evictions, %d part-evicted prefixes seen", removed, partial)
}
