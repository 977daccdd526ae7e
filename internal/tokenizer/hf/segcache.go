package hf

import (
	"hash/maphash"
	"sync"
)

// segmentCache remembers the ids of long text segments — the stretches
// between added/special tokens, which in a rendered chat prompt are whole
// message contents. A multi-turn conversation resends its whole history on
// every turn; with the cache only the new messages are tokenized. It is
// exact: an added token always splits the text (it is matched before BPE),
// so a segment's ids never depend on what surrounds it.
//
// Memory is bounded by segCacheBudget bytes per tokenizer (text plus ids);
// a full shard forgets everything it holds, which costs one re-tokenization
// of the segments still in use — simpler and more predictable than LRU
// bookkeeping on a path that runs per request.
type segmentCache struct {
	seed   maphash.Seed
	shards [segCacheShards]segShard
}

type segShard struct {
	mu    sync.RWMutex
	m     map[string][]uint32
	bytes int
}

const (
	segCacheShards = 16
	segCacheBudget = 64 << 20
	// segCacheMin is the shortest segment worth caching: below it the
	// word cache already makes tokenizing cheap.
	segCacheMin = 64
)

func newSegmentCache() *segmentCache {
	c := &segmentCache{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].m = make(map[string][]uint32)
	}
	return c
}

func (c *segmentCache) shard(s string) *segShard {
	return &c.shards[maphash.String(c.seed, s)%segCacheShards]
}

// get returns the cached ids of s; the caller must not modify them.
func (c *segmentCache) get(s string) ([]uint32, bool) {
	sh := c.shard(s)
	sh.mu.RLock()
	ids, ok := sh.m[s]
	sh.mu.RUnlock()
	return ids, ok
}

// put caches a copy of ids for s.
func (c *segmentCache) put(s string, ids []uint32) {
	cost := len(s) + 4*len(ids) + 64
	if cost > segCacheBudget/segCacheShards/4 {
		return // one segment must not flush a shard
	}
	own := make([]uint32, len(ids))
	copy(own, ids)
	key := string([]byte(s)) // do not pin the caller's (possibly huge) prompt
	sh := c.shard(s)
	sh.mu.Lock()
	if _, ok := sh.m[key]; !ok {
		if sh.bytes+cost > segCacheBudget/segCacheShards {
			clear(sh.m)
			sh.bytes = 0
		}
		sh.m[key] = own
		sh.bytes += cost
	}
	sh.mu.Unlock()
}
