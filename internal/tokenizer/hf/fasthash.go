package hf

import "math/bits"

// wordHash is the id caches' key for s (words, and the segment cache's
// long segments): a multiply-mix of its bytes read sixteen at a time,
// seeded per cache. Words are a few bytes long and a
// prompt has thousands of them; maphash's call for each was 6 % of the
// router's time on a cold prompt, this is a handful of instructions. A
// collision costs a miss, never a wrong answer (keys are compared), and
// cannot be made to cost more: the caches keep one entry per key.
func wordHash(seed uint64, s string) uint64 {
	n := len(s)
	a, b := seed^uint64(n)*k0, seed^k1
	switch {
	case n > 16:
		for p := s; len(p) > 16; p = p[16:] {
			a = mix(a^le64(p), b^le64(p[8:]))
		}
		// The last 16 bytes, overlapping what the loop read.
		a ^= le64(s[n-16:])
		b ^= le64(s[n-8:])
	case n > 8:
		a ^= le64(s)
		b ^= le64(s[n-8:])
	case n >= 4:
		a ^= uint64(le32(s))
		b ^= uint64(le32(s[n-4:]))
	case n > 0:
		a ^= uint64(s[0])<<16 | uint64(s[n>>1])<<8 | uint64(s[n-1])
	}
	return mix(a^k1, b^k2)
}

const (
	k0 = 0xa0761d6478bd642f
	k1 = 0xe7037ed1a0b428db
	k2 = 0x8ebc6af09c88c6e3
)

func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func le32(s string) uint32 {
	_ = s[3]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// isASCII reports whether s is all ASCII, eight bytes at a time: ASCII
// text is in every Unicode normal form, and checking it is most of what a
// normalizer's own check costs on English prompts.
func isASCII(s string) bool {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if le64(s[i:])&0x8080808080808080 != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
