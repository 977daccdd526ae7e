package blockset

import (
	"slices"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/kvblock"
	"github.com/switchyard-dev/switchyard/internal/vllm/kvevents"
)

func toks(n int, start uint32) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = start + uint32(i)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func stored(hashes []kvevents.EngineHash, parent *kvevents.EngineHash, tokens []uint32) *kvevents.BlockStored {
	return &kvevents.BlockStored{BlockHashes: hashes, ParentBlockHash: parent, TokenIDs: tokens, BlockSize: 4, Medium: ptr("GPU")}
}

func removed(hashes ...kvevents.EngineHash) *kvevents.BlockRemoved {
	return &kvevents.BlockRemoved{BlockHashes: hashes}
}

func hashes(in ...kvblock.Hash) []uint64 {
	out := make([]uint64, len(in))
	for i, h := range in {
		out[i] = uint64(h)
	}
	return out
}

func TestApply(t *testing.T) {
	t8 := toks(8, 100)
	a := kvblock.Of(kvblock.Root, t8[:4], "")
	b := kvblock.Of(a, t8[4:], "")
	loraA := kvblock.Of(kvblock.Root, t8[:4], "lora-x")
	type want struct {
		stored, removed []uint64
		cleared         bool
		set             []uint64
		skipped         SkipReason
		orphans         uint64
		unknownRemoved  uint64
	}
	tests := []struct {
		name    string
		prepare [][]kvevents.Event // earlier batches
		batch   []kvevents.Event
		want    want
	}{
		{
			name:  "chain from root",
			batch: []kvevents.Event{stored([]kvevents.EngineHash{1, 2}, nil, t8)},
			want:  want{stored: hashes(a, b), set: hashes(a, b), skipped: -1},
		},
		{
			name:  "parent zero is the root",
			batch: []kvevents.Event{stored([]kvevents.EngineHash{1, 2}, ptr[kvevents.EngineHash](0), t8)},
			want:  want{stored: hashes(a, b), set: hashes(a, b), skipped: -1},
		},
		{
			name:    "chain continues from the parent's own hash",
			prepare: [][]kvevents.Event{{stored([]kvevents.EngineHash{1}, nil, t8[:4])}},
			batch:   []kvevents.Event{stored([]kvevents.EngineHash{2}, ptr[kvevents.EngineHash](1), t8[4:])},
			want:    want{stored: hashes(b), set: hashes(a, b), skipped: -1},
		},
		{
			name:    "remove resolves the engine hash",
			prepare: [][]kvevents.Event{{stored([]kvevents.EngineHash{1, 2}, nil, t8)}},
			batch:   []kvevents.Event{removed(2)},
			want:    want{removed: hashes(b), set: hashes(a), skipped: -1},
		},
		{
			name:  "stored then removed in one batch is no change",
			batch: []kvevents.Event{stored([]kvevents.EngineHash{1, 2}, nil, t8), removed(2)},
			want:  want{stored: hashes(a), set: hashes(a), skipped: -1},
		},
		{
			name:    "removed then stored again in one batch",
			prepare: [][]kvevents.Event{{stored([]kvevents.EngineHash{1}, nil, t8[:4])}},
			batch:   []kvevents.Event{removed(1), stored([]kvevents.EngineHash{7}, nil, t8[:4])},
			want:    want{removed: hashes(a), stored: hashes(a), set: hashes(a), skipped: -1},
		},
		{
			name:    "duplicate copies keep the block until the last goes",
			prepare: [][]kvevents.Event{{stored([]kvevents.EngineHash{1}, nil, t8[:4]), stored([]kvevents.EngineHash{1}, nil, t8[:4])}},
			batch:   []kvevents.Event{removed(1)},
			want:    want{set: hashes(a), skipped: -1},
		},
		{
			name:    "two engine hashes, one own hash",
			prepare: [][]kvevents.Event{{stored([]kvevents.EngineHash{1}, nil, t8[:4]), stored([]kvevents.EngineHash{9}, nil, t8[:4])}},
			batch:   []kvevents.Event{removed(1)},
			want:    want{set: hashes(a), skipped: -1},
		},
		{
			name:    "cleared",
			prepare: [][]kvevents.Event{{stored([]kvevents.EngineHash{1, 2}, nil, t8)}},
			batch:   []kvevents.Event{&kvevents.AllBlocksCleared{}, stored([]kvevents.EngineHash{5}, nil, t8[:4])},
			want:    want{cleared: true, stored: hashes(a), set: hashes(a), skipped: -1},
		},
		{
			name:  "lora name is the extra key",
			batch: []kvevents.Event{&kvevents.BlockStored{BlockHashes: []kvevents.EngineHash{1}, TokenIDs: t8[:4], BlockSize: 4, LoRAName: ptr("lora-x")}},
			want:  want{stored: hashes(loraA), set: hashes(loraA), skipped: -1},
		},
		{
			name:  "cpu medium skipped",
			batch: []kvevents.Event{&kvevents.BlockStored{BlockHashes: []kvevents.EngineHash{1}, TokenIDs: t8[:4], BlockSize: 4, Medium: ptr("CPU")}},
			want:  want{skipped: SkipMedium},
		},
		{
			name: "sliding window group skipped, its removals too",
			batch: []kvevents.Event{
				&kvevents.BlockStored{BlockHashes: []kvevents.EngineHash{1}, TokenIDs: t8[:4], BlockSize: 4, GroupIdx: ptr[int64](1), KVCacheSpecKind: ptr("sliding_window"), KVCacheSpecSlidingWindow: ptr[int64](8)},
				&kvevents.BlockRemoved{BlockHashes: []kvevents.EngineHash{1}, GroupIdx: ptr[int64](1)},
			},
			want: want{skipped: SkipSlidingWindow, unknownRemoved: 1},
		},
		{
			name:    "groups have separate key spaces",
			prepare: [][]kvevents.Event{{stored([]kvevents.EngineHash{1}, nil, t8[:4])}},
			batch:   []kvevents.Event{&kvevents.BlockRemoved{BlockHashes: []kvevents.EngineHash{1}, GroupIdx: ptr[int64](2)}},
			want:    want{set: hashes(a), skipped: -1, unknownRemoved: 1},
		},
		{
			name:  "unknown tag",
			batch: []kvevents.Event{&kvevents.Unknown{Name: "BlockPromoted"}},
			want:  want{skipped: SkipUnknownTag},
		},
		{
			name:  "token count mismatch",
			batch: []kvevents.Event{stored([]kvevents.EngineHash{1, 2}, nil, t8[:7])},
			want:  want{skipped: SkipMalformed},
		},
		{
			name:  "other block size",
			batch: []kvevents.Event{&kvevents.BlockStored{BlockHashes: []kvevents.EngineHash{1}, TokenIDs: t8, BlockSize: 8}},
			want:  want{skipped: SkipBlockSize},
		},
		{
			name:  "block size 0 means the configured one",
			batch: []kvevents.Event{&kvevents.BlockStored{BlockHashes: []kvevents.EngineHash{1}, TokenIDs: t8[:4]}},
			want:  want{stored: hashes(a), set: hashes(a), skipped: -1},
		},
		{
			name:  "unknown parent",
			batch: []kvevents.Event{stored([]kvevents.EngineHash{2}, ptr[kvevents.EngineHash](77), t8[4:])},
			want:  want{skipped: SkipOrphan, orphans: 1},
		},
		{
			name:  "unknown removal",
			batch: []kvevents.Event{removed(42)},
			want:  want{skipped: -1, unknownRemoved: 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := New(4)
			for _, b := range tc.prepare {
				s.Begin()
				for _, ev := range b {
					s.Apply(ev)
				}
				s.End()
			}
			s.Begin()
			for _, ev := range tc.batch {
				s.Apply(ev)
			}
			st, rm, cl := s.End()
			if !slices.Equal(st, tc.want.stored) && len(st)+len(tc.want.stored) > 0 {
				t.Errorf("stored %x, want %x", st, tc.want.stored)
			}
			if !slices.Equal(rm, tc.want.removed) && len(rm)+len(tc.want.removed) > 0 {
				t.Errorf("removed %x, want %x", rm, tc.want.removed)
			}
			if cl != tc.want.cleared {
				t.Errorf("cleared %v", cl)
			}
			set := s.AppendBlocks(nil)
			slices.Sort(set)
			wantSet := slices.Sorted(slices.Values(tc.want.set))
			if !slices.Equal(set, wantSet) && len(set)+len(wantSet) > 0 {
				t.Errorf("set %x, want %x", set, wantSet)
			}
			c := s.Counts()
			for r := range NumSkipReasons {
				want := uint64(0)
				if r == tc.want.skipped {
					want = 1
				}
				if c.Skipped[r] != want {
					t.Errorf("skipped[%s] = %d, want %d", r, c.Skipped[r], want)
				}
			}
			if c.OrphanBlocks != tc.want.orphans || c.UnknownRemoved != tc.want.unknownRemoved {
				t.Errorf("orphans %d unknown removed %d", c.OrphanBlocks, c.UnknownRemoved)
			}
		})
	}
}

// TestDeltasReplayToTheSet applies a long random history and checks that a
// consumer applying only the published deltas ends with the same set.
func TestDeltasReplayToTheSet(t *testing.T) {
	s := New(2)
	consumer := map[uint64]bool{}
	var live []kvevents.EngineHash // engine hashes currently stored (with duplicates)
	next := kvevents.EngineHash(1)
	rng := uint64(12345)
	rnd := func(n int) int {
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		return int(rng % uint64(n))
	}
	for batch := 0; batch < 2000; batch++ {
		s.Begin()
		for e := 0; e < 1+rnd(4); e++ {
			switch {
			case rnd(40) == 0:
				s.Apply(&kvevents.AllBlocksCleared{})
				live = live[:0]
			case len(live) > 0 && rnd(2) == 0:
				i := rnd(len(live))
				s.Apply(removed(live[i]))
				live = append(live[:i], live[i+1:]...)
			default:
				n := 1 + rnd(3)
				hs := make([]kvevents.EngineHash, n)
				for i := range hs {
					if rnd(5) == 0 && len(live) > 0 {
						hs[i] = live[rnd(len(live))] // a duplicate copy
					} else {
						hs[i] = next
						next++
					}
				}
				tk := make([]uint32, 2*n)
				for i := range tk {
					tk[i] = uint32(rnd(4)) // small alphabet: many equal own hashes
				}
				s.Apply(&kvevents.BlockStored{BlockHashes: hs, TokenIDs: tk, BlockSize: 2})
				live = append(live, hs...)
			}
		}
		st, rm, cl := s.End()
		if cl {
			clear(consumer)
		}
		for _, h := range rm {
			if !consumer[h] {
				t.Fatalf("batch %d: removed %x the consumer does not hold", batch, h)
			}
			delete(consumer, h)
		}
		for _, h := range st {
			if consumer[h] {
				t.Fatalf("batch %d: stored %x the consumer already holds", batch, h)
			}
			consumer[h] = true
		}
		if len(consumer) != s.Len() {
			t.Fatalf("batch %d: consumer holds %d, set %d", batch, len(consumer), s.Len())
		}
	}
	for _, h := range s.AppendBlocks(nil) {
		if !consumer[h] {
			t.Fatalf("set holds %x, consumer does not", h)
		}
	}
}
