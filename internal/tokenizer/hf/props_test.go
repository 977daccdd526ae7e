package hf

import (
	"testing"
	"unicode"
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
