package kvblock

import (
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Index maps block hashes to the workers whose prefix cache holds them. It
// answers the router's question — how many leading blocks of this prompt
// does each candidate already hold — in time proportional to the prompt's
// block count: one map probe per block, shared by every candidate, and the
// walk stops as soon as no candidate holds the next block.
//
// Two kinds of holdings live side by side:
//
//   - confirmed blocks, reported by the kvtracker (Store, Remove, Clear,
//     Replace), kept until removed;
//   - speculative blocks (Speculate), the router's own guess right after a
//     decision, each with an expiry. A burst of requests sharing a new
//     prefix then sticks to one worker before the worker's first BlockStored
//     arrives. Lookups treat an unexpired speculative block as held; Sweep
//     frees expired ones. A guess is kept on a sparse grid of a chain's
//     blocks (SpecGrid says why), each standing for the blocks before it.
//
// # Memory
//
// Workers get a small slot number. Each distinct hash costs one map entry
// (8-byte key, 8-byte bitmask) whatever the number of workers holding it, as
// long as those workers have one of the first 63 slots; later slots spill
// into a side list per hash (the top bit of the mask says so). Each worker
// also lists the hashes it holds (8 bytes a holding), so that clearing a
// worker visits its blocks alone. About 36 bytes per distinct cached block
// held by one worker in practice, map overhead included (see
// TestIndexMemoryPerBlock).
//
// # Concurrency
//
// The hashes are spread over shards, each behind its own RWMutex, so readers
// never take a global lock and a writer only blocks readers of the shard it
// is touching. All methods are safe for concurrent use.
type Index struct {
	shards [numShards]shard

	regMu sync.RWMutex
	slots map[string]int // worker -> slot
	info  []*slotInfo    // slot -> worker; nil when free
	free  []int          // released slots, reused first

	grid grid // where guesses are kept (SpecGrid)
}

const (
	shardBits   = 6
	numShards   = 1 << shardBits
	inlineSlots = 63
	overflowBit = uint64(1) << 63
	maxSlots    = 1 << 16
	// cacheLine pads shards apart so readers of one do not invalidate
	// another's lock word.
	cacheLine = 64
)

type slotInfo struct {
	name   string
	blocks atomic.Int64 // confirmed blocks

	// held lists the hashes the slot was given as confirmed blocks, so
	// that Clear and Replace visit the worker's blocks instead of the
	// whole index: an eviction storm (every worker resetting its cache
	// at once, or a fleet restarting) is one Clear per worker, and a scan
	// of every shard each took 128 workers' storm from 90 ms to over a
	// second. Removed blocks stay listed until the list is compacted
	// (track), when it outgrows twice the slot's blocks.
	mu   sync.Mutex
	held []Hash
}

// minCompact is the list length below which track never compacts.
const minCompact = 1024

// track lists hashes (newly held by slot s) on the slot's list,
// compacting the list when removals have left it mostly stale.
func (x *Index) track(s int, si *slotInfo, hashes []Hash) {
	if len(hashes) == 0 {
		return
	}
	si.mu.Lock()
	defer si.mu.Unlock()
	if int64(len(hashes)) == si.blocks.Load() {
		// All it holds was just added: the rest of the list is stale.
		si.held = append(si.held[:0], hashes...)
		return
	}
	si.held = append(si.held, hashes...)
	if len(si.held) <= minCompact || int64(len(si.held)) <= 2*si.blocks.Load() {
		return
	}
	seen := make(map[Hash]struct{}, si.blocks.Load())
	kept := make([]Hash, 0, si.blocks.Load()+minCompact/2)
	x.byShard(si.held, func(sh *shard, hs []Hash) {
		sh.mu.RLock()
		for _, h := range hs {
			if _, dup := seen[h]; dup || !sh.holds(h, s) {
				continue
			}
			seen[h] = struct{}{}
			kept = append(kept, h)
		}
		sh.mu.RUnlock()
	})
	si.held = kept
}

// take empties slot s's list and returns what it held.
func (si *slotInfo) take() []Hash {
	si.mu.Lock()
	defer si.mu.Unlock()
	out := si.held
	si.held = nil
	return out
}

type shard struct {
	mu   sync.RWMutex
	held map[Hash]uint64   // bit s (s < 63): slot s holds the block; overflowBit: see over
	over map[Hash][]uint16 // slots >= 63 holding the block, sorted
	// spec holds each speculated hash's first holder inline, so the map
	// has no pointer for the collector to follow and a new guess
	// allocates nothing; specMore holds the rare further holders.
	spec     map[Hash]specHold
	specMore map[Hash][]specHold
	// due lists speculative hashes by a second at or before which their
	// earliest hold expires, so Sweep visits what may have expired
	// instead of every entry: a router taking long unique prompts holds
	// millions of speculative blocks (each lives for the request's
	// predicted TTFT plus the TTL), and a full walk every second burned
	// its CPU and held shard locks for milliseconds. A hash is listed when
	// it gains a holder; an extended hold is not listed again — a
	// conversation resends its whole history every turn, and listing it
	// each time grew the lists by the prompt's length per request — but
	// Sweep, finding it alive under its old second, lists it under its
	// new one.
	due map[int64][]Hash
	// specPeak is the most entries spec has held since it was last
	// rebuilt (see Sweep).
	specPeak int
	_        [cacheLine]byte
}

func dueSecond(untilNs int64) int64 { return untilNs / int64(time.Second) }

type specHold struct {
	until int64 // unix nanoseconds
	slot  uint16
	more  bool // in spec: specMore has further holders of the hash
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	x := &Index{slots: map[string]int{}, grid: defaultGrid}
	for i := range x.shards {
		x.shards[i].held = map[Hash]uint64{}
	}
	return x
}

func (x *Index) shardOf(h Hash) *shard {
	// The hashes are xxhash outputs, so their high bits are as good as
	// any; the map's own hashing uses all of them again.
	return &x.shards[uint64(h)>>(64-shardBits)]
}

// slot returns worker's slot, or -1 when the index has never seen it.
func (x *Index) slot(worker string) int {
	x.regMu.RLock()
	s, ok := x.slots[worker]
	x.regMu.RUnlock()
	if !ok {
		return -1
	}
	return s
}

// slotFor returns worker's slot, assigning one on first sight. It returns
// -1 only when every slot is taken.
func (x *Index) slotFor(worker string) int {
	if s := x.slot(worker); s >= 0 {
		return s
	}
	x.regMu.Lock()
	defer x.regMu.Unlock()
	if s, ok := x.slots[worker]; ok {
		return s
	}
	var s int
	switch {
	case len(x.free) > 0:
		// Lowest free slot first keeps workers in the inline bitmask.
		best := 0
		for i, f := range x.free {
			if f < x.free[best] {
				best = i
			}
		}
		s = x.free[best]
		x.free = append(x.free[:best], x.free[best+1:]...)
		x.info[s] = &slotInfo{name: worker}
	case len(x.info) < maxSlots:
		s = len(x.info)
		x.info = append(x.info, &slotInfo{name: worker})
	default:
		return -1
	}
	x.slots[worker] = s
	return s
}

func (x *Index) slotInfo(s int) *slotInfo {
	x.regMu.RLock()
	defer x.regMu.RUnlock()
	return x.info[s]
}

// Store records that worker holds hashes.
func (x *Index) Store(worker string, hashes []Hash) {
	if len(hashes) == 0 {
		return
	}
	s := x.slotFor(worker)
	if s < 0 {
		return
	}
	var added []Hash
	x.byShard(hashes, func(sh *shard, hs []Hash) {
		sh.mu.Lock()
		for _, h := range hs {
			if sh.add(h, s) {
				added = append(added, h)
			}
		}
		sh.mu.Unlock()
	})
	si := x.slotInfo(s)
	si.blocks.Add(int64(len(added)))
	x.track(s, si, added)
}

// sortScratch holds the per-call buffer byShard sorts hashes into.
type sortScratch struct{ buf []Hash }

var sortPool = sync.Pool{New: func() any { return new(sortScratch) }}

// byShard calls f once per shard that some of hashes fall in, with those
// hashes, so a batch takes each shard's lock once instead of once per hash.
func (x *Index) byShard(hashes []Hash, f func(sh *shard, hs []Hash)) {
	if len(hashes) <= 4 {
		for i := range hashes {
			f(x.shardOf(hashes[i]), hashes[i:i+1])
		}
		return
	}
	var count [numShards + 1]int
	for _, h := range hashes {
		count[uint64(h)>>(64-shardBits)+1]++
	}
	for i := 1; i <= numShards; i++ {
		count[i] += count[i-1]
	}
	sc := sortPool.Get().(*sortScratch)
	if cap(sc.buf) < len(hashes) {
		sc.buf = make([]Hash, len(hashes))
	}
	buf := sc.buf[:len(hashes)]
	next := count
	for _, h := range hashes {
		i := uint64(h) >> (64 - shardBits)
		buf[next[i]] = h
		next[i]++
	}
	for i := range numShards {
		if count[i] < count[i+1] {
			f(&x.shards[i], buf[count[i]:count[i+1]])
		}
	}
	sortPool.Put(sc)
}

// Remove records that worker no longer holds hashes. Hashes it did not hold
// are ignored. The worker's speculative holds on them go too: an eviction
// is the worker's own word that the block is gone, and a guess left
// standing would keep sending a conversation to a worker that has just
// dropped its history, where every later turn is prefilled from scratch
// until the guess expires.
func (x *Index) Remove(worker string, hashes []Hash) {
	s := x.slot(worker)
	if s < 0 || len(hashes) == 0 {
		return
	}
	removed := 0
	x.byShard(hashes, func(sh *shard, hs []Hash) {
		sh.mu.Lock()
		for _, h := range hs {
			if sh.remove(h, s) {
				removed++
			}
			if sh.spec != nil {
				sh.unspeculate(h, s)
			}
		}
		sh.mu.Unlock()
	})
	x.slotInfo(s).blocks.Add(-int64(removed))
}

// Clear drops every confirmed block of worker (its speculative ones expire
// on their own), in time proportional to the worker's blocks.
func (x *Index) Clear(worker string) {
	x.Replace(worker, nil)
}

// Replace makes hashes the whole confirmed content of worker, as after
// loading a snapshot. Blocks in both the old and the new content stay
// visible throughout, so lookups during a resynchronisation never see the
// worker emptied. It visits the worker's old and new blocks, not the
// whole index.
func (x *Index) Replace(worker string, hashes []Hash) {
	var s int
	if len(hashes) == 0 {
		if s = x.slot(worker); s < 0 {
			return
		}
	} else if s = x.slotFor(worker); s < 0 {
		return
	}
	si := x.slotInfo(s)
	old := si.take()
	drop := old
	if len(hashes) > 0 {
		keep := make(map[Hash]struct{}, len(hashes))
		for _, h := range hashes {
			keep[h] = struct{}{}
		}
		drop = make([]Hash, 0, len(old))
		for _, h := range old {
			if _, ok := keep[h]; !ok {
				drop = append(drop, h)
			}
		}
	}
	var delta int64
	x.byShard(drop, func(sh *shard, hs []Hash) {
		sh.mu.Lock()
		for _, h := range hs {
			if sh.remove(h, s) {
				delta--
			}
		}
		sh.mu.Unlock()
	})
	var held []Hash
	x.byShard(hashes, func(sh *shard, hs []Hash) {
		sh.mu.Lock()
		for _, h := range hs {
			if sh.add(h, s) {
				delta++
			}
			if sh.holds(h, s) {
				held = append(held, h)
			}
		}
		sh.mu.Unlock()
	})
	si.blocks.Add(delta)
	x.track(s, si, held)
}

// Speculate records that worker is assumed to hold chain[from:] — and so,
// the hashes being chained, every block before — until the given time. A
// later call extends an entry, never shortens it. Only the blocks on the
// speculation grid (specAt) get an entry; chain must be a whole chain from
// its first block, as Prefixes is asked about, so that both place the grid
// alike.
func (x *Index) Speculate(worker string, chain []Hash, from int, until time.Time) {
	n := len(chain)
	if from < 0 || from >= n {
		return
	}
	s := x.slotFor(worker)
	if s < 0 {
		return
	}
	sc := gridPool.Get().(*sortScratch)
	grid := sc.buf[:0]
	for p := from; p < n; p++ {
		if x.grid.onGrid(p, n) {
			grid = append(grid, chain[p])
		}
	}
	u := until.UnixNano()
	x.byShard(grid, func(sh *shard, hs []Hash) {
		sh.mu.Lock()
		if sh.spec == nil {
			sh.spec = map[Hash]specHold{}
			sh.due = map[int64][]Hash{}
		}
		sec := dueSecond(u)
		listed := sh.due[sec]
		for _, h := range hs {
			if sh.speculate(h, s, u) {
				listed = append(listed, h)
			}
		}
		if len(listed) > 0 {
			sh.due[sec] = listed
		}
		sh.mu.Unlock()
	})
	sc.buf = grid
	gridPool.Put(sc)
}

// gridPool holds Speculate's buffers of grid hashes (byShard takes the
// other pool's).
var gridPool = sync.Pool{New: func() any { return new(sortScratch) }}

// The speculation grid. A guess is a claim about a whole prefix, and the
// hashes are chained, so a hold on block p of a chain stands for blocks
// 0..p: a guess needs an entry only every few blocks. Kept on every
// block, a cold 8k-token prompt costs 512 map writes, and at hundreds of
// cold prompts a second (a million live entries, each write a cache miss)
// they are a fifth of the router's CPU per request. On the default grid
// the first 32 blocks keep one entry each, so short prompts are exact;
// past them one block in 8 has one, plus the chain's last block, so a
// repeated prompt is matched to its end: 93 entries for 8k tokens. The
// price: a lookup of a chain that leaves a guessed one part-way through a
// stride (a shared prefix, or a longer turn of the same conversation) is
// credited with the guess up to the last grid block before the fork, at
// most stride-1 blocks short, until the worker's own events confirm the
// rest.
type grid struct{ dense, stride int }

var defaultGrid = grid{dense: 32, stride: 8}

// SpecGrid sets the speculation grid: every block below dense, then one
// in stride (which must divide 32, the first lookup window, and dense).
// SpecGrid(0, 1) keeps every block, for an index whose chains are already
// sparse. Call it before the index is used.
func (x *Index) SpecGrid(dense, stride int) {
	if stride < 1 || 32%stride != 0 || dense < 0 || dense%stride != 0 {
		panic("kvblock: SpecGrid: stride must divide 32 and dense")
	}
	x.grid = grid{dense, stride}
}

// onGrid reports whether block p of an n-block chain gets a speculative
// entry.
func (g grid) onGrid(p, n int) bool {
	return p < g.dense || p%g.stride == g.stride-1 || p == n-1
}

// specAt is the grid block whose speculative holds stand for block i of
// an n-block chain: the first grid block at or after it.
func (g grid) specAt(i, n int) int {
	if i < g.dense {
		return i
	}
	return min(i-i%g.stride+g.stride-1, n-1)
}

// Sweep frees speculative entries expired at now and returns how many it
// freed.
func (x *Index) Sweep(now time.Time) int {
	n := now.UnixNano()
	freed := 0
	nowSec := dueSecond(n)
	var again []relist
	for i := range x.shards {
		sh := &x.shards[i]
		sh.mu.Lock()
		sh.specPeak = max(sh.specPeak, len(sh.spec))
		again = again[:0]
		for sec, hs := range sh.due {
			if sec > nowSec {
				continue
			}
			delete(sh.due, sec)
			for _, h := range hs {
				f, next := sh.expire(h, n)
				freed += f
				if next != 0 {
					again = append(again, relist{h, dueSecond(next)})
				}
			}
		}
		// After the walk: a listing added to a second being walked could
		// be visited again in the same Sweep.
		for _, r := range again {
			sh.due[r.sec] = append(sh.due[r.sec], r.h)
		}
		// A Go map keeps the memory of the entries deleted from it, and a
		// burst of cold prompts grows spec to millions of entries (a
		// queue of long predicted TTFTs keeps them for minutes): once it
		// is down to a quarter of its peak, it is rebuilt at its size.
		if sh.specPeak >= minShrink && len(sh.spec) <= sh.specPeak/4 {
			sh.spec = resized(sh.spec)
			sh.specMore = resized(sh.specMore)
			sh.specPeak = len(sh.spec)
		}
		sh.mu.Unlock()
	}
	return freed
}

// minShrink is the peak size below which a map is not worth rebuilding.
const minShrink = 1024

// resized copies m into a map sized for what it holds now.
func resized[V any](m map[Hash]V) map[Hash]V {
	if m == nil {
		return nil
	}
	out := make(map[Hash]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

type relist struct {
	h   Hash
	sec int64
}

// DropSpeculative drops worker's speculative blocks and keeps its confirmed
// ones: the guesses about a worker that restarted (its cache is empty) no
// longer hold, while its confirmed blocks follow the kvtracker's epochs. It
// scans every speculative entry: workers restart rarely.
func (x *Index) DropSpeculative(worker string) {
	if s := x.slot(worker); s >= 0 {
		x.unspeculateSlot(s)
	}
}

func (x *Index) unspeculateSlot(s int) {
	for i := range x.shards {
		sh := &x.shards[i]
		sh.mu.Lock()
		for h := range sh.spec {
			sh.unspeculate(h, s)
		}
		sh.mu.Unlock()
	}
}

// Forget drops everything about worker, confirmed and speculative, and frees
// its slot for another worker.
func (x *Index) Forget(worker string) {
	s := x.slot(worker)
	if s < 0 {
		return
	}
	x.Clear(worker)
	x.unspeculateSlot(s)
	x.regMu.Lock()
	delete(x.slots, worker)
	x.info[s] = nil
	x.free = append(x.free, s)
	x.regMu.Unlock()
}

// Blocks is the number of confirmed blocks worker holds.
func (x *Index) Blocks(worker string) int {
	s := x.slot(worker)
	if s < 0 {
		return 0
	}
	return int(x.slotInfo(s).blocks.Load())
}

// Len is the number of distinct confirmed hashes.
func (x *Index) Len() int {
	n := 0
	for i := range x.shards {
		sh := &x.shards[i]
		sh.mu.RLock()
		n += len(sh.held)
		sh.mu.RUnlock()
	}
	return n
}

// Workers lists the workers the index has a slot for.
func (x *Index) Workers() []string {
	x.regMu.RLock()
	defer x.regMu.RUnlock()
	out := make([]string, 0, len(x.slots))
	for _, in := range x.info {
		if in != nil {
			out = append(out, in.name)
		}
	}
	return out
}

// Prefixes reports, for each of workers, how many leading hashes it holds
// (confirmed, or speculatively at now): out[i] is the length of workers[i]'s
// cached prefix in blocks. Because hashes are chained, a held block implies
// the prefix before it, so the first missing block ends the count. out is
// reused when large enough.
func (x *Index) Prefixes(hashes []Hash, workers []string, now time.Time, out []int) []int {
	out = append(out[:0], make([]int, len(workers))...)
	if len(hashes) == 0 || len(workers) == 0 {
		return out
	}
	// Resolve slots once. first[k] is where candidate k's prefix ended
	// (-1: still going).
	var slotBuf, firstBuf [32]int
	slots, first := slotBuf[:0], firstBuf[:0]
	var alive uint64 // inline slots still matching
	var spill []int  // candidate indexes with slots >= 63 still matching
	x.regMu.RLock()
	for k, w := range workers {
		s, ok := x.slots[w]
		if !ok {
			s = -1
		}
		slots = append(slots, s)
		first = append(first, -1)
		switch {
		case s < 0:
			first[k] = 0
		case s < inlineSlots:
			alive |= 1 << uint(s)
		default:
			spill = append(spill, k)
		}
	}
	x.regMu.RUnlock()
	// In slot order, so that each hash's sorted side list is merged with
	// them in one pass: checking each candidate against the list cost
	// blocks × candidates × list, 17k comparisons a block at 128 workers.
	slices.SortFunc(spill, func(a, b int) int { return slots[a] - slots[b] })
	var endAt [inlineSlots]int32 // inline slot -> block index where it stopped matching
	for i := range endAt {
		endAt[i] = -1
	}
	nowNs := now.UnixNano()
	n := len(hashes)
	if len(spill) == 0 {
		x.walkInline(hashes, alive, nowNs, &endAt)
		alive = 0
	}
	// Candidates past the inline slots: one probe per hash, checking their
	// side lists under the shard's lock.
	var specBuf [8]specHold
	var specList []specHold
	for i, g := 0, -1; i < n && (alive != 0 || len(spill) > 0); i++ {
		if at := x.grid.specAt(i, n); at != g {
			g = at
			specList = x.holders(hashes[g], specBuf[:0])
		}
		h := hashes[i]
		sh := x.shardOf(h)
		sh.mu.RLock()
		m := sh.held[h] | inlineMask(specList, nowNs)
		if len(spill) > 0 {
			var ov []uint16
			if m&overflowBit != 0 {
				ov = sh.over[h]
			}
			kept, j := spill[:0], 0
			for _, k := range spill {
				s := slots[k]
				for j < len(ov) && int(ov[j]) < s {
					j++
				}
				if j < len(ov) && int(ov[j]) == s || specHolds(specList, s, nowNs) {
					kept = append(kept, k)
				} else {
					first[k] = i
				}
			}
			spill = kept
		}
		sh.mu.RUnlock()
		for gone := alive &^ m; gone != 0; gone &= gone - 1 {
			endAt[bits.TrailingZeros64(gone)] = int32(i)
		}
		alive &= m
	}
	for k, s := range slots {
		switch {
		case first[k] >= 0:
			out[k] = first[k]
		case s >= 0 && s < inlineSlots && endAt[s] >= 0:
			out[k] = int(endAt[s])
		default:
			out[k] = n
		}
	}
	return out
}

// walkInline is Prefixes' walk when every candidate has an inline slot. It
// reads the hashes in windows, taking each shard's read lock once per
// window rather than once per hash; windows grow from 32 to 256 hashes, so
// a prompt cached nowhere stops after a few probes while a long cached
// prefix pays few lock operations. Windows start and end on stride
// boundaries (or the chain's end), so the grid block standing for a block
// is always in its window.
func (x *Index) walkInline(hashes []Hash, alive uint64, nowNs int64, endAt *[inlineSlots]int32) {
	const maxWin = 256
	var masks, specMasks [maxWin]uint64
	var probed [maxWin]bool
	var order [maxWin]uint16
	n := len(hashes)
	for base, win := 0, 32; base < n && alive != 0; base, win = base+win, min(2*win, maxWin) {
		w := min(win, n-base)
		var count [numShards + 1]uint16
		for i := range w {
			count[uint64(hashes[base+i])>>(64-shardBits)+1]++
		}
		for i := 1; i <= numShards; i++ {
			count[i] += count[i-1]
		}
		next := count
		for i := range w {
			sh := uint64(hashes[base+i]) >> (64 - shardBits)
			order[next[sh]] = uint16(i)
			next[sh]++
		}
		for si := range numShards {
			lo, hi := count[si], count[si+1]
			if lo == hi {
				continue
			}
			sh := &x.shards[si]
			sh.mu.RLock()
			for _, pos := range order[lo:hi] {
				masks[pos] = sh.held[hashes[base+int(pos)]]
			}
			sh.mu.RUnlock()
		}
		clear(probed[:w])
		for i := 0; i < w && alive != 0; i++ {
			m := masks[i]
			// Guesses matter only for candidates still matching that
			// the confirmed mask leaves out; with KV events, a cached
			// history is confirmed on its holder, and this saves the
			// guess's probe for nearly every block.
			if alive&^m != 0 {
				g := x.grid.specAt(base+i, n) - base
				if !probed[g] {
					probed[g] = true
					specMasks[g] = x.specMask(hashes[base+g], nowNs)
				}
				m |= specMasks[g]
			}
			for gone := alive &^ m; gone != 0; gone &= gone - 1 {
				endAt[bits.TrailingZeros64(gone)] = int32(base + i)
			}
			alive &= m
		}
	}
}

// holders appends h's speculative holders to dst.
func (x *Index) holders(h Hash, dst []specHold) []specHold {
	sh := x.shardOf(h)
	sh.mu.RLock()
	if len(sh.spec) > 0 {
		dst = sh.holders(h, dst)
	}
	sh.mu.RUnlock()
	return dst
}

// specMask is the inline slots holding h speculatively at nowNs.
func (x *Index) specMask(h Hash, nowNs int64) uint64 {
	var buf [8]specHold
	return inlineMask(x.holders(h, buf[:0]), nowNs)
}

func specHolds(list []specHold, s int, nowNs int64) bool {
	for _, e := range list {
		if int(e.slot) == s && e.until > nowNs {
			return true
		}
	}
	return false
}

// add sets slot s on h and reports whether it was not set before.
func (sh *shard) add(h Hash, s int) bool {
	m := sh.held[h]
	if s < inlineSlots {
		bit := uint64(1) << uint(s)
		if m&bit != 0 {
			return false
		}
		sh.held[h] = m | bit
		return true
	}
	if sh.over == nil {
		sh.over = map[Hash][]uint16{}
	}
	list := sh.over[h]
	i := 0
	for i < len(list) && int(list[i]) < s {
		i++
	}
	if i < len(list) && int(list[i]) == s {
		return false
	}
	list = append(list, 0)
	copy(list[i+1:], list[i:])
	list[i] = uint16(s)
	sh.over[h] = list
	sh.held[h] = m | overflowBit
	return true
}

// holds reports whether slot s holds h as a confirmed block.
func (sh *shard) holds(h Hash, s int) bool {
	m, ok := sh.held[h]
	if !ok {
		return false
	}
	if s < inlineSlots {
		return m&(uint64(1)<<uint(s)) != 0
	}
	return m&overflowBit != 0 && slices.Contains(sh.over[h], uint16(s))
}

// remove clears slot s on h and reports whether it was set.
func (sh *shard) remove(h Hash, s int) bool {
	m, ok := sh.held[h]
	if !ok {
		return false
	}
	if s < inlineSlots {
		bit := uint64(1) << uint(s)
		if m&bit == 0 {
			return false
		}
		m &^= bit
	} else {
		if m&overflowBit == 0 {
			return false
		}
		list := sh.over[h]
		i := 0
		for i < len(list) && int(list[i]) != s {
			i++
		}
		if i == len(list) {
			return false
		}
		list = append(list[:i], list[i+1:]...)
		if len(list) == 0 {
			delete(sh.over, h)
			m &^= overflowBit
		} else {
			sh.over[h] = list
		}
	}
	if m == 0 {
		delete(sh.held, h)
	} else {
		sh.held[h] = m
	}
	return true
}
