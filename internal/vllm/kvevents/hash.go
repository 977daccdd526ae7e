package kvevents

// EngineHashFromBytes folds a bytes block hash into an EngineHash: the bytes
// read as one big-endian unsigned integer, reduced modulo 2^64 (so the last
// eight bytes, zero-extended when shorter). That is exactly the int vLLM
// itself puts on the wire for the same block when
// VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES is set (maybe_convert_block_hash), so
// a worker keeps the same keys whichever form it sends. vLLM's byte hashes
// are cryptographic or xxhash digests, whose last eight bytes are as
// uniform as the whole.
func EngineHashFromBytes(b []byte) EngineHash {
	if len(b) > 8 {
		b = b[len(b)-8:]
	}
	var h uint64
	for _, c := range b {
		h = h<<8 | uint64(c)
	}
	return EngineHash(h)
}
