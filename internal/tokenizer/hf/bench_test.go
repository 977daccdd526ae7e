package hf

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/tokenizer/chattemplate"
)

// benchText is a bench text repeated to about 256 KiB, the same way
// testdata/gen/bench.js builds it for the reference.
func benchText(b *testing.B, name string) string {
	b.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "bench", name+".txt"))
	if err != nil {
		b.Fatal(err)
	}
	return strings.Repeat(string(data), (256<<10)/len(data)+1)
}

// BenchmarkEncode reports MB/s on one core; compare with
// testdata/gen/bench.sh, which runs the reference on the same texts.
func BenchmarkEncode(b *testing.B) {
	for _, model := range families {
		for _, text := range []string{"english", "japanese", "english/4k", "japanese/4k"} {
			b.Run(model+"/"+text, func(b *testing.B) {
				name, chunked := strings.CutSuffix(text, "/4k")
				// Tokenizing, not remembering: without the segment cache,
				// which would serve this repeated text from memory (the
				// comparison with the reference would be meaningless).
				cold := *fixture(b, model)
				cold.segments = nil
				tok := &cold
				s := benchText(b, name)
				// The /4k runs encode the same text as request-sized
				// pieces, one call each (bench.js cuts at the same bytes).
				pieces := []string{s}
				if chunked {
					pieces = chunks(s, 4096)
				}
				tok.Encode(s) // warm the word cache, as a running router's is
				runtime.GC()  // loading leaves garbage that would bill this run
				b.SetBytes(int64(len(s)))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					for _, p := range pieces {
						tok.Encode(p)
					}
				}
			})
		}
	}
}

// chunks cuts s into pieces of about n bytes, each ending before a UTF-8
// continuation byte.
func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		cut := n
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut--
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return append(out, s)
}

// chatOfTokens builds a multi-turn conversation of about n prompt tokens.
func chatOfTokens(b *testing.B, tok *Tokenizer, n int) []any {
	b.Helper()
	prose, err := os.ReadFile(filepath.Join("testdata", "bench", "english.txt"))
	if err != nil {
		b.Fatal(err)
	}
	paras := strings.Split(strings.TrimSpace(string(prose)), "\n\n")
	msg := func(role, content string) any {
		d := chattemplate.NewDict()
		d.Set("role", role)
		d.Set("content", content)
		return d
	}
	msgs := []any{msg("system", "You are a careful assistant for a harbour town's archive.")}
	for i := 0; ; i++ {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, msg(role, fmt.Sprintf("Turn %d. %s", i, paras[i%len(paras)])))
		text, err := tok.Chat().Render(msgs, chattemplate.Options{AddGenerationPrompt: true})
		if err != nil {
			b.Fatal(err)
		}
		if len(tok.Encode(text)) >= n && role == "user" {
			return msgs
		}
	}
}

// BenchmarkChatPrompt measures render + tokenize of a whole chat prompt, the
// router's per-request tokenizer cost, with latency percentiles:
//   - cold: nothing cached (the segment cache off), the first sight of a
//     conversation;
//   - multi-turn: the history was seen before (the previous turn's request)
//     and a new user message is appended every time — what a router sees
//     turn after turn.
func BenchmarkChatPrompt(b *testing.B) {
	for _, model := range []string{"qwen3", "llama3_1"} {
		for _, n := range []int{1000, 8000, 32000} {
			for _, mode := range []string{"cold", "multi-turn"} {
				b.Run(fmt.Sprintf("%s/%dk/%s", model, n/1000, mode), func(b *testing.B) {
					tok := fixture(b, model)
					history := chatOfTokens(b, tok, n)
					if mode == "cold" {
						cold := *tok
						cold.segments = nil
						tok = &cold
					}
					opts := chattemplate.Options{AddGenerationPrompt: true}
					lat := make([]time.Duration, 0, b.N)
					var tokens int
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						msgs := history
						if mode == "multi-turn" {
							msgs = append(history[:len(history):len(history)],
								chatMsg("assistant", fmt.Sprintf("Noted, entry %d.", i)),
								chatMsg("user", fmt.Sprintf("Question %d: what did the harbour master record about the storm of %d, and who signed the ledger afterwards?", i, 1800+i%200)))
						}
						start := time.Now()
						text, err := tok.Chat().Render(msgs, opts)
						if err != nil {
							b.Fatal(err)
						}
						tokens = len(tok.Encode(text))
						lat = append(lat, time.Since(start))
					}
					b.StopTimer()
					slices.Sort(lat)
					b.ReportMetric(float64(tokens), "tokens")
					b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
					b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
				})
			}
		}
	}
}

func chatMsg(role, content string) any {
	d := chattemplate.NewDict()
	d.Set("role", role)
	d.Set("content", content)
	return d
}

func BenchmarkLoad(b *testing.B) {
	dir := fixtureDir(b, "qwen3")
	for i := 0; i < b.N; i++ {
		if _, err := LoadDir(dir); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRender is the chat template alone on an 8k-token conversation
// (the part of BenchmarkChatPrompt's multi-turn case that no cache
// serves: a template may look at any message, so every request renders
// its whole history).
func BenchmarkRender(b *testing.B) {
	for _, model := range []string{"qwen3", "llama3_1"} {
		b.Run(model, func(b *testing.B) {
			tok := fixture(b, model)
			msgs := chatOfTokens(b, tok, 8000)
			opts := chattemplate.Options{AddGenerationPrompt: true}
			b.ReportMetric(float64(len(msgs)), "messages")
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tok.Chat().Render(msgs, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
