// Package blockset is one worker's prefix cache as the kvtracker sees it:
// vLLM's KV events applied to a set of Switchyard block hashes.
//
// vLLM names blocks by its own hashes, which depend on a per-process seed;
// routers cannot compute them. So every stored block is re-keyed to
// kvblock.Of over its token ids, chained from its parent's Switchyard hash,
// and a map engine hash → Switchyard hash resolves later removals.
//
// Both maps are reference counted. vLLM can hold two copies of one block
// (two requests computed the same prefix at once) and reports each store
// and each eviction, so a block leaves the set only when its last copy
// goes. Distinct engine blocks can also share one Switchyard hash (extra
// keys such as a cache salt change vLLM's hash, not ours).
package blockset

import (
	"strconv"

	"github.com/switchyard-dev/switchyard/internal/kvblock"
	"github.com/switchyard-dev/switchyard/internal/vllm/kvevents"
)

// EventKind classifies decoded events for counting.
type EventKind int

// Event kinds.
const (
	EventStored EventKind = iota
	EventRemoved
	EventCleared
	EventUnknown
	NumEventKinds
)

var eventKindNames = [NumEventKinds]string{"BlockStored", "BlockRemoved", "AllBlocksCleared", "unknown"}

func (k EventKind) String() string { return eventKindNames[k] }

// SkipReason says why an event was not applied.
type SkipReason int

// Skip reasons.
const (
	// SkipMedium: blocks on a medium other than GPU (CPU or storage
	// offload tiers): a router cannot hit them.
	SkipMedium SkipReason = iota
	// SkipSlidingWindow: a KV cache group that is not full attention
	// (sliding window, chunked local, mamba): its blocks do not make a
	// prefix reusable.
	SkipSlidingWindow
	// SkipUnknownTag: an event type this tracker does not know.
	SkipUnknownTag
	// SkipMalformed: token ids that do not fill the blocks reported.
	SkipMalformed
	// SkipBlockSize: an event whose block size differs from the worker's
	// configured one; routers hash with the configured size and could
	// never match these blocks.
	SkipBlockSize
	// SkipOrphan: a chain whose parent block is unknown, so its own hashes
	// cannot be computed. Normal right after joining a running worker;
	// otherwise a sign that events were missed.
	SkipOrphan
	NumSkipReasons
)

var skipReasonNames = [NumSkipReasons]string{"medium", "sliding_window", "unknown_tag", "malformed_event", "block_size_mismatch", "orphan"}

func (r SkipReason) String() string { return skipReasonNames[r] }

// Counts describes one batch.
type Counts struct {
	Events  [NumEventKinds]uint64
	Skipped [NumSkipReasons]uint64 // events
	// BlocksStored and BlocksRemoved count engine blocks applied.
	BlocksStored, BlocksRemoved uint64
	// OrphanBlocks counts the blocks of SkipOrphan events.
	OrphanBlocks uint64
	// UnknownRemoved counts removals of blocks the set never held
	// (skipped or stored before the tracker joined).
	UnknownRemoved uint64
}

type engineEntry struct {
	own  kvblock.Hash
	refs uint32
}

type ownEntry struct {
	refs uint32
	// idx is the position in the batch's stored list when the entry was
	// created in batch number batch; it lets a removal in the same batch
	// cancel the store instead of publishing both.
	idx   int32
	batch uint64
}

// Set is one worker's cached blocks. It is not safe for concurrent use.
type Set struct {
	blockSize int
	engine    map[uint64]engineEntry
	own       map[kvblock.Hash]ownEntry

	batch     uint64
	stored    []uint64
	removed   []uint64
	cancelled bool
	cleared   bool
	counts    Counts

	// loraIDKey caches the extra key made for a lora_id without a name.
	loraID    int64
	loraIDKey string
}

// New returns an empty set for a worker whose blocks hold blockSize tokens.
func New(blockSize int) *Set {
	return &Set{
		blockSize: blockSize,
		engine:    make(map[uint64]engineEntry),
		own:       make(map[kvblock.Hash]ownEntry),
	}
}

// BlockSize is the configured block size.
func (s *Set) BlockSize() int { return s.blockSize }

// Len is the number of distinct Switchyard blocks held.
func (s *Set) Len() int { return len(s.own) }

// Reset empties the set, keeping its storage.
func (s *Set) Reset() {
	clear(s.engine)
	clear(s.own)
	s.stored = s.stored[:0]
	s.removed = s.removed[:0]
	s.cancelled = false
}

// AppendBlocks appends every held Switchyard hash to dst, in no order.
func (s *Set) AppendBlocks(dst []uint64) []uint64 {
	for h := range s.own {
		dst = append(dst, uint64(h))
	}
	return dst
}

// Contains reports whether the set holds h.
func (s *Set) Contains(h kvblock.Hash) bool {
	_, ok := s.own[h]
	return ok
}

// Begin starts a batch: the net change of the events applied until End.
func (s *Set) Begin() {
	s.batch++
	s.stored = s.stored[:0]
	s.removed = s.removed[:0]
	s.cancelled = false
	s.cleared = false
	s.counts = Counts{}
}

// End returns the batch's net change in the order a consumer applies it:
// if cleared, drop everything; then remove removed; then add stored. The
// slices are the Set's and valid until the next Begin.
func (s *Set) End() (stored, removed []uint64, cleared bool) {
	if s.cancelled {
		// A block stored and evicted within the batch was tombstoned in
		// place; keep only the stores that are still the live entry.
		n := 0
		for i, h := range s.stored {
			if o, ok := s.own[kvblock.Hash(h)]; ok && o.batch == s.batch && int(o.idx) == i {
				s.stored[n] = h
				n++
			}
		}
		s.stored = s.stored[:n]
	}
	return s.stored, s.removed, s.cleared
}

// Counts describes the batch since Begin.
func (s *Set) Counts() *Counts { return &s.counts }

// Apply applies one decoded event.
func (s *Set) Apply(ev kvevents.Event) {
	switch e := ev.(type) {
	case *kvevents.BlockStored:
		s.counts.Events[EventStored]++
		s.applyStored(e)
	case *kvevents.BlockRemoved:
		s.counts.Events[EventRemoved]++
		s.applyRemoved(e)
	case *kvevents.AllBlocksCleared:
		s.counts.Events[EventCleared]++
		s.Reset()
		s.cleared = true
	default:
		s.counts.Events[EventUnknown]++
		s.counts.Skipped[SkipUnknownTag]++
	}
}

func onGPU(medium *string) bool { return medium == nil || *medium == kvevents.MediumGPU }

// groupKey folds a KV cache group into an engine hash, so each group's
// blocks live in their own key space (vLLM reports stores and evictions
// per group, and hybrid models give one block hash to several groups).
func groupKey(h kvevents.EngineHash, group *int64) uint64 {
	if group == nil || *group == 0 {
		return uint64(h)
	}
	return uint64(h) ^ (uint64(*group) * 0x9e3779b97f4a7c15)
}

func (s *Set) applyStored(e *kvevents.BlockStored) {
	if !onGPU(e.Medium) {
		s.counts.Skipped[SkipMedium]++
		return
	}
	if e.KVCacheSpecSlidingWindow != nil || (e.KVCacheSpecKind != nil && *e.KVCacheSpecKind != "full_attention") {
		s.counts.Skipped[SkipSlidingWindow]++
		return
	}
	bs := e.BlockSize
	if bs <= 0 {
		bs = s.blockSize
	}
	if bs != s.blockSize {
		s.counts.Skipped[SkipBlockSize]++
		return
	}
	n := len(e.BlockHashes)
	if len(e.TokenIDs) != n*bs {
		s.counts.Skipped[SkipMalformed]++
		return
	}
	parent := kvblock.Root
	if p, ok := e.Parent(); ok {
		pe, found := s.engine[groupKey(p, e.GroupIdx)]
		if !found {
			s.counts.Skipped[SkipOrphan]++
			s.counts.OrphanBlocks += uint64(n)
			return
		}
		parent = pe.own
	}
	extra := s.extraKey(e)
	for i, h := range e.BlockHashes {
		own := kvblock.Of(parent, e.TokenIDs[i*bs:(i+1)*bs], extra)
		s.addEngine(groupKey(h, e.GroupIdx), own)
		parent = own
	}
	s.counts.BlocksStored += uint64(n)
}

// extraKey is the LoRA adapter's name. vLLM releases that sent only the
// deprecated lora_id get a key derived from the id: such blocks then match
// no request rather than wrongly matching the base model's.
func (s *Set) extraKey(e *kvevents.BlockStored) string {
	switch {
	case e.LoRAName != nil:
		return *e.LoRAName
	case e.LoRAID != nil && *e.LoRAID != 0:
		if *e.LoRAID != s.loraID || s.loraIDKey == "" {
			s.loraID, s.loraIDKey = *e.LoRAID, "lora_id:"+strconv.FormatInt(*e.LoRAID, 10)
		}
		return s.loraIDKey
	}
	return ""
}

func (s *Set) applyRemoved(e *kvevents.BlockRemoved) {
	if !onGPU(e.Medium) {
		s.counts.Skipped[SkipMedium]++
		return
	}
	for _, h := range e.BlockHashes {
		k := groupKey(h, e.GroupIdx)
		en, ok := s.engine[k]
		if !ok {
			s.counts.UnknownRemoved++
			continue
		}
		s.counts.BlocksRemoved++
		if en.refs > 1 {
			en.refs--
			s.engine[k] = en
			continue
		}
		delete(s.engine, k)
		s.dropOwn(en.own)
	}
}

func (s *Set) addEngine(k uint64, own kvblock.Hash) {
	if en, ok := s.engine[k]; ok {
		if en.own == own {
			en.refs++
			s.engine[k] = en
			return
		}
		// One engine hash for different content: a 64-bit collision of
		// vLLM's hash, or a store we missed. The newest report wins.
		s.dropOwn(en.own)
	}
	s.engine[k] = engineEntry{own: own, refs: 1}
	if o, ok := s.own[own]; ok {
		o.refs++
		s.own[own] = o
		return
	}
	s.own[own] = ownEntry{refs: 1, idx: int32(len(s.stored)), batch: s.batch}
	s.stored = append(s.stored, uint64(own))
}

func (s *Set) dropOwn(h kvblock.Hash) {
	o := s.own[h]
	if o.refs > 1 {
		o.refs--
		s.own[h] = o
		return
	}
	delete(s.own, h)
	if o.batch == s.batch && int(o.idx) < len(s.stored) && s.stored[o.idx] == uint64(h) {
		// Stored earlier in this batch: publishing it as both stored and
		// removed would leave it cached (consumers remove, then add).
		s.cancelled = true
		return
	}
	s.removed = append(s.removed, uint64(h))
}
