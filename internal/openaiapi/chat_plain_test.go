package openaiapi

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// plainJSONStringBytewise is the definition plainJSONString implements.
func plainJSONStringBytewise(b []byte) (string, bool) {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return "", false
	}
	inner := b[1 : len(b)-1]
	for _, ch := range inner {
		if ch == '\\' || ch == '"' || ch < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(inner) {
		return "", false
	}
	return string(inner), true
}

// TestPlainJSONStringMatchesBytewise puts every kind of byte the word-wide
// check must catch at every position of strings around the 8-byte stride.
func TestPlainJSONStringMatchesBytewise(t *testing.T) {
	pieces := [][]byte{
		[]byte("a"), []byte(" "), []byte("~"), {0x7f}, []byte(`"`), []byte(`\`), {0x00}, {0x1f}, {0x20},
		[]byte("あ"), []byte("é"), {0x80}, {0xff}, {0xe3, 0x81}, []byte("!"), []byte("#"), []byte("["), []byte("]"),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	accepted := 0
	for n := range 40 {
		for range 300 {
			b := []byte{'"'}
			for range n {
				if rng.IntN(4) == 0 {
					b = append(b, pieces[rng.IntN(len(pieces))]...)
				} else {
					b = append(b, byte('a'+rng.IntN(26)))
				}
			}
			b = append(b, '"')
			got, gotOK := plainJSONString(b)
			want, wantOK := plainJSONStringBytewise(b)
			if got != want || gotOK != wantOK {
				t.Fatalf("plainJSONString(%q) = %q, %v; want %q, %v", b, got, gotOK, want, wantOK)
			}
			if gotOK {
				accepted++
			}
		}
	}
	if accepted == 0 {
		t.Fatal("no case was plain: the generator tests only rejections")
	}
}

func BenchmarkPlainJSONString(b *testing.B) {
	s := []byte(`"`)
	for len(s) < 32<<10 {
		s = append(s, "The quick brown fox jumps over the lazy dog, again and again. "...)
	}
	s = append(s, '"')
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		if _, ok := plainJSONString(s); !ok {
			b.Fatal("not plain")
		}
	}
}

// BenchmarkParseChat8k reads an 8k-token chat body the way the router does
// on every request; real messages carry escapes (newlines, quotes), the
// "plain" variant none.
func BenchmarkParseChat8k(b *testing.B) {
	for _, v := range []struct{ name, line string }{
		{"escaped", "The harbour master wrote: \"tide at six\".\nShips waited.\n"},
		{"plain", "The harbour master wrote that the tide turns at six and ships waited. "},
	} {
		b.Run(v.name, func(b *testing.B) {
			body := []byte(`{"model":"m","messages":[`)
			for i := 0; len(body) < 36<<10; i++ {
				if i > 0 {
					body = append(body, ',')
				}
				role := "user"
				if i%2 == 1 {
					role = "assistant"
				}
				var content string
				for len(content) < 800 {
					content += v.line
				}
				q, _ := json.Marshal(content)
				body = append(body, `{"role":"`+role+`","content":`...)
				body = append(body, q...)
				body = append(body, '}')
			}
			body = append(body, "]}"...)
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := ParseChatCompletionRequest(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
