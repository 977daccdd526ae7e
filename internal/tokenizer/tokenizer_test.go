package tokenizer

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
)

func TestEncodePieces(t *testing.T) {
	tok := NewSimple()
	tests := []struct {
		text   string
		pieces []string // what the ids must equal, piece by piece
	}{
		{"hello", []string{"hell", "o"}},
		{" hello world", []string{"▁hell", "o", "▁worl", "d"}},
		{"a  b", []string{"a", "▁", "▁b"}},
		{"Hi, you!", []string{"Hi", ",", "▁you", "!"}},
		{"x\ny", []string{"x", "\n", "y"}},
		{"café 42", []string{"café", "▁42"}},
		{"<|im_start|>user\nhi<|im_end|>", []string{IMStart, "user", "\n", "hi", IMEnd}},
		{"", nil},
	}
	for _, tc := range tests {
		t.Run(tc.text, func(t *testing.T) {
			var want []uint32
			for _, p := range tc.pieces {
				want = append(want, idOf(p))
			}
			if got := tok.Encode(tc.text); !slices.Equal(got, want) {
				t.Errorf("Encode(%q) = %v, want %v", tc.text, got, want)
			}
		})
	}
}

// idOf is the id of a piece as the tests spell it.
func idOf(p string) uint32 {
	for _, s := range specials {
		if s.text == p {
			return s.id
		}
	}
	if rest, ok := strings.CutPrefix(p, spaceMarker); ok && rest != "" {
		return pieceID(true, rest)
	}
	return pieceID(false, p)
}

func TestSampleTextRoundTrips(t *testing.T) {
	tok := NewSimple()
	ids := tok.Encode(SampleText)
	if got := tok.Decode(ids); got != SampleText {
		t.Errorf("Decode(Encode(SampleText)) = %q", got)
	}
	for _, id := range ids {
		if id < ReservedIDs || id >= VocabSize {
			t.Errorf("id %d outside the piece range", id)
		}
	}
	// About four characters per token, like BPE on English.
	if r := float64(len(SampleText)) / float64(len(ids)); r < 3 || r > 5 {
		t.Errorf("%.2f characters per token", r)
	}
	if got := tok.Decode([]uint32{IMStartID, 99999}); got != IMStart+"\uFFFD" {
		t.Errorf("special and unknown ids decode to %q", got)
	}
}

func TestSharedPrefixGivesSharedIDs(t *testing.T) {
	tok := NewSimple()
	a := tok.Encode("The shared system prompt. Then question one?")
	b := tok.Encode("The shared system prompt. Then a different question")
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	if prefix := tok.Encode("The shared system prompt. Then"); n < len(prefix) {
		t.Errorf("common id prefix %d shorter than the common text's %d tokens", n, len(prefix))
	}
}

func TestApplyChatTemplate(t *testing.T) {
	tok := NewSimple()
	msgs := []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}}
	got, err := tok.ApplyChatTemplate(&Chat{Messages: msgs, AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
	if got != want {
		t.Errorf("rendered %q", got)
	}
	noGen, _ := tok.ApplyChatTemplate(&Chat{Messages: msgs})
	if !strings.HasPrefix(want, noGen) || strings.HasSuffix(noGen, "assistant\n") {
		t.Errorf("without generation prompt: %q", noGen)
	}
	if _, err := tok.ApplyChatTemplate(&Chat{AddGenerationPrompt: true}); err == nil {
		t.Error("empty conversation accepted")
	}
	if _, err := tok.ApplyChatTemplate(&Chat{Messages: []Message{{Content: "x"}}}); err == nil {
		t.Error("message without role accepted")
	}
}

func TestChatPrompt(t *testing.T) {
	tok := NewSimple()
	text := func(s string) openaiapi.MessageContent { return openaiapi.MessageContent{Text: &s} }
	parts := func(ss ...string) openaiapi.MessageContent {
		var c openaiapi.MessageContent
		for _, s := range ss {
			c.Parts = append(c.Parts, openaiapi.ContentPart{Type: "text", Text: &s})
		}
		return c
	}
	noGen := false
	tests := []struct {
		name string
		req  openaiapi.ChatCompletionRequest
		want string
	}{
		{"string content", openaiapi.ChatCompletionRequest{Messages: []openaiapi.ChatMessage{{Role: "user", Content: text("Hi")}}},
			"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
		{"parts joined by newline", openaiapi.ChatCompletionRequest{Messages: []openaiapi.ChatMessage{{Role: "user", Content: parts("a", "b")}}},
			"<|im_start|>user\na\nb<|im_end|>\n<|im_start|>assistant\n"},
		{"null content", openaiapi.ChatCompletionRequest{Messages: []openaiapi.ChatMessage{{Role: "assistant"}}, AddGenerationPrompt: &noGen},
			"<|im_start|>assistant\n<|im_end|>\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ChatPrompt(tok, &tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if want := tok.Encode(tc.want); !slices.Equal(got, want) {
				t.Errorf("ids differ from the encoding of %q", tc.want)
			}
		})
	}
	img := openaiapi.ChatCompletionRequest{Messages: []openaiapi.ChatMessage{{Role: "user",
		Content: openaiapi.MessageContent{Parts: []openaiapi.ContentPart{{Type: "image_url"}}}}}}
	_, err := ChatPrompt(tok, &img)
	if ie, ok := err.(*InputError); !ok || ie.Param != "messages[0].content[0].type" {
		t.Errorf("image part: %v", err)
	}
}

func FuzzEncode(f *testing.F) {
	for _, s := range []string{"", "hello world", SampleText, "<|im_start|>user\nx<|im_end|>", "a  \t\n b", "\xff\xfe", "<|im_", "ünïcödé 漢字 🙂"} {
		f.Add(s)
	}
	tok := NewSimple()
	f.Fuzz(func(t *testing.T, s string) {
		a := tok.Encode(s)
		if b := tok.Encode(s); !slices.Equal(a, b) {
			t.Fatal("Encode is not deterministic")
		}
		if len(a) > len(s) {
			t.Fatalf("%d tokens for %d bytes", len(a), len(s))
		}
		for _, id := range a {
			if id >= VocabSize {
				t.Fatalf("id %d out of range", id)
			}
		}
		out := tok.Decode(a)
		if !utf8.ValidString(out) {
			t.Fatalf("Decode produced invalid UTF-8: %q", out)
		}
		if _, err := tok.ApplyChatTemplate(&Chat{Messages: []Message{{Role: "user", Content: s}}, AddGenerationPrompt: true}); err != nil {
			t.Fatal(err)
		}
	})
}

func BenchmarkEncode(b *testing.B) {
	tok := NewSimple()
	text := strings.Repeat(SampleText+" ", 40) // ~25k characters, ~6k tokens
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	var n int
	for b.Loop() {
		n = len(tok.Encode(text))
	}
	b.ReportMetric(float64(n), "tokens/op")
}
