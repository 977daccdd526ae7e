package hf

import (
	"encoding/json"
	"fmt"
	"slices"
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
