package hf

import (
	"math/rand/v2"
	"testing"

	"golang.org/x/text/unicode/norm"
)

var forms = []norm.Form{norm.NFC, norm.NFD, norm.NFKC, norm.NFKD}

// TestStableSet: texts of stable characters are normalized under every
// form, and a character that is not stable, beyond U+10000 or invalid
// sends the text to the full check.
func TestStableSet(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, f := range forms {
		set := newStableSet(f)
		var stable []rune
		for r := rune(0); r < 1<<16; r++ {
			if set[r>>6]&(1<<(r&63)) != 0 {
				stable = append(stable, r)
			}
		}
		for range 200000 {
			var s []rune
			for range 2 + rng.IntN(3) {
				s = append(s, stable[rng.IntN(len(stable))])
			}
			if !set.holds(string(s)) || !f.IsNormalString(string(s)) {
				t.Fatalf("%v: %q: holds %v, normalized %v", f, string(s), set.holds(string(s)), f.IsNormalString(string(s)))
			}
		}
		for _, s := range []string{"e\u0301", "\u1100\u1161", "か\u3099", "\U0001F600", "a\xff"} {
			if set.holds(s) {
				t.Errorf("%v: %q holds", f, s)
			}
		}
	}
	if set := newStableSet(norm.NFC); !set.holds("日本語のテキスト、English.") {
		t.Error("NFC: Japanese and ASCII do not hold")
	}
}

// FuzzStableSet: whatever a stable set holds, its form leaves unchanged.
func FuzzStableSet(f *testing.F) {
	for _, s := range []string{"日本語", "e\u0301", "\u1100\u1161\u11a8", "か\u3099", "Å", "\u212b", "\u0340", "ﬁ", "\xff"} {
		f.Add(s)
	}
	sets := make([]*stableSet, len(forms))
	for i, form := range forms {
		sets[i] = newStableSet(form)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for i, form := range forms {
			if sets[i].holds(s) && form.String(s) != s {
				t.Fatalf("%v: %q holds, normalizes to %q", form, s, form.String(s))
			}
		}
	})
}
