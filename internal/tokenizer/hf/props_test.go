package hf

import (
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestBMPProps: the looked-up properties and classes of every character
// are the ones the Unicode tables give (runeProps; unicode.IsLetter,
// IsNumber and isSpace for the cl100k classes), in and beyond the table.
func TestBMPProps(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if r >= 0xd800 && r <= 0xdfff {
			continue // surrogates: not in UTF-8 text
		}
		s := string(r)
		p, n := propsAt(s, 0)
		if want := runeProps(r); p != want || n != len(s) {
			t.Fatalf("propsAt(%U) = %#x, %d; want %#x, %d", r, p, n, want, len(s))
		}
		want := uint8(clsOther)
		switch {
		case r == '\r' || r == '\n':
			want = clsNewline
		case unicode.IsLetter(r):
			want = clsLetter
		case unicode.IsNumber(r):
			want = clsNumber
		case isSpace(r):
			want = clsSpace
		}
		if c, n := classAt(s, 0); c != want || n != len(s) {
			t.Fatalf("classAt(%U) = %d, %d; want %d, %d", r, c, n, want, len(s))
		}
	}
	if p, n := propsAt("\xff", 0); p != 0 || n != 1 {
		t.Errorf("propsAt of an invalid byte = %#x, %d", p, n)
	}
}

// TestDecodeRune: decodeRune is utf8.DecodeRuneInString on every sequence
// of a lead byte beyond ASCII and two more bytes, and at the end of text.
func TestDecodeRune(t *testing.T) {
	b := make([]byte, 3)
	for c := 0x80; c <= 0xff; c++ {
		for c1 := 0; c1 <= 0xff; c1++ {
			for c2 := 0; c2 <= 0xff; c2++ {
				b[0], b[1], b[2] = byte(c), byte(c1), byte(c2)
				s := string(b)
				for _, s := range []string{s, s[:2], s[:1]} {
					r, n := decodeRune(s, 0)
					if wr, wn := utf8.DecodeRuneInString(s); r != wr || n != wn {
						t.Fatalf("decodeRune(%q) = %U, %d; want %U, %d", s, r, n, wr, wn)
					}
				}
			}
		}
	}
}
