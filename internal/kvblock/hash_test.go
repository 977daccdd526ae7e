package kvblock

import (
	"testing"
)

func seq(n int, start uint32) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = start + uint32(i)
	}
	return out
}

func TestChainIsPrefixStable(t *testing.T) {
	a := seq(64, 1)
	b := append(seq(48, 1), seq(16, 900)...) // same first 3 blocks, different 4th
	ha := Chain(nil, Root, a, 16, "")
	hb := Chain(nil, Root, b, 16, "")
	if len(ha) != 4 || len(hb) != 4 {
		t.Fatalf("lens %d %d", len(ha), len(hb))
	}
	for i := 0; i < 3; i++ {
		if ha[i] != hb[i] {
			t.Errorf("block %d differs for an equal prefix", i)
		}
	}
	if ha[3] == hb[3] {
		t.Error("different 4th block, same hash")
	}
	// Chaining: the same block content after a different parent differs.
	if Of(Root, a[16:32], "") == ha[1] {
		t.Error("hash ignores its parent")
	}
	// Incremental chaining equals one pass.
	inc := Chain(nil, Root, a[:32], 16, "")
	inc = Chain(inc, inc[len(inc)-1], a[32:], 16, "")
	for i := range ha {
		if inc[i] != ha[i] {
			t.Fatalf("incremental chain differs at %d", i)
		}
	}
}

func TestPartialBlocksAndExtraKeys(t *testing.T) {
	if got := Chain(nil, Root, seq(31, 1), 16, ""); len(got) != 1 {
		t.Errorf("31 tokens / 16 = %d blocks, want 1", len(got))
	}
	if got := Chain(nil, Root, seq(31, 1), 0, ""); len(got) != 0 {
		t.Errorf("block size 0 hashed %d blocks", len(got))
	}
	tok := seq(16, 5)
	if Of(Root, tok, "") == Of(Root, tok, "lora-a") || Of(Root, tok, "lora-a") == Of(Root, tok, "lora-b") {
		t.Error("extra key ignored")
	}
	// Blocks larger than the stack scratch buffer chain the same way.
	long := seq(1024, 9)
	if got := Chain(nil, Root, long, 512, "x"); len(got) != 2 || got[0] != Of(Root, long[:512], "x") || got[1] != Of(got[0], long[512:], "x") {
		t.Error("Chain with 512-token blocks disagrees with Of")
	}
	big := seq(1000, 3) // larger than the stack buffer
	if Of(Root, big, "") != Of(Root, append([]uint32(nil), big...), "") {
		t.Error("heap path not deterministic")
	}
}

func TestKnownValue(t *testing.T) {
	// Pinned so that a change to the function — which would silently make
	// routers and kvtrackers of different versions disagree — fails here.
	got := Chain(nil, Root, seq(32, 0), 16, "")
	want := []Hash{Of(Root, seq(16, 0), "")}
	want = append(want, Of(want[0], seq(16, 16), ""))
	if got[0] != want[0] || got[1] != want[1] {
		t.Fatal("Chain and Of disagree")
	}
	if got[1] != 0xbbb079d4e1a7aa70 {
		t.Errorf("chain of 0..31 = %#x: the block hash function changed; routers and kvtrackers of different versions would disagree", uint64(got[1]))
	}
	if h := Of(Root, seq(16, 0), "lora-a"); h != 0x23065df87594858a {
		t.Errorf("extra-key hash = %#x: the block hash function changed", uint64(h))
	}
}

func BenchmarkChain8k(b *testing.B) {
	toks := seq(8192, 7)
	dst := make([]Hash, 0, 512)
	b.SetBytes(int64(len(toks) * 4))
	for b.Loop() {
		dst = Chain(dst[:0], Root, toks, 16, "")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/512, "ns/block")
}
