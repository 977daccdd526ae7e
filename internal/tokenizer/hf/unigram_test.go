package hf

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// unigramFile is a tokenizer.json with a Unigram model over pieces (id 0
// the unknown token), the added tokens <s> (1, special) and [n] (2,
// normalized), and the given normalizer, pre-tokenizer and decoder.
func unigramFile(pieces [][2]any, byteFallback bool, normalizer, pre, decoder any) []byte {
	vocab := []any{[]any{"<unk>", 0}, []any{"<s>", 0}, []any{"[n]", 0}}
	for _, p := range pieces {
		vocab = append(vocab, []any{p[0], p[1]})
	}
	added := func(id int, content string, normalized, special bool) any {
		return map[string]any{"id": id, "content": content, "single_word": false, "lstrip": false, "rstrip": false,
			"normalized": normalized, "special": special}
	}
	f := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil,
		"added_tokens":   []any{added(1, "<s>", false, true), added(2, "[n]", true, false)},
		"normalizer":     normalizer,
		"pre_tokenizer":  pre,
		"post_processor": nil,
		"decoder":        decoder,
		"model":          map[string]any{"type": "Unigram", "unk_id": 0, "vocab": vocab, "byte_fallback": byteFallback},
	}
	data, err := json.Marshal(f)
	if err != nil {
		panic(err)
	}
	return data
}

var fuse = map[string]any{"type": "Fuse"}

func metaspaceCfg(scheme string, split bool) map[string]any {
	return map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": split}
}

// TestUnigramSmall: the example of Hugging Face's Unigram::encode
// documentation — "abcdacdxx" is abcd, a, cd and the fused unknown xx.
func TestUnigramSmall(t *testing.T) {
	pieces := [][2]any{{"a", 0.0}, {"b", 0.0}, {"c", 0.0}, {"d", 0.0}, {"cd", 1.0}, {"ab", 2.0}, {"abc", 5.0}, {"abcd", 10.0}}
	tok, err := Load(unigramFile(pieces, false, nil, nil, fuse))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tok.Encode("abcdacdxx"), []uint32{10, 3, 7, 0}; !slices.Equal(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
}

// TestMetaspaceSmall holds the Metaspace pre-tokenizer and decoder to what
// the reference (@anush008/tokenizers, tokenizers 0.22.2) gives on a small
// vocabulary: sections after an added token, normalized or not, get no
// "▁" under "first"; the decoder drops the first token's "▁" unless the
// scheme is never.
func TestMetaspaceSmall(t *testing.T) {
	pieces := [][2]any{{"▁", -1.0}, {"a", -2.0}, {"b", -2.0}, {"▁a", -1.5}}
	type want struct {
		text      string
		ids       []uint32
		dec, skip string
	}
	for _, tc := range []struct {
		pre   any
		cases []want
	}{
		{map[string]any{"type": "Metaspace", "replacement": "▁"}, []want{ // always, split
			{"a b", []uint32{6, 3, 5}, "a b", "a b"},
			{"<s>a", []uint32{1, 6}, "<s> a", "a"},
			{"b<s>a", []uint32{3, 5, 1, 6}, "b<s> a", "b a"},
			{"[n]a", []uint32{2, 6}, "[n] a", "[n] a"},
			{"a[n]", []uint32{6, 2}, "a[n]", "a[n]"},
			{" a", []uint32{6}, "a", "a"},
			{"<s> a", []uint32{1, 6}, "<s> a", "a"},
		}},
		{metaspaceCfg("first", true), []want{
			{"a b", []uint32{6, 3, 5}, "a b", "a b"},
			{"<s>a", []uint32{1, 4}, "<s>a", "a"},
			{"b<s>a", []uint32{3, 5, 1, 4}, "b<s>a", "ba"},
			{"[n]a", []uint32{2, 4}, "[n]a", "[n]a"},
			{"b[n]a", []uint32{3, 5, 2, 4}, "b[n]a", "b[n]a"},
			{"a[n]", []uint32{6, 2}, "a[n]", "a[n]"},
			{"<s> a", []uint32{1, 6}, "<s> a", "a"},
		}},
		{map[string]any{"type": "Metaspace", "replacement": "▁", "add_prefix_space": false, "prepend_scheme": "never"}, []want{
			{"a b", []uint32{4, 3, 5}, "a b", "a b"},
			{"b<s>a", []uint32{5, 1, 4}, "b<s>a", "ba"},
			{" a", []uint32{6}, " a", " a"},
			{"<s> a", []uint32{1, 6}, "<s> a", " a"},
		}},
	} {
		tok, err := Load(unigramFile(pieces, false, nil, tc.pre, tc.pre))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range tc.cases {
			// Twice: the second may come from the segment cache.
			for range 2 {
				if got := tok.Encode(c.text); !slices.Equal(got, c.ids) {
					t.Errorf("%v: Encode(%q) = %v, want %v", tc.pre, c.text, got, c.ids)
				}
			}
			if got := tok.Decode(c.ids); got != c.dec {
				t.Errorf("%v: Decode(%v) = %q, want %q", tc.pre, c.ids, got, c.dec)
			}
			if got := tok.DecodeSkipSpecial(c.ids); got != c.skip {
				t.Errorf("%v: DecodeSkipSpecial(%v) = %q, want %q", tc.pre, c.ids, got, c.skip)
			}
		}
	}
}

// TestMetaspaceLoad: what Hugging Face refuses to load, this refuses too.
func TestMetaspaceLoad(t *testing.T) {
	for _, pre := range []map[string]any{
		{"type": "Metaspace"},
		{"type": "Metaspace", "replacement": "ab"},
		{"type": "Metaspace", "replacement": "▁", "add_prefix_space": false},
		{"type": "Metaspace", "replacement": "▁", "add_prefix_space": false, "prepend_scheme": "first"},
		{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "sometimes"},
	} {
		if _, err := Load(unigramFile(nil, false, nil, pre, fuse)); err == nil {
			t.Errorf("%v: loaded", pre)
		}
	}
}

func TestUnsupportedUnigram(t *testing.T) {
	tests := []struct {
		name    string
		data    []byte
		feature string
	}{
		{"no_unk_id", func() []byte {
			var m map[string]any
			_ = json.Unmarshal(unigramFile(nil, false, nil, nil, fuse), &m)
			delete(m["model"].(map[string]any), "unk_id")
			data, _ := json.Marshal(m)
			return data
		}(), "without unk_id"},
		{"byte_level", synthetic(func(m map[string]any) {
			m["model"] = map[string]any{"type": "Unigram", "unk_id": 0, "vocab": []any{[]any{"<unk>", 0}}}
		}), "model Unigram after a byte-level pre-tokenizer"},
		{"metaspace_decoder_late", unigramFile(nil, true, nil, metaspaceCfg("always", true), map[string]any{
			"type": "Sequence", "decoders": []any{map[string]any{"type": "ByteFallback"}, metaspaceCfg("always", true)}}),
			"Metaspace other than first"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.data)
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

// TestLowercase holds the Lowercase normalizer to the reference's mapping
// of every code point (testdata/golden/lowercase.txt, gen_tokens.js): the
// ones it lists map so, every other one is left as it is.
func TestLowercase(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "golden", "lowercase.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	listed := map[rune]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		from, to, ok := strings.Cut(sc.Text(), " ")
		cp, err := strconv.ParseUint(from, 16, 32)
		if !ok || err != nil {
			t.Fatalf("line %q", sc.Text())
		}
		var b strings.Builder
		for _, h := range strings.Split(to, ",") {
			r, err := strconv.ParseUint(h, 16, 32)
			if err != nil {
				t.Fatalf("line %q", sc.Text())
			}
			b.WriteRune(rune(r))
		}
		listed[rune(cp)] = b.String()
	}
	if len(listed) < 1400 {
		t.Fatalf("lowercase.txt lists %d code points", len(listed))
	}
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue
		}
		want, ok := listed[r]
		if !ok {
			want = string(r)
		}
		if got := lowercase(string(r)); got != want {
			t.Errorf("lowercase(U+%04X) = %q, want %q", r, got, want)
		}
	}
	// No final-sigma rule: the reference lowercases one character at a
	// time. Invalid bytes stay.
	for in, want := range map[string]string{"ΟΔΟΣ ΣΑ": "οδοσ σα", "ABC\xffDÉ": "abc\xffdé", "abc": "abc", "İ": "i\u0307"} {
		if got := lowercase(in); got != want {
			t.Errorf("lowercase(%q) = %q, want %q", in, got, want)
		}
	}
}

// unigramSpec builds a small vocabulary from fuzz input: pieces cut at NUL
// bytes (valid UTF-8, 1 to 8 bytes, at most 48), scored on a quarter grid
// so that paths tie, or with fractions that round; with fallback, the
// <0xXX> pieces (some missing when round).
func unigramSpec(spec []byte, fallback, round bool) [][2]any {
	var pieces [][2]any
	for i, p := range strings.Split(string(spec), "\x00") {
		if p == "" || len(p) > 8 || !utf8.ValidString(p) || len(pieces) == 48 {
			continue
		}
		h := uint32(2166136261)
		for k := 0; k < len(p); k++ {
			h = (h ^ uint32(p[k])) * 16777619
		}
		score := -float64(h%24) / 4
		if round {
			score = -float64(h%1000)/7 - float64(i)/3
		}
		pieces = append(pieces, [2]any{p, score})
	}
	if fallback {
		for c := 0; c < 256; c++ {
			// With round, some bytes have no piece: a run holding one
			// falls back to the unknown token whole.
			if !round || c%5 != 0 {
				pieces = append(pieces, [2]any{fmt.Sprintf("<0x%02X>", c), -30.0})
			}
		}
	}
	return pieces
}

// simpleUnigram is the Viterbi search written the other way round, for
// FuzzUnigram: for each end, every start before it in order, by map
// look-up. It returns the ids and the best path's score.
func simpleUnigram(vocab [][2]any, unkID int, byteFallback bool, s string) ([]uint32, float64) {
	ids := map[string]int{}
	scores := make([]float64, len(vocab))
	minScore := math.Inf(1)
	for id, p := range vocab {
		ids[p[0].(string)] = id
		scores[id] = p[1].(float64)
		minScore = min(minScore, scores[id])
	}
	unkScore := minScore - 10
	var bounds []int // character starts, and len(s)
	charEnd := map[int]int{}
	for i := 0; i < len(s); {
		_, n := utf8.DecodeRuneInString(s[i:])
		bounds = append(bounds, i)
		charEnd[i] = i + n
		i += n
	}
	bounds = append(bounds, len(s))
	best := map[int]float64{0: 0}
	from := map[int]int{}
	node := map[int]int{}
	for _, e := range bounds[1:] {
		for _, st := range bounds {
			if st >= e {
				break
			}
			cand, id := 0.0, -1
			if pid, ok := ids[s[st:e]]; ok {
				cand, id = scores[pid]+best[st], pid
			} else if _, single := ids[s[st:charEnd[st]]]; !single && charEnd[st] == e {
				cand, id = unkScore+best[st], unkID
			}
			if id < 0 {
				continue
			}
			if _, set := from[e]; !set || cand > best[e] {
				best[e], from[e], node[e] = cand, st, id
			}
		}
	}
	type seg struct {
		s  string
		id int
	}
	var path []seg
	for e := len(s); e > 0; e = from[e] {
		path = append(path, seg{s[from[e]:e], node[e]})
	}
	slices.Reverse(path)
	var out []uint32
	emit := func(run string) {
		if id, ok := ids[run]; ok {
			out = append(out, uint32(id))
			return
		}
		var bytes []uint32
		for i := 0; byteFallback && i < len(run); i++ {
			id, ok := ids[fmt.Sprintf("<0x%02X>", run[i])]
			if !ok {
				bytes = nil
				break
			}
			bytes = append(bytes, uint32(id))
		}
		if bytes != nil {
			out = append(out, bytes...)
		} else {
			out = append(out, uint32(unkID))
		}
	}
	run := ""
	for _, p := range path {
		if p.id == unkID {
			run += p.s
			continue
		}
		if run != "" {
			emit(run)
			run = ""
		}
		out = append(out, uint32(p.id))
	}
	if run != "" {
		emit(run)
	}
	return out, best[len(s)]
}

// exhaustiveBest is the best score over every segmentation of s into
// pieces and unknown characters (a character with no piece of its own).
func exhaustiveBest(vocab [][2]any, s string) float64 {
	ids := map[string]float64{}
	minScore := math.Inf(1)
	for _, p := range vocab {
		ids[p[0].(string)] = p[1].(float64)
		minScore = min(minScore, p[1].(float64))
	}
	var walk func(i int) float64
	walk = func(i int) float64 {
		if i == len(s) {
			return 0
		}
		best := math.Inf(-1)
		_, n := utf8.DecodeRuneInString(s[i:])
		if _, ok := ids[s[i:i+n]]; !ok {
			best = minScore - 10 + walk(i+n)
		}
		for e := i + 1; e <= len(s); e++ {
			if sc, ok := ids[s[i:e]]; ok {
				best = max(best, sc+walk(e))
			}
		}
		return best
	}
	return walk(0)
}

// FuzzUnigram checks the Unigram encoder against simpleUnigram on small
// vocabularies built from the input, and the best path's score against
// every segmentation on short texts.
func FuzzUnigram(f *testing.F) {
	f.Add([]byte("a\x00b\x00ab\x00abc\x00é\x00日本\x00bc"), "abcabé日本x", true, false)
	f.Add([]byte("a\x00aa\x00aaa\x00<unk>\x00x"), "aaaaaxxa<unk>y", false, true)
	f.Add([]byte("ab\x00b\x00\xe6\x97"), "abab\xe6\x97\xa5\xff", true, true)
	f.Fuzz(func(t *testing.T, spec []byte, text string, fallback, round bool) {
		if text == "" || len(text) > 48 || len(spec) > 512 {
			return
		}
		pieces := unigramSpec(spec, fallback, round)
		tok, err := Load(unigramFile(pieces, fallback, nil, nil, fuse))
		if err != nil {
			t.Fatal(err)
		}
		vocab := [][2]any{{"<unk>", 0.0}, {"<s>", 0.0}, {"[n]", 0.0}}
		for _, p := range pieces {
			vocab = append(vocab, [2]any{p[0], p[1].(float64)})
		}
		ops := 0
		got := tok.model.uni.encode(nil, text, &ops)
		want, score := simpleUnigram(vocab, 0, fallback, text)
		if !slices.Equal(got, want) {
			t.Fatalf("encode(%q) = %v, simple Viterbi %v (pieces %q)", text, got, want, pieces)
		}
		if utf8.RuneCountInString(text) <= 10 {
			if best := exhaustiveBest(vocab, text); math.Abs(best-score) > 1e-9*max(1, math.Abs(best)) {
				t.Fatalf("encode(%q): best path scores %v, the best segmentation %v", text, score, best)
			}
		}
	})
}

// TestMetaspaceFirstCache: under prepend_scheme "first" the same text
// encodes otherwise at the input's start than after an added token, so the
// segment cache must not hand one the other's ids.
func TestMetaspaceFirstCache(t *testing.T) {
	fresh, err := LoadDir(fixtureDir(t, "llama2_metaspace"))
	if err != nil {
		t.Fatal(err)
	}
	cold := *fresh
	cold.segments = nil
	s := strings.Repeat("Hello world, once more. ", 40)
	for _, text := range []string{"<s>" + s, s, s + "</s>" + s, s, "<s>" + s} {
		for range 2 {
			if got, want := fresh.Encode(text), cold.Encode(text); !slices.Equal(got, want) {
				t.Fatalf("cached Encode(%q) = %v, uncached %v", trunc(text), trunc(got), trunc(want))
			}
		}
	}
	if a, b := cold.Encode(s), cold.Encode("<s>" + s)[1:]; slices.Equal(a, b) {
		t.Fatal("the same text encodes the same at the start and after <s>: the test tests nothing")
	}
}

// TestUnigramLinear: the Viterbi search reads each position's pieces from
// the trie, so its work is at most the longest piece per byte, however
// long the word — here a vocabulary of runs of up to 32 "a"s and "ab"s,
// words of 16 KiB to 1 MiB with no space to cut them.
func TestUnigramLinear(t *testing.T) {
	var pieces [][2]any
	for k := 1; k <= 32; k++ {
		pieces = append(pieces, [2]any{strings.Repeat("a", k), -float64(k) / 3}, [2]any{strings.Repeat("ab", k), -float64(k) / 2})
	}
	tok, err := Load(unigramFile(pieces, true, nil, metaspaceCfg("always", false), fuse))
	if err != nil {
		t.Fatal(err)
	}
	cold := *tok
	cold.segments = nil
	for _, x := range []string{"a", "ab", "aab", "b", "日本", "a\xff"} {
		small := repeatTo(x, 16<<10)
		large := repeatTo(x, 1<<20)
		p1 := float64(stepsOf(&cold, small)) / float64(len(small))
		p64 := float64(stepsOf(&cold, large)) / float64(len(large))
		if p64 > 1.25*p1+0.5 || p64 > 2*64+8 {
			t.Errorf("%q: work per byte %.2f at %d bytes, %.2f at %d", x, p1, len(small), p64, len(large))
		}
	}
}
