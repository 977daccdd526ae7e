package sim

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
)

// TestRealTokenizer runs a worker with a real Hugging Face tokenizer
// (--tokenizer) and checks the prompt token counts it reports are the ids
// Hugging Face's tokenizer gives (see yardctl's and hf's goldens): chat
// rendered by the model's template without special tokens, completions with
// the post-processor's BOS.
func TestRealTokenizer(t *testing.T) {
	root := filepath.Join("..", "..", "testdata-cache", "tokenizers")
	if _, err := os.Stat(filepath.Join(root, "llama3_1", "tokenizer.json")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("fixture tokenizers missing: run make testdata (%v)", err)
		}
		t.Skipf("SKIP: fixture tokenizers missing, run `make testdata` (%v)", err)
	}
	tests := []struct {
		model      string
		path, body string
		wantPrompt int
	}{
		// <|im_start|>user\nHello, 世界!<|im_end|>\n<|im_start|>assistant\n
		{"qwen3", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"Hello, 世界!"}],"max_tokens":2}`, 13},
		// <|begin_of_text|> "h" "é" "llo" " world"
		{"llama3_1", "/v1/completions", `{"model":"m","prompt":"héllo world","max_tokens":2}`, 5},
	}
	for _, tc := range tests {
		t.Run(tc.model, func(t *testing.T) {
			cfg := fastConfig()
			cfg.ServedModelName = "m"
			cfg.Tokenizer = filepath.Join(root, tc.model)
			f := startFleet(t, cfg)
			resp, body := post(t, f.Workers()[0].URL+tc.path, tc.body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			var out struct {
				Usage openaiapi.Usage `json:"usage"`
			}
			if err := json.Unmarshal(body, &out); err != nil {
				t.Fatal(err)
			}
			if out.Usage.PromptTokens != tc.wantPrompt {
				t.Errorf("prompt_tokens = %d, want %d", out.Usage.PromptTokens, tc.wantPrompt)
			}
		})
	}
	if _, err := StartFleet(t.Context(), func() Config { c := fastConfig(); c.Tokenizer = t.TempDir(); return c }(), zerolog.Nop()); err == nil {
		t.Error("a directory without tokenizer.json was accepted")
	}
}
