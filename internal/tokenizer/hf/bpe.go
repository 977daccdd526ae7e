package hf

import (
	"sync"
)

// byteLevelRunes is GPT-2's byte-to-character table: printable bytes stand
// for themselves, the others are shifted to U+0100 and up, so every byte has
// a visible character in vocabulary strings.
var byteLevelRunes = func() (t [256]rune) {
	n := rune(0)
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			t[b] = rune(b)
		} else {
			t[b] = 256 + n
			n++
		}
	}
	return t
}()

// unByteLevel maps a vocabulary string back to raw bytes; ok is false when a
// character is not in the byte-level alphabet.
func unByteLevel(s string) (raw string, ok bool) {
	inv := byteLevelInverse()
	out := make([]byte, 0, len(s))
	for _, r := range s {
		b, found := inv[r]
		if !found {
			return "", false
		}
		out = append(out, b)
	}
	return string(out), true
}

var byteLevelInverse = sync.OnceValue(func() map[rune]byte {
	m := make(map[rune]byte, 256)
	for b, r := range byteLevelRunes {
		m[r] = byte(b)
	}
	return m
})

// merge is the result of merging a pair: its rank (lower merges first) and
// the id of the merged token.
type merge struct{ rank, id uint32 }

func pairKey(a, b uint32) uint64 { return uint64(a)<<32 | uint64(b) }

// bpe.sides bits.
const (
	mergesLeft  = 1 << iota // the token is the left side of a merge
	mergesRight             // ... the right side
)

// lookup returns the merge of the pair (a, b), if there is one. Most pairs
// of neighbours in a text have none (Llama 2 knows Japanese characters one
// by one: no pair of them merges), and for many of those bpe.sides, an
// array small enough to stay in cache, answers without a probe of the
// merges map, which is a cache miss most times.
func (m *bpe) lookup(a, b uint32) (merge, bool) {
	if m.sides[a]&mergesLeft == 0 || m.sides[b]&mergesRight == 0 {
		return merge{}, false
	}
	mg, ok := m.merges[pairKey(a, b)]
	return mg, ok
}

// bpe is a byte-level BPE model working on raw bytes: vocabulary strings are
// converted back from the byte-level alphabet at load, so pre-tokens are
// merged without re-encoding them.
type bpe struct {
	vocab        *stringIndex // raw bytes → id
	byteID       [256]uint32
	merges       map[uint64]merge
	sides        []uint8     // id → mergesLeft, mergesRight: whether the token is either side of any merge
	ignoreMerges bool        // a pre-token found whole in the vocabulary is one token
	charLevel    bool        // vocab of characters; byteID holds ASCII's tokens (sentencepiece.go)
	fallback     [256]uint32 // charLevel: the <0xXX> tokens (noToken where missing)
	unk          uint32      // charLevel: the unknown token, noToken if none
	fuseUnk      bool        // charLevel: a run of unknown characters is one unknown token
	charTokens   []uint32    // charLevel: 1 + the token of each character below U+10000, 0 if none
	uni          *unigram    // a Unigram model instead of merges (unigram.go)
	wp           *wordPiece  // a WordPiece model instead of merges (wordpiece.go)
	cache        *idCache    // recent pre-tokens; text repeats words heavily
	fronts       sync.Pool   // *wordFront: the cache's lock-free front, one per encoding
	scratch      sync.Pool   // *bpeWork
}

// Words longer than this many bytes are not cached: they are rare (long
// whitespace runs, pasted blobs) and would crowd out the common ones.
// Unbroken scripts make long words — a Japanese clause is one pre-token —
// so the limit is generous, like Hugging Face's 256 characters.
const maxCachedWord = 512

// wordCacheBytes bounds the word cache: some 100k distinct words.
const wordCacheBytes = 4 << 20

// encodeWord appends the ids of one pre-token (raw bytes, non-empty) and
// adds its work to *ops: the bytes it hashes or looks up, and the merge
// queue's operations when it merges.
func (m *bpe) encodeWord(dst []uint32, w string, front *wordFront, ops *int) []uint32 {
	*ops += len(w)
	if len(w) == 1 && m.byteID[w[0]] != noToken {
		return append(dst, m.byteID[w[0]])
	}
	if m.ignoreMerges {
		if id, ok := m.vocab.get(w); ok {
			return append(dst, id)
		}
	}
	if len(w) > maxCachedWord {
		return m.mergeWord(dst, w, ops)
	}
	h := m.cache.hash(w)
	if out, ok := front.appendGet(dst, h, w); ok {
		return out
	}
	start := len(dst)
	if out, ok := m.cache.appendGetHash(dst, h, w); ok {
		front.put(h, w, out[start:])
		return out
	}
	dst = m.mergeWord(dst, w, ops)
	m.cache.putHash(h, w, dst[start:])
	front.put(h, w, dst[start:])
	return dst
}

// front lends out a wordFront for one encoding; give it back with
// release.
func (m *bpe) front() *wordFront {
	if f, ok := m.fronts.Get().(*wordFront); ok {
		return f
	}
	return newWordFront()
}

func (m *bpe) release(f *wordFront) { m.fronts.Put(f) }

type symbol struct {
	id         uint32
	prev, next int32 // -1 at the ends
	gone       bool  // merged into its left neighbour
}

// candidate is a queued merge of the symbol at pos with its right
// neighbour; pair is their tokens' pairKey then. Four fields, not five: Go
// keeps a struct of up to four in registers, and the heap's swaps ran
// five times slower through memory.
type candidate struct {
	rank, id uint32
	pos      int32
	pair     uint64
}

// candidates is a binary min-heap of merge candidates: lowest rank first,
// then leftmost. Hand-written rather than container/heap, whose interface
// boxing would allocate on every push.
type candidates []candidate

func (c candidates) less(i, j int) bool {
	if c[i].rank != c[j].rank {
		return c[i].rank < c[j].rank
	}
	return c[i].pos < c[j].pos
}

func (c candidates) down(i int) {
	n := len(c)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && c.less(r, l) {
			m = r
		}
		if !c.less(m, i) {
			return
		}
		c[i], c[m] = c[m], c[i]
		i = m
	}
}

func (c candidates) heapify() {
	for i := len(c)/2 - 1; i >= 0; i-- {
		c.down(i)
	}
}

func (c *candidates) push(x candidate) {
	*c = append(*c, x)
	h := *c
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (c *candidates) pop() candidate {
	h := *c
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	*c = h[:last]
	c.down(0)
	return top
}

func (c *candidates) init(n int) *candidates {
	if cap(*c) < n {
		*c = make(candidates, 0, n)
	}
	*c = (*c)[:0]
	return c
}

type bpeWork struct {
	syms  []symbol
	queue candidates
}

// mergeWord runs BPE over the bytes of w: repeatedly merge the adjacent pair
// with the lowest rank, the leftmost first among equals — the order Hugging
// Face's implementation uses, which decides the result when merges overlap.
func (m *bpe) mergeWord(dst []uint32, w string, ops *int) []uint32 {
	if m.uni != nil {
		return m.uni.encode(dst, w, ops)
	}
	if m.wp != nil {
		return m.wp.encode(dst, w, ops)
	}
	work, _ := m.scratch.Get().(*bpeWork)
	if work == nil {
		work = &bpeWork{}
	}
	defer m.scratch.Put(work)

	n := len(w)
	if cap(work.syms) < n {
		work.syms = make([]symbol, n)
	}
	syms := work.syms[:n]
	if m.charLevel {
		syms = m.charSymbols(syms, w)
		if n = len(syms); n == 0 {
			return dst // unknown characters without an unknown token
		}
	} else {
		for i := 0; i < n; i++ {
			syms[i] = symbol{id: m.byteID[w[i]], prev: int32(i - 1), next: int32(i + 1)}
		}
	}
	syms[n-1].next = -1

	q := work.queue.init(n)
	for i := 0; i+1 < n; i++ {
		if mg, ok := m.lookup(syms[i].id, syms[i+1].id); ok {
			*q = append(*q, candidate{rank: mg.rank, id: mg.id, pos: int32(i), pair: pairKey(syms[i].id, syms[i+1].id)})
		}
	}
	q.heapify()
	*ops += n + len(*q)
	for len(*q) > 0 {
		*ops++
		c := q.pop()
		left := &syms[c.pos]
		if left.gone || left.next < 0 {
			continue
		}
		right := &syms[left.next]
		// Stale: one side has merged since this candidate was queued, and
		// the pair now there does not merge into the same token (Hugging
		// Face's test, so that the result is its own in any vocabulary).
		// A pair still the same needs no look-up to pass.
		if pairKey(left.id, right.id) != c.pair {
			if mg, ok := m.lookup(left.id, right.id); !ok || mg.id != c.id {
				continue
			}
		}
		left.id = c.id
		right.gone = true
		left.next = right.next
		if left.next >= 0 {
			syms[left.next].prev = c.pos
		}
		if left.prev >= 0 {
			prev := syms[left.prev].id
			if mg, ok := m.lookup(prev, left.id); ok {
				*ops++
				q.push(candidate{rank: mg.rank, id: mg.id, pos: left.prev, pair: pairKey(prev, left.id)})
			}
		}
		if left.next >= 0 {
			next := syms[left.next].id
			if mg, ok := m.lookup(left.id, next); ok {
				*ops++
				q.push(candidate{rank: mg.rank, id: mg.id, pos: c.pos, pair: pairKey(left.id, next)})
			}
		}
	}
	work.queue = *q
	for i := int32(0); i >= 0; i = syms[i].next {
		dst = append(dst, syms[i].id)
	}
	return dst
}
