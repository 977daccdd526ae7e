package kvblock

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// TextChain appends to dst the chained hashes of every full chunkBytes-long
// chunk of text, starting from parent. It keys the router's approximate
// index for models without a tokenizer: two prompts sharing a text prefix
// share the hashes of the chunks inside it, just as token blocks do. A
// trailing partial chunk is not hashed.
func TextChain(dst []Hash, parent Hash, text string, chunkBytes int) []Hash {
	if chunkBytes <= 0 {
		return dst
	}
	var d xxhash.Digest
	var p [8]byte
	for off := 0; off+chunkBytes <= len(text); off += chunkBytes {
		d.Reset()
		binary.LittleEndian.PutUint64(p[:], uint64(parent))
		_, _ = d.Write(p[:])
		_, _ = d.WriteString(text[off : off+chunkBytes])
		parent = Hash(d.Sum64())
		dst = append(dst, parent)
	}
	return dst
}
