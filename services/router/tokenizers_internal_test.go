package router

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	"github.com/switchyard-dev/switchyard/internal/tokenizer"
)

// TestHarmonyTokenizerKind: "harmony:DIR" gives a model the directory's
// tokenizer with chats rendered in harmony's format (what vLLM prompts
// gpt-oss with), while "hf:DIR" on the same directory keeps its chat
// template (the gpt-oss fixture has none).
func TestHarmonyTokenizerKind(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata-cache", "tokenizers", "gptoss")
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Skipf("SKIP: fixture tokenizer not fetched; run `make testdata` (%v)", err)
	}
	specs, err := parseTokenizers("gpt-oss=harmony:" + dir + ",*=hf:" + dir)
	if err != nil {
		t.Fatal(err)
	}
	toks, err := loadTokenizers(specs)
	if err != nil {
		t.Fatal(err)
	}
	req, apiErr := openaiapi.ParseChatCompletionRequest([]byte(`{"model":"gpt-oss","messages":[{"role":"user","content":"Hi"}]}`))
	if apiErr != nil {
		t.Fatal(apiErr.Message)
	}
	text, err := tokenizer.ChatText(toks.For("gpt-oss"), req)
	if err != nil || !strings.HasPrefix(text, "<|start|>system<|message|>") || !strings.HasSuffix(text, "<|start|>user<|message|>Hi<|end|><|start|>assistant") {
		t.Fatalf("harmony: %q (%v)", text, err)
	}
	if _, err := tokenizer.ChatText(toks.For("other"), req); err == nil {
		t.Fatal("hf on the gpt-oss fixture rendered a chat without a template")
	}
	if _, err := parseTokenizers("m=harmony:/does/not/exist"); err == nil {
		t.Fatal("harmony accepted a missing directory")
	}
}
