package bytescan_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/bytescan"
)

// naive is Next a byte at a time.
func naive(in *[256]bool, text string, i int) int {
	for i < len(text) && !in[text[i]] {
		i++
	}
	return i
}

func setOf(bytes string) *[256]bool {
	var in [256]bool
	for i := range len(bytes) {
		in[bytes[i]] = true
	}
	return &in
}

// TestNextIsNaive: whatever the set (letters in one or both cases,
// punctuation, bytes of 0x80 or more, more than the probes), Next finds
// what a byte-at-a-time search finds, from every start.
func TestNextIsNaive(t *testing.T) {
	sets := []string{"", "E", "pPbB", "@:0", "aA", "a", "\x80\xff", "x\xe3", "abcdefgh", "pPbBfF\xc3", "\x00", " \t"}
	texts := []string{"", "Every baker bakes bread at dawn; Project Falcon @ 09:00.", "社員番号EMP-123456です", strings.Repeat("z", 70) + "P",
		"\x00\x01\x7f\x80\xff", strings.Repeat("ábc", 20)}
	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		b := make([]byte, r.IntN(100))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		texts = append(texts, string(b))
	}
	for _, set := range sets {
		in := setOf(set)
		s := bytescan.NewSet(in)
		for _, text := range texts {
			for i := 0; i <= len(text); i++ {
				if got, want := s.Next(text, i), naive(in, text, i); got != want {
					t.Fatalf("set %q text %q from %d: Next %d, want %d", set, text, i, got, want)
				}
			}
		}
	}
}

func TestZeroAndHighBytes(t *testing.T) {
	// Each byte on its own, and next to every other (a carry would show).
	for a := range 256 {
		for _, b := range []int{0, 1, 0x7f, 0x80, 0xff, a} {
			x := uint64(a) | uint64(b)<<8 | uint64(a)<<56
			var zero, high uint64
			for k, c := range []int{a, b, 0, 0, 0, 0, 0, a} {
				if c == 0 {
					zero |= 0x80 << (8 * k)
				}
				if c >= 0x80 {
					high |= 0x80 << (8 * k)
				}
			}
			// Bytes 2 to 6 are zero in x.
			if got := bytescan.ZeroBytes(x); got != zero {
				t.Fatalf("ZeroBytes(%#x) = %#x, want %#x", x, got, zero)
			}
			if got := bytescan.HighBytes(x); got != high {
				t.Fatalf("HighBytes(%#x) = %#x, want %#x", x, got, high)
			}
		}
	}
}

func FuzzNext(f *testing.F) {
	f.Add("pPbB", "Every baker bakes bread")
	f.Add("\x80E", "社員番号EMP-123456です")
	f.Fuzz(func(t *testing.T, set, text string) {
		in := setOf(set)
		s := bytescan.NewSet(in)
		for i := 0; i <= len(text); i++ {
			if got, want := s.Next(text, i), naive(in, text, i); got != want {
				t.Fatalf("set %q text %q from %d: Next %d, want %d", set, text, i, got, want)
			}
		}
	})
}

// BenchmarkNext is a search through 32 KB of prose for a set as a
// dictionary's first letters make it, against a table look-up a byte.
func BenchmarkNext(b *testing.B) {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog while the river runs past the old mill. ", 400)
	for _, set := range []string{"E", "pPbB", "pPbBfFsS"} {
		in := setOf(set)
		s := bytescan.NewSet(in)
		b.Run(set+"/swar", func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				for i := 0; i < len(text); i++ {
					i = s.Next(text, i)
				}
			}
		})
		b.Run(set+"/table", func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				for i := 0; i < len(text); i++ {
					i = naive(in, text, i)
				}
			}
		})
	}
}
