// Package kvblock is Switchyard's own identity for KV cache blocks: a chained
// 64-bit hash over a block's token ids, shared by the kvtracker (which
// re-keys every block a vLLM worker reports) and the router (which hashes a
// request's prompt the same way). vLLM's own block hashes depend on its hash
// algorithm and a per-process seed, so they are never reproduced; both sides
// compute this one function instead.
package kvblock

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// Hash identifies a block together with everything before it: equal hashes
// mean equal token prefixes (up to 64-bit collisions).
type Hash uint64

// Root is the parent of a prompt's first block. It is not 0 so that a
// missing parent can never be confused with a real one.
const Root Hash = 0x5357_5941_5244_0001 // "SWYARD" 1

// maxStackTokens is the largest block hashed without a heap buffer.
const maxStackTokens = 256

// Of returns the hash of one block of tokens after parent. extra carries
// whatever else changes the KV values of identical tokens (a LoRA adapter's
// name, a cache salt); "" for none.
func Of(parent Hash, tokens []uint32, extra string) Hash {
	var stack [8 + 4*maxStackTokens]byte
	return of(stack[:0], parent, tokens, extra)
}

// of hashes one block using buf's capacity as scratch space.
func of(buf []byte, parent Hash, tokens []uint32, extra string) Hash {
	n := 8 + 4*len(tokens)
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	binary.LittleEndian.PutUint64(buf, uint64(parent))
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(buf[8+4*i:], t)
	}
	if extra == "" {
		return Hash(xxhash.Sum64(buf))
	}
	d := xxhash.New()
	_, _ = d.Write(buf)
	_, _ = d.Write([]byte{0})
	_, _ = d.WriteString(extra)
	return Hash(d.Sum64())
}

// Chain appends to dst the hashes of every full block of tokens, in order,
// starting from parent (Root for a whole prompt). A trailing partial block
// is not hashed: vLLM only caches full blocks.
func Chain(dst []Hash, parent Hash, tokens []uint32, blockSize int, extra string) []Hash {
	if blockSize <= 0 {
		return dst
	}
	// One scratch buffer for the whole chain: zeroing a fresh one per block
	// cost as much as hashing it.
	var stack [8 + 4*maxStackTokens]byte
	buf := stack[:0]
	if n := 8 + 4*blockSize; n > cap(buf) {
		buf = make([]byte, 0, n)
	}
	for off := 0; off+blockSize <= len(tokens); off += blockSize {
		parent = of(buf, parent, tokens[off:off+blockSize], extra)
		dst = append(dst, parent)
	}
	return dst
}
