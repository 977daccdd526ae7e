// Package kvevents is vLLM's KV cache event wire format: the batches a vLLM
// engine publishes over ZMQ when prefix-cache blocks are stored or evicted.
//
// A ZMQ message has three frames: topic, an 8-byte big-endian sequence
// number, and a msgpack payload. The payload is an EventBatch. vLLM has
// shipped two encodings of it:
//
//   - Array: msgspec array_like structs. Batch = [ts, [events...], dp_rank];
//     an event is [tag, field1, field2, ...] with trailing defaulted fields
//     omitted, tag being the class name ("BlockStored", ...).
//   - Map: msgspec structs encoded as maps. Batch = {"ts":..., "events":[...],
//     "data_parallel_rank":...}; an event is {"type": tag, field: value, ...}
//     with fields equal to their default omitted.
//
// Block hashes have been sent as int64, uint64 and bytes across vLLM
// versions; EngineHash folds all of them into one 64-bit key.
package kvevents

// EngineHash is a vLLM engine's own block hash. It depends on vLLM's hash
// algorithm and a per-process seed, so Switchyard only uses it as a key to
// resolve BlockRemoved events; routing uses its own hash over token ids.
type EngineHash uint64

// Encoding selects which of vLLM's payload encodings is produced.
type Encoding int

const (
	// EncodingArray is the older array_like encoding.
	EncodingArray Encoding = iota
	// EncodingMap is the newer map encoding with a "type" tag.
	EncodingMap
)

func (e Encoding) String() string {
	switch e {
	case EncodingArray:
		return "array"
	case EncodingMap:
		return "map"
	}
	return "unknown"
}

// Event tags as vLLM writes them.
const (
	TagBlockStored      = "BlockStored"
	TagBlockRemoved     = "BlockRemoved"
	TagAllBlocksCleared = "AllBlocksCleared"
)

// MediumGPU is the medium vLLM reports for GPU-resident blocks. Other media
// (CPU, storage offload tiers) describe blocks the router cannot hit.
const MediumGPU = "GPU"

// Event is one of *BlockStored, *BlockRemoved, *AllBlocksCleared.
type Event interface {
	Tag() string
}

// BlockStored reports full blocks newly committed to the prefix cache, in
// chain order. TokenIDs holds len(BlockHashes)*BlockSize tokens.
type BlockStored struct {
	BlockHashes     []EngineHash
	ParentBlockHash *EngineHash // nil for a chain that starts at the root
	TokenIDs        []uint32
	BlockSize       int
	LoRAID          *int64 // deprecated by vLLM in favour of LoRAName
	Medium          *string
	LoRAName        *string
	// ExtraKeys, one entry per block, as vLLM sent them (multimodal ids,
	// cache salt...). Kept opaque.
	ExtraKeys                []any
	GroupIdx                 *int64
	KVCacheSpecKind          *string
	KVCacheSpecSlidingWindow *int64
}

// Tag implements Event.
func (*BlockStored) Tag() string { return TagBlockStored }

// BlockRemoved reports blocks evicted from the cache.
type BlockRemoved struct {
	BlockHashes []EngineHash
	Medium      *string
	GroupIdx    *int64
}

// Tag implements Event.
func (*BlockRemoved) Tag() string { return TagBlockRemoved }

// AllBlocksCleared reports that the engine reset its prefix cache.
type AllBlocksCleared struct{}

// Tag implements Event.
func (*AllBlocksCleared) Tag() string { return TagAllBlocksCleared }

// Batch is one published message: the events of one engine step.
type Batch struct {
	// TS is the engine's wall clock, seconds since the Unix epoch.
	TS     float64
	Events []Event
	// DataParallelRank is nil when the publisher did not set it.
	DataParallelRank *int64
}

// Message is a batch with its transport envelope.
type Message struct {
	Topic string
	Seq   uint64
	Batch Batch
}

// EndOfReplaySeq is the sequence value (-1 as signed 64-bit) a replay
// server sends, with an empty payload, after the last buffered batch.
const EndOfReplaySeq = ^uint64(0)
