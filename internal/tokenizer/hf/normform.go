package hf

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// A Unicode normalization form leaves most text as it is — Qwen's NFC
// changes nothing in Japanese, Chinese or English — but checking that with
// norm.Form.IsNormalString costs some 25 ns a character outside ASCII
// (trie look-ups, composition state), three quarters of Qwen3's time on
// Japanese. A stableSet answers the common case from one bit per
// character instead.
//
// A character is stable under a form when the form leaves it unchanged on
// its own (its quick-check value is not No) and it can neither be
// reordered nor combine with what precedes it (canonical combining class
// 0 and quick-check not Maybe: norm's BoundaryBefore). A text of stable
// characters only passes the Unicode quick check (UAX #15) with YES,
// which is definite: the text is normalized, and returned as it is —
// what the form would have returned. Anything else (a character outside
// the set, at or beyond U+10000, invalid UTF-8) goes to the full check.
type stableSet [1 << 16 / 64]uint64

// newStableSet computes the stable characters below U+10000 of f, one by
// one through norm's own tables: some 5 ms, once per tokenizer load.
func newStableSet(f norm.Form) *stableSet {
	set := new(stableSet)
	for r := rune(0); r < 1<<16; r++ {
		if r >= 0xd800 && r <= 0xdfff {
			continue // surrogates: not characters of UTF-8 text
		}
		s := string(r)
		if f.PropertiesString(s).BoundaryBefore() && f.IsNormalString(s) {
			set[r>>6] |= 1 << (r & 63)
		}
	}
	return set
}

// holds reports whether every character of s is stable.
func (set *stableSet) holds(s string) bool {
	for i := 0; i < len(s); {
		r, n := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, n = utf8.DecodeRuneInString(s[i:])
			if r >= 1<<16 || (r == utf8.RuneError && n == 1) {
				return false
			}
		}
		if set[r>>6]&(1<<(r&63)) == 0 {
			return false
		}
		i += n
	}
	return true
}

// referenceForm is f as the reference applies it. Hugging Face's
// normalizers run on a normalization crate whose tables are Unicode 9's,
// Go's (x/text) are 15's: the reference leaves a character assigned since
// 9.0 as it is — no decomposition (ꟲ, 🯰, ㋿), no combining class (so no
// reordering around it), no composition with it (𑤸). Such a character
// is a starter that combines with nothing in the reference, and
// normalization does not reach across such a starter, so f applied to
// the text between them, with them kept as they are, gives the
// reference's result. A text f leaves as it is, the reference leaves too:
// every change Unicode 9 makes, 15 makes (the newer characters only block
// more).
func referenceForm(f norm.Form, s string) string {
	start := -1 // where the first newer character is
	for i, r := range s {
		if unicode.Is(ucd9Unassigned, r) {
			start = i
			break
		}
	}
	if start < 0 {
		return f.String(s)
	}
	var b strings.Builder
	b.Grow(len(s))
	seg := 0 // start of the text since the last newer character
	for i, r := range s[start:] {
		i += start
		if !unicode.Is(ucd9Unassigned, r) {
			continue // U+FFFD, which an invalid byte reads as, included
		}
		b.WriteString(f.String(s[seg:i]))
		n := utf8.RuneLen(r)
		b.WriteString(s[i : i+n])
		seg = i + n
	}
	b.WriteString(f.String(s[seg:]))
	return b.String()
}
