package kvevents

import (
	"errors"
	"strings"
	"testing"
)

func TestDecodeErrors(t *testing.T) {
	stored := func(m mp, tokens func(mp) mp) mp {
		return tokens(m.fixmap(8).k("type").fixstr("BlockStored").k("block_hashes").fixarr(1).posfix(1).k("parent_block_hash").nil_().
			k("token_ids")).k("block_size").posfix(4).k("lora_id").nil_().k("medium").fixstr("GPU").k("lora_name").nil_()
	}
	cleared := func(m mp) mp { return m.fixarr(1).fixstr("AllBlocksCleared") }
	tests := []struct {
		name    string
		payload []byte
		want    string
	}{
		{"empty", nil, "want array or map, got end of input"},
		{"not a container", mp{}.posfix(5), "batch: want array or map, got int"},
		{"invalid byte", mp{}.raw(0xc1), "got invalid byte 0xc1"},
		{"trailing bytes", mp{}.fixarr(2).f64(1).fixarr(0).posfix(0), "1 trailing bytes after the batch"},
		{"short batch array", mp{}.fixarr(1).f64(1), "want at least 2 elements"},
		{"ts not a float", mp{}.fixarr(2).fixstr("x").fixarr(0), "ts at byte 1: want float, got str"},
		{"map batch without ts", mp{}.fixmap(1).k("events").fixarr(0), "missing required field ts"},
		{"map batch without events", mp{}.fixmap(1).k("ts").f64(1), "missing required field events"},
		{
			"token_ids of the wrong type",
			mp{}.fixarr(2).f64(1).fixarr(1).then(stored(nil, func(m mp) mp { return m.fixstr("oops") })),
			"events[0].token_ids at byte 73: want array, got str",
		},
		{
			"fourth event not a struct",
			mp{}.fixarr(2).f64(1).fixarr(4).then(cleared(nil)).then(cleared(nil)).then(cleared(nil)).posfix(5),
			"events[3] at byte ",
		},
		{
			"negative token id",
			mp{}.fixarr(2).f64(1).fixarr(1).then(stored(nil, func(m mp) mp { return m.fixarr(2).posfix(1).negfix(-1) })),
			"events[0].token_ids[1] at byte 75: token id -1 out of range",
		},
		{
			"token id above uint32",
			mp{}.fixarr(2).f64(1).fixarr(1).then(stored(nil, func(m mp) mp { return m.fixarr(1).u64(1 << 40) })),
			"events[0].token_ids[0]",
		},
		{
			"array length beyond the payload",
			mp{}.fixarr(2).f64(1).raw(0xdd, 0xff, 0xff, 0xff, 0xff),
			"events at byte 10: array of 4294967295 elements exceeds the 0 bytes left",
		},
		{
			"str length beyond the payload",
			mp{}.fixarr(2).f64(1).fixarr(1).fixarr(1).raw(0xdb, 0x7f, 0xff, 0xff, 0xff),
			"str of 2147483647 bytes exceeds",
		},
		{
			"block_size overflows int64",
			mp{}.fixarr(2).f64(1).fixarr(1).fixarr(5).fixstr("BlockStored").fixarr(0).nil_().fixarr(0).u64(1 << 63),
			"events[0].block_size",
		},
		{
			"missing token_ids",
			mp{}.fixarr(2).f64(1).fixarr(1).fixmap(3).k("type").fixstr("BlockStored").k("block_hashes").fixarr(0).k("block_size").posfix(4),
			"BlockStored: missing required field token_ids",
		},
		{
			"array BlockStored too short",
			mp{}.fixarr(2).f64(1).fixarr(1).fixarr(3).fixstr("BlockStored").fixarr(0).nil_(),
			"missing required field token_ids",
		},
		{
			"BlockRemoved without hashes",
			mp{}.fixarr(2).f64(1).fixarr(1).fixarr(1).fixstr("BlockRemoved"),
			"BlockRemoved: missing required field block_hashes",
		},
		{
			"event map without tag",
			mp{}.fixarr(2).f64(1).fixarr(1).fixmap(1).k("block_hashes").fixarr(0),
			`events[0] at byte 11: event map has no "type" tag`,
		},
		{
			"tag not a str",
			mp{}.fixarr(2).f64(1).fixarr(1).fixarr(1).posfix(5),
			"events[0][0] at byte 12: want str, got int",
		},
		{
			"empty event array",
			mp{}.fixarr(2).f64(1).fixarr(1).fixarr(0),
			"events[0] at byte 12: want a tagged array, got an empty one",
		},
		{
			"ext as a hash",
			mp{}.fixarr(2).f64(1).fixarr(1).fixarr(2).fixstr("BlockRemoved").fixarr(1).raw(0xd4, 1, 2),
			"events[0].block_hashes[0] at byte 26: want int or bytes block hash, got ext",
		},
		{
			"dp rank not an int",
			mp{}.fixarr(3).f64(1).fixarr(0).fixstr("0"),
			"data_parallel_rank at byte 11: want int, got str",
		},
		{
			"truncated float",
			mp{}.fixarr(2).raw(0xcb, 1, 2),
			"ts at byte 1: truncated input",
		},
		{
			"extra_keys nested too deep",
			mp{}.fixarr(2).f64(1).fixarr(1).fixarr(9).fixstr("BlockStored").fixarr(0).nil_().fixarr(0).posfix(4).nil_().nil_().nil_().
				fixarr(1).then(deepArray(40)),
			"value nested deeper than 32",
		},
		{
			"extra_keys map with a non-str key",
			mp{}.fixarr(2).f64(1).fixarr(1).fixarr(9).fixstr("BlockStored").fixarr(0).nil_().fixarr(0).posfix(4).nil_().nil_().nil_().
				fixarr(1).fixmap(1).posfix(1).nil_(),
			"events[0].extra_keys[0] at byte 33: want str map key, got int",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d Decoder
			var b Batch
			err := d.Decode(tt.payload, &b)
			if err == nil {
				t.Fatalf("want an error containing %q, got none", tt.want)
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("want a *DecodeError, got %T: %v", err, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
			if len(b.Events) != 0 || b.DataParallelRank != nil {
				t.Fatalf("a failed decode left a partial batch: %+v", b)
			}
		})
	}
}

func deepArray(depth int) mp {
	var m mp
	for i := 0; i < depth; i++ {
		m = m.fixarr(1)
	}
	return m.nil_()
}

// TestDecodeTruncated cuts every golden at every length: each cut must fail
// cleanly, never panic, never succeed.
func TestDecodeTruncated(t *testing.T) {
	for _, g := range goldens() {
		full := []byte(g.build())
		var d Decoder
		var b Batch
		for n := 0; n < len(full); n++ {
			if err := d.Decode(full[:n], &b); err == nil {
				t.Fatalf("%s cut to %d of %d bytes decoded without error", g.name, n, len(full))
			}
		}
	}
}

// TestDecodeRecyclesWithoutLeaking decodes batches of changing shape into
// one Batch with one Decoder: recycled events must not keep fields from the
// previous batch.
func TestDecodeRecyclesWithoutLeaking(t *testing.T) {
	var all, small, removed Batch
	for _, g := range goldens() {
		switch g.name {
		case "map_stored_all_fields":
			all = g.want
		case "map_stored_defaults_omitted":
			small = g.want
		case "map_block_removed":
			removed = g.want
		}
	}
	seq := []struct {
		b   Batch
		enc Encoding
	}{
		{all, EncodingMap}, {small, EncodingMap}, {all, EncodingArray}, {small, EncodingArray},
		{removed, EncodingMap}, {all, EncodingMap}, {removed, EncodingArray}, {small, EncodingMap},
	}
	var d Decoder
	var out Batch
	for i, s := range seq {
		p, err := AppendEncode(nil, &s.b, s.enc)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Decode(p, &out); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if diff := diffBatch(&s.b, &out); diff != "" {
			t.Fatalf("step %d (%s): %s", i, s.enc, diff)
		}
	}
}

// TestDecodeAllocations pins the hot path to zero allocations per batch
// once a Decoder has warmed up, for the payload shapes vLLM sends.
func TestDecodeAllocations(t *testing.T) {
	tests := []struct {
		name string
		enc  Encoding
		b    Batch
	}{
		{"map int hashes", EncodingMap, benchBatch(16, 1, 16, false)},
		{"array int hashes", EncodingArray, benchBatch(16, 1, 16, false)},
		{"map 64 blocks", EncodingMap, benchBatch(1, 64, 16, false)},
		{"map removed", EncodingMap, removedBatch(16, 4)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := AppendEncode(nil, &tt.b, tt.enc)
			if err != nil {
				t.Fatal(err)
			}
			var d Decoder
			var out Batch
			if err := d.Decode(p, &out); err != nil {
				t.Fatal(err)
			}
			allocs := testing.AllocsPerRun(100, func() {
				if err := d.Decode(p, &out); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Fatalf("Decode allocates %.1f times per batch once warm; want 0", allocs)
			}
		})
	}
	t.Run("bytes hashes", func(t *testing.T) {
		p := bytesHashBatch(16, 1, 16)
		var d Decoder
		var out Batch
		if err := d.Decode(p, &out); err != nil {
			t.Fatal(err)
		}
		if allocs := testing.AllocsPerRun(100, func() { _ = d.Decode(p, &out) }); allocs != 0 {
			t.Fatalf("Decode allocates %.1f times per batch once warm; want 0", allocs)
		}
	})
}

func TestParent(t *testing.T) {
	tests := []struct {
		name   string
		parent *EngineHash
		want   EngineHash
		ok     bool
	}{
		{"nil is the root", nil, 0, false},
		{"zero is the root", ptr[EngineHash](0), 0, false},
		{"a hash", ptr[EngineHash](42), 42, true},
		{"a high hash", ptr[EngineHash](1 << 63), 1 << 63, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, ok := (&BlockStored{ParentBlockHash: tt.parent}).Parent()
			if h != tt.want || ok != tt.ok {
				t.Fatalf("Parent() = %d, %v; want %d, %v", h, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestEngineHashFromBytes(t *testing.T) {
	sha := hashBytes(1, 32)
	tests := []struct {
		name string
		in   []byte
		want EngineHash
	}{
		{"empty", nil, 0},
		{"short is zero-extended", []byte{0x01, 0x02}, 0x0102},
		{"eight bytes big-endian", be8(0x0102030405060708), 0x0102030405060708},
		{"longer keeps the last eight", sha, EngineHash(uint64(sha[24])<<56 | uint64(sha[25])<<48 | uint64(sha[26])<<40 | uint64(sha[27])<<32 | uint64(sha[28])<<24 | uint64(sha[29])<<16 | uint64(sha[30])<<8 | uint64(sha[31]))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EngineHashFromBytes(tt.in); got != tt.want {
				t.Fatalf("EngineHashFromBytes(%x) = %#x, want %#x", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseEncoding(t *testing.T) {
	tests := []struct {
		in      string
		want    Encoding
		wantErr string
	}{
		{in: "array", want: EncodingArray},
		{in: "map", want: EncodingMap},
		{in: "map+byte-hashes", want: EncodingMap | WithByteHashes},
		{in: "array+signed-hashes+no-medium", want: EncodingArray | WithSignedHashes | WithoutMedium},
		{in: "array+no-lora-name", want: EncodingArray | WithoutLoRAName},
		{in: "json", wantErr: "want array or map"},
		{in: "map+zstd", wantErr: `unknown modifier "zstd"`},
		{in: "map+signed-hashes+byte-hashes", wantErr: "exclude each other"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseEncoding(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseEncoding(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseEncoding(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
			if s := got.String(); s != tt.in {
				t.Fatalf("String() = %q, want %q", s, tt.in)
			}
		})
	}
}

func TestEncodeErrors(t *testing.T) {
	type custom struct{}
	tests := []struct {
		name string
		b    Batch
		enc  Encoding
		want string
	}{
		{"nil event", Batch{Events: []Event{nil}}, EncodingMap, "events[0]: nil event"},
		{"nil BlockStored", Batch{Events: []Event{(*BlockStored)(nil)}}, EncodingMap, "nil *BlockStored"},
		{"unencodable extra key", Batch{Events: []Event{&BlockStored{ExtraKeys: []any{[]any{custom{}}}}}}, EncodingArray, "extra_keys[0]: [0]: unsupported value type"},
		{"conflicting hash forms", Batch{}, EncodingMap | WithSignedHashes | WithByteHashes, "invalid encoding"},
		{"unknown form", Batch{}, Encoding(7), "invalid encoding"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := AppendEncode(nil, &tt.b, tt.enc)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("AppendEncode error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
