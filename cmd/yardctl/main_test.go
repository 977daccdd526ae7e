package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestUsage(t *testing.T) {
	if code, out, _ := runCLI(t, "", "help"); code != 0 || !strings.Contains(out, "tokenize") {
		t.Errorf("help: %d %q", code, out)
	}
	if code, _, errOut := runCLI(t, "", "nope"); code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Errorf("unknown: %d %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "", "explain"); code != 1 || !strings.Contains(errOut, "--model is required") {
		t.Errorf("explain without model: %d %q", code, errOut)
	}
}

// TestTokenize checks the command against token ids from Hugging Face's own
// tokenizer for the fixture models (see internal/tokenizer/hf goldens).
func TestTokenize(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end; skipped in -short")
	}
	dir := filepath.Join("..", "..", "testdata-cache", "tokenizers", "qwen3")
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("fixture tokenizers missing: run make testdata (%v)", err)
		}
		t.Skipf("SKIP: fixture tokenizers missing, run `make testdata` (%v)", err)
	}
	code, out, errOut := runCLI(t, `[{"role":"user","content":"Hello, 世界!"}]`, "tokenize", "--tokenizer", dir, "--chat")
	if code != 0 {
		t.Fatalf("tokenize: %d %s", code, errOut)
	}
	// <|im_start|>user\nHello, 世界!<|im_end|>\n<|im_start|>assistant\n
	want := "[151644,872,198,9707,11,220,99489,0,151645,198,151644,77091,198]"
	if strings.TrimSpace(out) != want {
		t.Errorf("ids = %s, want %s", out, want)
	}
	// A whole request renders as the router and vLLM render it: the
	// golden's tool-call arguments are JSON strings, its tools lack
	// declared fields.
	data, err := os.ReadFile(filepath.Join("..", "..", "internal", "tokenizer", "hf", "testdata", "golden", "requests.json"))
	if err != nil {
		t.Fatal(err)
	}
	var goldens struct {
		Cases []struct {
			Template, Name string
			Body           json.RawMessage
			Output         string
		}
	}
	if err := json.Unmarshal(data, &goldens); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, c := range goldens.Cases {
		if c.Template != "qwen3" {
			continue
		}
		code, out, errOut := runCLI(t, string(c.Body), "tokenize", "--tokenizer", dir, "--chat", "--render")
		if code != 0 || out != c.Output {
			t.Errorf("%s: exit %d %s\nrendered %q\nwant     %q", c.Name, code, errOut, out, c.Output)
		}
		checked++
	}
	if checked == 0 {
		t.Error("no qwen3 request goldens")
	}
	if code, _, errOut := runCLI(t, `{"messages":[{"role":"bot","content":"x"}]}`, "tokenize", "--tokenizer", dir, "--chat"); code == 0 || !strings.Contains(errOut, "messages[0].role") {
		t.Errorf("bad role accepted or unnamed: %d %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "x", "tokenize"); code == 0 || !strings.Contains(errOut, "tokenizer") {
		t.Errorf("missing --tokenizer accepted: %d %q", code, errOut)
	}
}

// TestTokenizeHarmony: --harmony renders a chat as vLLM prompts gpt-oss
// (internal/tokenizer/harmony), pinned to the date vLLM's
// VLLM_SYSTEM_START_DATE gives.
func TestTokenizeHarmony(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata-cache", "tokenizers", "gptoss")
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("fixture tokenizers missing: run make testdata (%v)", err)
		}
		t.Skipf("SKIP: fixture tokenizers missing, run `make testdata` (%v)", err)
	}
	t.Setenv("VLLM_SYSTEM_START_DATE", "2026-01-02")
	code, out, errOut := runCLI(t, `[{"role":"user","content":"Hi"}]`, "tokenize", "--tokenizer", dir, "--chat", "--harmony", "--render")
	if code != 0 {
		t.Fatalf("tokenize: %d %s", code, errOut)
	}
	want := "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\n" +
		"Current date: 2026-01-02\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message." +
		"<|end|><|start|>user<|message|>Hi<|end|><|start|>assistant"
	if out != want {
		t.Errorf("rendered %q, want %q", out, want)
	}
	if code, _, _ := runCLI(t, `[{"role":"user","content":"Hi"}]`, "tokenize", "--tokenizer", dir, "--chat"); code == 0 {
		t.Error("without --harmony the gpt-oss fixture (no chat template) rendered a chat")
	}
}
