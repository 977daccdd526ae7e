package prompt

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/tokenizer"
)

// TestLimits: a request over one of the Limits is refused with a
// *LimitError naming it, whatever the tokenizer (none, simple, a real
// one); one at the limits is read.
func TestLimits(t *testing.T) {
	lim := Limits{MaxMessages: 50, MaxPromptBytes: 2000, MaxTemplateBytes: 2400}
	msgs := func(n int, content string) [][2]string {
		out := make([][2]string, n)
		for i := range out {
			out[i] = [2]string{"user", content}
		}
		return out
	}
	toks := map[string]tokenizer.Tokenizer{"none": nil, "simple": tokenizer.NewSimple()}
	for _, name := range []string{"qwen3", "llama3_1"} {
		t.Run("fixture "+name, func(t *testing.T) { toks[name] = fixtureTokenizer(t, name) })
	}
	for name, tok := range toks {
		tests := []struct {
			name string
			api  string
			body []byte
			want Limit
			ok   bool
		}{
			{"at the limits", "chat", appendBody(nil, msgs(5, "hello")), 0, true},
			{"messages", "chat", appendBody(nil, msgs(51, "a")), LimitMessages, false},
			{"prompt bytes", "chat", appendBody(nil, msgs(2, strings.Repeat("x", 1000))), LimitPromptBytes, false},
			{"completions prompt bytes", "completions", []byte(`{"model":"m","prompt":["` + strings.Repeat("x", 1500) + `","` + strings.Repeat("y", 1500) + `"]}`), LimitPromptBytes, false},
			{"completions at the limit", "completions", []byte(`{"model":"m","prompt":"` + strings.Repeat("x", 2000) + `"}`), 0, true},
		}
		if tok != nil {
			// 45 messages of 40 bytes: 1,980 bytes of text, and the markup
			// of every template here takes the render past 2,400.
			tests = append(tests, struct {
				name string
				api  string
				body []byte
				want Limit
				ok   bool
			}{"template bytes", "chat", appendBody(nil, msgs(45, strings.Repeat("z", 40))), LimitTemplateBytes, false})
		}
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				api := chat
				if tt.api == "completions" {
					api = compl
				}
				p, err := Read(context.Background(), nil, api, tt.body, tok, lim)
				var le *LimitError
				switch {
				case tt.ok && err != nil:
					t.Fatalf("refused: %v", err)
				case tt.ok && p.Kind == None:
					t.Fatal("no prompt read")
				case !tt.ok && (!errors.As(err, &le) || le.Limit != tt.want):
					t.Fatalf("err = %v, want a LimitError on limit %d", err, tt.want)
				case !tt.ok && !strings.Contains(err.Error(), strconv.Itoa(le.Max)):
					t.Fatalf("%q does not name the limit %d", err, le.Max)
				}
			})
		}
	}
}
