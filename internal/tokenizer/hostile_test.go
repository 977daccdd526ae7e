package tokenizer

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// nextSpecialNaive is the obvious (and quadratic over a whole text)
// search nextSpecial must agree with: each token's first occurrence, the
// earliest wins.
func nextSpecialNaive(s string) (at, which int) {
	at, which = -1, -1
	for i, sp := range specials {
		if j := strings.Index(s, sp.text); j >= 0 && (at < 0 || j < at) {
			at, which = j, i
		}
	}
	return at, which
}

func TestSpecialsStartWithAngle(t *testing.T) {
	for _, sp := range specials {
		if !strings.HasPrefix(sp.text, "<") {
			t.Errorf("special %q does not start with '<': nextSpecial only looks at '<'", sp.text)
		}
	}
}

func FuzzNextSpecial(f *testing.F) {
	for _, s := range []string{"", "<", "<|im_", "<|im_end|>", "a<|im_start<|im_end|>", "<<|endoftext|>", "<|im_start|><|im_end|>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		at, which, _ := nextSpecial(s)
		wantAt, wantWhich := nextSpecialNaive(s)
		if at != wantAt || which != wantWhich {
			t.Fatalf("nextSpecial(%q) = %d, %d; want %d, %d", s, at, which, wantAt, wantWhich)
		}
	})
}

// TestHostileSizes: texts and conversations built from what is expensive
// to scan (special tokens back to back, near-misses of them, thousands of
// tiny messages) tokenize to exactly what they should, with at most one id
// per byte.
func TestHostileSizes(t *testing.T) {
	tok := NewSimple()
	const n = 20000
	ids := tok.Encode(strings.Repeat(IMEnd, n))
	if len(ids) != n || slices.ContainsFunc(ids, func(id uint32) bool { return id != IMEndID }) {
		t.Fatalf("%d × %s: %d ids, want %d × %d", n, IMEnd, len(ids), n, IMEndID)
	}
	near := strings.Repeat("<|im_", n) // a prefix of two specials, never one
	if ids := tok.Encode(near); slices.Contains(ids, IMStartID) || slices.Contains(ids, IMEndID) || len(ids) > len(near) {
		t.Fatalf("near misses: %d ids, a special among them: %v", len(ids), slices.Contains(ids, IMEndID))
	}
	mixed := strings.Repeat("<"+EndOfText+"<|im_end|"+IMStart, n)
	ids = tok.Encode(mixed)
	if got := countID(ids, EndOfTextID); got != n {
		t.Errorf("mixed: %d × %s, want %d", got, EndOfText, n)
	}
	if got := countID(ids, IMStartID); got != n {
		t.Errorf("mixed: %d × %s, want %d", got, IMStart, n)
	}
	if countID(ids, IMEndID) != 0 {
		t.Error("mixed: <|im_end| without > read as a special")
	}

	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i] = Message{Role: "user", Content: "a"}
	}
	text, err := tok.ApplyChatTemplate(&Chat{Messages: msgs, AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	ids = tok.Encode(text)
	if countID(ids, IMStartID) != n+1 || countID(ids, IMEndID) != n {
		t.Fatalf("%d messages: %d %s and %d %s", n, countID(ids, IMStartID), IMStart, countID(ids, IMEndID), IMEnd)
	}
	if len(ids) > len(text) {
		t.Fatalf("%d ids for %d bytes", len(ids), len(text))
	}
}

func countID(ids []uint32, id uint32) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}

// TestEncodeStopsWhenCanceled: under a context that is done, a hostile-size
// text costs at most one CheckEvery slice of work before the context's
// error comes back; a live context encodes it all, as Encode does.
func TestEncodeStopsWhenCanceled(t *testing.T) {
	tok := NewSimple()
	text := strings.Repeat(SampleText+"\n", (8<<20)/len(SampleText))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ids, err := tok.AppendEncodeContext(ctx, nil, text)
	if !errors.Is(err, context.Canceled) || len(ids) > CheckEvery {
		t.Fatalf("canceled: %d ids, %v; want context.Canceled within %d bytes of work", len(ids), err, CheckEvery)
	}
	ids, err = tok.AppendEncodeContext(context.Background(), nil, text)
	if err != nil || !slices.Equal(ids, tok.Encode(text)) {
		t.Fatalf("live context: %d ids, %v; want Encode's %d", len(ids), err, len(tok.Encode(text)))
	}

	msgs := make([]Message, 100000)
	for i := range msgs {
		msgs[i] = Message{Role: "user", Content: SampleText}
	}
	c := &Chat{Messages: msgs}
	if _, err := tok.ApplyChatTemplateContext(ctx, c, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("render under a canceled context: %v", err)
	}
	if _, err := tok.ApplyChatTemplateContext(context.Background(), c, 1<<20); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("render over its cap: %v", err)
	}
	out, err := tok.ApplyChatTemplateContext(context.Background(), &Chat{Messages: msgs[:10]}, 1<<20)
	if want, _ := tok.ApplyChatTemplate(&Chat{Messages: msgs[:10]}); err != nil || out != want {
		t.Fatalf("render within its cap: %v", err)
	}
}

// FuzzLastIndex: lastIndex agrees with strings.LastIndex, on patterns
// long enough for its own hash (the fuzzer's sub is repeated past 64
// bytes) and texts that hold it or near misses of it.
func FuzzLastIndex(f *testing.F) {
	f.Add("ab", "abababa", uint8(3))
	f.Add("x", "yyyy", uint8(0))
	f.Add("abc", "", uint8(1))
	f.Fuzz(func(t *testing.T, sub, filler string, k uint8) {
		if sub == "" {
			return
		}
		long := repeatTo(sub, 65+int(k))
		for _, s := range []string{
			filler + long + filler,
			long[1:] + filler + long[:len(long)-1],
			strings.Repeat(filler+long, int(k%4)+1) + filler,
			long,
			long[:len(long)-1],
		} {
			if got, want := lastIndex(s, long), strings.LastIndex(s, long); got != want {
				t.Fatalf("lastIndex = %d, strings.LastIndex = %d", got, want)
			}
		}
	})
}
