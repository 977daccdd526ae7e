package hf

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// charVocab is a character-level BPE tokenizer.json with byte fallback
// that lacks <0x63> ("c") and <0xE6> (the lead byte of 日), so that "c"
// and 日 are unknown, as Gemma's tab would be without its own token.
func charVocab(fuseUnk, unk bool) []byte {
	vocab := map[string]any{"<unk>": 0, "a": 1, "b": 2, "▁": 3, "ab": 4}
	n := 5
	for c := 0; c < 256; c++ {
		if c == 0x63 || c == 0xE6 {
			continue
		}
		vocab[fmt.Sprintf("<0x%02X>", c)] = n
		n++
	}
	var unkToken any
	if unk {
		unkToken = "<unk>"
	}
	f := map[string]any{
		"version": "1.0", "added_tokens": []any{},
		"normalizer":    map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"},
		"pre_tokenizer": nil, "post_processor": nil,
		"decoder": map[string]any{"type": "Sequence", "decoders": []any{
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": "▁"}, "content": " "},
			map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"},
		}},
		"model": map[string]any{
			"type": "BPE", "unk_token": unkToken, "fuse_unk": fuseUnk, "byte_fallback": true,
			"vocab": vocab, "merges": [][2]string{{"a", "b"}},
		},
	}
	data, err := json.Marshal(f)
	if err != nil {
		panic(err)
	}
	return data
}

// TestByteFallbackUnknown: a character missing from the vocabulary is its
// <0xXX> tokens only when all of them exist, else the unknown token (one
// per run with fuse_unk, nothing without an unknown token), which is
// added at the next character found in the vocabulary or at the end —
// after the byte tokens of the characters between. The expected ids are
// Hugging Face's (tokenizers 0.22, the reference binding) for these
// tokenizer.json files.
func TestByteFallbackUnknown(t *testing.T) {
	const e1, e2 = 199, 173 // <0xC3> <0xA9>: é
	want := map[string]map[string][]uint32{
		"fuse": {
			"acb": {1, 0, 2}, "accb": {1, 0, 2}, "c": {0}, "cé": {e1, e2, 0}, "céa": {e1, e2, 0, 1},
			"cécb": {e1, e2, 0, 2}, "日": {0}, "a日b日日": {1, 0, 2, 0}, "ab c ab": {4, 3, 0, 3, 4},
			"c c": {0, 3, 0}, "é": {e1, e2}, "ccé": {e1, e2, 0}, "😀c": {243, 163, 156, 132, 0},
		},
		"nofuse": {
			"acb": {1, 0, 2}, "accb": {1, 0, 0, 2}, "c": {0}, "cé": {e1, e2, 0}, "céa": {e1, e2, 0, 1},
			"cécb": {e1, e2, 0, 0, 2}, "日": {0}, "a日b日日": {1, 0, 2, 0, 0}, "ab c ab": {4, 3, 0, 3, 4},
			"c c": {0, 3, 0}, "é": {e1, e2}, "ccé": {0, e1, e2, 0}, "😀c": {243, 163, 156, 132, 0},
		},
		"nounk": {
			"acb": {4}, "accb": {4}, "c": nil, "cé": {e1, e2}, "céa": {e1, e2, 1},
			"cécb": {e1, e2, 2}, "日": nil, "a日b日日": {4}, "ab c ab": {4, 3, 3, 4},
			"c c": {3}, "é": {e1, e2}, "ccé": {e1, e2}, "😀c": {243, 163, 156, 132},
		},
	}
	for name, cases := range want {
		tok, err := Load(charVocab(name == "fuse", name != "nounk"))
		if err != nil {
			t.Fatal(err)
		}
		if tok.split.spaceMark != "▁" {
			t.Errorf("%s: segments not cut at ▁", name)
		}
		for text, ids := range cases {
			if got := tok.Encode(text); !slices.Equal(got, ids) {
				t.Errorf("%s: Encode(%q) = %v, want %v", name, text, got, ids)
			}
		}
	}
	// An unknown token that is not a token: Hugging Face fails the
	// encodings that need it, so such a tokenizer is refused.
	var f map[string]any
	if err := json.Unmarshal(charVocab(true, true), &f); err != nil {
		t.Fatal(err)
	}
	f["model"].(map[string]any)["unk_token"] = "<missing>"
	data, _ := json.Marshal(f)
	if _, err := Load(data); err == nil {
		t.Error("unk_token outside the vocabulary: loaded")
	}
}

// TestSpaceKeepers: a vocabulary with too many strings that have "▁"
// after other text still cuts segments, but not after the characters
// before those marks (InternLM2: tab and newline), nor after a character
// that is not a token of its own; the cuts change no ids.
func TestSpaceKeepers(t *testing.T) {
	keep, ok := spaceKeepers(map[string]uint32{"▁": 0, "\t▁▁": 1, "\n▁": 2, "a▁▁b▁": 3, "▁▁x": 4}, "▁")
	if !ok || string(keep) != "\t\nab" {
		t.Errorf("spaceKeepers = %q, %v; want tab, newline, a, b", string(keep), ok)
	}
	if _, ok := spaceKeepers(map[string]uint32{"\t▁": 1}, "▁"); ok {
		t.Error("a mark that is not a token: cut anyway")
	}
	many := map[string]uint32{"▁": 100}
	for i := range maxSpaceExceptions + 1 {
		many[string(rune('a'+i))+"▁"] = uint32(i)
	}
	if _, ok := spaceKeepers(many, "▁"); ok {
		t.Error("more keepers than the bound: cut anyway")
	}

	tok := fixture(t, "internlm2")
	if tok.split.spaceMark != "▁" || string(tok.split.spaceKeep) != "\t\n" {
		t.Fatalf("internlm2: mark %q, keep %q; want ▁ and tab, newline", tok.split.spaceMark, string(tok.split.spaceKeep))
	}
	for _, c := range []struct {
		s    string
		want int
	}{
		{"▁the▁cat", len("▁the")}, {"a\t▁▁b▁c", len("a\t▁▁b")}, {"x\n▁y", len("x\n▁y")},
		{"\ue000▁x▁y", len("\ue000▁x")}, {"▁▁", len("▁▁")}, {"ab", 2},
	} {
		if got := tok.model.nextSpaceChunkKeep(c.s, "▁", tok.split.spaceKeep); got != c.want {
			t.Errorf("nextSpaceChunkKeep(%q) = %d, want %d", c.s, got, c.want)
		}
	}
	whole := *tok
	whole.segments = nil
	whole.split.spaceMark, whole.split.spaceKeep = "", nil
	cut := *tok
	cut.segments = nil
	texts := []string{"def f():\n\treturn  1\n\n\t\t x = 2", "a\t b\n c \ue000 d \U0001F600 e", "  \t  \n  \t\t  ", "\n    \n        \n"}
	for i := range 200 {
		var b strings.Builder
		for k := range 30 {
			b.WriteString([]string{" ", "\t", "\n", "a", "the", "\ue000", "日本", "  ", "\t ", "\n ", "x\u0301", "😀"}[(i*7+k*k*3+k*i)%12])
		}
		texts = append(texts, b.String())
	}
	for _, s := range texts {
		if got, want := cut.Encode(s), whole.Encode(s); !slices.Equal(got, want) {
			t.Fatalf("Encode(%q) cut at marks = %v, whole %v", s, got, want)
		}
	}
}

// TestExceptionsExact: spaceChunks's exceptions are trusted only while a
// merge across a cut would show in the text.
func TestExceptionsExact(t *testing.T) {
	unk := "<unk>"
	m := &bpe{unk: 0}
	if !m.exceptionsExact(nil, &unk) || !m.exceptionsExact([]string{">▁</"}, &unk) {
		t.Error("plain exceptions refused")
	}
	if m.exceptionsExact([]string{"<0x0A>▁"}, &unk) || m.exceptionsExact([]string{"<unk>▁a"}, &unk) {
		t.Error("an exception a byte-fallback or unknown token could make: trusted")
	}
	m.unk, m.fallback[9] = noToken, noToken
	if m.exceptionsExact([]string{">▁</"}, nil) || !m.exceptionsExact(nil, nil) {
		t.Error("with characters that vanish, exceptions trusted (or no exceptions refused)")
	}
}

// FuzzSpaceCuts: cutting segments at "▁" (spaceChunks's exceptions,
// spaceKeepers's characters) gives the ids of the uncut segment, for the
// character-level fixtures that cut.
func FuzzSpaceCuts(f *testing.F) {
	for _, s := range []string{"a b", "x\t y", "\n  \n", "<b> </b>", "\ue000 x", "日本 語", "\t\t\t  a"} {
		f.Add(s)
	}
	type pair struct{ cut, whole *Tokenizer }
	var pairs []pair
	for _, name := range []string{"internlm2", "gemma3", "gemma", "llama2"} {
		dir := filepath.Join(cacheDir(), "tokenizers", name)
		if !fileExists(filepath.Join(dir, "tokenizer.json")) {
			continue
		}
		tok, err := LoadDir(dir)
		if err != nil {
			f.Fatal(err)
		}
		cut, whole := *tok, *tok
		cut.segments, whole.segments = nil, nil
		whole.split.spaceMark, whole.split.spaceExcept, whole.split.spaceKeep = "", nil, nil
		pairs = append(pairs, pair{&cut, &whole})
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range pairs {
			if got, want := p.cut.Encode(s), p.whole.Encode(s); !slices.Equal(got, want) {
				t.Fatalf("Encode(%q) cut at marks = %v, whole %v", s, got, want)
			}
		}
	})
}
