package hf

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// lowercase is the Lowercase normalizer: each character replaced by its
// lowercase mapping, one character at a time as Rust's char::to_lowercase
// does — so without str::to_lowercase's final-sigma rule ("Σ" is always
// "σ") — with the one unconditional multi-character mapping, U+0130 "İ" to
// "i̇" (i, U+0307). Go's unicode tables are Unicode 15.0; the reference's
// Rust standard library has Unicode 17.0, whose new lowercase mappings are
// lowerSince15 (testdata/golden/lowercase.txt, the reference's mapping of
// every code point, holds the whole table). An invalid UTF-8 byte is kept.
func lowercase(s string) string {
	i := 0
	for i < len(s) {
		c := s[i]
		if c >= utf8.RuneSelf || ('A' <= c && c <= 'Z') {
			break
		}
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			b.WriteByte(c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteByte(c)
			i++
			continue
		}
		if r == 0x130 {
			b.WriteString("i\u0307")
		} else {
			b.WriteRune(lowerRune(r))
		}
		i += n
	}
	return b.String()
}

// lowerRune is the lowercase of one non-ASCII character other than
// U+0130.
func lowerRune(r rune) rune {
	if r == 0x1C89 || (r >= 0xA7CB && r <= 0xA7DC) || (r >= 0x10D50 && r <= 0x10D65) || (r >= 0x16EA0 && r <= 0x16EB8) {
		if l, ok := lowerSince15[r]; ok {
			return l
		}
	}
	return unicode.ToLower(r)
}

// lowerSince15 are the lowercase mappings Unicode added after 15.0 (Go's
// tables) up to 17.0 (the reference's).
var lowerSince15 = map[rune]rune{
	0x1C89:  0x1C8A,
	0xA7CB:  0x264,
	0xA7CC:  0xA7CD,
	0xA7CE:  0xA7CF,
	0xA7D2:  0xA7D3,
	0xA7D4:  0xA7D5,
	0xA7DA:  0xA7DB,
	0xA7DC:  0x19B,
	0x10D50: 0x10D70,
	0x10D51: 0x10D71,
	0x10D52: 0x10D72,
	0x10D53: 0x10D73,
	0x10D54: 0x10D74,
	0x10D55: 0x10D75,
	0x10D56: 0x10D76,
	0x10D57: 0x10D77,
	0x10D58: 0x10D78,
	0x10D59: 0x10D79,
	0x10D5A: 0x10D7A,
	0x10D5B: 0x10D7B,
	0x10D5C: 0x10D7C,
	0x10D5D: 0x10D7D,
	0x10D5E: 0x10D7E,
	0x10D5F: 0x10D7F,
	0x10D60: 0x10D80,
	0x10D61: 0x10D81,
	0x10D62: 0x10D82,
	0x10D63: 0x10D83,
	0x10D64: 0x10D84,
	0x10D65: 0x10D85,
	0x16EA0: 0x16EBB,
	0x16EA1: 0x16EBC,
	0x16EA2: 0x16EBD,
	0x16EA3: 0x16EBE,
	0x16EA4: 0x16EBF,
	0x16EA5: 0x16EC0,
	0x16EA6: 0x16EC1,
	0x16EA7: 0x16EC2,
	0x16EA8: 0x16EC3,
	0x16EA9: 0x16EC4,
	0x16EAA: 0x16EC5,
	0x16EAB: 0x16EC6,
	0x16EAC: 0x16EC7,
	0x16EAD: 0x16EC8,
	0x16EAE: 0x16EC9,
	0x16EAF: 0x16ECA,
	0x16EB0: 0x16ECB,
	0x16EB1: 0x16ECC,
	0x16EB2: 0x16ECD,
	0x16EB3: 0x16ECE,
	0x16EB4: 0x16ECF,
	0x16EB5: 0x16ED0,
	0x16EB6: 0x16ED1,
	0x16EB7: 0x16ED2,
	0x16EB8: 0x16ED3,
}
