package hf

import (
	"strings"
	"testing"
)

// TestWordHashUsesEveryByte: flipping any byte of a string of any length
// up to 40 changes its hash, and strings that differ only in length do
// not collide.
func TestWordHashUsesEveryByte(t *testing.T) {
	const seed = 12345
	base := strings.Repeat("abcdefghij", 4)
	seen := map[uint64]string{}
	for n := 0; n <= len(base); n++ {
		s := base[:n]
		h := wordHash(seed, s)
		if prev, ok := seen[h]; ok {
			t.Fatalf("%q and %q collide", s, prev)
		}
		seen[h] = s
		for i := range n {
			b := []byte(s)
			b[i] ^= 0x20
			if wordHash(seed, string(b)) == h {
				t.Fatalf("length %d: byte %d does not change the hash", n, i)
			}
		}
	}
	if wordHash(1, "word") == wordHash(2, "word") {
		t.Fatal("the seed does not change the hash")
	}
}

func TestIsASCII(t *testing.T) {
	for _, tt := range []struct {
		s    string
		want bool
	}{
		{"", true},
		{"plain ascii text, longer than eight bytes", true},
		{"café", false},
		{strings.Repeat("a", 16) + "\x80", false},
		{"\xff" + strings.Repeat("a", 16), false},
		{strings.Repeat("a", 7) + "é" + strings.Repeat("a", 9), false},
	} {
		if got := isASCII(tt.s); got != tt.want {
			t.Errorf("isASCII(%q) = %v", tt.s, got)
		}
	}
}
