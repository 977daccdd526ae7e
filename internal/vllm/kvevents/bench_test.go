package kvevents

import (
	"math/rand/v2"
	"testing"
)

// benchBatch is one engine step as vLLM reports it: events BlockStored
// events, each committing blocks full blocks of blockSize tokens, with
// random 64-bit hashes and token ids from a 150k vocabulary.
func benchBatch(events, blocks, blockSize int, lora bool) Batch {
	rng := rand.New(rand.NewPCG(1, 2))
	b := Batch{TS: 1752154723.25, DataParallelRank: ptr[int64](0)}
	gpu := MediumGPU
	for i := 0; i < events; i++ {
		ev := &BlockStored{BlockSize: blockSize, Medium: &gpu}
		if i > 0 {
			ev.ParentBlockHash = ptr(EngineHash(rng.Uint64()))
		}
		for j := 0; j < blocks; j++ {
			ev.BlockHashes = append(ev.BlockHashes, EngineHash(rng.Uint64()))
		}
		for j := 0; j < blocks*blockSize; j++ {
			ev.TokenIDs = append(ev.TokenIDs, uint32(rng.IntN(150000)))
		}
		if lora {
			ev.LoRAName = ptr("adapter-a")
		}
		b.Events = append(b.Events, ev)
	}
	return b
}

func removedBatch(events, hashes int) Batch {
	rng := rand.New(rand.NewPCG(3, 4))
	b := Batch{TS: 1752154723.25, DataParallelRank: ptr[int64](0)}
	for i := 0; i < events; i++ {
		ev := &BlockRemoved{Medium: ptr(MediumGPU)}
		for j := 0; j < hashes; j++ {
			ev.BlockHashes = append(ev.BlockHashes, EngineHash(rng.Uint64()))
		}
		b.Events = append(b.Events, ev)
	}
	return b
}

// bytesHashBatch is benchBatch in map form with 32-byte sha256 hashes,
// vLLM's default; the encoder cannot produce those, so it is built by hand.
func bytesHashBatch(events, blocks, blockSize int) []byte {
	rng := rand.New(rand.NewPCG(5, 6))
	h := func(m mp) mp {
		var b [32]byte
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return m.bin8(b[:])
	}
	m := mp{}.fixarr(3).f64(1752154723.25)
	if events < 16 {
		m = m.fixarr(events)
	} else {
		m = m.arr16(events)
	}
	for i := 0; i < events; i++ {
		m = m.fixmap(8).k("type").fixstr("BlockStored").k("block_hashes")
		if blocks < 16 {
			m = m.fixarr(blocks)
		} else {
			m = m.arr16(blocks)
		}
		m = m.each(blocks, func(m mp, _ int) mp { return h(m) })
		m = h(m.k("parent_block_hash"))
		m = m.k("token_ids").arr16(blocks*blockSize).each(blocks*blockSize, func(m mp, _ int) mp { return m.u32(uint32(rng.IntN(150000)) | 1<<16) })
		m = m.k("block_size").posfix(blockSize).k("lora_id").nil_().k("medium").fixstr("GPU").k("lora_name").nil_()
	}
	return m.posfix(0)
}

// BenchmarkDecode reports block events/s (one per block hash) and batch
// events/s for the payload shapes vLLM sends.
func BenchmarkDecode(b *testing.B) {
	type bc struct {
		name    string
		payload []byte
		blocks  int
		events  int
	}
	enc := func(bt Batch, e Encoding) []byte {
		p, err := AppendEncode(nil, &bt, e)
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	cases := []bc{
		{"map/16x1block", enc(benchBatch(16, 1, 16, false), EncodingMap), 16, 16},
		{"array/16x1block", enc(benchBatch(16, 1, 16, false), EncodingArray), 16, 16},
		{"map/1x64blocks", enc(benchBatch(1, 64, 16, false), EncodingMap), 64, 1},
		{"array/1x64blocks", enc(benchBatch(1, 64, 16, false), EncodingArray), 64, 1},
		{"map-sha256/16x1block", bytesHashBatch(16, 1, 16), 16, 16},
		{"map-sha256/1x64blocks", bytesHashBatch(1, 64, 16), 64, 1},
		{"map/removed16x4", enc(removedBatch(16, 4), EncodingMap), 64, 16},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var d Decoder
			var out Batch
			b.SetBytes(int64(len(c.payload)))
			b.ReportAllocs()
			for b.Loop() {
				if err := d.Decode(c.payload, &out); err != nil {
					b.Fatal(err)
				}
			}
			sec := b.Elapsed().Seconds()
			b.ReportMetric(float64(c.blocks*b.N)/sec, "blocks/s")
			b.ReportMetric(float64(c.events*b.N)/sec, "events/s")
		})
	}
}

func BenchmarkEncode(b *testing.B) {
	for _, e := range []Encoding{EncodingMap, EncodingArray} {
		bt := benchBatch(16, 1, 16, false)
		b.Run(e.String()+"/16x1block", func(b *testing.B) {
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if buf, err = AppendEncode(buf[:0], &bt, e); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(16*b.N)/b.Elapsed().Seconds(), "blocks/s")
		})
	}
}
