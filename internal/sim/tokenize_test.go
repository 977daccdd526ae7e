package sim

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/tokcheck"
	"github.com/switchyard-dev/switchyard/internal/tokenizer"
	"github.com/switchyard-dev/switchyard/internal/tokenizer/hf"
)

// TestTokenize: POST /tokenize answers vLLM's TokenizeResponse with the
// worker's own tokenizer and chat template, both forms, with vLLM's
// defaults (chat: no special tokens; prompt: special tokens), token_strs
// only when asked, and 404 model_not_found for another model.
func TestTokenize(t *testing.T) {
	cases := []struct {
		name string
		dir  string
	}{{"simple", ""}, {"llama3_1", "llama3_1"}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fastConfig()
			var tok tokenizer.Tokenizer = tokenizer.NewSimple()
			if tc.dir != "" {
				dir := filepath.Join("..", "..", "testdata-cache", "tokenizers", tc.dir)
				if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
					t.Skipf("SKIP: fixture tokenizers missing, run `make testdata` (%v)", err)
				}
				cfg.Tokenizer = dir
				h, err := hf.LoadDir(dir)
				if err != nil {
					t.Fatal(err)
				}
				tok = h
			}
			f := startFleet(t, cfg)
			url := f.Workers()[0].URL
			for _, form := range []string{tokcheck.FormChat, tokcheck.FormPrompt} {
				want, err := tokcheck.Local(context.Background(), tok, form)
				if err != nil {
					t.Fatal(err)
				}
				got, err := tokcheck.Remote(context.Background(), http.DefaultClient, url, tokcheck.ProbeRequest(form, DefaultServedModelName))
				if err != nil {
					t.Fatalf("%s: %v", form, err)
				}
				if !slices.Equal(got.Tokens, want) || got.Count != len(want) || got.MaxModelLen != cfg.MaxModelLen || len(got.TokenStrs) != len(want) {
					t.Fatalf("%s: got %+v, want tokens %v", form, got, want)
				}
			}
			// Defaults: a chat without add_special_tokens adds none; a
			// prompt adds them; token_strs null unless asked.
			resp, data := post(t, url+"/tokenize", map[string]any{"prompt": "Hello world"})
			var raw map[string]json.RawMessage
			if err := json.Unmarshal(data, &raw); resp.StatusCode != 200 || err != nil || string(raw["token_strs"]) != "null" {
				t.Fatalf("prompt form: %d %s", resp.StatusCode, data)
			}
			var r tokcheck.Response
			_ = json.Unmarshal(data, &r)
			if want := encode(tok, "Hello world", true); !slices.Equal(r.Tokens, want) {
				t.Fatalf("prompt form tokens %v, want %v", r.Tokens, want)
			}
			_, data = post(t, url+"/tokenize", map[string]any{"prompt": "Hello world", "add_special_tokens": false})
			r = tokcheck.Response{}
			_ = json.Unmarshal(data, &r)
			if want := tok.Encode("Hello world"); !slices.Equal(r.Tokens, want) {
				t.Fatalf("prompt form without special tokens: %v, want %v", r.Tokens, want)
			}
			resp, data = post(t, url+"/tokenize", map[string]any{"model": "other", "prompt": "x"})
			if resp.StatusCode != http.StatusNotFound {
				t.Fatalf("other model: %d %s", resp.StatusCode, data)
			}
			resp, data = post(t, url+"/tokenize", map[string]any{"messages": []any{map[string]string{"role": "user", "content": "x"}},
				"add_generation_prompt": true, "continue_final_message": true})
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("both generation prompt and continue_final_message: %d %s", resp.StatusCode, data)
			}
		})
	}
}
