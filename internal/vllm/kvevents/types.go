// Package kvevents is vLLM's KV cache event wire format: the batches a vLLM
// engine publishes over ZMQ when prefix-cache blocks are stored or evicted.
//
// A ZMQ message has three frames: topic, an 8-byte big-endian sequence
// number, and a msgpack payload. The payload is an EventBatch, always an
// array_like msgspec struct: [ts, [events...], data_parallel_rank], the
// rank omitted when None. vLLM has shipped two encodings of the events:
//
//   - Array (before vLLM #42892): an event is [tag, field1, field2, ...]
//     with trailing defaulted fields omitted, tag being the class name
//     ("BlockStored", ...).
//   - Map (vLLM #42892 on, which removed array_like from the event structs
//     only): an event is {"type": tag, field: value, ...} with fields equal
//     to their default omitted.
//
// The decoder also reads a batch encoded as a map ({"ts":..., "events":
// [...], "data_parallel_rank":...}), which the encoder never writes.
//
// Block hashes have been sent as int64, uint64 and bytes across vLLM
// versions; EngineHash folds all of them into one 64-bit key.
package kvevents

import (
	"fmt"
	"strings"
)

// EngineHash is a vLLM engine's own block hash. It depends on vLLM's hash
// algorithm and a per-process seed, so Switchyard only uses it as a key to
// resolve BlockRemoved events; routing uses its own hash over token ids.
// Int hashes map to their 64-bit two's complement (a negative int64 and the
// uint64 with the same bits are one key); bytes hashes are folded by
// EngineHashFromBytes.
type EngineHash uint64

// Encoding selects which of vLLM's payload encodings is produced: a form
// (EncodingArray or EncodingMap), optionally OR-ed with modifiers that
// reproduce what older vLLM releases put on the wire, byte for byte.
type Encoding int

const (
	// EncodingArray is the older encoding: array_like events.
	EncodingArray Encoding = iota
	// EncodingMap is the newer encoding: events as maps with a "type"
	// tag, in the array batch.
	EncodingMap
)

// Modifiers OR-ed into an Encoding. The decoder needs none of them: it
// accepts every variant whatever the modifiers.
const (
	// WithSignedHashes writes block hashes as signed 64-bit ints, as vLLM did
	// while its block hashes were Python hash() values (int64).
	WithSignedHashes Encoding = 1 << (8 + iota)
	// WithByteHashes writes block hashes as 8-byte big-endian bin, the bytes
	// form of vLLM's ExternalBlockHash.
	WithByteHashes
	// WithoutMedium is the first shipped layout: BlockStored without medium
	// and lora_name (6 array elements), BlockRemoved without medium, and
	// none of the later defaulted fields.
	WithoutMedium
	// WithoutLoRAName is the layout with medium but before lora_name:
	// BlockStored has 7 array elements, BlockRemoved has medium.
	WithoutLoRAName
)

const (
	encodingFormMask = 0xff
	encodingFlagMask = WithSignedHashes | WithByteHashes | WithoutMedium | WithoutLoRAName
)

// Form is e without modifiers: EncodingArray or EncodingMap.
func (e Encoding) Form() Encoding { return e & encodingFormMask }

func (e Encoding) valid() bool {
	if e&^(encodingFormMask|encodingFlagMask) != 0 {
		return false
	}
	if f := e.Form(); f != EncodingArray && f != EncodingMap {
		return false
	}
	return e&WithSignedHashes == 0 || e&WithByteHashes == 0
}

var encodingFlagNames = [...]struct {
	flag Encoding
	name string
}{
	{WithSignedHashes, "signed-hashes"},
	{WithByteHashes, "byte-hashes"},
	{WithoutMedium, "no-medium"},
	{WithoutLoRAName, "no-lora-name"},
}

// String gives the form and the modifiers joined by "+", e.g.
// "array+no-medium"; ParseEncoding reads it back.
func (e Encoding) String() string {
	if !e.valid() {
		return "unknown"
	}
	s := "array"
	if e.Form() == EncodingMap {
		s = "map"
	}
	for _, f := range encodingFlagNames {
		if e&f.flag != 0 {
			s += "+" + f.name
		}
	}
	return s
}

// ParseEncoding reads what Encoding.String writes ("map", "array",
// "array+no-medium+signed-hashes", ...).
func ParseEncoding(s string) (Encoding, error) {
	parts := strings.Split(s, "+")
	var e Encoding
	switch parts[0] {
	case "array":
		e = EncodingArray
	case "map":
		e = EncodingMap
	default:
		return 0, fmt.Errorf("encoding %q: want array or map, optionally followed by +signed-hashes, +byte-hashes, +no-medium or +no-lora-name", s)
	}
next:
	for _, p := range parts[1:] {
		for _, f := range encodingFlagNames {
			if p == f.name {
				e |= f.flag
				continue next
			}
		}
		return 0, fmt.Errorf("encoding %q: unknown modifier %q", s, p)
	}
	if !e.valid() {
		return 0, fmt.Errorf("encoding %q: signed-hashes and byte-hashes exclude each other", s)
	}
	return e, nil
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

// Event is one of *BlockStored, *BlockRemoved, *AllBlocksCleared, or
// *Unknown for a tag this package does not know.
type Event interface {
	Tag() string
}

// BlockStored reports full blocks newly committed to the prefix cache, in
// chain order. TokenIDs holds len(BlockHashes)*BlockSize tokens.
type BlockStored struct {
	BlockHashes []EngineHash
	// ParentBlockHash is nil for a chain that starts at the root; vLLM
	// releases have also sent 0 for that, so use Parent to read it.
	ParentBlockHash *EngineHash
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

// Parent is the hash of the block this chain extends; ok is false when the
// chain starts at the root (parent nil or 0 on the wire).
func (e *BlockStored) Parent() (h EngineHash, ok bool) {
	if e.ParentBlockHash == nil || *e.ParentBlockHash == 0 {
		return 0, false
	}
	return *e.ParentBlockHash, true
}

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

// Unknown is an event whose tag this package does not know (a newer vLLM
// event type). Its fields are skipped; callers count and ignore it.
type Unknown struct {
	Name string
}

// Tag implements Event.
func (u *Unknown) Tag() string { return u.Name }

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
