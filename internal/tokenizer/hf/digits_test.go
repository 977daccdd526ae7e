package hf

import (
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func digitsPieces(d digitsMode, s string) []string {
	var out []string
	for i := 0; i < len(s); {
		end := d.next(s, i)
		out = append(out, s[i:end])
		i = end
	}
	return out
}

func TestDigitsPieces(t *testing.T) {
	tests := []struct {
		mode digitsMode
		text string
		want []string
	}{
		{digitsRuns, "Hey 123 friend!", []string{"Hey ", "123", " friend!"}},
		{digitsEach, "Hey 123 friend!", []string{"Hey ", "1", "2", "3", " friend!"}},
		{digitsRuns, "٣½²Ⅻ①x", []string{"٣½²Ⅻ①", "x"}},
		{digitsEach, "a٣½", []string{"a", "٣", "½"}},
		{digitsRuns, "\xff1\xfe", []string{"\xff", "1", "\xfe"}},
	}
	for _, tc := range tests {
		if got := digitsPieces(tc.mode, tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("%v %q: %q, want %q", tc.mode, tc.text, got, tc.want)
		}
	}
}

// FuzzDigits holds the Digits cutter to its definition: the pieces cover
// the text, each is all numeric or all not (one numeric character with
// individual_digits), and two pieces of other characters never touch.
func FuzzDigits(f *testing.F) {
	for _, s := range []string{"Hey 123 friend!", "٣½²Ⅻ", "a\xff1", "", "1", "x1y22"} {
		f.Add(s)
	}
	numeric := func(p string) (all, none bool) {
		all, none = true, true
		for _, r := range p {
			if r != utf8.RuneError && unicode.IsNumber(r) {
				none = false
			} else {
				all = false
			}
		}
		return all, none
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, d := range []digitsMode{digitsRuns, digitsEach} {
			ps := digitsPieces(d, s)
			if strings.Join(ps, "") != s {
				t.Fatalf("%v: pieces %q do not cover %q", d, ps, s)
			}
			prevOther := false
			for _, p := range ps {
				all, none := numeric(p)
				if !all && !none {
					t.Fatalf("%v: piece %q of %q is mixed", d, p, s)
				}
				if all && d == digitsEach && utf8.RuneCountInString(p) != 1 {
					t.Fatalf("individual: piece %q of %q", p, s)
				}
				if none && prevOther {
					t.Fatalf("%v: two pieces of other characters in %q", d, ps)
				}
				prevOther = none
			}
		}
	})
}
