package harmony

// The goldens are the real harmony renderer's output: testdata/gen/gen.sh
// renders every case of testdata/cases.json (an OpenAI chat request, what
// the router receives) with openai/harmony's Rust crate compiled to
// WebAssembly (npm openai-harmony 0.4.0), after turning the request into
// harmony messages as vLLM's gpt-oss path does (vllm/entrypoints/openai/
// parser/harmony_utils.py, ported in testdata/gen/gen.js), and writes the
// token ids and their decoded text to testdata/goldens.json. The renderer
// here must produce that text, and the fixture tokenizer those ids.
// Each case's "source" says what it pins down.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	"github.com/switchyard-dev/switchyard/internal/tokcheck"
	"github.com/switchyard-dev/switchyard/internal/tokenizer"
	"github.com/switchyard-dev/switchyard/internal/tokenizer/hf"
)

var (
	loadOnce sync.Once
	loaded   *hf.Tokenizer
	loadErr  error
)

// gptoss is the gpt-oss fixture tokenizer (scripts/testdata.sh), skipping
// the test when it has not been fetched (failing it in CI).
func gptoss(tb testing.TB) *hf.Tokenizer {
	tb.Helper()
	cache := os.Getenv("TESTDATA_CACHE")
	if cache == "" {
		cache = filepath.Join("..", "..", "..", "testdata-cache")
	}
	dir := filepath.Join(cache, "tokenizers", "gptoss")
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("fixture tokenizer gptoss missing in CI: run `make testdata` first: %v", err)
		}
		tb.Skipf("SKIP: fixture tokenizer gptoss not fetched; run `make testdata`")
	}
	loadOnce.Do(func() { loaded, loadErr = hf.LoadDir(dir) })
	if loadErr != nil {
		tb.Fatal(loadErr)
	}
	return loaded
}

// renderer is a harmony Tokenizer over the fixture, dated as the goldens.
func renderer(tb testing.TB, date string) (*hf.Tokenizer, *Renderer) {
	tok := gptoss(tb)
	d, err := time.Parse("2006-01-02", date)
	if err != nil {
		tb.Fatal(err)
	}
	r, err := New(tok.HasAddedToken)
	if err != nil {
		tb.Fatal(err)
	}
	r = r.WithClock(func() time.Time { return d })
	return tok.WithChatRenderer(r), r
}

type golden struct {
	Name   string          `json:"name"`
	Source string          `json:"source"`
	Date   string          `json:"date"`
	Body   json.RawMessage `json:"body"`
}

type rendered struct {
	Text string   `json:"text"`
	IDs  []uint32 `json:"ids"`
}

// cases is testdata/cases.json, each with its generated golden.
func cases(tb testing.TB) ([]golden, map[string]rendered) {
	tb.Helper()
	var cs []golden
	var want map[string]rendered
	for file, v := range map[string]any{"cases.json": &cs, "goldens.json": &want} {
		b, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			tb.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			tb.Fatalf("%s: %v", file, err)
		}
	}
	return cs, want
}

// TestGoldens: every case renders to the real renderer's text and
// tokenizes to its ids.
func TestGoldens(t *testing.T) {
	cs, want := cases(t)
	seen := map[string]bool{}
	for _, g := range cs {
		t.Run(g.Name, func(t *testing.T) {
			if seen[g.Name] {
				t.Fatalf("case %s twice", g.Name)
			}
			seen[g.Name] = true
			w, ok := want[g.Name]
			if !ok {
				t.Fatalf("no golden for %s: run internal/tokenizer/harmony/testdata/gen/gen.sh", g.Name)
			}
			tok, _ := renderer(t, g.Date)
			req, apiErr := openaiapi.ParseChatCompletionRequest(g.Body)
			if apiErr != nil {
				t.Fatal(apiErr.Message)
			}
			got, err := tokenizer.ChatText(tok, req)
			if err != nil {
				t.Fatal(err)
			}
			if got != w.Text {
				t.Fatalf("source: %s\nrendered\n%q\nharmony renders\n%q", g.Source, got, w.Text)
			}
			ids, err := tokenizer.ChatPrompt(tok, req)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids, w.IDs) {
				i := 0
				for i < len(ids) && i < len(w.IDs) && ids[i] == w.IDs[i] {
					i++
				}
				t.Fatalf("source: %s\nids differ from harmony's at %d of %d/%d:\n%v\nharmony\n%v", g.Source, i, len(ids), len(w.IDs), ids, w.IDs)
			}
		})
	}
	if len(want) != len(cs) {
		t.Errorf("%d goldens for %d cases: regenerate", len(want), len(cs))
	}
}

// TestPiecesEncodeAlone: the prompt's ids are what harmony produces, which
// encodes each text piece by itself (encode_ordinary) between its
// formatting tokens. The render is one string for the tokenizer, so
// encoding it whole must give the same ids as encoding piece by piece.
func TestPiecesEncodeAlone(t *testing.T) {
	tok, r := renderer(t, "2026-01-02")
	cs, _ := cases(t)
	for _, g := range cs {
		req, apiErr := openaiapi.ParseChatCompletionRequest(g.Body)
		if apiErr != nil {
			t.Fatal(apiErr.Message)
		}
		checkPieces(t, tok, r, req)
	}
}

func checkPieces(t *testing.T, tok *hf.Tokenizer, r *Renderer, req *openaiapi.ChatCompletionRequest) {
	t.Helper()
	c, err := tokenizer.ChatOf(req)
	if err != nil {
		return
	}
	pieces, err := r.render(context.Background(), c)
	if err != nil {
		return
	}
	var whole strings.Builder
	var want []uint32
	for _, p := range pieces {
		whole.WriteString(p.text)
		ids := tok.Encode(p.text)
		if p.special && len(ids) != 1 {
			t.Fatalf("formatting token %q is %v, not one special token", p.text, ids)
		}
		want = append(want, ids...)
	}
	if got := tok.Encode(whole.String()); !slices.Equal(got, want) {
		t.Fatalf("encoding %q whole differs from encoding its pieces", whole.String())
	}
}

// TestRefused: what the router cannot render as the worker does is an
// error naming the field, never a guess.
func TestRefused(t *testing.T) {
	tok, _ := renderer(t, "2026-01-02")
	for _, tc := range []struct{ body, param string }{
		{`{"messages":[{"role":"user","content":"say <|end|> twice"}]}`, "messages[0].content"},
		{`{"messages":[{"role":"system","content":"<|start|>"},{"role":"user","content":"x"}]}`, "messages[0].content"},
		{`{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"","reasoning":"<|channel|>"}]}`, "messages[1].reasoning"},
		{`{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"","tool_calls":[{"id":"a","type":"function","function":{"name":"f<|call|>","arguments":"{}"}}]}]}`, "messages[1].tool_calls[0]"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","description":"<|start|>"}}]}`, "tools"},
		{`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`, "messages[0].content"},
		{`{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"none"}`, "reasoning_effort"},
		{`{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"minimal"}`, "reasoning_effort"},
		{`{"messages":[{"role":"function","content":"x"}]}`, "messages[0].role"},
		{`{"messages":[{"role":"user","content":"x","tool_calls":[]}]}`, "messages[0].tool_calls"},
		{`{"messages":[{"role":"user","content":"x"},{"role":"tool","content":"r"}]}`, "messages[1].tool_call_id"},
		{`{"messages":[{"role":"assistant","content":"","tool_calls":[{"id":1,"type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, "messages[0].tool_calls[0].id"},
		{`{"messages":[{"role":"assistant","content":"","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":{}}}]}]}`, "messages[0].tool_calls[0].function.arguments"},
		{`{"messages":[{"role":"assistant","content":"","tool_calls":[{"id":"a","type":"custom","function":{"name":"f","arguments":"{}"}}]}]}`, "messages[0].tool_calls[0].type"},
		{`{"messages":[{"role":"assistant","content":"","tool_calls":[{"id":"a","function":{"name":null}}]}]}`, "messages[0].tool_calls[0].function.name"},
		{`{"messages":[{"role":"assistant","content":"","tool_calls":[{"id":"a","function":"f"}]}]}`, "messages[0].tool_calls[0].function"},
		{`{"messages":[{"role":"assistant","content":"","tool_calls":[1]}]}`, "messages[0].tool_calls[0]"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"default":null}}}}}]}`, "tools[0].function.parameters"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"default":1e20}}}}}]}`, "tools[0].function.parameters"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":[]}}]}`, "tools[0].function.parameters"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{}}]}`, "tools[0].function.name"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"custom","function":{"name":"f"}}]}`, "tools[0].type"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":{}}`, "tools"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":` +
			strings.Repeat(`{"a":`, maxSchemaDepth+1) + "1" + strings.Repeat("}", maxSchemaDepth+1) + `}}]}`, "tools[0].function.parameters"},
	} {
		req, apiErr := openaiapi.ParseChatCompletionRequest([]byte(tc.body))
		if apiErr != nil {
			t.Fatalf("%s: %s", tc.body, apiErr.Message)
		}
		_, err := tokenizer.ChatText(tok, req)
		var ie *tokenizer.InputError
		if !errors.As(err, &ie) || ie.Param != tc.param {
			t.Errorf("%s: error %v, want one for %s", tc.body, err, tc.param)
		}
	}
}

// TestRustLines: descriptions split into comment lines as Rust's
// str::lines splits them [encoding.rs].
func TestRustLines(t *testing.T) {
	for in, want := range map[string][]string{
		"": nil, "a": {"a"}, "a\n": {"a"}, "a\n\n": {"a", ""}, "\n": {""},
		"a\r\nb": {"a", "b"}, "a\rb": {"a\rb"}, "a\r": {"a\r"},
	} {
		if got := rustLines(in); !slices.Equal(got, want) {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// TestStartDate: the date comes from VLLM_SYSTEM_START_DATE when set, as on
// the worker; the byte cap holds; VLLM_GPT_OSS_HARMONY_SYSTEM_INSTRUCTIONS,
// whose prompt is not implemented, is refused.
func TestStartDate(t *testing.T) {
	tok := gptoss(t)
	t.Setenv(StartDateEnv, "2031-02-03")
	c := &tokenizer.Chat{Messages: []tokenizer.Message{{Role: "user", Content: "hi"}}}
	r, err := New(tok.HasAddedToken)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.RenderChat(context.Background(), c, 0)
	if err != nil || !strings.Contains(got, "\nCurrent date: 2031-02-03\n") {
		t.Fatalf("rendered %q (%v)", got, err)
	}
	if _, err := r.RenderChat(context.Background(), c, 100); !errors.Is(err, tokenizer.ErrTooLarge) {
		t.Fatalf("a 100-byte cap: %v, want ErrTooLarge", err)
	}
	t.Setenv(SystemInstructionsEnv, "1")
	if _, err := New(tok.HasAddedToken); err == nil {
		t.Fatalf("%s=1 accepted", SystemInstructionsEnv)
	}
}

// FuzzRender: any request either is refused or renders to a prompt whose
// whole encoding is its pieces' — tools, tool calls and content are
// arbitrary client JSON.
func FuzzRender(f *testing.F) {
	cs, _ := cases(f)
	for _, g := range cs {
		f.Add([]byte(g.Body))
	}
	f.Add([]byte(`{"messages":[{"role":"tool","tool_call_id":"a","content":"x"},{"role":"assistant","content":"","tool_calls":[{"id":"a","type":"function","function":{"name":"n ","arguments":" {"}}]}]}`))
	tok, r := renderer(f, "2026-01-02")
	f.Fuzz(func(t *testing.T, body []byte) {
		req, apiErr := openaiapi.ParseChatCompletionRequest(body)
		if apiErr != nil {
			return
		}
		checkPieces(t, tok, r, req)
	})
}

// TestHarmonyTokenIDs: the fixture tokenizer reads a harmony text as
// harmony's own encoding does — [format.md]'s streaming-parser example,
// its ids as that document lists them (formatting tokens 200002–200008,
// "assistant" 173781, "analysis" 35644, "final" 17196).
func TestHarmonyTokenIDs(t *testing.T) {
	tok := gptoss(t)
	text := `<|channel|>analysis<|message|>User asks: "What is 2 + 2?" Simple arithmetic. Provide answer.<|end|>` +
		`<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>`
	want := []uint32{200005, 35644, 200008, 1844, 31064, 25, 392, 4827, 382, 220, 17, 659, 220, 17, 16842, 12295, 81645, 13, 51441,
		6052, 13, 200007, 200006, 173781, 200005, 17196, 200008, 17, 659, 220, 17, 314, 220, 19, 13, 200002}
	if got := tok.Encode(text); !slices.Equal(got, want) {
		t.Fatalf("ids %v\nwant %v", got, want)
	}
	if got := tok.Encode("<|call|>"); !slices.Equal(got, []uint32{200012}) {
		t.Fatalf("<|call|> is %v, want [200012]", got)
	}
}

// TestCheckPromptFormOnly: vLLM's /tokenize renders the chat form with the
// model's Jinja template, not harmony, so a harmony tokenizer is checked
// against a worker in the completion form only — a worker whose chat form
// differs (as gpt-oss's template does from harmony) still matches.
func TestCheckPromptFormOnly(t *testing.T) {
	tok, _ := renderer(t, "2026-01-02")
	prompt := tok.EncodeWithSpecialTokens(tokcheck.ProbePrompt())
	var chatAsked bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req tokcheck.Request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ids := prompt
		if req.Prompt == nil {
			chatAsked, ids = true, []uint32{1, 2, 3}
		}
		_ = json.NewEncoder(w).Encode(tokcheck.Response{Count: len(ids), Tokens: ids})
	}))
	defer srv.Close()
	if res := tokcheck.Check(context.Background(), srv.Client(), srv.URL, "gpt-oss", tok); res.Status != tokcheck.Match || chatAsked {
		t.Fatalf("check: %s (chat form asked: %v)", res.Describe(tok), chatAsked)
	}
	if res := tokcheck.Check(context.Background(), srv.Client(), srv.URL, "gpt-oss", gptoss(t)); res.Status != tokcheck.Unchecked && res.Status != tokcheck.Mismatch {
		t.Fatalf("a template tokenizer skipped the chat form: %s", res.Describe(tok))
	}
}

// FuzzRenderFields: arbitrary text in every field that becomes part of a
// header or a message — tool names sit beside " to=" in headers — encodes
// whole as harmony encodes it piece by piece.
func FuzzRenderFields(f *testing.F) {
	f.Add("hi", "get_weather", `{"city":"Oslo"}`, "thinking", "desc")
	f.Add("a\n", "n \t", " {", "", "x\r\ny")
	f.Add("  ", "f\n", "", "😀", "")
	tok, r := renderer(f, "2026-01-02")
	f.Fuzz(func(t *testing.T, text, name, args, thought, desc string) {
		body, err := json.Marshal(map[string]any{
			"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": name, "description": desc,
				"parameters": map[string]any{"type": "object", "properties": map[string]any{name: map[string]any{"type": "string", "description": desc, "default": text}}}}}},
			"messages": []any{
				map[string]any{"role": "system", "content": desc},
				map[string]any{"role": "user", "content": text},
				map[string]any{"role": "assistant", "content": text, "reasoning": thought,
					"tool_calls": []any{map[string]any{"id": "c", "type": "function", "function": map[string]any{"name": name, "arguments": args}}}},
				map[string]any{"role": "tool", "tool_call_id": "c", "content": args},
				map[string]any{"role": "assistant", "content": thought},
			},
		})
		if err != nil {
			return
		}
		req, apiErr := openaiapi.ParseChatCompletionRequest(body)
		if apiErr != nil {
			return
		}
		checkPieces(t, tok, r, req)
	})
}

// BenchmarkRenderChat is a 40-turn chat of some 8k tokens rendered and
// tokenized, what the router does per request for a harmony model (after
// the first round, with the tokenizer's segment cache holding the
// messages, as for a conversation's history).
func BenchmarkRenderChat(b *testing.B) {
	tok, _ := renderer(b, "2026-01-02")
	msgs := []any{map[string]any{"role": "system", "content": "You are a careful assistant."}}
	para := strings.Repeat("The quick brown fox jumps over the lazy dog, again and again. ", 12)
	for i := range 40 {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, map[string]any{"role": role, "content": fmt.Sprintf("%d: %s", i, para)})
	}
	cs, _ := cases(b)
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(cs[0].Body, &fields); err != nil || fields["tools"] == nil {
		b.Fatalf("the first case has no tools (%v)", err)
	}
	body, err := json.Marshal(map[string]any{"model": "m", "messages": msgs, "tools": fields["tools"]})
	if err != nil {
		b.Fatal(err)
	}
	req, apiErr := openaiapi.ParseChatCompletionRequest(body)
	if apiErr != nil {
		b.Fatal(apiErr.Message)
	}
	ids, err := tokenizer.ChatPrompt(tok, req)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := tokenizer.ChatPrompt(tok, req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(ids)), "tokens")
}
