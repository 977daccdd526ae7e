package chattemplate

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// linearTemplates are the templates FuzzRenderLinear renders: the
// llama-like test template, and the real ones when fetched. (The features
// test template is left out: it collects the roles with
// ns.roles = ns.roles + [role], a new list per message, which is quadratic
// in Jinja too; a template like that is bounded by the render's byte cap
// and context, not by its shape.)
func linearTemplates(f *testing.F) map[string]*Chat {
	out := map[string]*Chat{}
	for _, name := range []string{"llamaish_tools"} {
		out[name] = loadChat(f, name)
	}
	cache := os.Getenv("TESTDATA_CACHE")
	if cache == "" {
		cache = filepath.Join("..", "..", "..", "testdata-cache")
	}
	for _, name := range []string{"qwen3", "llama3_1"} {
		dir := filepath.Join(cache, "tokenizers", name)
		if _, err := os.Stat(filepath.Join(dir, "tokenizer_config.json")); err != nil {
			continue
		}
		c, err := LoadDir(dir)
		if err != nil {
			f.Fatal(err)
		}
		out[name] = c
	}
	return out
}

var fuzzRoles = []string{"user", "assistant", "system", "tool"}

// conversation is n copies of the messages unit describes: one message
// per byte, its role from the byte, content as given.
func conversation(unit []byte, content string, n int) []any {
	var msgs []any
	for range n {
		for _, b := range unit {
			d := NewDict()
			d.Set("role", fuzzRoles[int(b)%len(fuzzRoles)])
			d.Set("content", content)
			msgs = append(msgs, d)
		}
	}
	return msgs
}

// FuzzRenderLinear looks for conversations whose rendering is
// super-linear: a conversation of some 64 messages and the same four times
// over must take the same steps per message (the renderer's count of
// nodes run, expressions evaluated and values built, which does not
// depend on the machine), within a quarter. A template that raises
// (roles out of order, say) is skipped.
func FuzzRenderLinear(f *testing.F) {
	f.Add([]byte{0, 1}, "hello")
	f.Add([]byte{2, 0, 1, 3}, "<tool_response>x</tool_response>")
	f.Add([]byte{0}, "a</think>b")
	f.Add([]byte{1, 1, 3, 3, 0}, "")
	chats := linearTemplates(f)
	f.Fuzz(func(t *testing.T, unit []byte, content string) {
		if len(unit) == 0 || len(unit) > 16 || len(content) > 1024 {
			return
		}
		k := max(1, 64/len(unit))
		small, large := conversation(unit, content, k), conversation(unit, content, 4*k)
		for name, c := range chats {
			_, s1, err1 := c.renderCounted(context.Background(), small, Options{AddGenerationPrompt: true})
			_, s4, err4 := c.renderCounted(context.Background(), large, Options{AddGenerationPrompt: true})
			if err1 != nil || err4 != nil {
				continue
			}
			p1, p4 := float64(s1)/float64(len(small)), float64(s4)/float64(len(large))
			if p4 > 1.25*p1+1 {
				t.Fatalf("%s: steps per message grow with the conversation: %.1f at %d messages, %.1f at %d", name, p1, len(small), p4, len(large))
			}
		}
	})
}

// TestRenderLinearCatchesQuadratic: a template that rebuilds the
// conversation for every message is caught by the same measure.
func TestRenderLinearCatchesQuadratic(t *testing.T) {
	quadratic, err := New(`{% set ns = namespace(s='') %}{% for m in messages %}{% set ns.s = ns.s + m.content %}{{ messages[:loop.index] | length }}{% endfor %}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	unit := []byte{0, 1}
	small, large := conversation(unit, "some content here", 32), conversation(unit, "some content here", 128)
	_, s1, err1 := quadratic.renderCounted(context.Background(), small, Options{})
	_, s4, err4 := quadratic.renderCounted(context.Background(), large, Options{})
	if err1 != nil || err4 != nil {
		t.Fatal(err1, err4)
	}
	if p1, p4 := float64(s1)/float64(len(small)), float64(s4)/float64(len(large)); p4 < 2*p1 {
		t.Fatalf("steps per message %.1f at %d messages, %.1f at %d: a quadratic template looks linear", p1, len(small), p4, len(large))
	}
}
