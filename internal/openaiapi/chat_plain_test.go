package openaiapi

import (
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// plainJSONStringBytewise is the definition plainJSONString implements.
func plainJSONStringBytewise(b []byte) (string, bool) {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return "", false
	}
	inner := b[1 : len(b)-1]
	for _, ch := range inner {
		if ch == '\\' || ch == '"' || ch < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(inner) {
		return "", false
	}
	return string(inner), true
}

// TestPlainJSONStringMatchesBytewise puts every kind of byte the word-wide
// check must catch at every position of strings around the 8-byte stride.
func TestPlainJSONStringMatchesBytewise(t *testing.T) {
	pieces := [][]byte{
		[]byte("a"), []byte(" "), []byte("~"), {0x7f}, []byte(`"`), []byte(`\`), {0x00}, {0x1f}, {0x20},
		[]byte("あ"), []byte("é"), {0x80}, {0xff}, {0xe3, 0x81}, []byte("!"), []byte("#"), []byte("["), []byte("]"),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	accepted := 0
	for n := range 40 {
		for range 300 {
			b := []byte{'"'}
			for range n {
				if rng.IntN(4) == 0 {
					b = append(b, pieces[rng.IntN(len(pieces))]...)
				} else {
					b = append(b, byte('a'+rng.IntN(26)))
				}
			}
			b = append(b, '"')
			got, gotOK := plainJSONString(b)
			want, wantOK := plainJSONStringBytewise(b)
			if got != want || gotOK != wantOK {
				t.Fatalf("plainJSONString(%q) = %q, %v; want %q, %v", b, got, gotOK, want, wantOK)
			}
			if gotOK {
				accepted++
			}
		}
	}
	if accepted == 0 {
		t.Fatal("no case was plain: the generator tests only rejections")
	}
}

func BenchmarkPlainJSONString(b *testing.B) {
	s := []byte(`"`)
	for len(s) < 32<<10 {
		s = append(s, "The quick brown fox jumps over the lazy dog, again and again. "...)
	}
	s = append(s, '"')
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		if _, ok := plainJSONString(s); !ok {
			b.Fatal("not plain")
		}
	}
}
