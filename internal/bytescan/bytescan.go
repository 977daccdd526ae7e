// Package bytescan finds bytes in text eight at a time, for the scanners
// of prompt text (the pii and pii-rules classifiers, the complexity
// scorer) that skip what cannot start a match: prose is mostly bytes that
// cannot, so the skip is most of their cost, and a table look-up a byte
// is the slow way to do it.
//
// A word of eight bytes is tested for all of them at once with the bit
// tricks of "Bit Twiddling Hacks" (haszero, in its exact form: no carry
// from one byte reaches the next, so each byte's flag is its own), and
// only a word with a flagged byte is looked at a byte at a time.
package bytescan

import "math/bits"

const (
	lsb = 0x0101010101010101 // each byte's low bit
	msb = 0x8080808080808080 // each byte's top bit
)

// Load64 is s[i:i+8] as a little-endian word: s[i] is its lowest byte.
// The compiler makes it one load.
func Load64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// ZeroBytes has the top bit set of each byte of x that is zero, and no
// other bit.
func ZeroBytes(x uint64) uint64 { return ^((x&^msb + lsb*0x7f) | x) & msb }

// HighBytes has the top bit set of each byte of x of 0x80 or more (a byte
// of a UTF-8 sequence), and no other bit.
func HighBytes(x uint64) uint64 { return x & msb }

// Broadcast is c in each byte of a word.
func Broadcast(c byte) uint64 { return lsb * uint64(c) }

// maxProbes bounds the comparisons a Set makes per word: past it a table
// look-up a byte is as fast.
const maxProbes = 4

// Set is a set of bytes to search text for (Next). A letter in both cases
// costs one comparison, every byte of 0x80 or more together one; a set
// needing more than four comparisons is searched a byte at a time.
type Set struct {
	in       [256]bool
	probes   [maxProbes]uint64 // a byte, broadcast
	folds    [maxProbes]uint64 // 0x20 broadcast where the probe is a letter in both cases
	n        int
	high     bool // some byte of 0x80 or more is in the set
	bytewise bool
	empty    bool
}

// NewSet is the set of the bytes c with in[c] true.
func NewSet(in *[256]bool) Set {
	s := Set{in: *in, empty: true}
	n := 0
	for c := range 256 {
		if !in[c] {
			continue
		}
		s.empty = false
		switch {
		case c >= 0x80:
			s.high = true
			continue
		case c >= 'A' && c <= 'Z' && in[c+0x20]:
			continue // probed as its lower case
		}
		if n == maxProbes {
			s.bytewise = true
			return s
		}
		s.probes[n] = Broadcast(byte(c))
		if c >= 'a' && c <= 'z' && in[c-0x20] {
			s.folds[n] = Broadcast(0x20)
		}
		n++
	}
	s.n = n
	return s
}

// Has says whether c is in the set.
func (s *Set) Has(c byte) bool { return s.in[c] }

// Next is the index of the first byte of text at or after i that is in
// the set, or len(text).
func (s *Set) Next(text string, i int) int {
	switch {
	case s.empty:
		return len(text)
	case s.bytewise:
		return s.nextBytewise(text, i)
	}
	if i < len(text) && s.in[text[i]] {
		return i // dense text: no word to load
	}
	for ; i+8 <= len(text); i += 8 {
		x := Load64(text, i)
		var m uint64
		if s.high {
			m = HighBytes(x)
		}
		for k := range s.n {
			m |= ZeroBytes((x | s.folds[k]) ^ s.probes[k])
		}
		// m flags a superset (a high byte not in the set, another byte
		// that folds onto a probe): the table says which are in.
		for ; m != 0; m &= m - 1 {
			if j := i + bits.TrailingZeros64(m)/8; s.in[text[j]] {
				return j
			}
		}
	}
	return s.nextBytewise(text, i)
}

func (s *Set) nextBytewise(text string, i int) int {
	for i < len(text) && !s.in[text[i]] {
		i++
	}
	return i
}
