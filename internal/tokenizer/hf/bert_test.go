package hf

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// readBertChars reads testdata/golden/bert_chars.txt (gen_tokens.js): the
// reference's flags for every code point and what strip_accents makes of
// those it changes.
func readBertChars(t *testing.T) (flags map[rune]string, strip map[rune]string) {
	f, err := os.Open(filepath.Join("testdata", "golden", "bert_chars.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flags, strip = map[rune]string{}, map[rune]string{}
	sc := bufio.NewScanner(f)
	hex := func(s string) rune {
		v, err := strconv.ParseInt(s, 16, 32)
		if err != nil {
			t.Fatalf("bert_chars.txt: %q: %v", s, err)
		}
		return rune(v)
	}
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		switch {
		case len(fs) >= 2 && fs[1] == "=":
			var b strings.Builder
			if len(fs) == 3 {
				for _, h := range strings.Split(fs[2], ",") {
					b.WriteRune(hex(h))
				}
			}
			strip[hex(fs[0])] = b.String()
		case len(fs) == 3:
			for r := hex(fs[0]); r <= hex(fs[1]); r++ {
				flags[r] = fs[2]
			}
		default:
			t.Fatalf("bert_chars.txt: line %q", sc.Text())
		}
	}
	return flags, strip
}

// TestBertChars holds BertNormalizer's clean_text and strip_accents and
// BertPreTokenizer's classes to the reference's on every code point.
func TestBertChars(t *testing.T) {
	flags, strip := readBertChars(t)
	bertTables()
	clean := &bertNormalizer{clean: true}
	stripper := &bertNormalizer{strip: true}
	bad := 0
	for r := rune(0); r <= utf8.MaxRune && bad < 20; r++ {
		if 0xd800 <= r && r <= 0xdfff {
			continue
		}
		s := string(r)
		got := ""
		switch c := clean.apply(s); {
		case c == "":
			got += "x"
		case c == " " && s != " ":
			got += "s"
		}
		switch n := len(bertWords("a" + s + "a")); n {
		case 2:
			got += "w"
		case 3:
			got += "p"
		}
		if got != flags[r] {
			t.Errorf("U+%04X: flags %q, want %q", r, got, flags[r])
			bad++
		}
		want, ok := strip[r]
		if !ok {
			want = s
		}
		if a := stripper.apply(s); a != want {
			t.Errorf("U+%04X: strip_accents %q, want %q", r, a, want)
			bad++
		}
	}
}

// bertWords is BertPreTokenizer's words of s.
func bertWords(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		start, end := nextBertWord(s, i)
		if start < end {
			out = append(out, s[start:end])
		}
		i = end
	}
	return out
}

// inSpans is class membership by a plain search of the generated ranges,
// not bertClass's tables.
func inSpans(spans []runeSpan, r rune) bool {
	for _, s := range spans {
		if s.lo <= r && r <= s.hi {
			return true
		}
	}
	return false
}

// naiveBertWords cuts s as BertPreTokenizer does, written the other way
// round: split at whitespace first, then each piece around punctuation.
func naiveBertWords(s string) []string {
	var out []string
	fields := strings.FieldsFunc(s, func(r rune) bool { return inSpans(bertWhiteRanges, r) })
	for _, f := range fields {
		rs := []rune(f)
		var cur []rune
		for k, r := range rs {
			if utf8.ValidString(string(rs[k])) && inSpans(bertPunctRanges, r) {
				if len(cur) > 0 {
					out = append(out, string(cur))
				}
				out = append(out, string(r))
				cur = nil
				continue
			}
			cur = append(cur, r)
		}
		if len(cur) > 0 {
			out = append(out, string(cur))
		}
	}
	return out
}

// naiveBertNormalize is BertNormalizer step by step over whole strings.
func naiveBertNormalize(n *bertNormalizer, s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if n.clean {
		var b strings.Builder
		for _, r := range s {
			switch {
			case r == 0 || r == 0xfffd || inSpans(bertRemoveRanges, r):
			case inSpans(bertSpaceRanges, r):
				b.WriteByte(' ')
			default:
				b.WriteRune(r)
			}
		}
		s = b.String()
	}
	if n.chinese {
		var b strings.Builder
		for _, r := range s {
			if inSpans(bertChineseRanges, r) {
				b.WriteString(" " + string(r) + " ")
			} else {
				b.WriteRune(r)
			}
		}
		s = b.String()
	}
	if n.strip {
		var b strings.Builder
		d := referenceForm(norm.NFD, s)
		for _, r := range d {
			if !inSpans(bertMarkRanges, r) {
				b.WriteRune(r)
			}
		}
		s = b.String()
	}
	if n.lower {
		s = lowercase(s)
	}
	return s
}

// FuzzBertPreTokenizer holds BertNormalizer (every combination of its
// options, and its ASCII path) and BertPreTokenizer to the naive versions
// above on arbitrary valid text.
func FuzzBertPreTokenizer(f *testing.F) {
	for _, s := range []string{"Hello, world!", "a.b", " \t\n ", "北京 x", "Café", "\u0000\u0085\u00ad", "İ", "x\u3000y", "!!", "\xff", "a\u0301\u0300"} {
		f.Add(s)
	}
	bertTables()
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		got, want := bertWords(s), naiveBertWords(s)
		if strings.Join(got, "\x00") != strings.Join(want, "\x00") || len(got) != len(want) {
			t.Fatalf("words of %q: %q, want %q", s, got, want)
		}
		for k := 0; k < 16; k++ {
			n := &bertNormalizer{clean: k&1 != 0, chinese: k&2 != 0, strip: k&4 != 0, lower: k&8 != 0}
			if got, want := n.apply(s), naiveBertNormalize(n, s); got != want {
				t.Fatalf("normalize %+v %q = %q, want %q", *n, s, got, want)
			}
		}
	})
}

// naiveWordPiece is Hugging Face's loop: from each point, the longest
// piece by trying every end from the word's end down, one character at a
// time, looked up as a string.
func naiveWordPiece(vocab map[string]uint32, unk uint32, prefix string, maxChars int, w string) []uint32 {
	if utf8.RuneCountInString(w) > maxChars {
		return []uint32{unk}
	}
	var out []uint32
	for start := 0; start < len(w); {
		end := len(w)
		found := false
		for start < end {
			sub := w[start:end]
			if start > 0 {
				sub = prefix + sub
			}
			if id, ok := vocab[sub]; ok {
				out = append(out, id)
				found = true
				break
			}
			_, size := utf8.DecodeLastRuneInString(w[start:end])
			end -= size
		}
		if !found {
			return []uint32{unk}
		}
		start = end
	}
	return out
}

// FuzzWordPiece holds the trie's longest match to the naive loop on a
// vocabulary and a word from the input: pieces is "|"-separated, the word
// is cut from the alphabet the pieces use.
func FuzzWordPiece(f *testing.F) {
	f.Add("a|ab|abc|##b|##bc|##c|b", "abcabc", uint8(10))
	f.Add("é|##é|e|##\u0301", "ééé", uint8(2))
	f.Add("x|##|###|##x", "x##x", uint8(100))
	f.Fuzz(func(t *testing.T, pieces, word string, maxChars uint8) {
		if !utf8.ValidString(pieces) || !utf8.ValidString(word) || word == "" || len(pieces) > 1<<10 {
			return
		}
		vocab := map[string]uint32{"[UNK]": 0}
		for _, p := range strings.Split(pieces, "|") {
			if _, ok := vocab[p]; !ok && p != "" {
				vocab[p] = uint32(len(vocab))
			}
		}
		mc := int(maxChars)
		m := &modelJSON{Type: "WordPiece", Vocab: vocab, MaxInputCharsPerWord: &mc}
		tok := &Tokenizer{bertPre: true}
		if err := tok.loadWordPiece(m); err != nil {
			t.Fatal(err)
		}
		ops := 0
		got := tok.model.wp.encode(nil, word, &ops)
		want := naiveWordPiece(vocab, 0, "##", mc, word)
		if !slices.Equal(got, want) {
			t.Fatalf("vocab %q word %q: %v, want %v", pieces, word, got, want)
		}
		if ops > len(word)*(len(pieces)+2) {
			t.Fatalf("vocab %q word %q: %d steps", pieces, word, ops)
		}
	})
}

// TestWordPieceLongWord: a word far over max_input_chars_per_word is one
// unknown token after a single count of its characters.
func TestWordPieceLongWord(t *testing.T) {
	tok := fixture(t, "bert_base_uncased")
	word := strings.Repeat("x", 1<<20)
	w := work{ctx: context.Background()}
	got, err := tok.appendEncode(&w, nil, word)
	if err != nil || len(got) != 1 || got[0] != 100 {
		t.Fatalf("1 MiB word: %v %v, want [100]", trunc(got), err)
	}
}

// TestWordPieceUnsupported: what the WordPiece path does not implement is
// refused at load, on the bert_base_uncased fixture changed one field at a
// time.
func TestWordPieceUnsupported(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(fixtureDir(t, "bert_base_uncased"), "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		mutate  func(m map[string]any)
		feature string
	}{
		{"no_unk", func(m map[string]any) { m["model"].(map[string]any)["unk_token"] = "<unk>" }, `unk_token "<unk>" not in the vocabulary`},
		{"decoder_null", func(m map[string]any) { m["decoder"] = nil }, "decoder null with a WordPiece model"},
		{"decoder_bytelevel", func(m map[string]any) { m["decoder"] = map[string]any{"type": "ByteLevel"} }, `decoder "ByteLevel" with a WordPiece model`},
		{"whitespace_pre", func(m map[string]any) { m["pre_tokenizer"] = map[string]any{"type": "Whitespace"} }, `pre_tokenizer "Whitespace"`},
		{"no_pre", func(m map[string]any) { m["pre_tokenizer"] = nil }, "model WordPiece without BertPreTokenizer"},
		{"other_normalizer", func(m map[string]any) { m["normalizer"] = map[string]any{"type": "NFC"} }, "normalizer other than BertNormalizer"},
		{"roberta", func(m map[string]any) { m["post_processor"] = map[string]any{"type": "RobertaProcessing"} }, `post_processor "RobertaProcessing"`},
		{"bpe_fields", func(m map[string]any) { m["model"].(map[string]any)["merges"] = []any{} }, "WordPiece with BPE fields"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m map[string]any
			if err := jsonUnmarshal(data, &m); err != nil {
				t.Fatal(err)
			}
			tc.mutate(m)
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Load(b)
			var ue *UnsupportedError
			if !errors.As(err, &ue) {
				t.Fatalf("Load: err = %v, want an UnsupportedError", err)
			}
			if !strings.Contains(ue.Feature, tc.feature) {
				t.Errorf("feature %q does not name %q", ue.Feature, tc.feature)
			}
		})
	}
}
