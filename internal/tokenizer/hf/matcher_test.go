package hf

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/tokenizer"
)

// findNaive is the reference matcher: at each place, every token in turn,
// the longest that matches wins.
func findNaive(tokens []addedToken, s string) (int, addedToken) {
	for i := range len(s) {
		best := -1
		for k, a := range tokens {
			if strings.HasPrefix(s[i:], a.content) && (best < 0 || len(a.content) > len(tokens[best].content)) {
				best = k
			}
		}
		if best >= 0 {
			return i, tokens[best]
		}
	}
	return -1, addedToken{}
}

var matcherTokens = []addedToken{
	{content: "<|im_start|>", id: 1}, {content: "<|im_end|>", id: 2}, {content: "<|im", id: 3},
	{content: "<|reserved_special_token_1|>", id: 4}, {content: "<|reserved_special_token_10|>", id: 5},
	{content: "<think>", id: 6}, {content: "</think>", id: 7}, {content: "[INST]", id: 8},
	{content: "<|im_end|>", id: 9}, // a duplicate: the first one wins
}

func FuzzMatcher(f *testing.F) {
	for _, s := range []string{"", "<|im_end|>", "x<|im<|im_start|>", "<|reserved_special_token_10|>", "[INST]<think></think>", "<<<|"} {
		f.Add(s)
	}
	m := newMatcher(matcherTokens)
	f.Fuzz(func(t *testing.T, s string) {
		at, tok, _ := m.find(s)
		wantAt, want := findNaive(matcherTokens, s)
		if at != wantAt || tok != want {
			t.Fatalf("find(%q) = %d %v, want %d %v", s, at, tok, wantAt, want)
		}
	})
}

// TestMatcherRandom compares the trie with the reference on texts glued
// from the tokens' own fragments, where near misses are the rule.
func TestMatcherRandom(t *testing.T) {
	m := newMatcher(matcherTokens)
	single := newMatcher(matcherTokens[:6]) // all start with '<': the IndexByte path
	var frags []string
	for _, a := range matcherTokens {
		for i := 1; i <= len(a.content); i++ {
			frags = append(frags, a.content[:i], a.content[i-1:])
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		var b strings.Builder
		for range rng.IntN(8) {
			b.WriteString(frags[rng.IntN(len(frags))])
		}
		s := b.String()
		at, tok, _ := m.find(s)
		wantAt, want := findNaive(matcherTokens, s)
		if at != wantAt || tok != want {
			t.Fatalf("find(%q) = %d %v, want %d %v", s, at, tok, wantAt, want)
		}
		at, tok, _ = single.find(s)
		wantAt, want = findNaive(matcherTokens[:6], s)
		if at != wantAt || tok != want {
			t.Fatalf("single-byte matcher: find(%q) = %d %v, want %d %v", s, at, tok, wantAt, want)
		}
	}
}

// TestAddedTokensHostile: a prompt made of special tokens and their near
// misses, at a hostile size, encodes to one id per special token.
func TestAddedTokensHostile(t *testing.T) {
	for _, model := range []string{"qwen3", "llama3_1"} {
		t.Run(model, func(t *testing.T) {
			tok := fixture(t, model)
			special := "<|im_end|>"
			if model == "llama3_1" {
				special = "<|eot_id|>"
			}
			id, ok := tok.AddedTokenID(special)
			if !ok {
				t.Fatalf("no %s", special)
			}
			const n = 20000
			ids := tok.Encode(strings.Repeat(special, n))
			if len(ids) != n || slices.ContainsFunc(ids, func(x uint32) bool { return x != id }) {
				t.Fatalf("%d × %s: %d ids", n, special, len(ids))
			}
			near := strings.Repeat(special[:len(special)-1]+"<|reserved_special_token_", n/10)
			ids = tok.Encode(near)
			if slices.Contains(ids, id) || len(ids) > len(near) {
				t.Fatalf("near misses: %d ids for %d bytes", len(ids), len(near))
			}
			if got := tok.Decode(ids); got != near {
				t.Fatal("near misses do not round-trip")
			}
		})
	}
}

// TestEncodeStopsWhenCanceled: under a context that is done, the real
// tokenizers stop within one CheckEvery slice of a hostile-size text and
// rendering stops too; a live context gives Encode's ids.
func TestEncodeStopsWhenCanceled(t *testing.T) {
	for _, model := range []string{"qwen3", "llama3_1"} {
		t.Run(model, func(t *testing.T) {
			cold := *fixture(t, model)
			cold.segments = nil // tokenize, do not remember
			tok := &cold
			text := strings.Repeat("The quick brown fox jumps over the lazy dog.\n", (8<<20)/45)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			ids, err := tok.AppendEncodeContext(ctx, nil, text)
			if !errors.Is(err, context.Canceled) || len(ids) > tokenizer.CheckEvery {
				t.Fatalf("canceled: %d ids, %v", len(ids), err)
			}
			short := text[:1<<18]
			if ids, err := tok.AppendEncodeContext(context.Background(), nil, short); err != nil || !slices.Equal(ids, tok.Encode(short)) {
				t.Fatalf("live context: %v", err)
			}
			msgs := make([]tokenizer.Message, 20000)
			for i := range msgs {
				msgs[i] = tokenizer.Message{Role: "user", Content: "hi"}
			}
			c := &tokenizer.Chat{Messages: msgs, AddGenerationPrompt: true}
			if _, err := tok.ApplyChatTemplateContext(ctx, c, 0); !errors.Is(err, context.Canceled) {
				t.Fatalf("render under a canceled context: %v", err)
			}
			if _, err := tok.ApplyChatTemplateContext(context.Background(), c, 64<<10); !errors.Is(err, tokenizer.ErrTooLarge) {
				t.Fatalf("render over its cap: %v", err)
			}
			want, err := tok.ApplyChatTemplate(c)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := tok.ApplyChatTemplateContext(context.Background(), c, len(want)); err != nil || got != want {
				t.Fatalf("render at exactly its cap: %v", err)
			}
		})
	}
}
