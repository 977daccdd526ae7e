package kvevents

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.bin from the hand-built fixtures")

// The goldens in testdata/*.bin are written by this file (go test -run
// TestGolden -update), not by msgspec: Debian (bookworm) has no
// python3-msgspec package. They follow vLLM's documented structs and
// msgspec's encoding rules, spelled out byte form by byte form below.
//
// mp is a deliberately dumb msgpack writer for the fixtures. Every call
// names the exact wire form, picked by hand the way msgspec picks it
// (smallest int form, unsigned forms for non-negative ints, float64,
// fixstr/str8, fixarray/array16). It shares no code with the encoder, so
// the goldens check the encoder rather than mirror it.
type mp []byte

func (m mp) fixarr(n int) mp { return append(m, 0x90|byte(n)) }
func (m mp) arr16(n int) mp  { return binary.BigEndian.AppendUint16(append(m, 0xdc), uint16(n)) }
func (m mp) fixmap(n int) mp { return append(m, 0x80|byte(n)) }
func (m mp) fixstr(s string) mp {
	if len(s) > 31 {
		panic("fixstr too long")
	}
	return append(append(m, 0xa0|byte(len(s))), s...)
}
func (m mp) str8(s string) mp { return append(append(m, 0xd9, byte(len(s))), s...) }
func (m mp) bin8(b []byte) mp { return append(append(m, 0xc4, byte(len(b))), b...) }
func (m mp) nil_() mp         { return append(m, 0xc0) }
func (m mp) posfix(v int) mp  { return append(m, byte(v)) }
func (m mp) negfix(v int) mp  { return append(m, byte(int8(v))) }
func (m mp) u8(v uint8) mp    { return append(m, 0xcc, v) }
func (m mp) u16(v uint16) mp  { return binary.BigEndian.AppendUint16(append(m, 0xcd), v) }
func (m mp) u32(v uint32) mp  { return binary.BigEndian.AppendUint32(append(m, 0xce), v) }
func (m mp) u64(v uint64) mp  { return binary.BigEndian.AppendUint64(append(m, 0xcf), v) }
func (m mp) i8(v int8) mp     { return append(m, 0xd0, byte(v)) }
func (m mp) i16(v int16) mp   { return binary.BigEndian.AppendUint16(append(m, 0xd1), uint16(v)) }
func (m mp) i64(v int64) mp   { return binary.BigEndian.AppendUint64(append(m, 0xd3), uint64(v)) }
func (m mp) f64(v float64) mp {
	return binary.BigEndian.AppendUint64(append(m, 0xcb), math.Float64bits(v))
}
func (m mp) raw(b ...byte) mp { return append(m, b...) }
func (m mp) k(key string) mp  { return m.fixstr(key) } // map keys are short field names
func (m mp) then(o mp) mp     { return append(m, o...) }
func (m mp) each(n int, f func(m mp, i int) mp) mp {
	for i := 0; i < n; i++ {
		m = f(m, i)
	}
	return m
}

const goldenTS = 1752154723.5

func ptr[T any](v T) *T { return &v }

// tokens8 are two blocks of four tokens, in every int form a token id can
// take: positive fixint, uint8, uint16, uint32.
var tokens8 = []uint32{1, 2, 200, 300, 70000, 5, 65535, 151643}

func tokens8mp(m mp) mp {
	return m.fixarr(8).posfix(1).posfix(2).u8(200).u16(300).u32(70000).posfix(5).u16(65535).u32(151643)
}

var tokens4 = []uint32{7, 8, 9, 10}

func tokens4mp(m mp) mp { return m.fixarr(4).posfix(7).posfix(8).posfix(9).posfix(10) }

func hashBytes(seed byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i)*17
	}
	return b
}

type golden struct {
	name string
	doc  string
	// build writes the fixture by hand.
	build func() mp
	want  Batch
	// encodable: AppendEncode(want, enc) must reproduce the file.
	encodable bool
	enc       Encoding
}

func goldens() []golden {
	hb32 := hashBytes(3, 32)
	long := strings.Repeat("adapter-", 5) // 40 bytes: str8
	return []golden{
		{
			name: "array_stored6_no_dp",
			doc:  "first shipped layout: BlockStored of 6 elements (no medium), BlockRemoved of 2, batch [ts, events]; signed Python hash() ints",
			build: func() mp {
				return mp{}.fixarr(2).f64(goldenTS).fixarr(2).
					fixarr(6).fixstr("BlockStored").fixarr(2).negfix(-7).u64(1234567890123).nil_().then(tokens8mp(nil)).posfix(4).nil_().
					fixarr(2).fixstr("BlockRemoved").fixarr(1).i64(-6917529027641081856)
			},
			want: Batch{TS: goldenTS, Events: []Event{
				&BlockStored{BlockHashes: []EngineHash{EngineHash(negU(7)), 1234567890123}, TokenIDs: tokens8, BlockSize: 4},
				&BlockRemoved{BlockHashes: []EngineHash{EngineHash(negU(6917529027641081856))}},
			}},
			encodable: true, enc: EncodingArray | WithoutMedium | WithSignedHashes,
		},
		{
			name: "array_stored7_medium",
			doc:  "layout with medium, before lora_name: BlockStored of 7 elements, BlockRemoved of 3; dp rank 0",
			build: func() mp {
				return mp{}.fixarr(3).f64(goldenTS).fixarr(2).
					fixarr(7).fixstr("BlockStored").fixarr(1).posfix(42).u16(4242).then(tokens4mp(nil)).posfix(4).posfix(5).fixstr("GPU").
					fixarr(3).fixstr("BlockRemoved").fixarr(1).posfix(41).fixstr("GPU").
					posfix(0)
			},
			want: Batch{TS: goldenTS, DataParallelRank: ptr[int64](0), Events: []Event{
				&BlockStored{BlockHashes: []EngineHash{42}, ParentBlockHash: ptr[EngineHash](4242), TokenIDs: tokens4, BlockSize: 4, LoRAID: ptr[int64](5), Medium: ptr("GPU")},
				&BlockRemoved{BlockHashes: []EngineHash{41}, Medium: ptr("GPU")},
			}},
			encodable: true, enc: EncodingArray | WithoutLoRAName,
		},
		{
			name: "array_stored8",
			doc:  "current struct in array form, defaulted fields all None: 8 elements; parent nil",
			build: func() mp {
				return mp{}.fixarr(3).f64(goldenTS).fixarr(1).
					fixarr(8).fixstr("BlockStored").fixarr(2).posfix(1).posfix(2).nil_().then(tokens8mp(nil)).posfix(4).nil_().fixstr("GPU").nil_().
					posfix(1)
			},
			want: Batch{TS: goldenTS, DataParallelRank: ptr[int64](1), Events: []Event{
				&BlockStored{BlockHashes: []EngineHash{1, 2}, TokenIDs: tokens8, BlockSize: 4, Medium: ptr("GPU")},
			}},
			encodable: true, enc: EncodingArray,
		},
		{
			name: "array_stored12",
			doc:  "every BlockStored field set: 12 elements",
			build: func() mp {
				return mp{}.fixarr(3).f64(goldenTS).fixarr(1).
					fixarr(12).fixstr("BlockStored").fixarr(2).u8(200).u32(1 << 31).u16(999).then(tokens8mp(nil)).posfix(4).posfix(3).fixstr("GPU").fixstr("adapter-a").
					fixarr(2).fixarr(2).fixstr("mm-hash").posfix(0).nil_().
					posfix(1).fixstr("sliding_window").u16(4096).
					posfix(0)
			},
			want: Batch{TS: goldenTS, DataParallelRank: ptr[int64](0), Events: []Event{
				&BlockStored{
					BlockHashes: []EngineHash{200, 1 << 31}, ParentBlockHash: ptr[EngineHash](999), TokenIDs: tokens8, BlockSize: 4,
					LoRAID: ptr[int64](3), Medium: ptr("GPU"), LoRAName: ptr("adapter-a"),
					ExtraKeys: []any{[]any{"mm-hash", int64(0)}, nil},
					GroupIdx:  ptr[int64](1), KVCacheSpecKind: ptr("sliding_window"), KVCacheSpecSlidingWindow: ptr[int64](4096),
				},
			}},
			encodable: true, enc: EncodingArray,
		},
		{
			name: "array_stored_middle_default",
			doc:  "array form keeps a None default in the middle (extra_keys) and drops only the trailing one",
			build: func() mp {
				return mp{}.fixarr(3).f64(goldenTS).fixarr(1).
					fixarr(11).fixstr("BlockStored").fixarr(1).posfix(9).nil_().then(tokens4mp(nil)).posfix(4).nil_().fixstr("GPU").nil_().
					nil_().posfix(0).fixstr("full_attention").
					posfix(0)
			},
			want: Batch{TS: goldenTS, DataParallelRank: ptr[int64](0), Events: []Event{
				&BlockStored{BlockHashes: []EngineHash{9}, TokenIDs: tokens4, BlockSize: 4, Medium: ptr("GPU"), GroupIdx: ptr[int64](0), KVCacheSpecKind: ptr("full_attention")},
			}},
			encodable: true, enc: EncodingArray,
		},
		{
			name: "map_stored_middle_default",
			doc:  "map form drops every None default, wherever it is",
			build: func() mp {
				return mp{}.fixarr(3).f64(goldenTS).fixarr(1).
					fixmap(10).k("type").fixstr("BlockStored").k("block_hashes").fixarr(1).posfix(9).k("parent_block_hash").nil_().
					k("token_ids").then(tokens4mp(nil)).k("block_size").posfix(4).k("lora_id").nil_().k("medium").fixstr("GPU").k("lora_name").nil_().
					k("group_idx").posfix(0).k("kv_cache_spec_kind").fixstr("full_attention").
					posfix(0)
			},
			want: Batch{TS: goldenTS, DataParallelRank: ptr[int64](0), Events: []Event{
				&BlockStored{BlockHashes: []EngineHash{9}, TokenIDs: tokens4, BlockSize: 4, Medium: ptr("GPU"), GroupIdx: ptr[int64](0), KVCacheSpecKind: ptr("full_attention")},
			}},
			encodable: true, enc: EncodingMap,
		},
		{
			name: "array_stored_trailing_unknown",
			doc:  "a newer vLLM's extra trailing elements are skipped",
			build: func() mp {
				return mp{}.fixarr(3).f64(goldenTS).fixarr(1).
					fixarr(14).fixstr("BlockStored").fixarr(1).posfix(1).nil_().then(tokens4mp(nil)).posfix(4).nil_().fixstr("GPU").nil_().
					nil_().nil_().nil_().nil_().posfix(7).fixmap(1).k("v").fixarr(2).posfix(1).fixstr("x").
					posfix(0)
			},
			want: Batch{TS: goldenTS, DataParallelRank: ptr[int64](0), Events: []Event{
				&BlockStored{BlockHashes: []EngineHash{1}, TokenIDs: tokens4, BlockSize: 4, Medium: ptr("GPU")},
			}},
		},
		{
			name: "map_stored_defaults_omitted",
			doc:  "current vLLM: map form, required None fields written, defaulted ones omitted; parent nil",
			build: func() mp {
				return mp{}.fixarr(3).f64(goldenTS).fixarr(1).
					fixmap(8).k("type").fixstr("BlockStored").k("block_hashes").fixarr(2).posfix(1).posfix(2).k("parent_block_hash").nil_().
					k("token_ids").then(tokens8mp(nil)).k("block_size").posfix(4).k("lora_id").nil_().k("medium").fixstr("GPU").k("lora_name").nil_().
					posfix(0)
			},
			want: Batch{TS: goldenTS, DataParallelRank: ptr[int64](0), Events: []Event{
				&BlockStored{BlockHashes: []EngineHash{1, 2}, TokenIDs: tokens8, BlockSize: 4, Medium: ptr("GPU")},
			}},
			encodable: true, enc: EncodingMap,
		},
		{
			name: "map_stored_all_fields",
			doc:  "map form with every field set; dp rank 2",
			build: func() mp {
				return mp{}.fixarr(3).f64(goldenTS).fixarr(1).
					fixmap(12).k("type").fixstr("BlockStored").k("block_hashes").fixarr(2).posfix(10).posfix(11).k("parent_block_hash").posfix(9).
					k("token_ids").then(tokens8mp(nil)).k("block_size").posfix(4).k("lora_id").posfix(3).k("medium").fixstr("GPU").k("lora_name").fixstr("adapter-a").
					k("extra_keys").fixarr(2).fixarr(1).fixstr("salt").fixarr(2).fixstr("mm").bin8([]byte{1, 2, 3}).
					k("group_idx").posfix(1).k("kv_cache_spec_kind").fixstr("sliding_window").k("kv_cache_spec_sliding_window").u16(1024).
					posfix(2)
			},
			want: Batch{TS: goldenTS, DataParallelRank: ptr[int64](2), Events: []Event{
				&BlockStored{
					BlockHashes: []EngineHash{10, 11}, ParentBlockHash: ptr[EngineHash](9), TokenIDs: tokens8, BlockSize: 4,
					LoRAID: ptr[int64](3), Medium: ptr("GPU"), LoRAName: ptr("adapter-a"),
					ExtraKeys: []any{[]any{"salt"}, []any{"mm", []byte{1, 2, 3}}},
					GroupIdx:  ptr[int64](1), KVCacheSpecKind: ptr("sliding_window"), KVCacheSpecSlidingWindow: ptr[int64](1024),
				},
			}},
			encodable: true, enc: EncodingMap,
		},
		{
			name: "map_hash_int64_negative",
			doc:  "negative int64 hashes in every signed form",
			build: func() mp {
				return mp{}.fixarr(2).f64(goldenTS).fixarr(1).
					fixmap(8).k("type").fixstr("BlockStored").k("block_hashes").fixarr(5).negfix(-5).i8(-100).i16(-200).i64(-6917529027641081856).u32(100000).
					k("parent_block_hash").negfix(-1).
					k("token_ids").fixarr(0).k("block_size").posfix(0).k("lora_id").nil_().k("medium").fixstr("GPU").k("lora_name").nil_()
			},
			want: Batch{TS: goldenTS, Events: []Event{
				&BlockStored{
					BlockHashes:     []EngineHash{EngineHash(negU(5)), EngineHash(negU(100)), EngineHash(negU(200)), EngineHash(negU(6917529027641081856)), 100000},
					ParentBlockHash: ptr(EngineHash(math.MaxUint64)), TokenIDs: []uint32{}, Medium: ptr("GPU"),
				},
			}},
			encodable: true, enc: EncodingMap | WithSignedHashes,
		},
		{
			name: "map_hash_uint64_large",
			doc:  "hashes above 2^63 as uint64",
			build: func() mp {
				return mp{}.fixarr(2).f64(goldenTS).fixarr(1).
					fixmap(8).k("type").fixstr("BlockStored").k("block_hashes").fixarr(2).u64(0xfedcba9876543210).u64(1 << 63).
					k("parent_block_hash").u64(1<<63 + 1).
					k("token_ids").then(tokens8mp(nil)).k("block_size").posfix(4).k("lora_id").nil_().k("medium").fixstr("GPU").k("lora_name").nil_()
			},
			want: Batch{TS: goldenTS, Events: []Event{
				&BlockStored{BlockHashes: []EngineHash{0xfedcba9876543210, 1 << 63}, ParentBlockHash: ptr[EngineHash](1<<63 + 1), TokenIDs: tokens8, BlockSize: 4, Medium: ptr("GPU")},
			}},
			encodable: true, enc: EncodingMap,
		},
		{
			name: "map_hash_bytes8",
			doc:  "bytes hashes of 8 bytes: read big-endian as is",
			build: func() mp {
				return mp{}.fixarr(2).f64(goldenTS).fixarr(2).
					fixmap(8).k("type").fixstr("BlockStored").k("block_hashes").fixarr(2).bin8(be8(0x0102030405060708)).bin8(be8(0xfffefdfcfbfaf9f8)).
					k("parent_block_hash").bin8(be8(77)).
					k("token_ids").then(tokens8mp(nil)).k("block_size").posfix(4).k("lora_id").nil_().k("medium").fixstr("GPU").k("lora_name").nil_().
					fixmap(3).k("type").fixstr("BlockRemoved").k("block_hashes").fixarr(1).bin8(be8(0x0102030405060708)).k("medium").fixstr("GPU")
			},
			want: Batch{TS: goldenTS, Events: []Event{
				&BlockStored{BlockHashes: []EngineHash{0x0102030405060708, 0xfffefdfcfbfaf9f8}, ParentBlockHash: ptr[EngineHash](77), TokenIDs: tokens8, BlockSize: 4, Medium: ptr("GPU")},
				&BlockRemoved{BlockHashes: []EngineHash{0x0102030405060708}, Medium: ptr("GPU")},
			}},
			encodable: true, enc: EncodingMap | WithByteHashes,
		},
		{
			name: "map_hash_bytes32",
			doc:  "sha256 bytes hashes (vLLM's default), a short bytes hash and a str hash, folded by EngineHashFromBytes",
			build: func() mp {
				return mp{}.fixarr(2).f64(goldenTS).fixarr(1).
					fixmap(8).k("type").fixstr("BlockStored").k("block_hashes").fixarr(3).bin8(hb32).bin8([]byte{1, 2}).fixstr("abc").
					k("parent_block_hash").bin8(hashBytes(9, 32)).
					k("token_ids").fixarr(0).k("block_size").posfix(0).k("lora_id").nil_().k("medium").fixstr("GPU").k("lora_name").nil_()
			},
			want: Batch{TS: goldenTS, Events: []Event{
				&BlockStored{
					BlockHashes:     []EngineHash{EngineHash(binary.BigEndian.Uint64(hb32[24:])), 0x0102, 0x616263},
					ParentBlockHash: ptr(EngineHash(binary.BigEndian.Uint64(hashBytes(9, 32)[24:]))), TokenIDs: []uint32{}, Medium: ptr("GPU"),
				},
			}},
		},
		{
			name: "map_parent_zero",
			doc:  "parent_block_hash 0, which some releases sent for a root chain",
			build: func() mp {
				return mp{}.fixarr(3).f64(goldenTS).fixarr(1).
					fixmap(8).k("type").fixstr("BlockStored").k("block_hashes").fixarr(1).posfix(5).k("parent_block_hash").posfix(0).
					k("token_ids").then(tokens4mp(nil)).k("block_size").posfix(4).k("lora_id").nil_().k("medium").fixstr("GPU").k("lora_name").nil_().
					posfix(0)
			},
			want: Batch{TS: goldenTS, DataParallelRank: ptr[int64](0), Events: []Event{
				&BlockStored{BlockHashes: []EngineHash{5}, ParentBlockHash: ptr[EngineHash](0), TokenIDs: tokens4, BlockSize: 4, Medium: ptr("GPU")},
			}},
			encodable: true, enc: EncodingMap,
		},
		{
			name: "map_block_removed",
			doc:  "BlockRemoved with and without group_idx; dp rank absent",
			build: func() mp {
				return mp{}.fixarr(2).f64(goldenTS).fixarr(2).
					fixmap(3).k("type").fixstr("BlockRemoved").k("block_hashes").fixarr(2).posfix(1).posfix(2).k("medium").fixstr("GPU").
					fixmap(4).k("type").fixstr("BlockRemoved").k("block_hashes").fixarr(1).u16(300).k("medium").fixstr("CPU").k("group_idx").posfix(1)
			},
			want: Batch{TS: goldenTS, Events: []Event{
				&BlockRemoved{BlockHashes: []EngineHash{1, 2}, Medium: ptr("GPU")},
				&BlockRemoved{BlockHashes: []EngineHash{300}, Medium: ptr("CPU"), GroupIdx: ptr[int64](1)},
			}},
			encodable: true, enc: EncodingMap,
		},
		{
			name: "array_block_removed",
			doc:  "BlockRemoved in array form: [tag, hashes, medium] and with group_idx",
			build: func() mp {
				return mp{}.fixarr(3).f64(goldenTS).fixarr(2).
					fixarr(3).fixstr("BlockRemoved").fixarr(2).posfix(1).posfix(2).fixstr("GPU").
					fixarr(4).fixstr("BlockRemoved").fixarr(1).u16(300).nil_().posfix(2).
					posfix(0)
			},
			want: Batch{TS: goldenTS, DataParallelRank: ptr[int64](0), Events: []Event{
				&BlockRemoved{BlockHashes: []EngineHash{1, 2}, Medium: ptr("GPU")},
				&BlockRemoved{BlockHashes: []EngineHash{300}, GroupIdx: ptr[int64](2)},
			}},
			encodable: true, enc: EncodingArray,
		},
		{
			name: "map_all_blocks_cleared",
			doc:  "AllBlocksCleared, map form, dp rank present",
			build: func() mp {
				return mp{}.fixarr(3).f64(goldenTS).fixarr(1).
					fixmap(1).k("type").fixstr("AllBlocksCleared").
					posfix(0)
			},
			want:      Batch{TS: goldenTS, DataParallelRank: ptr[int64](0), Events: []Event{&AllBlocksCleared{}}},
			encodable: true, enc: EncodingMap,
		},
		{
			name: "array_all_blocks_cleared",
			doc:  "AllBlocksCleared, array form, dp rank absent",
			build: func() mp {
				return mp{}.fixarr(2).f64(goldenTS).fixarr(1).fixarr(1).fixstr("AllBlocksCleared")
			},
			want:      Batch{TS: goldenTS, Events: []Event{&AllBlocksCleared{}}},
			encodable: true, enc: EncodingArray,
		},
		{
			name: "map_large_forms",
			doc:  "array16 event list, array16 token list, str8 lora_name, uint32 block size",
			build: func() mp {
				m := mp{}.fixarr(3).f64(goldenTS).arr16(16)
				m = m.each(16, func(m mp, i int) mp {
					return m.fixmap(8).k("type").fixstr("BlockStored").k("block_hashes").fixarr(1).posfix(i).k("parent_block_hash").nil_().
						k("token_ids").arr16(16).each(16, func(m mp, j int) mp { return m.u16(uint16(1000 + j)) }).
						k("block_size").posfix(16).k("lora_id").nil_().k("medium").fixstr("GPU").k("lora_name").str8(long)
				})
				return m.u32(70000)
			},
			want: func() Batch {
				b := Batch{TS: goldenTS, DataParallelRank: ptr[int64](70000)}
				toks := make([]uint32, 16)
				for j := range toks {
					toks[j] = uint32(1000 + j)
				}
				for i := 0; i < 16; i++ {
					b.Events = append(b.Events, &BlockStored{BlockHashes: []EngineHash{EngineHash(i)}, TokenIDs: toks, BlockSize: 16, Medium: ptr("GPU"), LoRAName: ptr(long)})
				}
				return b
			}(),
			encodable: true, enc: EncodingMap,
		},
		{
			name: "map_unknown_keys_tag_last",
			doc:  "a map batch (no vLLM sends one; read anyway): unknown keys at batch and event level are skipped; the tag need not come first; events before ts",
			build: func() mp {
				return mp{}.fixmap(4).k("events").fixarr(1).
					fixmap(9).k("block_hashes").fixarr(1).posfix(3).k("future_field").fixmap(1).k("a").fixarr(2).nil_().f64(1.5).
					k("token_ids").then(tokens4mp(nil)).k("block_size").posfix(4).k("lora_id").nil_().k("medium").fixstr("GPU").
					k("lora_name").nil_().k("parent_block_hash").posfix(2).k("type").fixstr("BlockStored").
					k("producer").fixstr("vllm-next").k("ts").f64(goldenTS).k("data_parallel_rank").nil_()
			},
			want: Batch{TS: goldenTS, Events: []Event{
				&BlockStored{BlockHashes: []EngineHash{3}, ParentBlockHash: ptr[EngineHash](2), TokenIDs: tokens4, BlockSize: 4, Medium: ptr("GPU")},
			}},
		},
		{
			name: "array_batch_map_events",
			doc:  "vLLM's shape since #42892 at its smallest: array_like batch whose events are tagged maps",
			build: func() mp {
				return mp{}.fixarr(3).f64(goldenTS).fixarr(1).
					fixmap(8).k("type").fixstr("BlockStored").k("block_hashes").fixarr(1).posfix(1).k("parent_block_hash").nil_().
					k("token_ids").then(tokens4mp(nil)).k("block_size").posfix(4).k("lora_id").nil_().k("medium").fixstr("GPU").k("lora_name").nil_().
					posfix(0)
			},
			want: Batch{TS: goldenTS, DataParallelRank: ptr[int64](0), Events: []Event{
				&BlockStored{BlockHashes: []EngineHash{1}, TokenIDs: tokens4, BlockSize: 4, Medium: ptr("GPU")},
			}},
		},
		{
			// What vLLM (kv_events.py after #42892; e.g. 0.26) publishes for a
			// full-attention group: KVEventBatch keeps array_like, so the batch
			// is [ts, events, data_parallel_rank]; each event is a tagged map
			// (msgspec tag=True: "type" first), fields in declaration order,
			// and omit_defaults drops only the defaulted fields still None
			// (kv_cache_spec_sliding_window here). extra_keys holds one entry
			// per block: a tuple for a block with keys (the cache salt on the
			// first), None for one without.
			name: "map_vllm_group_spec",
			doc:  "vLLM's current wire: array batch, map events with extra_keys, group_idx and kv_cache_spec_kind",
			build: func() mp {
				return mp{}.fixarr(3).f64(goldenTS).fixarr(2).
					fixmap(11).k("type").fixstr("BlockStored").k("block_hashes").fixarr(2).u64(15760518052499183552).u64(2911784457389965703).
					k("parent_block_hash").nil_().k("token_ids").then(tokens8mp(nil)).k("block_size").posfix(4).
					k("lora_id").nil_().k("medium").fixstr("GPU").k("lora_name").nil_().
					k("extra_keys").fixarr(2).fixarr(1).fixstr("tenant-a").nil_().
					k("group_idx").posfix(0).k("kv_cache_spec_kind").fixstr("full_attention").
					fixmap(4).k("type").fixstr("BlockRemoved").k("block_hashes").fixarr(1).u64(2911784457389965703).
					k("medium").fixstr("GPU").k("group_idx").posfix(0).
					posfix(0)
			},
			want: Batch{TS: goldenTS, DataParallelRank: ptr[int64](0), Events: []Event{
				&BlockStored{
					BlockHashes: []EngineHash{15760518052499183552, 2911784457389965703}, TokenIDs: tokens8, BlockSize: 4, Medium: ptr("GPU"),
					ExtraKeys: []any{[]any{"tenant-a"}, nil}, GroupIdx: ptr[int64](0), KVCacheSpecKind: ptr("full_attention"),
				},
				&BlockRemoved{BlockHashes: []EngineHash{2911784457389965703}, Medium: ptr("GPU"), GroupIdx: ptr[int64](0)},
			}},
			encodable: true, enc: EncodingMap,
		},
		{
			name: "map_batch_lenient",
			doc:  "the batch as a map, as Switchyard's simulator once wrote it (no vLLM does): read all the same",
			build: func() mp {
				return mp{}.fixmap(3).k("ts").f64(goldenTS).k("events").fixarr(1).
					fixmap(8).k("type").fixstr("BlockStored").k("block_hashes").fixarr(1).posfix(1).k("parent_block_hash").nil_().
					k("token_ids").then(tokens4mp(nil)).k("block_size").posfix(4).k("lora_id").nil_().k("medium").fixstr("GPU").k("lora_name").nil_().
					k("data_parallel_rank").posfix(0)
			},
			want: Batch{TS: goldenTS, DataParallelRank: ptr[int64](0), Events: []Event{
				&BlockStored{BlockHashes: []EngineHash{1}, TokenIDs: tokens4, BlockSize: 4, Medium: ptr("GPU")},
			}},
		},
		{
			name: "map_unknown_tag",
			doc:  "an event type this package does not know decodes as *Unknown",
			build: func() mp {
				return mp{}.fixarr(2).f64(goldenTS).fixarr(2).
					fixmap(2).k("type").fixstr("BlockPinned").k("block_hashes").fixarr(1).posfix(1).
					fixmap(1).k("type").fixstr("AllBlocksCleared")
			},
			want: Batch{TS: goldenTS, Events: []Event{&Unknown{Name: "BlockPinned"}, &AllBlocksCleared{}}},
		},
		{
			name: "array_unknown_tag",
			doc:  "an unknown array-form event with fields",
			build: func() mp {
				return mp{}.fixarr(2).f64(goldenTS).fixarr(1).fixarr(3).fixstr("BlockMoved").fixarr(1).posfix(1).fixstr("CPU")
			},
			want: Batch{TS: goldenTS, Events: []Event{&Unknown{Name: "BlockMoved"}}},
		},
	}
}

func negU(v uint64) uint64 { return -v }

func be8(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func goldenPath(name string) string { return filepath.Join("testdata", name+".bin") }

func TestGolden(t *testing.T) {
	for _, g := range goldens() {
		t.Run(g.name, func(t *testing.T) {
			built := []byte(g.build())
			path := goldenPath(g.name)
			if *update {
				if err := os.WriteFile(path, built, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			file, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden (run with -update to create it): %v", err)
			}
			if !bytes.Equal(file, built) {
				t.Fatalf("%s differs from its hand-built fixture; run with -update if the change is intended", path)
			}

			var d Decoder
			var got Batch
			if err := d.Decode(file, &got); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if diff := diffBatch(&g.want, &got); diff != "" {
				t.Fatalf("decoded batch: %s", diff)
			}

			if g.encodable {
				enc, err := AppendEncode(nil, &g.want, g.enc)
				if err != nil {
					t.Fatalf("encode: %v", err)
				}
				if !bytes.Equal(enc, file) {
					t.Fatalf("encode %s:\n got  %x\n want %x", g.enc, enc, file)
				}
			}

			// Round trip through both current encodings.
			for _, e := range []Encoding{EncodingArray, EncodingMap} {
				p, err := AppendEncode(nil, &got, e)
				if err != nil {
					t.Fatalf("re-encode %s: %v", e, err)
				}
				var d2 Decoder
				var back Batch
				if err := d2.Decode(p, &back); err != nil {
					t.Fatalf("decode re-encoded %s: %v", e, err)
				}
				if diff := diffBatch(&got, &back); diff != "" {
					t.Fatalf("round trip %s: %s", e, diff)
				}
			}
		})
	}
}

// TestGoldenFilesAreListed keeps testdata free of fixtures no test reads.
func TestGoldenFilesAreListed(t *testing.T) {
	names := map[string]bool{}
	for _, g := range goldens() {
		names[g.name+".bin"] = true
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*.bin"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !names[filepath.Base(f)] {
			t.Errorf("%s is not produced by goldens()", f)
		}
	}
	if len(files) != len(names) {
		t.Errorf("%d golden files for %d fixtures", len(files), len(names))
	}
}

// diffBatch describes the first difference between two batches, "" when
// equal. Floats compare by bits (NaN equals itself); nil and empty hash and
// token lists compare equal (msgspec cannot tell them apart), but nil and
// empty ExtraKeys do not (None vs []).
func diffBatch(want, got *Batch) string {
	if math.Float64bits(want.TS) != math.Float64bits(got.TS) {
		return fmt.Sprintf("ts: want %v, got %v", want.TS, got.TS)
	}
	if d := diffPtr("data_parallel_rank", want.DataParallelRank, got.DataParallelRank); d != "" {
		return d
	}
	if len(want.Events) != len(got.Events) {
		return fmt.Sprintf("events: want %d, got %d", len(want.Events), len(got.Events))
	}
	for i := range want.Events {
		if d := diffEvent(want.Events[i], got.Events[i]); d != "" {
			return fmt.Sprintf("events[%d]: %s", i, d)
		}
	}
	return ""
}

func diffEvent(want, got Event) string {
	switch w := want.(type) {
	case *BlockStored:
		g, ok := got.(*BlockStored)
		if !ok {
			return fmt.Sprintf("want *BlockStored, got %T", got)
		}
		switch {
		case !equalSlices(w.BlockHashes, g.BlockHashes):
			return fmt.Sprintf("block_hashes: want %v, got %v", w.BlockHashes, g.BlockHashes)
		case !equalSlices(w.TokenIDs, g.TokenIDs):
			return fmt.Sprintf("token_ids: want %v, got %v", w.TokenIDs, g.TokenIDs)
		case w.BlockSize != g.BlockSize:
			return fmt.Sprintf("block_size: want %d, got %d", w.BlockSize, g.BlockSize)
		case (w.ExtraKeys == nil) != (g.ExtraKeys == nil) || !equalValue(w.ExtraKeys, g.ExtraKeys):
			return fmt.Sprintf("extra_keys: want %#v, got %#v", w.ExtraKeys, g.ExtraKeys)
		}
		for _, d := range []string{
			diffPtr("parent_block_hash", w.ParentBlockHash, g.ParentBlockHash),
			diffPtr("lora_id", w.LoRAID, g.LoRAID),
			diffPtr("medium", w.Medium, g.Medium),
			diffPtr("lora_name", w.LoRAName, g.LoRAName),
			diffPtr("group_idx", w.GroupIdx, g.GroupIdx),
			diffPtr("kv_cache_spec_kind", w.KVCacheSpecKind, g.KVCacheSpecKind),
			diffPtr("kv_cache_spec_sliding_window", w.KVCacheSpecSlidingWindow, g.KVCacheSpecSlidingWindow),
		} {
			if d != "" {
				return d
			}
		}
	case *BlockRemoved:
		g, ok := got.(*BlockRemoved)
		if !ok {
			return fmt.Sprintf("want *BlockRemoved, got %T", got)
		}
		if !equalSlices(w.BlockHashes, g.BlockHashes) {
			return fmt.Sprintf("block_hashes: want %v, got %v", w.BlockHashes, g.BlockHashes)
		}
		if d := diffPtr("medium", w.Medium, g.Medium); d != "" {
			return d
		}
		return diffPtr("group_idx", w.GroupIdx, g.GroupIdx)
	case *AllBlocksCleared:
		if _, ok := got.(*AllBlocksCleared); !ok {
			return fmt.Sprintf("want *AllBlocksCleared, got %T", got)
		}
	case *Unknown:
		g, ok := got.(*Unknown)
		if !ok {
			return fmt.Sprintf("want *Unknown, got %T", got)
		}
		if w.Name != g.Name {
			return fmt.Sprintf("unknown tag: want %q, got %q", w.Name, g.Name)
		}
	default:
		return fmt.Sprintf("unexpected want type %T", want)
	}
	return ""
}

func diffPtr[T comparable](name string, want, got *T) string {
	switch {
	case want == nil && got == nil:
		return ""
	case want == nil:
		return fmt.Sprintf("%s: want nil, got %v", name, *got)
	case got == nil:
		return fmt.Sprintf("%s: want %v, got nil", name, *want)
	case *want != *got:
		return fmt.Sprintf("%s: want %v, got %v", name, *want, *got)
	}
	return ""
}

func equalSlices[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func equalValue(a, b any) bool {
	switch a := a.(type) {
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !equalValue(a[i], b[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			w, ok := b[k]
			if !ok || !equalValue(v, w) {
				return false
			}
		}
		return true
	case []byte:
		b, ok := b.([]byte)
		return ok && bytes.Equal(a, b)
	case float64:
		b, ok := b.(float64)
		return ok && math.Float64bits(a) == math.Float64bits(b)
	}
	return a == b
}
