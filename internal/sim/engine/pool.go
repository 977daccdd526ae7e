package engine

import (
	"maps"

	"github.com/switchyard-dev/switchyard/internal/vllm/kvevents"
)

const none = int32(-1)

// block is one KV block. A block is "cached" when it holds a hash: it can be
// hit by a later request until it is evicted. Blocks with ref 0 sit in the
// free list; a cached one among them is an eviction candidate.
type block struct {
	hash       uint64
	hashed     bool
	ref        int32
	prev, next int32 // free-list links
	inFree     bool
	dupNext    int32 // next cached block with the same hash
}

// pool mirrors vLLM v1's BlockPool: block 0 is the reserved null block; the
// free list is in eviction order (head first), freed blocks go to its tail,
// so cached blocks are evicted least recently freed first. Like vLLM it does
// not de-duplicate: two requests computing the same block at once both cache
// it, and each copy is stored (and reported) on its own.
type pool struct {
	blocks             []block
	freeHead, freeTail int32
	numFree            int
	// cache maps a hash to the first block holding it; further copies
	// chain through dupNext. A lookup returns the first, as vLLM does.
	cache map[uint64]int32
	// events collects KV events until the step that caused them is
	// published; nil when nobody listens.
	events *[]kvevents.Event
}

func newPool(n int) pool {
	p := pool{blocks: make([]block, n), freeHead: none, freeTail: none, cache: make(map[uint64]int32, n)}
	for i := range p.blocks {
		p.blocks[i] = block{prev: none, next: none, dupNext: none}
	}
	for i := 1; i < n; i++ {
		p.pushFree(int32(i))
	}
	return p
}

func (p *pool) clone() pool {
	c := *p
	c.blocks = make([]block, len(p.blocks))
	copy(c.blocks, p.blocks)
	c.cache = maps.Clone(p.cache)
	c.events = nil
	return c
}

// usable is the number of blocks that can hold tokens.
func (p *pool) usable() int { return len(p.blocks) - 1 }

func (p *pool) usage() float64 {
	if p.usable() == 0 {
		return 0
	}
	return 1 - float64(p.numFree)/float64(p.usable())
}

func (p *pool) pushFree(id int32) {
	b := &p.blocks[id]
	b.prev, b.next, b.inFree = p.freeTail, none, true
	if p.freeTail != none {
		p.blocks[p.freeTail].next = id
	} else {
		p.freeHead = id
	}
	p.freeTail = id
	p.numFree++
}

func (p *pool) removeFree(id int32) {
	b := &p.blocks[id]
	if b.prev != none {
		p.blocks[b.prev].next = b.next
	} else {
		p.freeHead = b.next
	}
	if b.next != none {
		p.blocks[b.next].prev = b.prev
	} else {
		p.freeTail = b.prev
	}
	b.prev, b.next, b.inFree = none, none, false
	p.numFree--
}

// allocate takes the head of the free list, evicting its cached content.
// The caller has checked numFree.
func (p *pool) allocate() int32 {
	id := p.freeHead
	p.removeFree(id)
	if p.blocks[id].hashed {
		p.evict(id)
	}
	p.blocks[id].ref = 1
	return id
}

// touch takes a reference on a cached block hit by a request.
func (p *pool) touch(id int32) {
	b := &p.blocks[id]
	if b.ref == 0 && b.inFree {
		p.removeFree(id)
	}
	b.ref++
}

// release drops a reference; at zero the block joins the free list's tail,
// keeping its cached content until evicted.
func (p *pool) release(id int32) {
	b := &p.blocks[id]
	b.ref--
	if b.ref == 0 {
		p.pushFree(id)
	}
}

func (p *pool) lookup(h uint64) (int32, bool) {
	id, ok := p.cache[h]
	return id, ok
}

// commit caches block id under hash h.
func (p *pool) commit(id int32, h uint64) {
	b := &p.blocks[id]
	b.hash, b.hashed, b.dupNext = h, true, none
	first, ok := p.cache[h]
	if !ok {
		p.cache[h] = id
		return
	}
	for p.blocks[first].dupNext != none {
		first = p.blocks[first].dupNext
	}
	p.blocks[first].dupNext = id
}

func (p *pool) evict(id int32) {
	b := &p.blocks[id]
	h := b.hash
	if first := p.cache[h]; first == id {
		if b.dupNext != none {
			p.cache[h] = b.dupNext
		} else {
			delete(p.cache, h)
		}
	} else {
		for cur := first; cur != none; cur = p.blocks[cur].dupNext {
			if p.blocks[cur].dupNext == id {
				p.blocks[cur].dupNext = b.dupNext
				break
			}
		}
	}
	b.hashed, b.hash, b.dupNext = false, 0, none
	if p.events != nil {
		*p.events = append(*p.events, &kvevents.BlockRemoved{
			BlockHashes: []kvevents.EngineHash{kvevents.EngineHash(h)},
			Medium:      mediumGPU(),
		})
	}
}

// reset forgets every cached hash. Like vLLM it refuses while any block is
// in use.
func (p *pool) reset() bool {
	if p.numFree != p.usable() {
		return false
	}
	clear(p.cache)
	for i := range p.blocks {
		p.blocks[i].hashed, p.blocks[i].hash, p.blocks[i].dupNext = false, 0, none
	}
	if p.events != nil {
		*p.events = append(*p.events, &kvevents.AllBlocksCleared{})
	}
	return true
}

func mediumGPU() *string {
	m := kvevents.MediumGPU
	return &m
}
