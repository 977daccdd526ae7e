package hf

import (
	"math/rand/v2"
	"sync"
)

// idCache maps strings to id sequences: the word cache (pre-token → ids)
// and the segment cache (text between special tokens → ids).
//
// It holds no Go pointer per entry — each shard generation is a map from a
// 64-bit hash to offsets into one byte arena (the keys) and one id arena —
// so a full cache costs the garbage collector nothing to scan. With a map
// of strings to slices, every GC cycle marked tens of thousands of small
// objects while the router was answering requests; that was its tail
// latency.
//
// Eviction is by generations: when a shard's young generation reaches its
// byte budget it becomes the old one and the previous old one is emptied
// and reused; a hit in the old generation is copied to the young one. An
// LRU approximation with no per-hit bookkeeping.
//
// Keys are compared byte for byte on every hit, so a hash collision is a
// miss, never a wrong answer. Hits are copied out under the shard lock:
// arenas are reused after a rotation.
type idCache struct {
	seed   uint64
	budget int // bytes per shard and generation
	shards [idCacheShards]idShard
}

const idCacheShards = 16

type idShard struct {
	mu         sync.Mutex
	young, old idGen
}

type idGen struct {
	index map[uint64]idSpan
	keys  []byte
	ids   []uint32
}

type idSpan struct{ key, keyLen, ids, n uint32 }

// entryOverhead approximates an index entry's own size in bytes.
const entryOverhead = 32

// newIDCache makes a cache of about maxBytes in all (both generations).
func newIDCache(maxBytes int) *idCache {
	return &idCache{seed: rand.Uint64(), budget: max(maxBytes/idCacheShards/2, 4<<10)}
}

// cost is what an entry takes from a generation's budget.
func cost(s string, n int) int { return len(s) + 4*n + entryOverhead }

// hash is s's key in the cache.
func (c *idCache) hash(s string) uint64 { return wordHash(c.seed, s) }

// appendGet appends the cached ids of s to dst.
func (c *idCache) appendGet(dst []uint32, s string) ([]uint32, bool) {
	return c.appendGetHash(dst, c.hash(s), s)
}

// appendGetHash is appendGet with s's hash already computed.
func (c *idCache) appendGetHash(dst []uint32, h uint64, s string) ([]uint32, bool) {
	sh := &c.shards[h%idCacheShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sp, ok := sh.young.lookup(h, s); ok {
		return append(dst, sh.young.ids[sp.ids:sp.ids+sp.n]...), true
	}
	sp, ok := sh.old.lookup(h, s)
	if !ok {
		return dst, false
	}
	start := len(dst)
	dst = append(dst, sh.old.ids[sp.ids:sp.ids+sp.n]...)
	// Promote from the copy: a rotation reuses the old generation's arena.
	ids := dst[start:]
	sh.rotateFor(cost(s, len(ids)), c.budget)
	sh.young.add(h, s, ids)
	return dst, true
}

// put caches a copy of ids for s; an entry larger than a generation's
// budget is not cached.
func (c *idCache) put(s string, ids []uint32) { c.putHash(c.hash(s), s, ids) }

// putHash is put with s's hash already computed.
func (c *idCache) putHash(h uint64, s string, ids []uint32) {
	n := cost(s, len(ids))
	if n > c.budget {
		return
	}
	sh := &c.shards[h%idCacheShards]
	sh.mu.Lock()
	if _, ok := sh.young.lookup(h, s); !ok {
		sh.rotateFor(n, c.budget)
		sh.young.add(h, s, ids)
	}
	sh.mu.Unlock()
}

// rotateFor makes room for n more bytes in the young generation.
func (sh *idShard) rotateFor(n, budget int) {
	if sh.young.size()+n <= budget {
		return
	}
	sh.young, sh.old = sh.old, sh.young
	sh.young.reset()
}

func (g *idGen) size() int { return len(g.keys) + 4*len(g.ids) + entryOverhead*len(g.index) }

func (g *idGen) reset() {
	clear(g.index)
	g.keys, g.ids = g.keys[:0], g.ids[:0]
}

func (g *idGen) lookup(h uint64, s string) (idSpan, bool) {
	sp, ok := g.index[h]
	if !ok || int(sp.keyLen) != len(s) || string(g.keys[sp.key:sp.key+sp.keyLen]) != s {
		return idSpan{}, false
	}
	return sp, true
}

func (g *idGen) add(h uint64, s string, ids []uint32) {
	if g.index == nil {
		g.index = make(map[uint64]idSpan)
	}
	g.index[h] = idSpan{key: uint32(len(g.keys)), keyLen: uint32(len(s)), ids: uint32(len(g.ids)), n: uint32(len(ids))}
	g.keys = append(g.keys, s...)
	g.ids = append(g.ids, ids...)
}
