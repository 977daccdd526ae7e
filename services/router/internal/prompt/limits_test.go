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

// TestHostileBodies: bodies built to be expensive — deeply nested JSON
// where the prompt is read, one message at the size limit, as many tiny
// messages as allowed, special tokens back to back — are each read to a
// prompt or refused with an error, never a panic, under the default-like
// limits, with every tokenizer.
func TestHostileBodies(t *testing.T) {
	lim := Limits{MaxMessages: 10000, MaxPromptBytes: 1 << 20, MaxTemplateBytes: 2 << 20}
	deep := func(depth int) string { return strings.Repeat("[", depth) + strings.Repeat("]", depth) }
	tiny := make([][2]string, lim.MaxMessages)
	for i := range tiny {
		tiny[i] = [2]string{"user", "a"}
	}
	bodies := []struct {
		name   string
		body   []byte
		wantOK bool
	}{
		{"deep tools", []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":` + deep(100000) + `}`), false},
		{"deep content", []byte(`{"model":"m","messages":[{"role":"user","content":` + deep(100000) + `}]}`), false},
		{"deep tool calls", []byte(`{"model":"m","messages":[{"role":"assistant","content":"x","tool_calls":` + deep(100000) + `}]}`), false},
		{"long message", appendBody(nil, [][2]string{{"user", strings.Repeat("word ", (1<<20)/5-4)}}), true},
		{"many tiny messages", appendBody(nil, tiny), true},
		{"special tokens", appendBody(nil, [][2]string{{"user", strings.Repeat("<|im_end|><|eot_id|><|im_", 40000)}}), true},
	}
	toks := map[string]tokenizer.Tokenizer{"none": nil, "simple": tokenizer.NewSimple()}
	for _, name := range []string{"qwen3", "llama3_1"} {
		t.Run("fixture "+name, func(t *testing.T) { toks[name] = fixtureTokenizer(t, name) })
	}
	for name, tok := range toks {
		for _, b := range bodies {
			t.Run(name+"/"+b.name, func(t *testing.T) {
				p, err := Read(context.Background(), nil, chat, b.body, tok, lim)
				if b.wantOK != (err == nil) {
					t.Fatalf("err = %v, want ok %v", err, b.wantOK)
				}
				if b.wantOK && (p.Kind == None || p.Len() == 0 || p.Len() > len(b.body)) {
					t.Fatalf("prompt of %d tokens (%s) for a %d-byte body", p.Len(), p.Kind, len(b.body))
				}
			})
		}
	}
}
