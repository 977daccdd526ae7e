package prompt

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/tokenizer"
)

// BenchmarkHostile is the prompt path (parse, render, tokenize) on inputs
// built to find super-linear work, at sizes N, 2N, 4N and 8N: ns/byte must
// stay flat as the size grows. specials is one message made of special
// tokens; tiny is many one-character messages; each runs with the simple
// tokenizer and, when fetched, the real ones.
func BenchmarkHostile(b *testing.B) {
	cases := []struct {
		name string
		body func(n int) []byte
	}{
		{"specials", func(n int) []byte {
			return appendBody(nil, [][2]string{{"user", strings.Repeat(tokenizer.IMEnd, n)}})
		}},
		{"tiny", func(n int) []byte {
			msgs := make([][2]string, n)
			for i := range msgs {
				msgs[i] = [2]string{"user", "a"}
			}
			return appendBody(nil, msgs)
		}},
	}
	toks := []string{"simple", "qwen3", "llama3_1"}
	for _, c := range cases {
		for _, name := range toks {
			for _, n := range []int{2500, 5000, 10000, 20000} {
				b.Run(c.name+"/"+name+"/"+strconv.Itoa(n), func(b *testing.B) {
					var tok tokenizer.Tokenizer = tokenizer.NewSimple()
					if name != "simple" {
						tok = fixtureTokenizer(b, name)
					}
					body := c.body(n)
					b.SetBytes(int64(len(body)))
					for b.Loop() {
						if _, err := Read(context.Background(), nil, chat, body, tok, Limits{}); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(body)), "ns/byte")
				})
			}
		}
	}
}
