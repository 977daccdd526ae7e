package hf

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// BERT's normalizer and pre-tokenizer, as Hugging Face's tokenizers runs
// them. BertNormalizer, in this order: clean_text drops NUL, U+FFFD and
// the control, format and private-use characters (but tab, newline and
// carriage return) and turns every other whitespace character into a
// space; handle_chinese_chars puts a space on either side of each CJK
// ideograph (the CJK Unified Ideographs blocks and their extensions A–E,
// the compatibility ideographs); strip_accents decomposes the text (NFD)
// and drops its nonspacing marks — null means whatever lowercase is;
// lowercase maps each character as Rust's char::to_lowercase. Then
// BertPreTokenizer splits the text at whitespace, which it drops, and
// around each punctuation character (ASCII punctuation, and the Unicode
// P* categories), which is a word of its own.
//
// The reference classes characters by the tables of an older Unicode
// version than Go's (the unicode_categories crate), so the classes are its
// own: bert_tables.go, generated from what the reference does to every
// code point (testdata/golden/bert_chars.txt, which TestBertChars checks
// the whole pipeline against).

// runeSpan is an inclusive range of code points.
type runeSpan struct{ lo, hi rune }

// The classes of a character (bertClass).
const (
	bertRemove  = 1 << iota // clean_text drops it
	bertSpace               // clean_text turns it into a space
	bertWhite               // the pre-tokenizer splits on it
	bertPunct               // the pre-tokenizer isolates it
	bertMark                // strip_accents drops it (after NFD)
	bertChinese             // handle_chinese_chars spaces it
)

var (
	bertBMPOnce sync.Once
	bertBMP     *[0x10000]uint8
	bertAstral  []bertSpanClass // the classes above U+FFFF, sorted
)

type bertSpanClass struct {
	runeSpan
	class uint8
}

// bertChineseRanges are the blocks handle_chinese_chars spaces.
var bertChineseRanges = []runeSpan{
	{0x3400, 0x4DBF}, {0x4E00, 0x9FFF}, {0xF900, 0xFAFF}, {0x20000, 0x2A6DF}, {0x2A700, 0x2B73F},
	{0x2B740, 0x2B81F}, {0x2B920, 0x2CEAF}, {0x2F800, 0x2FA1F},
}

func bertTables() {
	bertBMPOnce.Do(func() {
		t := new([0x10000]uint8)
		var astral []bertSpanClass
		for _, c := range []struct {
			spans []runeSpan
			class uint8
		}{
			{bertRemoveRanges, bertRemove}, {bertSpaceRanges, bertSpace}, {bertWhiteRanges, bertWhite},
			{bertPunctRanges, bertPunct}, {bertMarkRanges, bertMark}, {bertChineseRanges, bertChinese},
		} {
			for _, s := range c.spans {
				for r := s.lo; r <= s.hi && r < 0x10000; r++ {
					t[r] |= c.class
				}
				if s.hi >= 0x10000 {
					astral = append(astral, bertSpanClass{runeSpan{max(s.lo, 0x10000), s.hi}, c.class})
				}
			}
		}
		// Split the astral spans at every boundary so that each piece has
		// one set of classes, then merge the classes of equal pieces.
		cuts := map[rune]bool{}
		for _, s := range astral {
			cuts[s.lo], cuts[s.hi+1] = true, true
		}
		points := make([]rune, 0, len(cuts))
		for p := range cuts {
			points = append(points, p)
		}
		sort.Slice(points, func(i, j int) bool { return points[i] < points[j] })
		var merged []bertSpanClass
		for i := 0; i+1 < len(points); i++ {
			lo, hi := points[i], points[i+1]-1
			var class uint8
			for _, s := range astral {
				if s.lo <= lo && hi <= s.hi {
					class |= s.class
				}
			}
			if class != 0 {
				merged = append(merged, bertSpanClass{runeSpan{lo, hi}, class})
			}
		}
		bertBMP, bertAstral = t, merged
	})
}

// bertClass is r's classes; bertTables must have run.
func bertClass(r rune) uint8 {
	if r < 0x10000 {
		return bertBMP[r]
	}
	i := sort.Search(len(bertAstral), func(i int) bool { return bertAstral[i].hi >= r })
	if i < len(bertAstral) && bertAstral[i].lo <= r {
		return bertAstral[i].class
	}
	return 0
}

// bertNormalizer is a loaded BertNormalizer.
type bertNormalizer struct {
	clean, chinese, strip, lower bool
}

type bertNormalizerJSON struct {
	Type               string `json:"type"`
	CleanText          *bool  `json:"clean_text"`
	HandleChineseChars *bool  `json:"handle_chinese_chars"`
	StripAccents       *bool  `json:"strip_accents"`
	Lowercase          *bool  `json:"lowercase"`
}

// parseBertNormalizer reads a BertNormalizer: every option true when
// absent (Hugging Face's defaults), strip_accents null (or absent) meaning
// lowercase's value.
func parseBertNormalizer(raw json.RawMessage) (*bertNormalizer, error) {
	var c bertNormalizerJSON
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("parse normalizer: %w", err)
	}
	opt := func(b *bool) bool { return b == nil || *b }
	n := &bertNormalizer{clean: opt(c.CleanText), chinese: opt(c.HandleChineseChars), lower: opt(c.Lowercase)}
	n.strip = n.lower
	if c.StripAccents != nil {
		n.strip = *c.StripAccents
	}
	bertTables()
	return n, nil
}

// apply normalizes s.
func (n *bertNormalizer) apply(s string) string {
	if isASCII(s) {
		return n.applyASCII(s)
	}
	if out, ok := n.applyFolded(s); ok {
		return out
	}
	var b strings.Builder
	b.Grow(len(s) + len(s)/4)
	for _, r := range s { // an invalid byte reads as U+FFFD
		c := bertClass(r)
		if n.clean {
			if c&bertRemove != 0 || r == 0 || r == utf8.RuneError {
				continue
			}
			if c&bertSpace != 0 {
				r = ' '
			}
		}
		if n.chinese && c&bertChinese != 0 {
			b.WriteByte(' ')
			b.WriteRune(r)
			b.WriteByte(' ')
			continue
		}
		b.WriteRune(r)
	}
	out := b.String()
	if n.strip {
		out = bertStripAccents(out)
	}
	if n.lower {
		out = lowercase(out)
	}
	return out
}

// applyFolded is apply in one pass over s, each character mapped through
// strip_accents and lowercase on its own (bertFold), when every character
// allows it; false when one does not. A character allows it when each
// character of its NFD is either a starter or a mark strip_accents drops:
// then NFD's reordering (which moves only non-starters) has nothing left
// to reorder once the marks are gone, and lowercase maps a character at a
// time, so the text's result is its characters' results put together.
// Japanese, with kana whose voicing marks strip_accents drops, spent more
// than half its time in the two whole-text passes this replaces.
func (n *bertNormalizer) applyFolded(s string) (string, bool) {
	fold := bertFoldFor(n.strip, n.lower)
	var b strings.Builder
	b.Grow(len(s) + len(s)/4)
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		i += size
		c := bertClass(r)
		if n.clean {
			if c&bertRemove != 0 || r == 0 || r == utf8.RuneError {
				continue
			}
			if c&bertSpace != 0 {
				b.WriteByte(' ')
				continue
			}
		}
		out, same, ok := fold.of(r)
		if !ok {
			return "", false
		}
		spaced := n.chinese && c&bertChinese != 0
		if spaced {
			b.WriteByte(' ')
		}
		if same {
			b.WriteRune(r)
		} else {
			b.WriteString(out)
		}
		if spaced {
			b.WriteByte(' ')
		}
	}
	return b.String(), true
}

// bertFold maps a character through strip_accents and lowercase (either
// may be off) on its own: bmp[r] is 0 when r does not allow it
// (applyFolded), 1 when it maps to itself, else 2 + its result's index in
// results. Built once per combination of the two options, at first use:
// some 65,000 characters through NFD and lowercase, a few milliseconds.
type bertFold struct {
	strip, lower bool
	bmp          *[0x10000]uint16
	results      []string
}

var (
	bertFoldOnce [4]sync.Once
	bertFolds    [4]*bertFold
)

func bertFoldFor(strip, lower bool) *bertFold {
	k := 0
	if strip {
		k |= 1
	}
	if lower {
		k |= 2
	}
	bertFoldOnce[k].Do(func() {
		f := &bertFold{strip: strip, lower: lower, bmp: new([0x10000]uint16)}
		for r := rune(0); r < 0x10000; r++ {
			if r >= 0xd800 && r <= 0xdfff {
				continue
			}
			out, ok := f.compute(r)
			switch {
			case !ok:
			case out == string(r):
				f.bmp[r] = 1
			default:
				f.bmp[r] = uint16(2 + len(f.results))
				f.results = append(f.results, out)
			}
		}
		bertFolds[k] = f
	})
	return bertFolds[k]
}

// of is r's result (same: r itself), ok false when r does not allow
// folding.
func (f *bertFold) of(r rune) (out string, same, ok bool) {
	if r >= 0x10000 {
		out, ok = f.compute(r)
		return out, false, ok
	}
	switch v := f.bmp[r]; v {
	case 0:
		return "", false, false
	case 1:
		return "", true, true
	default:
		return f.results[v-2], false, true
	}
}

// compute is of from the normalizers themselves.
func (f *bertFold) compute(r rune) (string, bool) {
	s := string(r)
	if f.strip {
		// bertStripAccents of s, checking each character it keeps.
		var kept []rune
		for _, x := range referenceForm(norm.NFD, s) {
			if bertClass(x)&bertMark != 0 {
				continue
			}
			if norm.NFD.PropertiesString(string(x)).CCC() != 0 && !unicode.Is(ucd9Unassigned, x) {
				return "", false // a non-starter that stays
			}
			kept = append(kept, x)
		}
		s = string(kept)
	}
	if f.lower {
		s = lowercase(s)
	}
	return s, true
}

// applyASCII is apply for ASCII text: no ideographs, decompositions or
// marks, and ASCII's lowercase.
func (n *bertNormalizer) applyASCII(s string) string {
	changes := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (n.lower && 'A' <= c && c <= 'Z') || (n.clean && (c < ' ' || c == 0x7f)) {
			changes = true
			break
		}
	}
	if !changes {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if n.clean {
			cl := bertBMP[c]
			if cl&bertRemove != 0 || c == 0 {
				continue
			}
			if cl&bertSpace != 0 {
				c = ' '
			}
		}
		if n.lower && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return string(b)
}

// bertStripAccents is NFD without the nonspacing marks: the reference's
// NFD (referenceForm), which leaves a character newer than Unicode 9 whole
// (U+11938 DIVES AKURU VOWEL SIGN O, say, which Go's decomposes).
func bertStripAccents(s string) string {
	d := referenceForm(norm.NFD, s)
	var b strings.Builder
	b.Grow(len(d))
	for _, r := range d {
		if bertClass(r)&bertMark == 0 {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// bertPreTokenizerOf says whether raw is BertPreTokenizer, alone or as a
// Sequence of it alone.
func bertPreTokenizerOf(raw json.RawMessage) bool {
	var c componentJSON
	if json.Unmarshal(raw, &c) != nil {
		return false
	}
	if c.Type == "Sequence" && len(c.Pretokenizers) == 1 {
		return bertPreTokenizerOf(c.Pretokenizers[0])
	}
	return c.Type == "BertPreTokenizer"
}

// nextBertWord returns the next word of s at or after i — [start, end),
// start == end == len(s) when none is left — as BertPreTokenizer cuts it:
// whitespace dropped, each punctuation character alone.
func nextBertWord(s string, i int) (start, end int) {
	for i < len(s) {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		c := bertClass(r)
		if c&bertWhite != 0 {
			i += size
			continue
		}
		if c&bertPunct != 0 {
			return i, i + size
		}
		break
	}
	start = i
	for i < len(s) {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		if bertClass(r)&(bertWhite|bertPunct) != 0 {
			break
		}
		i += size
	}
	return start, i
}

// appendBertWords is appendWords for BertPreTokenizer.
func (t *Tokenizer) appendBertWords(w *work, dst []uint32, s string, front *wordFront) ([]uint32, error) {
	for i := 0; i < len(s); {
		start, end := nextBertWord(s, i)
		w.steps += end - i
		if start < end {
			dst = t.model.encodeWord(dst, s[start:end], front, &w.steps)
		}
		if err := w.check(end - i); err != nil {
			return dst, err
		}
		i = end
	}
	return dst, nil
}
