package prompt

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	"github.com/switchyard-dev/switchyard/internal/tokenizer"
	"github.com/switchyard-dev/switchyard/internal/tokenizer/hf"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

const (
	chat  = routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS
	compl = routerv1.ApiKind_API_KIND_COMPLETIONS
	unsp  = routerv1.ApiKind_API_KIND_UNSPECIFIED
	anth  = routerv1.ApiKind_API_KIND_ANTHROPIC_MESSAGES
)

// simTokens is what the simulated worker computes for a chat body: the
// router must agree with it token for token.
func simTokens(t *testing.T, body string) []uint32 {
	t.Helper()
	req, apiErr := openaiapi.ParseChatCompletionRequest([]byte(body))
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	ids, err := tokenizer.ChatPrompt(tokenizer.NewSimple(), req)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func TestRead(t *testing.T) {
	tok := tokenizer.NewSimple()
	chatBody := `{"model":"m","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":[{"type":"text","text":"Name"},{"type":"text","text":"three rivers."}]}]}`
	tests := []struct {
		name     string
		api      routerv1.ApiKind
		body     string
		tok      tokenizer.Tokenizer
		wantKind Kind
		want     []uint32 // tokens, when wantKind is Tokens
		wantText string
		wantErr  string
	}{
		{name: "chat tokens like the worker", api: chat, body: chatBody, tok: tok, wantKind: Tokens, want: simTokens(t, chatBody)},
		{name: "api sniffed from messages", api: unsp, body: chatBody, tok: tok, wantKind: Tokens, want: simTokens(t, chatBody)},
		{name: "no generation prompt", api: chat, tok: tok, wantKind: Tokens,
			body: `{"messages":[{"role":"user","content":"hi"}],"add_generation_prompt":false}`,
			want: tok.Encode("<|im_start|>user\nhi<|im_end|>\n")},
		{name: "completion text", api: compl, body: `{"model":"m","prompt":"Once upon a time"}`, tok: tok, wantKind: Tokens, want: tok.Encode("Once upon a time")},
		{name: "completion sniffed", api: unsp, body: `{"model":"m","prompt":"Once upon a time"}`, tok: tok, wantKind: Tokens, want: tok.Encode("Once upon a time")},
		{name: "completion batch uses the first prompt", api: compl, body: `{"prompt":["first one","second"]}`, tok: tok, wantKind: Tokens, want: tok.Encode("first one")},
		{name: "completion token ids as given", api: compl, body: `{"prompt":[5,6,7]}`, tok: tok, wantKind: Tokens, want: []uint32{5, 6, 7}},
		{name: "token ids need no tokenizer", api: compl, body: `{"prompt":[[9,8],[1]]}`, tok: nil, wantKind: Tokens, want: []uint32{9, 8}},
		{name: "chat text without tokenizer", api: chat, body: chatBody, tok: nil, wantKind: Text,
			wantText: "system\nYou are terse.\x00user\nName\nthree rivers.\x00"},
		{name: "completion text without tokenizer", api: compl, body: `{"prompt":"abc"}`, tok: nil, wantKind: Text, wantText: "abc"},
		{name: "empty body", api: chat, body: "", tok: tok, wantKind: None},
		{name: "blank body", api: chat, body: " \n", tok: tok, wantKind: None},
		{name: "null prompt", api: compl, body: `{"prompt":null}`, tok: tok, wantErr: "prompt is required"},
		{name: "not json", api: chat, body: `{"messages":`, tok: tok, wantErr: "read chat body"},
		{name: "no messages", api: chat, body: `{"model":"m"}`, tok: tok, wantErr: "messages must be a non-empty array"},
		{name: "image part", api: chat, tok: tok, wantErr: "not supported",
			body: `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`},
		// vLLM's key rule (internal/jsonscan): the worker reads "messages"
		// and ignores "Messages", and so does the router.
		{name: "Messages is not messages", api: chat, tok: tok, wantKind: Tokens, want: simTokens(t, `{"messages":[{"role":"user","content":"short"}]}`),
			body: `{"messages":[{"role":"user","content":"short"}],"Messages":[{"role":"user","content":"` + strings.Repeat("steer ", 500) + `"}]}`},
		{name: "the last of a repeated key", api: chat, tok: tok, wantKind: Tokens, want: simTokens(t, `{"messages":[{"role":"user","content":"second"}]}`),
			body: `{"messages":[{"role":"user","content":"first"}],"messages":[{"role":"user","content":"second"}]}`},
		{name: "Messages sniffs no chat", api: unsp, body: `{"Messages":[{"role":"user","content":"x"}],"prompt":"abc"}`, tok: tok,
			wantKind: Tokens, want: tok.Encode("abc")},
		{name: "anthropic not read yet", api: anth, body: `{"messages":[]}`, tok: tok, wantErr: ErrUnsupportedAPI.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Read(context.Background(), nil, tt.api, []byte(tt.body), tt.tok, Limits{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if p.Kind != None {
					t.Fatalf("prompt %v with an error", p.Kind)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Kind != tt.wantKind {
				t.Fatalf("kind %v, want %v", p.Kind, tt.wantKind)
			}
			switch p.Kind {
			case Tokens:
				if !slices.Equal(p.Tokens, tt.want) || p.Len() != len(tt.want) {
					t.Fatalf("tokens %v (len %d), want %v", p.Tokens, p.Len(), tt.want)
				}
			case Text:
				if p.Text != tt.wantText || p.Len() != (len(tt.wantText)+3)/4 {
					t.Fatalf("text %q (len %d), want %q", p.Text, p.Len(), tt.wantText)
				}
			case None:
				if p.Len() != 0 {
					t.Fatalf("None with length %d", p.Len())
				}
			}
		})
	}
	if _, err := Read(context.Background(), nil, anth, []byte(`{}`), tok, Limits{}); !errors.Is(err, ErrUnsupportedAPI) {
		t.Fatalf("anthropic: %v", err)
	}
}

// TestSharedPrefixes checks the property the cache relies on: a
// conversation that extends another has the other's prompt as a prefix,
// in tokens and in approximate text alike.
func TestSharedPrefixes(t *testing.T) {
	tok := tokenizer.NewSimple()
	doc := strings.Repeat(tokenizer.SampleText+" ", 20)
	first := `{"messages":[{"role":"system","content":"` + doc + `"},{"role":"user","content":"Summarise."}],"add_generation_prompt":false}`
	second := `{"messages":[{"role":"system","content":"` + doc + `"},{"role":"user","content":"Summarise."},{"role":"assistant","content":"It is a valley."},{"role":"user","content":"More."}]}`
	for _, tk := range []tokenizer.Tokenizer{tok, nil} {
		a, err := Read(context.Background(), nil, chat, []byte(first), tk, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := Read(context.Background(), nil, chat, []byte(second), tk, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		switch a.Kind {
		case Tokens:
			if len(a.Tokens) < 1000 || !slices.Equal(a.Tokens, b.Tokens[:len(a.Tokens)]) {
				t.Fatalf("tokens of the first turn (%d) are not a prefix of the second's", len(a.Tokens))
			}
		case Text:
			if !strings.HasPrefix(b.Text, a.Text) {
				t.Fatal("text of the first turn is not a prefix of the second's")
			}
		default:
			t.Fatalf("kind %v", a.Kind)
		}
	}
}

// FuzzRead feeds arbitrary bodies for each API. Read must not panic, must
// be deterministic, and a chat it tokenizes must match the worker's own
// tokenization of the same body.
func FuzzRead(f *testing.F) {
	f.Add(uint8(1), []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	f.Add(uint8(1), []byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]},{"role":"assistant","content":null}]}`))
	f.Add(uint8(2), []byte(`{"prompt":"<|im_start|>x"}`))
	f.Add(uint8(2), []byte(`{"prompt":[[1,2],[3]]}`))
	f.Add(uint8(0), []byte(`{"prompt":[1e3]}`))
	f.Add(uint8(3), []byte(`{"messages":[]}`))
	tok := tokenizer.NewSimple()
	f.Fuzz(func(t *testing.T, api uint8, body []byte) {
		kind := routerv1.ApiKind(api % 4)
		for _, tk := range []tokenizer.Tokenizer{tok, nil} {
			p, err := Read(context.Background(), nil, kind, body, tk, Limits{})
			q, err2 := Read(context.Background(), nil, kind, body, tk, Limits{})
			if (err == nil) != (err2 == nil) || p.Kind != q.Kind || !slices.Equal(p.Tokens, q.Tokens) || p.Text != q.Text {
				t.Fatalf("not deterministic: %v/%v %v/%v", err, err2, p.Kind, q.Kind)
			}
			if err != nil {
				if p.Kind != None {
					t.Fatalf("error %v with kind %v", err, p.Kind)
				}
				continue
			}
			if p.Len() < 0 {
				t.Fatalf("negative length")
			}
			if kind == chat && tk != nil && p.Kind == Tokens {
				req, apiErr := openaiapi.ParseChatCompletionRequest(body)
				if apiErr != nil {
					t.Fatalf("router read a body the worker refuses: %v", apiErr)
				}
				want, err := tokenizer.ChatPrompt(tok, req)
				if err != nil || !slices.Equal(want, p.Tokens) {
					t.Fatalf("router tokens differ from the worker's (%v)", err)
				}
			}
		}
	})
}

// BenchmarkReadChat8k is the tokenization cost the Route budget excludes:
// parse an ~8k-token chat body and tokenize it.
func BenchmarkReadChat8k(b *testing.B) {
	tok := tokenizer.NewSimple()
	body := []byte(`{"model":"m","messages":[{"role":"system","content":"` + strings.Repeat(tokenizer.SampleText+" ", 60) + `"},{"role":"user","content":"Summarise."}]}`)
	p, err := Read(context.Background(), nil, chat, body, tok, Limits{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(p.Len()), "tokens")
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		_, _ = Read(context.Background(), nil, chat, body, tok, Limits{})
	}
}

// fixtureTokenizer loads a real Hugging Face tokenizer fetched by `make
// testdata`, skipping (failing in CI) when it is missing.
func fixtureTokenizer(t testing.TB, name string) tokenizer.Tokenizer {
	t.Helper()
	root := os.Getenv("TESTDATA_CACHE")
	if root == "" {
		root = filepath.Join("..", "..", "..", "..", "testdata-cache")
	}
	dir := filepath.Join(root, "tokenizers", name)
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("fixture tokenizer %s missing in CI: run `make testdata`: %v", name, err)
		}
		t.Skipf("SKIP: fixture tokenizer %s not fetched; run `make testdata`", name)
	}
	tok, err := hf.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestHuggingFaceTokenizersMatchTheWorker: with a real tokenizer the router
// computes the ids the worker computes (chat template, and completions
// prompts with the tokenizer's special tokens).
func TestHuggingFaceTokenizersMatchTheWorker(t *testing.T) {
	for _, name := range []string{"qwen3", "llama3_1"} {
		t.Run(name, func(t *testing.T) {
			tok := fixtureTokenizer(t, name)
			chatBody := []byte(`{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello there, ünïcode ✓"}]}`)
			p, err := Read(context.Background(), nil, chat, chatBody, tok, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			req, _ := openaiapi.ParseChatCompletionRequest(chatBody)
			want, err := tokenizer.ChatPrompt(tok, req)
			if err != nil || !slices.Equal(p.Tokens, want) {
				t.Fatalf("chat ids differ from the worker's (%v)", err)
			}
			complBody := []byte(`{"prompt":["Once upon a time","ignored"]}`)
			p, err = Read(context.Background(), nil, compl, complBody, tok, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			creq, _ := openaiapi.ParseCompletionRequest(complBody)
			wantAll, err := tokenizer.CompletionPrompts(tok, creq)
			if err != nil || !slices.Equal(p.Tokens, wantAll[0]) {
				t.Fatalf("completion ids %v differ from the worker's %v (%v)", p.Tokens, wantAll[0], err)
			}
		})
	}
}
