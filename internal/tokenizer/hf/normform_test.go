package hf

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"unicode"

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

// TestNormalizeReference: each form as a normalizer step applies it gives
// the reference's result (testdata/golden/normalize.json: the texts where
// the reference, on Unicode 9's tables, and a newer Unicode differ — every
// decomposing character, its decomposition, marks around marks — and a
// sample of the rest).
func TestNormalizeReference(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "golden", "normalize.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Cases []struct{ Text, NFC, NFKC, NFD, NFKD string }
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) < 1000 {
		t.Fatalf("normalize.json has %d cases", len(g.Cases))
	}
	steps := map[string]normStep{}
	for name, f := range map[string]norm.Form{"NFC": norm.NFC, "NFKC": norm.NFKC, "NFD": norm.NFD, "NFKD": norm.NFKD} {
		steps[name] = normStep{form: &f, stable: newStableSet(f)}
	}
	bad := 0
	for _, c := range g.Cases {
		for name, want := range map[string]string{"NFC": c.NFC, "NFKC": c.NFKC, "NFD": c.NFD, "NFKD": c.NFKD} {
			if got := steps[name].apply(c.Text); got != want {
				if bad++; bad <= 10 {
					t.Errorf("%s(%+q) = %+q, the reference gives %+q", name, c.Text, got, want)
				}
			}
		}
	}
	if bad > 10 {
		t.Errorf("%d mismatches in all", bad)
	}
}

// FuzzReferenceForm: the reference's form is the form itself on text
// without characters newer than Unicode 9, and leaves alone what the form
// leaves alone.
func FuzzReferenceForm(f *testing.F) {
	for _, s := range []string{"e\u0301", "\uA7F2", "a\u0334\U00016FF0", "\U00011935\U00011930", "\u32FF\u0301", "ﬁ\U0001FBF0", "\xff\u0301"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		newer := false
		for _, r := range s {
			newer = newer || unicode.Is(ucd9Unassigned, r)
		}
		for _, form := range forms {
			got := referenceForm(form, s)
			if !newer && got != form.String(s) {
				t.Fatalf("%v: %+q: %+q, the form gives %+q", form, s, got, form.String(s))
			}
			if form.IsNormalString(s) && got != s {
				t.Fatalf("%v: %+q is normalized, the reference's form gives %+q", form, s, got)
			}
		}
	})
}
