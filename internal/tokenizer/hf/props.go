package hf

import (
	"unicode"
	"unicode/utf8"
)

// Character properties of the o200k (gpt-oss) and DeepSeek V3 split
// patterns, as bits: those patterns tell upper from lower case letters,
// marks, punctuation and symbols, which the cl100k family's classes
// (classAt) do not. Invalid UTF-8 bytes have no property, as in classAt.
//
// The properties are Unicode 16's (ucd_tables.go), not those of Go's
// unicode package (15): the reference runs its patterns in Oniguruma,
// whose tables are 16's, so a character assigned in 16 (U+A7CB, the Garay
// and Kirat Rai digits) would otherwise be split where the worker does
// not split it. propNumeric is apart: the Digits pre-tokenizer asks Rust's
// char::is_numeric, which is Unicode 17's.
const (
	propUpper   = 1 << iota // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
	propLower               // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
	propLetter              // \p{L}
	propMark                // \p{M}
	propNumber              // \p{N}
	propSpace               // \s, \r and \n included
	propNewline             // \r or \n
	propPunct               // [\p{P}\p{S}]
	propCJK                 // [\x{4e00}-\x{9fa5}\x{3040}-\x{309f}\x{30a0}-\x{30ff}]
	propNumeric             // Rust's char::is_numeric (Digits)
)

// runeProps computes a character's properties from the Unicode tables.
// propsAt looks them up in bmpProps instead for the Basic Multilingual
// Plane, and only calls this beyond it.
func runeProps(r rune) uint16 {
	var p uint16
	switch {
	case unicode.In(r, ucd16Lu, ucd16Lt):
		p |= propUpper | propLetter
	case unicode.Is(ucd16Ll, r):
		p |= propLower | propLetter
	case unicode.In(r, ucd16Lm, ucd16Lo):
		p |= propUpper | propLower | propLetter
	case unicode.Is(ucd16M, r):
		p |= propUpper | propLower | propMark
	case unicode.Is(ucd16N, r):
		p |= propNumber
	case isSpace(r):
		p |= propSpace
		if r == '\r' || r == '\n' {
			p |= propNewline
		}
	case unicode.In(r, ucd16P, ucd16S):
		p |= propPunct
	}
	if unicode.Is(ucd17Numeric, r) {
		p |= propNumeric
	}
	if (r >= 0x4e00 && r <= 0x9fa5) || (r >= 0x3040 && r <= 0x30ff) {
		p |= propCJK
	}
	return p
}

// bmpProps is runeProps of every character below U+10000, which is where
// text's characters are. Computing them searched up to seven tables per
// character (binary searches, most of them), three quarters of DeepSeek
// V3's time on Japanese. It is built from the same tables range by range,
// not character by character (that would take milliseconds at every
// start): the general categories are disjoint and White_Space holds none
// of their characters, so runeProps's first matching case is the only one
// that matches, and each table's properties can be set on their own
// (propNumeric, the one set apart, has a table of its own too).
// TestBMPProps holds every entry to runeProps.
var bmpProps = func() *[1 << 16]uint16 {
	t := new([1 << 16]uint16)
	for _, c := range []struct {
		tab   *unicode.RangeTable
		props uint16
	}{
		{ucd16Lu, propUpper | propLetter},
		{ucd16Lt, propUpper | propLetter},
		{ucd16Ll, propLower | propLetter},
		{ucd16Lm, propUpper | propLower | propLetter},
		{ucd16Lo, propUpper | propLower | propLetter},
		{ucd16M, propUpper | propLower | propMark},
		{ucd16N, propNumber},
		{ucd16WhiteSpace, propSpace},
		{ucd16P, propPunct},
		{ucd16S, propPunct},
		{ucd17Numeric, propNumeric},
	} {
		for _, r := range c.tab.R16 {
			for x := int(r.Lo); x <= int(r.Hi); x += int(r.Stride) {
				t[x] |= c.props
			}
		}
		for _, r := range c.tab.R32 {
			for x := int(r.Lo); x <= int(r.Hi) && x < len(t); x += int(r.Stride) {
				t[x] |= c.props
			}
		}
	}
	t['\r'] |= propNewline
	t['\n'] |= propNewline
	for _, cjk := range [][2]int{{0x4e00, 0x9fa5}, {0x3040, 0x30ff}} {
		for x := cjk[0]; x <= cjk[1]; x++ {
			t[x] |= propCJK
		}
	}
	return t
}()

// propsAt returns the properties and byte width of the character at s[i].
func propsAt(s string, i int) (uint16, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return bmpProps[c], 1
	}
	r, n := decodeRune(s, i)
	switch {
	case r == utf8.RuneError && n == 1:
		return 0, 1
	case r < 1<<16:
		return bmpProps[r], n
	}
	return runeProps(r), n
}

// runProps returns the end of the run of characters starting at i that
// have any of the properties in mask.
func runProps(s string, i int, mask uint16) int {
	for i < len(s) {
		p, n := propsAt(s, i)
		if p&mask == 0 {
			break
		}
		i += n
	}
	return i
}

// runPropsMax is runProps for at most max characters (\p{N}{1,3}).
func runPropsMax(s string, i int, mask uint16, max int) int {
	for k := 0; k < max && i < len(s); k++ {
		p, n := propsAt(s, i)
		if p&mask == 0 {
			break
		}
		i += n
	}
	return i
}

// untilProps returns where the first character at or after i that has
// any of the properties in mask starts, len(s) when none has.
func untilProps(s string, i int, mask uint16) int {
	for i < len(s) {
		p, n := propsAt(s, i)
		if p&mask != 0 {
			break
		}
		i += n
	}
	return i
}

// whitespace resolves the pattern tail the three families share,
// `\s*[\r\n]+|\s+(?!\S)|\s+`, at a whitespace character s[i]: up to and
// including the last newline of the whitespace run, else spaceRun. far is
// the end of the run, which it reads.
func whitespace(s string, i int) (end, far int) {
	end, lastNL := i, -1
	for end < len(s) {
		p, n := propsAt(s, end)
		if p&propSpace == 0 {
			break
		}
		if p&propNewline != 0 {
			lastNL = end
		}
		end += n
	}
	if lastNL >= 0 {
		return lastNL + 1, end
	}
	return spaceRun(s, i, end), end
}

// decodeRune is utf8.DecodeRuneInString(s[i:]) for s[i] beyond ASCII, with
// the three-byte characters (CJK, kana and most of the BMP) decoded here:
// the library's general decoder, a call each time, was a third of
// DeepSeek V3's time on Japanese, whose split steps read every character
// three times. Only the lead bytes whose continuation bytes may be any of
// 0x80–0xBF are decoded here (not 0xE0, whose next byte excludes overlong
// forms, nor 0xED, whose next byte excludes surrogates); everything else
// goes to the library. TestDecodeRune holds it to the library on every
// three-byte sequence.
func decodeRune(s string, i int) (rune, int) {
	if c := s[i]; c >= 0xe1 && c <= 0xef && c != 0xed && i+2 < len(s) {
		c1, c2 := s[i+1], s[i+2]
		if c1&0xc0 == 0x80 && c2&0xc0 == 0x80 {
			return rune(c&0x0f)<<12 | rune(c1&0x3f)<<6 | rune(c2&0x3f), 3
		}
	}
	return utf8.DecodeRuneInString(s[i:])
}
