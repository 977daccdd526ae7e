package kvevents

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// AppendEncode appends the msgpack payload of b to dst, byte for byte what
// vLLM's msgspec encoder produces for the structs of the selected encoding:
// smallest int forms, float64 ts, tag first in map form, fields equal to
// their default omitted (map form) or trailing ones omitted (array form),
// and fields without a default always written, as nil when unset.
//
// The batch is an array, [ts, events, data_parallel_rank], in both forms:
// vLLM's EventBatch is array_like whatever its events are (vLLM #42892
// made only the events maps). The decoder still reads a map batch.
//
// *Unknown events are written as their bare tag so that what the decoder
// produced can be re-encoded; their skipped fields are gone.
func AppendEncode(dst []byte, b *Batch, enc Encoding) ([]byte, error) {
	if !enc.valid() {
		return dst, fmt.Errorf("encode batch: invalid encoding %d", int(enc))
	}
	e := encoder{enc: enc, m: enc.Form() == EncodingMap}
	n := 2
	if b.DataParallelRank != nil {
		n = 3
	}
	dst = appendArrayHeader(dst, n)
	dst = appendFloat64(dst, b.TS)
	dst = appendArrayHeader(dst, len(b.Events))
	for i, ev := range b.Events {
		var err error
		dst, err = e.event(dst, ev)
		if err != nil {
			return dst, fmt.Errorf("encode events[%d]: %w", i, err)
		}
	}
	if b.DataParallelRank != nil {
		dst = appendInt(dst, *b.DataParallelRank)
	}
	return dst, nil
}

type encoder struct {
	enc Encoding
	m   bool // map form
}

func (e encoder) event(dst []byte, ev Event) ([]byte, error) {
	switch ev := ev.(type) {
	case *BlockStored:
		if ev == nil {
			return dst, fmt.Errorf("nil *BlockStored")
		}
		return e.blockStored(dst, ev)
	case *BlockRemoved:
		if ev == nil {
			return dst, fmt.Errorf("nil *BlockRemoved")
		}
		return e.blockRemoved(dst, ev)
	case *AllBlocksCleared:
		return e.header(dst, TagAllBlocksCleared, 0), nil
	case *Unknown:
		if ev == nil {
			return dst, fmt.Errorf("nil *Unknown")
		}
		return e.header(dst, ev.Name, 0), nil
	case nil:
		return dst, fmt.Errorf("nil event")
	default:
		return dst, fmt.Errorf("unsupported event type %T", ev)
	}
}

// header starts a tagged struct of n written fields: the tag is the first
// array element, or the first map entry under "type".
func (e encoder) header(dst []byte, tag string, n int) []byte {
	if e.m {
		dst = appendMapHeader(dst, n+1)
		dst = appendStr(dst, "type")
	} else {
		dst = appendArrayHeader(dst, n+1)
	}
	return appendStr(dst, tag)
}

// BlockStored fields in vLLM's declaration order. The first storedRequired
// have no default and are always written; the rest default to None.
var storedFields = [...]string{
	"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id",
	"medium", "lora_name",
	"extra_keys", "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window",
}

const (
	storedRequired = 7
	// Fields a layout has: the first release stopped after lora_id, the
	// next after medium.
	storedFieldsNoMedium   = 5
	storedFieldsNoLoRAName = 6
)

// written decides, per msgspec's omit_defaults, which of the first n
// fields go on the wire: in map form every defaulted field left at None is
// dropped; in array form only the trailing run of them is (positions must
// hold). isNil reports whether defaulted field i is None.
func (e encoder) written(n, required int, isNil func(i int) bool) (count, last int) {
	last = n
	for last > required && isNil(last-1) {
		last--
	}
	if !e.m {
		return last, last
	}
	count = last
	for i := required; i < last; i++ {
		if isNil(i) {
			count--
		}
	}
	return count, last
}

func (e encoder) blockStored(dst []byte, ev *BlockStored) ([]byte, error) {
	n := len(storedFields)
	switch {
	case e.enc&WithoutMedium != 0:
		n = storedFieldsNoMedium
	case e.enc&WithoutLoRAName != 0:
		n = storedFieldsNoLoRAName
	}
	isNil := func(i int) bool {
		switch i {
		case 7:
			return ev.ExtraKeys == nil
		case 8:
			return ev.GroupIdx == nil
		case 9:
			return ev.KVCacheSpecKind == nil
		case 10:
			return ev.KVCacheSpecSlidingWindow == nil
		}
		return false
	}
	count, last := e.written(n, min(n, storedRequired), isNil)
	dst = e.header(dst, TagBlockStored, count)
	for i := 0; i < last; i++ {
		if e.m {
			if i >= storedRequired && isNil(i) {
				continue
			}
			dst = appendStr(dst, storedFields[i])
		}
		switch i {
		case 0:
			dst = e.hashes(dst, ev.BlockHashes)
		case 1:
			if ev.ParentBlockHash == nil {
				dst = appendNil(dst)
			} else {
				dst = e.hash(dst, *ev.ParentBlockHash)
			}
		case 2:
			dst = appendArrayHeader(dst, len(ev.TokenIDs))
			for _, t := range ev.TokenIDs {
				dst = appendUint(dst, uint64(t))
			}
		case 3:
			dst = appendInt(dst, int64(ev.BlockSize))
		case 4:
			dst = appendOptInt(dst, ev.LoRAID)
		case 5:
			dst = appendOptStr(dst, ev.Medium)
		case 6:
			dst = appendOptStr(dst, ev.LoRAName)
		case 7:
			if ev.ExtraKeys == nil {
				dst = appendNil(dst)
				break
			}
			dst = appendArrayHeader(dst, len(ev.ExtraKeys))
			for j, v := range ev.ExtraKeys {
				var err error
				if dst, err = appendValue(dst, v, 0); err != nil {
					return dst, fmt.Errorf("extra_keys[%d]: %w", j, err)
				}
			}
		case 8:
			dst = appendOptInt(dst, ev.GroupIdx)
		case 9:
			dst = appendOptStr(dst, ev.KVCacheSpecKind)
		case 10:
			dst = appendOptInt(dst, ev.KVCacheSpecSlidingWindow)
		}
	}
	return dst, nil
}

// BlockRemoved fields: block_hashes and medium have no default, group_idx
// defaults to None. The first release had block_hashes only; group_idx
// came after lora_name.
func (e encoder) blockRemoved(dst []byte, ev *BlockRemoved) ([]byte, error) {
	n := 3
	switch {
	case e.enc&WithoutMedium != 0:
		n = 1
	case e.enc&WithoutLoRAName != 0:
		n = 2
	}
	isNil := func(int) bool { return ev.GroupIdx == nil }
	count, last := e.written(n, min(n, 2), isNil)
	dst = e.header(dst, TagBlockRemoved, count)
	if e.m {
		dst = appendStr(dst, "block_hashes")
	}
	dst = e.hashes(dst, ev.BlockHashes)
	if last > 1 {
		if e.m {
			dst = appendStr(dst, "medium")
		}
		dst = appendOptStr(dst, ev.Medium)
	}
	if last > 2 {
		if e.m {
			dst = appendStr(dst, "group_idx")
		}
		dst = appendOptInt(dst, ev.GroupIdx)
	}
	return dst, nil
}

func appendOptInt(dst []byte, p *int64) []byte {
	if p == nil {
		return appendNil(dst)
	}
	return appendInt(dst, *p)
}

func appendOptStr(dst []byte, p *string) []byte {
	if p == nil {
		return appendNil(dst)
	}
	return appendStr(dst, *p)
}

func (e encoder) hashes(dst []byte, hs []EngineHash) []byte {
	dst = appendArrayHeader(dst, len(hs))
	for _, h := range hs {
		dst = e.hash(dst, h)
	}
	return dst
}

func (e encoder) hash(dst []byte, h EngineHash) []byte {
	switch {
	case e.enc&WithSignedHashes != 0:
		return appendInt(dst, int64(h))
	case e.enc&WithByteHashes != 0:
		dst = append(dst, 0xc4, 8)
		return binary.BigEndian.AppendUint64(dst, uint64(h))
	default:
		return appendUint(dst, uint64(h))
	}
}

// appendValue writes an opaque extra_keys value as msgspec writes the
// Python value it stands for (tuple and list as array, dict as map).
// Map keys are sorted so the output is deterministic.
func appendValue(dst []byte, v any, depth int) ([]byte, error) {
	if depth > maxValueDepth {
		return dst, fmt.Errorf("value nested deeper than %d", maxValueDepth)
	}
	switch v := v.(type) {
	case nil:
		return appendNil(dst), nil
	case bool:
		if v {
			return append(dst, 0xc3), nil
		}
		return append(dst, 0xc2), nil
	case int:
		return appendInt(dst, int64(v)), nil
	case int8:
		return appendInt(dst, int64(v)), nil
	case int16:
		return appendInt(dst, int64(v)), nil
	case int32:
		return appendInt(dst, int64(v)), nil
	case int64:
		return appendInt(dst, v), nil
	case uint:
		return appendUint(dst, uint64(v)), nil
	case uint8:
		return appendUint(dst, uint64(v)), nil
	case uint16:
		return appendUint(dst, uint64(v)), nil
	case uint32:
		return appendUint(dst, uint64(v)), nil
	case uint64:
		return appendUint(dst, v), nil
	case float32:
		return appendFloat64(dst, float64(v)), nil
	case float64:
		return appendFloat64(dst, v), nil
	case string:
		return appendStr(dst, v), nil
	case []byte:
		return appendBin(dst, v), nil
	case []any:
		dst = appendArrayHeader(dst, len(v))
		for i, x := range v {
			var err error
			if dst, err = appendValue(dst, x, depth+1); err != nil {
				return dst, fmt.Errorf("[%d]: %w", i, err)
			}
		}
		return dst, nil
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = appendMapHeader(dst, len(v))
		for _, k := range keys {
			dst = appendStr(dst, k)
			var err error
			if dst, err = appendValue(dst, v[k], depth+1); err != nil {
				return dst, fmt.Errorf("[%q]: %w", k, err)
			}
		}
		return dst, nil
	default:
		return dst, fmt.Errorf("unsupported value type %T", v)
	}
}

func appendNil(dst []byte) []byte { return append(dst, 0xc0) }

func appendFloat64(dst []byte, f float64) []byte {
	dst = append(dst, 0xcb)
	return binary.BigEndian.AppendUint64(dst, math.Float64bits(f))
}

// appendUint writes a non-negative int in its smallest form, as msgspec
// does (positive values never use the signed forms).
func appendUint(dst []byte, u uint64) []byte {
	switch {
	case u < 1<<7:
		return append(dst, byte(u))
	case u < 1<<8:
		return append(dst, 0xcc, byte(u))
	case u < 1<<16:
		return binary.BigEndian.AppendUint16(append(dst, 0xcd), uint16(u))
	case u < 1<<32:
		return binary.BigEndian.AppendUint32(append(dst, 0xce), uint32(u))
	default:
		return binary.BigEndian.AppendUint64(append(dst, 0xcf), u)
	}
}

func appendInt(dst []byte, i int64) []byte {
	switch {
	case i >= 0:
		return appendUint(dst, uint64(i))
	case i >= -(1 << 5):
		return append(dst, byte(i))
	case i >= -(1 << 7):
		return append(dst, 0xd0, byte(i))
	case i >= -(1 << 15):
		return binary.BigEndian.AppendUint16(append(dst, 0xd1), uint16(i))
	case i >= -(1 << 31):
		return binary.BigEndian.AppendUint32(append(dst, 0xd2), uint32(i))
	default:
		return binary.BigEndian.AppendUint64(append(dst, 0xd3), uint64(i))
	}
}

func appendStr(dst []byte, s string) []byte {
	n := len(s)
	switch {
	case n < 32:
		dst = append(dst, 0xa0|byte(n))
	case n < 1<<8:
		dst = append(dst, 0xd9, byte(n))
	case n < 1<<16:
		dst = binary.BigEndian.AppendUint16(append(dst, 0xda), uint16(n))
	default:
		dst = binary.BigEndian.AppendUint32(append(dst, 0xdb), uint32(n))
	}
	return append(dst, s...)
}

func appendBin(dst []byte, b []byte) []byte {
	n := len(b)
	switch {
	case n < 1<<8:
		dst = append(dst, 0xc4, byte(n))
	case n < 1<<16:
		dst = binary.BigEndian.AppendUint16(append(dst, 0xc5), uint16(n))
	default:
		dst = binary.BigEndian.AppendUint32(append(dst, 0xc6), uint32(n))
	}
	return append(dst, b...)
}

func appendArrayHeader(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, 0x90|byte(n))
	case n < 1<<16:
		return binary.BigEndian.AppendUint16(append(dst, 0xdc), uint16(n))
	default:
		return binary.BigEndian.AppendUint32(append(dst, 0xdd), uint32(n))
	}
}

func appendMapHeader(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, 0x80|byte(n))
	case n < 1<<16:
		return binary.BigEndian.AppendUint16(append(dst, 0xde), uint16(n))
	default:
		return binary.BigEndian.AppendUint32(append(dst, 0xdf), uint32(n))
	}
}
