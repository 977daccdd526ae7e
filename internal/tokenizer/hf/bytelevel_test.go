package hf

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestByteLevelUseRegexDefault: a ByteLevel pre-tokenizer without a
// use_regex field splits with GPT-2's regex, as Hugging Face's serde
// default (true) has it; an explicit false alone is refused, and so is
// the default after a Split (two splits, which is not implemented).
func TestByteLevelUseRegexDefault(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pre     any
		feature string // "" when it loads
	}{
		{"absent", map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true}, ""},
		{"true", map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}, ""},
		{"false", map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
			"[ByteLevel(use_regex=false)]"},
		{"absent_after_split", map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": patternQwen2}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false},
		}}, "[Split, ByteLevel(use_regex=true)]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := Load(synthetic(func(m map[string]any) { m["pre_tokenizer"] = tc.pre }))
			if tc.feature != "" {
				var ue *UnsupportedError
				if !errors.As(err, &ue) || !strings.Contains(ue.Feature, tc.feature) {
					t.Fatalf("Load: err = %v, want an UnsupportedError naming %s", err, tc.feature)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tok.split.gpt2 {
				t.Fatal("not split with GPT-2's regex")
			}
			if got, want := tok.Encode("hello world"), []uint32{259, 260, 'o', 'r', 'l', 'd'}; !slices.Equal(got, want) {
				t.Errorf("Encode = %v, want %v", got, want)
			}
		})
	}
}
