package hf

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestBMPProps: the looked-up properties and classes of every character
// are the ones the Unicode tables give (runeProps; \p{L}, \p{N} and \s
// for the cl100k classes), in and beyond the table.
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
		case unicode.In(r, ucd16Lu, ucd16Ll, ucd16Lt, ucd16Lm, ucd16Lo):
			want = clsLetter
		case unicode.Is(ucd16N, r):
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

// TestReferenceClasses holds every code point's properties to the classes
// the reference gives it (testdata/golden/classes.txt, written by
// testdata/gen/gen_tokens.js): its regex engine's \p{Lu} … \p{S} and \s,
// and its Digits step's numeric characters.
func TestReferenceClasses(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "golden", "classes.txt"))
	if err != nil {
		t.Fatal(err)
	}
	in := map[string][]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		name, ranges, _ := strings.Cut(line, " ")
		set := make([]bool, unicode.MaxRune+1)
		for _, r := range strings.Split(ranges, ",") {
			lo, hi, _ := strings.Cut(r, "-")
			a, err1 := strconv.ParseUint(lo, 16, 32)
			b, err2 := strconv.ParseUint(hi, 16, 32)
			if err1 != nil || err2 != nil || a > b || b > unicode.MaxRune {
				t.Fatalf("classes.txt: %s: bad range %q", name, r)
			}
			for x := a; x <= b; x++ {
				set[x] = true
			}
		}
		in[name] = set
	}
	for _, name := range []string{"Lu", "Ll", "Lt", "Lm", "Lo", "M", "N", "P", "S", "s", "numeric"} {
		if in[name] == nil {
			t.Fatalf("classes.txt has no %s", name)
		}
	}
	bad := 0
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if r >= 0xd800 && r <= 0xdfff {
			continue
		}
		var want uint16
		switch {
		case in["Lu"][r] || in["Lt"][r]:
			want = propUpper | propLetter
		case in["Ll"][r]:
			want = propLower | propLetter
		case in["Lm"][r] || in["Lo"][r]:
			want = propUpper | propLower | propLetter
		case in["M"][r]:
			want = propUpper | propLower | propMark
		case in["N"][r]:
			want = propNumber
		case in["s"][r]:
			want = propSpace
		case in["P"][r] || in["S"][r]:
			want = propPunct
		}
		if r == '\r' || r == '\n' {
			want |= propNewline
		}
		if in["numeric"][r] {
			want |= propNumeric
		}
		s := string(r)
		got, _ := propsAt(s, 0)
		if got&^propCJK != want {
			if bad++; bad <= 10 {
				t.Errorf("propsAt(%U) = %#x, the reference's classes give %#x", r, got&^propCJK, want)
			}
		}
		if num, _ := isNumberAt(s, 0); num != in["numeric"][r] {
			if bad++; bad <= 10 {
				t.Errorf("isNumberAt(%U) = %v, the reference's Digits says %v", r, num, in["numeric"][r])
			}
		}
	}
	if bad > 10 {
		t.Errorf("%d code points in all", bad)
	}
}
