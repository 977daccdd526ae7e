package hf

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// stepsOf is the work the encoder counts for text (work.steps).
func stepsOf(tok *Tokenizer, text string) int {
	w := work{ctx: context.Background()}
	if _, err := tok.appendEncode(&w, nil, text); err != nil {
		panic(err)
	}
	return w.steps
}

func repeatTo(x string, n int) string { return strings.Repeat(x, (n+len(x)-1)/len(x)) }

// linearTokenizer is the Qwen3 fixture when fetched, else the synthetic
// tokenizer, without the segment cache (which would turn the longer text
// into cache hits).
func linearTokenizer(f *testing.F) *Tokenizer {
	var tok *Tokenizer
	var err error
	if dir := filepath.Join(cacheDir(), "tokenizers", "qwen3"); fileExists(filepath.Join(dir, "tokenizer.json")) {
		tok, err = LoadDir(dir)
	} else {
		tok, err = Load(synthetic(nil))
	}
	if err != nil {
		f.Fatal(err)
	}
	cold := *tok
	cold.segments = nil
	return &cold
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// FuzzEncodeLinear looks for input that makes encoding super-linear: x
// repeated to some 16 KiB and the same four times longer must cost the
// same work per byte, within a quarter — the encoder's own count of the
// bytes its scans read (added-token search, pre-tokenizer, normalizer) and
// of BPE's queue operations, which does not depend on the machine. Both
// are encoded once first, so the word cache is equally warm for both.
func FuzzEncodeLinear(f *testing.F) {
	for _, s := range []string{"a", "<|im_end|>", "<|im_", "<|reserved_special_token_", " ", "\n \n", "abc", "'s'", "日本語", "1234", "a\xff"} {
		f.Add(s)
	}
	tok := linearTokenizer(f)
	f.Fuzz(func(t *testing.T, x string) {
		if x == "" || len(x) > 4<<10 {
			return
		}
		small := repeatTo(x, 16<<10)
		large := strings.Repeat(small, 4)
		tok.Encode(large)
		p1 := float64(stepsOf(tok, small)) / float64(len(small))
		p4 := float64(stepsOf(tok, large)) / float64(len(large))
		if p4 > 1.25*p1+0.5 {
			t.Fatalf("work per byte grows with the input: %.2f at %d bytes, %.2f at %d (x = %q)", p1, len(small), p4, len(large), x)
		}
	})
}

// families are the fixture tokenizers, one per pre-tokenizer and model
// kind this package implements (the llama2_* and llama3_digits ones
// derived from Llama 2's and Llama 3.1's:
// testdata/gen/derive).
var families = []string{"qwen3", "llama3_1", "deepseek_v3", "gptoss", "gemma3", "llama2",
	"mistral_nemo", "gemma2", "gemma", "yi", "internlm2", "claude",
	"llama2_metaspace", "llama2_metaspace_legacy", "llama2_unigram", "llama2_unigram_unk",
	"llama2_digits", "llama2_digits_only", "llama3_digits", "bert_base_uncased", "bert_options", "bert_raw"}

// TestFamiliesLinear holds every family to FuzzEncodeLinear's bound on
// inputs that are expensive for some pre-tokenizer or model: long runs of
// one class (a SentencePiece segment is one BPE word), case-shape
// backtracking for o200k, gaps no DeepSeek alternative matches.
func TestFamiliesLinear(t *testing.T) {
	inputs := []string{"a", " ", "\n \n", "'s'", "日本語", "1234", "a\xff", "<|im_", "<bos", "▁",
		"Ǆ", "AB", "Aʰ", "\u0301A", "ʰ\u0301", "A'S", "\u200d", "\u200da", "・ー", "/\n", " !", "\t\t a",
		"x1y", "😀", "ab cd", "あいうえお", "▁▁", "Σ", "İ", "<0x41>", "\u0001", "<unk>",
		"7", "٣", "a1", " 12", "½x"}
	for _, model := range families {
		t.Run(model, func(t *testing.T) {
			cold := *fixture(t, model)
			cold.segments = nil
			tok := &cold
			for _, x := range inputs {
				small := repeatTo(x, 16<<10)
				large := strings.Repeat(small, 4)
				tok.Encode(large)
				p1 := float64(stepsOf(tok, small)) / float64(len(small))
				p4 := float64(stepsOf(tok, large)) / float64(len(large))
				if p4 > 1.25*p1+0.5 {
					t.Errorf("%q: work per byte grows with the input: %.2f at %d bytes, %.2f at %d", x, p1, len(small), p4, len(large))
				}
			}
		})
	}
}

// FuzzSplitters feeds the hand-written o200k, tekken and DeepSeek scanners
// arbitrary text: each step must move forward and stay inside the text,
// and the pieces must cover it; the o200k and tekken pieces must be the
// reference's (refCaseSplit: Go's regexp and the look-ahead's meaning).
func FuzzSplitters(f *testing.F) {
	for _, s := range []string{"HTTPServer's", "\u0301A", "a\u200db", "日本・ー123", " \n\t/", "\xff\xfe", "'S", "ǅx"} {
		f.Add(s)
	}
	refs := caseRefs(f)
	f.Fuzz(func(t *testing.T, s string) {
		checkCaseSplit(t, refs, s)
		var got strings.Builder
		for i := 0; i < len(s); {
			end, far := nextO200k(s, i)
			if end <= i || end > len(s) || far < end {
				t.Fatalf("nextO200k(%q, %d) = %d, %d", s, i, end, far)
			}
			got.WriteString(s[i:end])
			i = end
		}
		for i := 0; i < len(s); {
			e1 := deepSeekDigits(s, i)
			if e1 <= i || e1 > len(s) {
				t.Fatalf("deepSeekDigits(%q, %d) = %d", s, i, e1)
			}
			for j := i; j < e1; {
				p := s[:e1]
				e2 := deepSeekCJK(p, j)
				if e2 <= j || e2 > e1 {
					t.Fatalf("deepSeekCJK(%q, %d) = %d", p, j, e2)
				}
				for k := j; k < e2; {
					end, _ := nextDeepSeek(s[:e2], k)
					if end <= k || end > e2 {
						t.Fatalf("nextDeepSeek(%q, %d) = %d", s[:e2], k, end)
					}
					k = end
				}
				j = e2
			}
			i = e1
		}
		if got.String() != s {
			t.Fatalf("o200k pieces %q do not cover %q", got.String(), s)
		}
	})
}

// TestWordPieceHostile holds the BERT pipeline to linear work on the
// inputs that are long for it: a 1 MiB word (far over
// max_input_chars_per_word), runs of punctuation (each a word), long CJK
// runs (each ideograph spaced apart), accents to strip, and words just
// under the character limit that WordPiece cuts into many pieces.
func TestWordPieceHostile(t *testing.T) {
	inputs := []string{"x", "!", "!?.,", "北", "北京大学", "日本語テキスト", "é", "e\u0301\u0300", "\u0000\u00ad",
		strings.Repeat("qz", 49) + " ", strings.Repeat("ab", 5) + "!", "\u3000", "😀"}
	for _, model := range []string{"bert_base_uncased", "bert_options", "bert_raw"} {
		t.Run(model, func(t *testing.T) {
			cold := *fixture(t, model)
			cold.segments = nil
			tok := &cold
			for _, x := range inputs {
				small := repeatTo(x, 256<<10)
				large := strings.Repeat(small, 4) // 1 MiB
				tok.Encode(large)
				p1 := float64(stepsOf(tok, small)) / float64(len(small))
				p4 := float64(stepsOf(tok, large)) / float64(len(large))
				if p4 > 1.25*p1+0.5 {
					t.Errorf("%q: work per byte grows with the input: %.2f at %d bytes, %.2f at %d", x, p1, len(small), p4, len(large))
				}
			}
		})
	}
}
