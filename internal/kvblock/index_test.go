package kvblock

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

var now0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// prompt returns the chained hashes of n blocks of a prompt identified by
// seed; prompts with the same seed share every block, and shared(seedA,
// seedB, k) builds one whose first k blocks equal seedA's.
func prompt(seed uint32, n int) []Hash {
	toks := make([]uint32, 16*n)
	for i := range toks {
		toks[i] = seed*100000 + uint32(i)
	}
	return Chain(nil, Root, toks, 16, "")
}

func shared(a, b uint32, k, n int) []Hash {
	toks := make([]uint32, 16*n)
	for i := range toks {
		if i < 16*k {
			toks[i] = a*100000 + uint32(i)
		} else {
			toks[i] = b*100000 + uint32(i)
		}
	}
	return Chain(nil, Root, toks, 16, "")
}

func TestIndexPrefixes(t *testing.T) {
	p := prompt(1, 8)
	type op struct {
		kind   string // store, remove, clear, replace, spec, forget
		worker string
		blocks []Hash
		until  time.Duration
	}
	tests := []struct {
		name    string
		ops     []op
		query   []Hash
		workers []string
		at      time.Duration
		want    []int
	}{
		{name: "empty index", query: p, workers: []string{"a", "b"}, want: []int{0, 0}},
		{name: "whole prompt on one worker",
			ops:   []op{{kind: "store", worker: "a", blocks: p}},
			query: p, workers: []string{"a", "b"}, want: []int{8, 0}},
		{name: "partial prefixes",
			ops: []op{
				{kind: "store", worker: "a", blocks: p[:3]},
				{kind: "store", worker: "b", blocks: p[:6]},
				{kind: "store", worker: "c", blocks: p[1:]}, // no first block: nothing counts
			},
			query: p, workers: []string{"a", "b", "c"}, want: []int{3, 6, 0}},
		{name: "a hole ends the prefix",
			ops: []op{
				{kind: "store", worker: "a", blocks: p},
				{kind: "remove", worker: "a", blocks: p[4:5]},
			},
			query: p, workers: []string{"a"}, want: []int{4}},
		{name: "a different branch shares only the common prefix",
			ops:   []op{{kind: "store", worker: "a", blocks: shared(1, 2, 5, 8)}},
			query: p, workers: []string{"a"}, want: []int{5}},
		{name: "clear drops one worker only",
			ops: []op{
				{kind: "store", worker: "a", blocks: p},
				{kind: "store", worker: "b", blocks: p},
				{kind: "clear", worker: "a"},
			},
			query: p, workers: []string{"a", "b"}, want: []int{0, 8}},
		{name: "replace swaps content",
			ops: []op{
				{kind: "store", worker: "a", blocks: prompt(7, 4)},
				{kind: "replace", worker: "a", blocks: p[:5]},
			},
			query: p, workers: []string{"a"}, want: []int{5}},
		{name: "speculative blocks count until they expire",
			ops: []op{
				{kind: "store", worker: "a", blocks: p[:2]},
				{kind: "spec", worker: "a", blocks: p, until: 2 * time.Second},
				{kind: "spec", worker: "b", blocks: p[:3], until: time.Second},
			},
			query: p, workers: []string{"a", "b"}, at: 1500 * time.Millisecond, want: []int{8, 0}},
		{name: "speculative and confirmed combine",
			ops: []op{
				{kind: "store", worker: "a", blocks: p[:2]},
				{kind: "spec", worker: "a", blocks: p[2:5], until: time.Minute},
			},
			query: p, workers: []string{"a"}, want: []int{5}},
		{name: "forgotten worker holds nothing",
			ops: []op{
				{kind: "store", worker: "a", blocks: p},
				{kind: "spec", worker: "a", blocks: p, until: time.Minute},
				{kind: "forget", worker: "a"},
				{kind: "store", worker: "b", blocks: p[:1]}, // reuses a's slot
			},
			query: p, workers: []string{"a", "b"}, want: []int{0, 1}},
		{name: "duplicate and unknown candidates",
			ops:   []op{{kind: "store", worker: "a", blocks: p[:4]}},
			query: p, workers: []string{"a", "zz", "a"}, want: []int{4, 0, 4}},
		{name: "empty query", ops: []op{{kind: "store", worker: "a", blocks: p}},
			query: nil, workers: []string{"a"}, want: []int{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := NewIndex()
			for _, o := range tt.ops {
				switch o.kind {
				case "store":
					x.Store(o.worker, o.blocks)
				case "remove":
					x.Remove(o.worker, o.blocks)
				case "clear":
					x.Clear(o.worker)
				case "replace":
					x.Replace(o.worker, o.blocks)
				case "spec":
					x.Speculate(o.worker, o.blocks, 0, now0.Add(o.until))
				case "forget":
					x.Forget(o.worker)
				}
			}
			got := x.Prefixes(tt.query, tt.workers, now0.Add(tt.at), nil)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Prefixes = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIndexCounts(t *testing.T) {
	x := NewIndex()
	p := prompt(1, 10)
	x.Store("a", p)
	x.Store("a", p[:5]) // already held
	x.Store("b", p[:4])
	if got := x.Blocks("a"); got != 10 {
		t.Fatalf("Blocks(a) = %d, want 10", got)
	}
	if got := x.Len(); got != 10 {
		t.Fatalf("Len = %d, want 10 distinct hashes", got)
	}
	x.Remove("a", p[8:])
	x.Remove("a", prompt(9, 3)) // never held
	if got := x.Blocks("a"); got != 8 {
		t.Fatalf("Blocks(a) after remove = %d, want 8", got)
	}
	x.Replace("a", p[:3])
	if got := x.Blocks("a"); got != 3 {
		t.Fatalf("Blocks(a) after replace = %d, want 3", got)
	}
	x.Clear("b")
	if got, l := x.Blocks("b"), x.Len(); got != 0 || l != 3 {
		t.Fatalf("after clear: Blocks(b) = %d, Len = %d; want 0, 3", got, l)
	}
	if w := x.Workers(); !slices.Equal(sortCopy(w), []string{"a", "b"}) {
		t.Fatalf("Workers = %v", w)
	}
	x.Forget("b")
	if w := x.Workers(); !slices.Equal(w, []string{"a"}) {
		t.Fatalf("Workers after forget = %v", w)
	}
}

func sortCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// TestIndexManyWorkers exercises the overflow path: slots past the inline
// bitmask must behave exactly like the first 63.
func TestIndexManyWorkers(t *testing.T) {
	x := NewIndex()
	p := prompt(3, 6)
	var workers []string
	want := make([]int, 0, 100)
	for i := range 100 {
		w := "w" + strconv.Itoa(i)
		workers = append(workers, w)
		k := i % 7
		if k > len(p) {
			k = len(p)
		}
		x.Store(w, p[:min(k, len(p))])
		want = append(want, min(k, len(p)))
	}
	got := x.Prefixes(p, workers, now0, nil)
	if !slices.Equal(got, want) {
		t.Fatalf("Prefixes = %v\nwant %v", got, want)
	}
	// Speculation on an overflow slot, then removal on one.
	x.Speculate("w90", p, 0, now0.Add(time.Second))
	x.Remove("w99", p[:1])
	got = x.Prefixes(p, []string{"w90", "w99", "w70"}, now0, nil)
	if !slices.Equal(got, []int{6, 0, 0}) {
		t.Fatalf("after spec/remove: %v", got)
	}
	x.Clear("w97")
	if x.Blocks("w97") != 0 || x.Blocks("w96") != 5 {
		t.Fatalf("blocks w97=%d w96=%d", x.Blocks("w97"), x.Blocks("w96"))
	}
}

func TestIndexSweep(t *testing.T) {
	x := NewIndex()
	p := prompt(1, 4)
	x.Speculate("a", p, 0, now0.Add(time.Second))
	x.Speculate("b", p[:2], 0, now0.Add(3*time.Second))
	x.Speculate("a", p[:1], 0, now0.Add(5*time.Second)) // extends a's first block
	if n := x.Sweep(now0.Add(2 * time.Second)); n != 3 {
		t.Fatalf("Sweep freed %d, want 3", n)
	}
	if got := x.Prefixes(p, []string{"a", "b"}, now0.Add(2*time.Second), nil); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("after sweep: %v", got)
	}
	if n := x.Sweep(now0.Add(time.Hour)); n != 3 {
		t.Fatalf("final Sweep freed %d, want 3", n)
	}
}

// TestIndexRemoveDropsSpeculation: an eviction reported by the worker ends
// its own guesses about the block, not another worker's, and Sweep copes
// with the listing left behind.
func TestIndexRemoveDropsSpeculation(t *testing.T) {
	x := NewIndex()
	p := prompt(1, 4)
	x.Store("a", p[:2])
	x.Speculate("a", p, 0, now0.Add(time.Hour))
	x.Speculate("b", p, 0, now0.Add(time.Hour))
	if got := x.Prefixes(p, []string{"a", "b"}, now0, nil); !slices.Equal(got, []int{4, 4}) {
		t.Fatalf("before eviction: %v", got)
	}
	x.Remove("a", p[2:3]) // evicts a speculated, never confirmed block
	x.Remove("a", p[:1])  // evicts a confirmed and speculated block
	if got := x.Prefixes(p, []string{"a", "b"}, now0, nil); !slices.Equal(got, []int{0, 4}) {
		t.Fatalf("after evicting a's first block: %v", got)
	}
	if got := x.Prefixes(p[1:], []string{"a", "b"}, now0, nil); !slices.Equal(got, []int{1, 3}) {
		t.Fatalf("from the second block: %v", got)
	}
	if n := x.Sweep(now0.Add(2 * time.Hour)); n != 6 {
		t.Fatalf("Sweep freed %d, want 6 (a's 2 left, b's 4)", n)
	}
	if got := x.Prefixes(p, []string{"a", "b"}, now0.Add(2*time.Hour), nil); !slices.Equal(got, []int{0, 0}) {
		t.Fatalf("after sweep: %v", got)
	}
	if got := x.Prefixes(p[1:], []string{"a"}, now0.Add(2*time.Hour), nil); !slices.Equal(got, []int{1}) {
		t.Fatalf("a's confirmed second block: %v", got)
	}
}

// TestIndexConcurrentReaders runs many lookups while a writer churns other
// workers' blocks and one worker's content is stable; the stable worker's
// answer must never change. Run with -race.
func TestIndexConcurrentReaders(t *testing.T) {
	x := NewIndex()
	p := prompt(1, 64)
	x.Store("stable", p)
	stop := make(chan struct{})
	writerDone := make(chan struct{})
	go func() { // the single writer: the KV replica applying deltas
		defer close(writerDone)
		r := rand.New(rand.NewPCG(1, 2))
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			w := "churn" + strconv.Itoa(i%8)
			k := r.IntN(len(p))
			switch i % 4 {
			case 0:
				x.Store(w, p[:k])
			case 1:
				x.Remove(w, p[k:])
			case 2:
				x.Speculate(w, p[:k], 0, now0.Add(time.Second))
			case 3:
				x.Replace(w, shared(1, 5, k, 64))
			}
		}
	}()
	var readers sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			workers := []string{"stable", "churn0", "churn1", "churn2", "churn3", "churn4", "churn5", "churn6", "churn7"}
			var out []int
			for range 2000 {
				out = x.Prefixes(p, workers, now0, out)
				if out[0] != len(p) {
					errs <- fmt.Errorf("reader %d: stable worker prefix %d, want %d", g, out[0], len(p))
					return
				}
				for _, v := range out[1:] {
					if v < 0 || v > len(p) {
						errs <- fmt.Errorf("reader %d: prefix %d out of range", g, v)
						return
					}
				}
			}
		}()
	}
	readers.Wait()
	close(stop)
	<-writerDone
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := x.Blocks("stable"); got != len(p) {
		t.Fatalf("stable worker has %d blocks, want %d", got, len(p))
	}
}

// TestIndexMemoryPerBlock measures the heap cost of one cached block on a
// fleet where each block is held by one or two workers, and holds it to a
// ceiling so a regression in the layout is noticed.
func TestIndexMemoryPerBlock(t *testing.T) {
	const blocks = 200_000
	perBlock := measureBytesPerBlock(blocks)
	t.Logf("%.1f bytes per cached block (%d distinct blocks)", perBlock, blocks)
	if perBlock > 64 {
		t.Fatalf("%.1f bytes per cached block, want <= 64", perBlock)
	}
}

func measureBytesPerBlock(blocks int) float64 {
	hashes := make([]Hash, blocks)
	r := rand.New(rand.NewPCG(7, 7))
	for i := range hashes {
		hashes[i] = Hash(r.Uint64())
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	x := NewIndex()
	const batch = 32
	for i := 0; i < blocks; i += batch {
		w := "w" + strconv.Itoa((i/batch)%16)
		x.Store(w, hashes[i:min(i+batch, blocks)])
		if i%(3*batch) == 0 { // a third of the blocks on a second worker too
			x.Store("w"+strconv.Itoa((i/batch+1)%16), hashes[i:min(i+batch, blocks)])
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(x)
	runtime.KeepAlive(hashes)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(blocks)
}

func TestTextChain(t *testing.T) {
	a := TextChain(nil, Root, "0123456789abcdefXYZ", 4)
	b := TextChain(nil, Root, "0123456789abZZZZ", 4)
	if len(a) != 4 || len(b) != 4 {
		t.Fatalf("lens %d %d, want 4 full chunks each", len(a), len(b))
	}
	if a[0] != b[0] || a[1] != b[1] || a[2] != b[2] || a[3] == b[3] {
		t.Fatalf("chunks: %v vs %v", a, b)
	}
	if c := TextChain(nil, Root, "0123", 0); c != nil {
		t.Fatalf("chunk size 0: %v", c)
	}
	if TextChain(nil, Root, "abcd", 4)[0] == TextChain(nil, Hash(1), "abcd", 4)[0] {
		t.Fatal("parent ignored")
	}
}

// FuzzIndexOps applies an arbitrary sequence of operations to the index and
// to a plain map-of-sets model and checks that every lookup agrees.
func FuzzIndexOps(f *testing.F) {
	f.Add([]byte{0, 1, 5, 1, 2, 3, 4, 0, 5, 8})
	f.Add([]byte{0, 70, 9, 3, 70, 2, 0, 1, 2, 5, 1, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		// Longer than Prefixes' first two windows (32, then 64 blocks).
		p := prompt(1, 120)
		x := NewIndex()
		model := map[string]map[Hash]bool{}
		spec := map[string]map[Hash]int64{}
		now := now0.UnixNano()
		for i := 0; i+2 < len(ops); i += 3 {
			w := "w" + strconv.Itoa(int(ops[i+1])%80)
			k := int(ops[i+2]) * (len(p) + 1) / 256
			if model[w] == nil {
				model[w], spec[w] = map[Hash]bool{}, map[Hash]int64{}
			}
			switch ops[i] % 7 {
			case 0:
				x.Store(w, p[:k])
				for _, h := range p[:k] {
					model[w][h] = true
				}
			case 1:
				x.Remove(w, p[k:])
				for _, h := range p[k:] {
					delete(model[w], h)
					delete(spec[w], h) // an eviction ends the guess too
				}
			case 2:
				x.Clear(w)
				clear(model[w])
			case 3:
				x.Replace(w, p[:k])
				clear(model[w])
				for _, h := range p[:k] {
					model[w][h] = true
				}
			case 4:
				until := now0.Add(time.Duration(int(ops[i+2])-128) * time.Millisecond)
				x.Speculate(w, p[:k], 0, until)
				for q, h := range p[:k] {
					if x.grid.onGrid(q, k) {
						spec[w][h] = max(spec[w][h], until.UnixNano())
					}
				}
			case 5:
				x.Forget(w)
				clear(model[w])
				clear(spec[w])
			case 6:
				at := now0.Add(time.Duration(int(ops[i+2])-128) * time.Millisecond)
				x.Sweep(at)
				for _, held := range spec {
					for h, until := range held {
						if until <= at.UnixNano() {
							delete(held, h)
						}
					}
				}
			}
		}
		var workers []string
		for w := range model {
			workers = append(workers, w)
		}
		got := x.Prefixes(p, workers, now0, nil)
		for k, w := range workers {
			want := 0
			for want < len(p) && (model[w][p[want]] || spec[w][p[x.grid.specAt(want, len(p))]] > now) {
				want++
			}
			if got[k] != want {
				t.Fatalf("worker %s: prefix %d, model says %d", w, got[k], want)
			}
			if b := x.Blocks(w); b != len(model[w]) {
				t.Fatalf("worker %s: Blocks %d, model %d", w, b, len(model[w]))
			}
		}
	})
}

// BenchmarkPrefixes is the router's lookup: an 8k-token prompt (512 blocks of
// 16) against 16 candidates, one holding the whole prompt, the others
// holding shorter prefixes of it, in an index with other traffic.
func BenchmarkPrefixes(b *testing.B) {
	x := NewIndex()
	p := prompt(1, 512)
	workers := make([]string, 16)
	for i := range workers {
		workers[i] = "w" + strconv.Itoa(i)
		x.Store(workers[i], p[:len(p)*i/15])
		x.Store(workers[i], prompt(uint32(100+i), 1500)) // unrelated cached blocks
	}
	var out []int
	for b.Loop() {
		out = x.Prefixes(p, workers, now0, out)
	}
	if out[15] != len(p) {
		b.Fatalf("prefix %d", out[15])
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(p)), "ns/block")
}

// BenchmarkStore is the replica's ingest: blocks stored in batches of 32
// across 16 workers.
func BenchmarkStore(b *testing.B) {
	x := NewIndex()
	hashes := make([]Hash, 1<<20)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range hashes {
		hashes[i] = Hash(r.Uint64())
	}
	i := 0
	for b.Loop() {
		off := (i * 32) % len(hashes)
		x.Store("w"+strconv.Itoa(i%16), hashes[off:off+32])
		i++
	}
	b.ReportMetric(float64(i*32)/b.Elapsed().Seconds(), "blocks/s")
}

func BenchmarkMemoryPerBlock(b *testing.B) {
	var v float64
	for b.Loop() {
		v = measureBytesPerBlock(100_000)
	}
	b.ReportMetric(v, "B/block")
}

// TestIndexSweepMatchesModel: speculative entries with scattered expiries
// and extensions; after every Sweep exactly the entries alive at that time
// remain, whichever expiry second they were listed under.
func TestIndexSweepMatchesModel(t *testing.T) {
	x := NewIndex()
	rng := rand.New(rand.NewPCG(7, 7))
	type key struct {
		w string
		h Hash
	}
	model := map[key]int64{}
	now := now0
	hashes := prompt(3, 200)
	for step := range 400 {
		w := []string{"a", "b", "c"}[rng.IntN(3)]
		start := rng.IntN(len(hashes))
		end := min(len(hashes), start+1+rng.IntN(60))
		until := now.Add(time.Duration(rng.IntN(5000)) * time.Millisecond)
		x.Speculate(w, hashes[:end], start, until)
		for p := start; p < end; p++ {
			if !x.grid.onGrid(p, end) {
				continue
			}
			k := key{w, hashes[p]}
			model[k] = max(model[k], until.UnixNano())
		}
		now = now.Add(time.Duration(rng.IntN(300)) * time.Millisecond)
		if step%7 == 0 {
			wantFreed := 0
			for k, u := range model {
				if u <= now.UnixNano() {
					delete(model, k)
					wantFreed++
				}
			}
			if got := x.Sweep(now); got != wantFreed {
				t.Fatalf("step %d: Sweep freed %d, want %d", step, got, wantFreed)
			}
			left := 0
			for i := range x.shards {
				left += x.shards[i].specCount()
			}
			if left != len(model) {
				t.Fatalf("step %d: %d speculative entries left, want %d", step, left, len(model))
			}
		}
	}
}

// BenchmarkSpeculateNew is the router after routing a cold 8k-token
// prompt: 512 blocks never seen before speculated on one worker, then
// looked up, in an index where earlier prompts' guesses expire.
func BenchmarkSpeculateNew(b *testing.B) {
	x := NewIndex()
	workers := []string{"w0", "w1", "w2", "w3"}
	now := now0
	var out []int
	i := 0
	for b.Loop() {
		p := prompt(uint32(i), 512)
		x.Speculate(workers[i%len(workers)], p, 0, now.Add(3*time.Second))
		out = x.Prefixes(p, workers, now, out)
		now = now.Add(10 * time.Millisecond)
		if i%100 == 0 {
			x.Sweep(now)
		}
		i++
	}
}

// BenchmarkSpeculateMultiTurn is the router on a conversation that keeps
// going without KV events (the dev fleet without --kv-events, or events
// lagging): each turn resends a 512-block history, looked up and then
// speculated again on the chosen worker with 2 new blocks, at 800
// requests a second, with the router's once-a-second Sweep.
func BenchmarkSpeculateMultiTurn(b *testing.B) {
	x := NewIndex()
	workers := make([]string, 16)
	for i := range workers {
		workers[i] = "w" + strconv.Itoa(i)
	}
	history := prompt(1, 512)
	now := now0
	lastSweep := now
	var out []int
	i := 0
	for b.Loop() {
		p := append(history[:len(history):len(history)], prompt(uint32(1000+i), 2)...)
		out = x.Prefixes(p, workers, now, out)
		x.Speculate(workers[i%16/8], p, 0, now.Add(2500*time.Millisecond))
		now = now.Add(1250 * time.Microsecond)
		if now.Sub(lastSweep) >= time.Second {
			x.Sweep(now)
			lastSweep = now
		}
		i++
	}
}

// TestSweepListsResentPrefixOnce: a conversation resends its history on
// every turn, extending the same holds; they are listed for Sweep once,
// not once per turn, and stay alive until the last extension expires.
func TestSweepListsResentPrefixOnce(t *testing.T) {
	x := NewIndex()
	history := prompt(5, 100)
	now := now0
	for turn := range 1000 {
		x.Speculate("a", history, 0, now.Add(2*time.Second))
		now = now.Add(10 * time.Millisecond)
		if turn%100 == 99 {
			if freed := x.Sweep(now); freed != 0 {
				t.Fatalf("turn %d: Sweep freed %d of holds extended every turn", turn, freed)
			}
		}
		if n := dueListings(x); n > 2*len(history) {
			t.Fatalf("turn %d: %d listings for %d held hashes", turn, n, len(history))
		}
	}
	// The last extension ran to now-10ms+2s.
	if freed := x.Sweep(now.Add(time.Second)); freed != 0 {
		t.Fatalf("Sweep freed %d before the last expiry", freed)
	}
	if got := x.Prefixes(history, []string{"a"}, now.Add(time.Second), nil); got[0] != len(history) {
		t.Fatalf("prefix %d before expiry", got[0])
	}
	if freed, want := x.Sweep(now.Add(2*time.Second)), gridCount(x.grid, len(history)); freed != want {
		t.Fatalf("Sweep after the last expiry freed %d, want %d", freed, want)
	}
	if n := dueListings(x); n != 0 {
		t.Fatalf("%d listings left with nothing held", n)
	}
}

func dueListings(x *Index) int {
	n := 0
	for i := range x.shards {
		for _, hs := range x.shards[i].due {
			n += len(hs)
		}
	}
	return n
}

// TestSweepGivesBackMemory: after a burst of speculative holds expires,
// the index gives the memory back (a Go map never shrinks by itself).
func TestSweepGivesBackMemory(t *testing.T) {
	const blocks = 200_000
	x := NewIndex()
	x.SpecGrid(0, 1) // an entry per block: blocks entries to free
	hashes := make([]Hash, blocks)
	r := rand.New(rand.NewPCG(9, 9))
	for i := range hashes {
		hashes[i] = Hash(r.Uint64())
	}
	runtime.GC()
	var before, burst, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < blocks; i += 512 {
		x.Speculate("w"+strconv.Itoa(i%7), hashes[i:min(i+512, blocks)], 0, now0.Add(time.Second))
	}
	runtime.GC()
	runtime.ReadMemStats(&burst)
	if freed := x.Sweep(now0.Add(2 * time.Second)); freed != blocks {
		t.Fatalf("Sweep freed %d of %d", freed, blocks)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(x)
	runtime.KeepAlive(hashes)
	held := int64(burst.HeapAlloc) - int64(before.HeapAlloc)
	kept := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap: %d KB during the burst, %d KB after it expired", held>>10, kept>>10)
	if kept > held/8 {
		t.Fatalf("%d KB still held after every hold expired (%d KB during the burst)", kept>>10, held>>10)
	}
}

// TestDropSpeculative: a restarted worker's guesses go, its confirmed blocks
// (the kvtracker's to change) and other workers' guesses stay.
func TestDropSpeculative(t *testing.T) {
	x := NewIndex()
	p := prompt(11, 6)
	x.Store("a", p[:2])
	x.Speculate("a", p, 0, now0.Add(time.Minute))
	x.Speculate("b", p[:4], 0, now0.Add(time.Minute))
	if got := x.Prefixes(p, []string{"a", "b"}, now0, nil); !slices.Equal(got, []int{6, 4}) {
		t.Fatalf("before: %v", got)
	}
	x.DropSpeculative("a")
	x.DropSpeculative("never-seen")
	if got := x.Prefixes(p, []string{"a", "b"}, now0, nil); !slices.Equal(got, []int{2, 4}) {
		t.Fatalf("after dropping a's guesses: %v, want a's 2 confirmed and b's 4 guessed", got)
	}
	if x.Sweep(now0.Add(2*time.Minute)) != 4 {
		t.Error("sweep after the drop")
	}
}

// TestIndexManyWorkersMatchesModel: 130 workers (most past the inline
// slots) holding random prefixes, confirmed with holes or speculated,
// queried in shuffled order with repeats: Prefixes is, for each, the
// leading run of blocks it holds.
func TestIndexManyWorkersMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 3))
	x := NewIndex()
	p := prompt(9, 40)
	want := map[string]int{}
	var workers []string
	for i := range 130 {
		w := "w" + strconv.Itoa(i)
		workers = append(workers, w)
		n := rng.IntN(len(p) + 1)
		want[w] = n
		switch {
		case rng.IntN(3) == 0:
			x.Speculate(w, p[:n], 0, now0.Add(time.Second))
			want[w] = specPrefix(x.grid, n, len(p))
		default:
			x.Store(w, p[:n])
			if n > 2 && rng.IntN(3) == 0 {
				hole := rng.IntN(n)
				x.Remove(w, p[hole:hole+1])
				want[w] = hole
			}
		}
	}
	for round := range 20 {
		q := slices.Clone(workers)
		rng.Shuffle(len(q), func(i, j int) { q[i], q[j] = q[j], q[i] })
		q = append(q[:20+round*5], q[:3]...) // a subset, with repeats
		got := x.Prefixes(p, q, now0, nil)
		for k, w := range q {
			if got[k] != want[w] {
				t.Fatalf("round %d: %s: %d among %d candidates, want %d", round, w, got[k], len(q), want[w])
			}
		}
	}
}

// gridCount is how many entries Speculate keeps for an n-block chain.
func gridCount(g grid, n int) int {
	c := 0
	for p := range n {
		if g.onGrid(p, n) {
			c++
		}
	}
	return c
}

// specPrefix is the prefix Prefixes reports for the first m blocks of a
// chain whose first n blocks were speculated, with nothing else held.
func specPrefix(g grid, n, m int) int {
	i := 0
	for i < m {
		if a := g.specAt(i, m); a >= n || !g.onGrid(a, n) {
			break
		}
		i++
	}
	return i
}

// TestSpeculationGrid: a guess on a long chain keeps an entry every
// stride blocks past the dense head, plus the last; a repeat of the chain
// matches it to its end, a longer chain to the last grid block it shares.
func TestSpeculationGrid(t *testing.T) {
	x := NewIndex()
	p := prompt(21, 100)
	x.Speculate("a", p[:60], 0, now0.Add(time.Second))
	if n := x.Sweep(now0); n != 0 {
		t.Fatalf("swept %d live", n)
	}
	if got, want := dueListings(x), 32+3+1; got != want { // 0..31, 39, 47, 55, then 59
		t.Fatalf("%d entries for 60 blocks, want %d", got, want)
	}
	for _, tt := range []struct{ query, want int }{
		{60, 60},  // the same prompt: its last block is on the grid
		{100, 56}, // a longer turn: up to the grid block 55
		{50, 48},  // a shorter prefix: up to grid block 47
		{20, 20},  // within the dense head
	} {
		if got := x.Prefixes(p[:tt.query], []string{"a"}, now0, nil); got[0] != tt.want {
			t.Errorf("query of %d blocks: prefix %d, want %d", tt.query, got[0], tt.want)
		}
	}
	// The rest of a longer turn, speculated from where the index already
	// matches it, is matched to its end; the blocks before are not written
	// again.
	x.Speculate("a", p, 56, now0.Add(time.Second))
	if got := x.Prefixes(p, []string{"a"}, now0, nil); got[0] != 100 {
		t.Fatalf("after the longer turn: prefix %d, want 100", got[0])
	}
	if got, want := dueListings(x), 36+6; got != want { // 63, 71, ..., 95, 99
		t.Fatalf("%d entries after the longer turn, want %d", got, want)
	}
	x.SpecGrid(0, 1)
	x.Speculate("b", p[:60], 0, now0.Add(time.Second))
	if got := x.Prefixes(p, []string{"b"}, now0, nil); got[0] != 60 {
		t.Fatalf("dense grid: prefix %d, want 60", got[0])
	}
}

// BenchmarkRemoveStorm is a router's side of an eviction storm: an index
// holding 128 workers' full caches (1,780 blocks each, a `switchyard sim`
// worker's) applies every worker's removal of all of them, in deltas of
// 256 blocks as the kvtracker publishes them.
func BenchmarkRemoveStorm(b *testing.B) {
	const workers, blocks, delta = 128, 1780, 256
	x := NewIndex()
	caches := make([][]Hash, workers)
	for i := range caches {
		caches[i] = prompt(uint32(1000+i), blocks)
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for i, c := range caches {
			x.Store("w"+strconv.Itoa(i), c)
		}
		b.StartTimer()
		for i, c := range caches {
			w := "w" + strconv.Itoa(i)
			for n := 0; n < len(c); n += delta {
				x.Remove(w, c[n:min(n+delta, len(c))])
			}
		}
		b.StopTimer()
		if n := x.Len(); n != 0 {
			b.Fatalf("%d blocks left", n)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*workers*blocks), "ns/block")
}

// BenchmarkClearStorm is the eviction storm as vLLM reports a prefix cache
// reset (POST /reset_prefix_cache): 128 full workers, each cleared at once
// (AllBlocksCleared, or a restart's new epoch), one Clear per worker.
func BenchmarkClearStorm(b *testing.B) {
	const workers, blocks = 128, 1780
	x := NewIndex()
	caches := make([][]Hash, workers)
	for i := range caches {
		caches[i] = prompt(uint32(1000+i), blocks)
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for i, c := range caches {
			x.Store("w"+strconv.Itoa(i), c)
		}
		b.StartTimer()
		for i := range caches {
			x.Clear("w" + strconv.Itoa(i))
		}
		b.StopTimer()
		if n := x.Len(); n != 0 {
			b.Fatalf("%d blocks left", n)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*workers*blocks), "ns/block")
}

// TestClearAndReplaceByWorkerList: Clear and Replace work from each
// worker's list of its blocks (not a scan of the index), so the list must
// follow every Store, Remove and Replace — inline slots and those past 63
// alike — and stay bounded when blocks come and go.
func TestClearAndReplaceByWorkerList(t *testing.T) {
	x := NewIndex()
	const workers = 70 // slots 63 and up spill into the side lists
	caches := make([][]Hash, workers)
	for i := range caches {
		caches[i] = prompt(uint32(1+i), 200)
		x.Store("w"+strconv.Itoa(i), caches[i])
		// Shared with worker 0, so a clear must leave the others' bits.
		x.Store("w"+strconv.Itoa(i), caches[0][:50])
	}
	// Churn on worker 0 and worker 69: blocks stored and removed many
	// times over; the lists are compacted, not grown without bound.
	for round := range 40 {
		for _, w := range []int{0, 69} {
			c := prompt(uint32(10000+round*100+w), 100)
			x.Store("w"+strconv.Itoa(w), c)
			x.Remove("w"+strconv.Itoa(w), c)
		}
	}
	for _, w := range []int{0, 69} {
		si := x.slotInfo(x.slot("w" + strconv.Itoa(w)))
		si.mu.Lock()
		n := len(si.held)
		si.mu.Unlock()
		if limit := 2*x.Blocks("w"+strconv.Itoa(w)) + minCompact + 100; n > limit {
			t.Errorf("w%d: list of %d hashes for %d blocks, want <= %d", w, n, x.Blocks("w"+strconv.Itoa(w)), limit)
		}
	}
	want := func(w string, n int) {
		t.Helper()
		if got := x.Blocks(w); got != n {
			t.Errorf("%s holds %d blocks, want %d", w, got, n)
		}
		if got := x.Prefixes(caches[0][:50], []string{w}, time.Now(), nil); len(got) != 1 {
			t.Fatalf("Prefixes: %v", got)
		}
	}
	x.Clear("w0")
	want("w0", 0)
	x.Clear("w69")
	want("w69", 0)
	for _, i := range []int{1, 62, 63, 68} {
		want("w"+strconv.Itoa(i), 200+50)
		if got := x.Prefixes(caches[0][:50], []string{"w" + strconv.Itoa(i)}, time.Now(), nil); got[0] != 50 {
			t.Errorf("w%d: a prefix of %d shared blocks after w0's clear, want 50", i, got[0])
		}
	}
	// Replace keeps what is in both, drops the rest, adds the new.
	next := append(slices.Clone(caches[65][100:]), prompt(99999, 30)...)
	x.Replace("w65", next)
	want("w65", 130)
	if got := x.Prefixes(caches[65][:100], []string{"w65"}, time.Now(), nil); got[0] != 0 {
		t.Errorf("w65: a prefix of %d blocks it no longer holds", got[0])
	}
	x.Clear("w65")
	want("w65", 0)
	total := 0
	for i := range workers {
		total += x.Blocks("w" + strconv.Itoa(i))
	}
	if total != (workers-3)*250 {
		t.Errorf("%d blocks held in all, want %d", total, (workers-3)*250)
	}
	for i := range workers {
		x.Clear("w" + strconv.Itoa(i))
	}
	if n := x.Len(); n != 0 {
		t.Errorf("%d hashes left after every worker's clear", n)
	}
}
