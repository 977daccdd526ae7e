package tokenizer

import (
	"context"
	"strings"
	"testing"
)

// repeatTo repeats x until it is at least n bytes long.
func repeatTo(x string, n int) string {
	return strings.Repeat(x, (n+len(x)-1)/len(x))
}

// workOf is the work Simple's encoder counts for text.
func workOf(tok *Simple, text string) int {
	var work int
	if _, err := tok.appendEncode(context.Background(), nil, text, &work); err != nil {
		panic(err)
	}
	return work
}

// FuzzEncodeLinear looks for input that makes encoding super-linear: a
// text made of x repeated to some 16 KiB, and the same four times longer,
// must cost the same work per byte (the encoder's own count of the bytes
// it reads, which does not depend on the machine), within a quarter.
// Reading a text full of special tokens (or of near misses of them) from
// each match on again was quadratic.
func FuzzEncodeLinear(f *testing.F) {
	for _, s := range []string{"a", IMEnd, "<|im_", "<|im_start|>user\nhi" + IMEnd + "\n", "<", " x", "\xff<|", SampleText} {
		f.Add(s)
	}
	tok := NewSimple()
	f.Fuzz(func(t *testing.T, x string) {
		if x == "" || len(x) > 4<<10 {
			return
		}
		small := repeatTo(x, 16<<10)
		large := strings.Repeat(small, 4)
		per := func(s string) float64 { return float64(workOf(tok, s)) / float64(len(s)) }
		if p1, p4 := per(small), per(large); p4 > 1.25*p1+0.5 {
			t.Fatalf("work per byte grows with the input: %.2f at %d bytes, %.2f at %d (x = %q)", p1, len(small), p4, len(large), x)
		}
	})
}

// TestWorkIsLinear holds the hostile inputs of the fuzz target's seeds to a
// few reads per byte at several sizes.
func TestWorkIsLinear(t *testing.T) {
	tok := NewSimple()
	for _, x := range []string{IMEnd, "<|im_", "<<<<", SampleText} {
		for _, n := range []int{16 << 10, 64 << 10, 256 << 10} {
			s := repeatTo(x, n)
			if w := workOf(tok, s); w > 40*len(s) {
				t.Errorf("%q to %d bytes: %d reads", x[:min(len(x), 12)], len(s), w)
			}
		}
	}
}
