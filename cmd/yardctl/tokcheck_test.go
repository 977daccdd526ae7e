package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/sim"
	"github.com/switchyard-dev/switchyard/internal/tokcheck"
	"github.com/switchyard-dev/switchyard/internal/tokenizer/hf"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

func startSimWorker(t *testing.T, tokenizerDir string) string {
	t.Helper()
	cfg := sim.DefaultConfig()
	cfg.Port = 0
	cfg.ShutdownTimeout = 5 * time.Second
	cfg.Tokenizer = tokenizerDir
	f, err := sim.StartFleet(context.Background(), cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f.Workers()[0].URL
}

// TestTokenizeCheckAgainst: `yardctl tokenize --check-against` against a
// real simulated worker: its own tokenizer matches (exit 0); Qwen3 against
// its Simple tokenizer differs at token 0 (exit 1); Qwen3 against a worker
// whose Qwen3 chat template ends the generation prompt with "\n\n" differs
// at the last token; a server without /tokenize is no verdict (exit 1).
func TestTokenizeCheckAgainst(t *testing.T) {
	simple := startSimWorker(t, "")
	code, out, errOut := runCLI(t, "", "tokenize", "--check-against", simple, "--model", sim.DefaultServedModelName)
	if code != 0 || !strings.HasPrefix(out, "match:") {
		t.Fatalf("simple vs simple: %d %q %q", code, out, errOut)
	}
	nf := httptest.NewServer(http.NotFoundHandler())
	defer nf.Close()
	if code, _, errOut := runCLI(t, "", "tokenize", "--check-against", nf.URL); code != 1 || !strings.Contains(errOut, "does not serve POST /tokenize") {
		t.Fatalf("no /tokenize: %d %q", code, errOut)
	}
	if code, _, _ := runCLI(t, "", "tokenize", "--check-against", "worker:8000"); code != 1 {
		t.Fatalf("bad url accepted")
	}

	qwen := filepath.Join("..", "..", "testdata-cache", "tokenizers", "qwen3")
	if _, err := os.Stat(filepath.Join(qwen, "tokenizer.json")); err != nil {
		t.Skipf("SKIP: fixture tokenizers missing, run `make testdata` (%v)", err)
	}
	code, out, _ = runCLI(t, "", "tokenize", "--check-against", simple, "--tokenizer", qwen)
	if code != 1 || !strings.Contains(out, "mismatch: chat probe differs at token 0 ") || !strings.Contains(out, `>>151644"<|im_start|>"`) {
		t.Fatalf("qwen3 vs simple: %d %q", code, out)
	}

	// A worker with Qwen3's vocabulary and a chat template that differs
	// only in its generation prompt.
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(qwen, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(dir, "tokenizer.json"), data, 0o644)
	raw, _ := os.ReadFile(filepath.Join(qwen, "tokenizer_config.json"))
	var tc map[string]any
	if err := json.Unmarshal(raw, &tc); err != nil {
		t.Fatal(err)
	}
	tmpl := tc["chat_template"].(string)
	if strings.Count(tmpl, `'<|im_start|>assistant\n'`) != 1 {
		t.Fatal("the fixture's template changed: no single generation prompt")
	}
	tc["chat_template"] = strings.Replace(tmpl, `'<|im_start|>assistant\n'`, `'<|im_start|>assistant\n\n'`, 1)
	raw, _ = json.Marshal(tc)
	_ = os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), raw, 0o644)
	other := startSimWorker(t, dir)
	tok, err := hf.LoadDir(qwen)
	if err != nil {
		t.Fatal(err)
	}
	local, err := tokcheck.Local(context.Background(), tok, tokcheck.FormChat)
	if err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCLI(t, "", "tokenize", "--check-against", other, "--tokenizer", qwen)
	want := "chat probe differs at token " + strconv.Itoa(len(local)-1) + " "
	if code != 1 || !strings.Contains(out, want) || !strings.Contains(out, `>>198"\n"`) || !strings.Contains(out, `>>271"\n\n"`) {
		t.Fatalf("generation prompt differs: %d %q, want %q", code, out, want)
	}
}

// TestExplainTableTokenizer: explain's table shows the router's tokenizer
// mode for the model and each worker's check.
func TestExplainTableTokenizer(t *testing.T) {
	resp := &routerv1.ExplainResponse{Result: &routerv1.RouteResponse{}, Tokenizer: &routerv1.TokenizerStatus{
		Model: "m", Mode: "approximate", Reason: "a worker's tokenizer differs from the router's (see checks)", PromptCountMismatches: 3,
		Checks: []*routerv1.TokenizerCheck{
			{EndpointId: "a", Status: "mismatch", FirstDifference: 0, Detail: "chat probe differs at token 0"},
			{EndpointId: "b", Status: "match", FirstDifference: -1, Detail: "match"},
		},
	}}
	var b strings.Builder
	if err := explainTable(&b, resp, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tokenizer: approximate: a worker's tokenizer differs", "  a: mismatch (chat probe differs at token 0)", "  b: match\n", "3 completions counted"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in:\n%s", want, b.String())
		}
	}
}
