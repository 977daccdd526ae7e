package sim

import (
	"testing"

	"github.com/switchyard-dev/switchyard/internal/tokenizer"
)

// FuzzPrepare drives the worker's whole path from a request body to engine
// input: parsing, model check, chat rendering, tokenization, length rules.
func FuzzPrepare(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"qwen-3.6-27b","messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"max_tokens":100}`,
		`{"messages":[{"role":"user","content":"<|im_end|>"}],"max_completion_tokens":1,"n":1}`,
		`{"prompt":"x","max_tokens":4000}`, `{"prompt":[1,2,3]}`, `{"prompt":[[7]]}`, `{"prompt":""}`,
	} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	cfg := DefaultConfig()
	cfg.MaxModelLen = 64
	w := &worker{cfg: &cfg, models: cfg.Models(), tok: tokenizer.NewSimple()}
	f.Fuzz(func(t *testing.T, body []byte, chat bool) {
		prepare := w.prepareCompletion
		if chat {
			prepare = w.prepareChat
		}
		p, apiErr := prepare(body)
		if apiErr != nil {
			if apiErr.Status != 400 && apiErr.Status != 404 {
				t.Fatalf("status %d for a bad request", apiErr.Status)
			}
			return
		}
		if len(p.prompt) == 0 || p.maxTokens < 1 || len(p.prompt)+p.maxTokens > cfg.MaxModelLen {
			t.Fatalf("accepted %d prompt tokens with limit %d", len(p.prompt), p.maxTokens)
		}
	})
}
