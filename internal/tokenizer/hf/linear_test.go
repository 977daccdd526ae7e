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
