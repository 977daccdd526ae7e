// Package tokcheck tells whether a tokenizer produces the token ids a vLLM
// worker does: it tokenizes a fixed probe locally and through the worker's
// POST /tokenize, and compares the ids. The router runs it when a worker
// appears for a model (a mismatch sends that model to approximate routing),
// and `yardctl tokenize --check-against` runs it by hand.
//
// The probe is a chat with system, user and assistant turns and a final
// user turn holding what tokenizers disagree on: non-ASCII letters, CJK,
// emoji (a ZWJ sequence), newlines, tabs, runs of spaces, digits and
// punctuation. It is tokenized twice, as vLLM's /tokenize takes it: in the
// chat form (the chat template rendered with the generation prompt, no
// special tokens added) and in the completion form (the last turn's text
// with the tokenizer's special tokens, e.g. Llama 3's BOS).
//
// A tokenizer whose chats a ChatRenderer renders instead of the chat
// template (harmony, for gpt-oss) is checked in the completion form only:
// vLLM's /tokenize renders the chat form with the model's chat template even
// for gpt-oss, whose chat completions it prompts with harmony instead (the
// two differ: the template ends the developer message with "\n\n"), so the
// chat form would report a mismatch where chat completions match. The
// router's prompt-count check on every completion still covers the chats.
//
// The worker's answer is outside input: DecodeResponse bounds its size and
// checks its shape (FuzzDecodeResponse holds it to that).
package tokcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	"github.com/switchyard-dev/switchyard/internal/tokenizer"
)

// ProbeMessages is the probe conversation.
var ProbeMessages = []map[string]string{
	{"role": "system", "content": "You are a careful assistant.\nAnswer in the user's language;\tkeep code blocks intact."},
	{"role": "user", "content": "Grüße aus Zürich! Ça va? 東京の天気は？ 🇯🇵👩‍💻\n\tindented\n\n  two  spaces"},
	{"role": "assistant", "content": "Tout va bien 😀 — the weather in 東京 is 23°C.\n```go\nfmt.Println(\"ok\")\n```"},
	{"role": "user", "content": "Thanks! Now: naïve café, résumé, Ελληνικά, русский, العربية, हिन्दी; 1234567 + 0.5 = ?\r\n<tag attr=\"x\">&amp;</tag>"},
}

// ProbePrompt is the completion-form probe: the last user turn's text.
func ProbePrompt() string { return ProbeMessages[len(ProbeMessages)-1]["content"] }

// Forms of the probe.
const (
	FormChat   = "chat"
	FormPrompt = "prompt"
)

// Request is the body of a vLLM POST /tokenize, chat or completion form
// (vLLM's TokenizeChatRequest and TokenizeCompletionRequest).
type Request struct {
	Model               string              `json:"model,omitempty"`
	Prompt              *string             `json:"prompt,omitempty"`
	Messages            []map[string]string `json:"messages,omitempty"`
	AddGenerationPrompt *bool               `json:"add_generation_prompt,omitempty"`
	AddSpecialTokens    *bool               `json:"add_special_tokens,omitempty"`
	ReturnTokenStrs     bool                `json:"return_token_strs,omitempty"`
}

// ProbeRequest is the /tokenize request of one form of the probe for
// model (empty: the worker's default model).
func ProbeRequest(form, model string) Request {
	t, f := true, false
	if form == FormPrompt {
		p := ProbePrompt()
		return Request{Model: model, Prompt: &p, AddSpecialTokens: &t, ReturnTokenStrs: true}
	}
	return Request{Model: model, Messages: ProbeMessages, AddGenerationPrompt: &t, AddSpecialTokens: &f, ReturnTokenStrs: true}
}

// Local tokenizes one form of the probe with tok, as a vLLM worker with
// tok would.
func Local(ctx context.Context, tok tokenizer.Tokenizer, form string) ([]uint32, error) {
	if form == FormPrompt {
		return tokenizer.CompletionPromptContext(ctx, tok, ProbePrompt())
	}
	body, err := json.Marshal(ProbeRequest(FormChat, "probe"))
	if err != nil {
		return nil, err
	}
	req, apiErr := openaiapi.ParseChatCompletionRequest(body)
	if apiErr != nil {
		return nil, fmt.Errorf("probe: %s", apiErr.Message)
	}
	return tokenizer.AppendChatPromptContext(ctx, nil, tok, req, 0)
}

// GenerationPromptTokens is how many tokens tok's chat template adds for the
// generation prompt (the probe rendered with it, less without it): the
// slack allowed between the router's and the worker's prompt counts of one
// request, since a client may leave the generation prompt to either.
func GenerationPromptTokens(ctx context.Context, tok tokenizer.Tokenizer) int {
	with, err := Local(ctx, tok, FormChat)
	if err != nil {
		return 0
	}
	body, _ := json.Marshal(map[string]any{"model": "probe", "messages": ProbeMessages, "add_generation_prompt": false})
	req, apiErr := openaiapi.ParseChatCompletionRequest(body)
	if apiErr != nil {
		return 0
	}
	without, err := tokenizer.AppendChatPromptContext(ctx, nil, tok, req, 0)
	if err != nil {
		return 0
	}
	return max(0, len(with)-len(without))
}

// Bounds on a /tokenize answer: the probe is a few hundred tokens, so
// anything near these is not an answer to it.
const (
	MaxResponseBytes = 1 << 20
	MaxTokens        = 1 << 16
	maxTokenStrBytes = 1 << 10
)

// Response is a vLLM /tokenize answer (TokenizeResponse): token_strs only
// when return_token_strs was asked for (and the worker supports it).
type Response struct {
	Count       int      `json:"count"`
	MaxModelLen int      `json:"max_model_len"`
	Tokens      []uint32 `json:"tokens"`
	TokenStrs   []string `json:"token_strs"`
}

// DecodeResponse reads a /tokenize answer body, refusing one over the
// bounds or inconsistent with itself (count other than the tokens', token
// strings not one per token).
func DecodeResponse(data []byte) (*Response, error) {
	if len(data) > MaxResponseBytes {
		return nil, fmt.Errorf("tokenize response is larger than %d bytes", MaxResponseBytes)
	}
	var raw struct {
		Count       *int64   `json:"count"`
		MaxModelLen int64    `json:"max_model_len"`
		Tokens      *[]int64 `json:"tokens"`
		TokenStrs   []string `json:"token_strs"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("tokenize response: %w", err)
	}
	if raw.Tokens == nil {
		return nil, errors.New("tokenize response has no tokens")
	}
	toks := *raw.Tokens
	if len(toks) > MaxTokens {
		return nil, fmt.Errorf("tokenize response has %d tokens, more than %d", len(toks), MaxTokens)
	}
	if raw.Count != nil && *raw.Count != int64(len(toks)) {
		return nil, fmt.Errorf("tokenize response: count %d but %d tokens", *raw.Count, len(toks))
	}
	if raw.TokenStrs != nil && len(raw.TokenStrs) != len(toks) {
		return nil, fmt.Errorf("tokenize response: %d token_strs for %d tokens", len(raw.TokenStrs), len(toks))
	}
	if raw.MaxModelLen < 0 || raw.MaxModelLen > 1<<40 {
		return nil, fmt.Errorf("tokenize response: max_model_len %d out of range", raw.MaxModelLen)
	}
	r := &Response{Count: len(toks), MaxModelLen: int(raw.MaxModelLen), Tokens: make([]uint32, len(toks))}
	for i, id := range toks {
		if id < 0 || id > 1<<32-1 {
			return nil, fmt.Errorf("tokenize response: token %d is %d, not a token id", i, id)
		}
		r.Tokens[i] = uint32(id)
	}
	for _, s := range raw.TokenStrs {
		if len(s) > maxTokenStrBytes {
			return nil, fmt.Errorf("tokenize response: a token string of %d bytes", len(s))
		}
	}
	r.TokenStrs = raw.TokenStrs
	return r, nil
}

// ErrUnsupported is a worker without /tokenize (404, 405 or 501): no
// verdict, not a mismatch.
var ErrUnsupported = errors.New("the worker does not serve POST /tokenize")

// Remote sends req to the worker at baseURL (http://host:port) and decodes
// its answer. The error wraps ErrUnsupported for a worker without the
// endpoint; any other error (unreachable, an error status, a malformed
// answer) is no verdict either.
func Remote(ctx context.Context, c *http.Client, baseURL string, req Request) (*Response, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(baseURL, "/")+"/tokenize", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read tokenize response: %w", err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound && !bytes.Contains(data, []byte(`"error"`)),
		resp.StatusCode == http.StatusMethodNotAllowed, resp.StatusCode == http.StatusNotImplemented:
		return nil, fmt.Errorf("%w (HTTP %d)", ErrUnsupported, resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("tokenize: HTTP %d: %s", resp.StatusCode, snippet(data))
	}
	return DecodeResponse(data)
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// Diff is the first position where a and b differ, -1 when they are equal;
// when one is a prefix of the other it is the shorter one's length.
func Diff(a, b []uint32) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) == len(b) {
		return -1
	}
	return n
}

// Status is a check's verdict.
type Status string

const (
	Match     Status = "match"
	Mismatch  Status = "mismatch"
	Unchecked Status = "unchecked"
)

// Result is one check of a tokenizer against a worker.
type Result struct {
	Status Status
	// Form is the probe form that differed (or was being checked when the
	// check failed); empty on a match.
	Form string
	// Position is the first differing token position, -1 unless Mismatch.
	Position int
	// Local and Remote are the two id sequences of Form; RemoteStrs the
	// worker's token strings when it sent them.
	Local, Remote []uint32
	RemoteStrs    []string
	// Err says why the check is Unchecked.
	Err error
}

// Check runs both probe forms against the worker (chat first; the prompt
// form only when the chat form matched), tokenizing locally with tok; the
// prompt form alone for a tokenizer with its own chat renderer.
func Check(ctx context.Context, c *http.Client, baseURL, model string, tok tokenizer.Tokenizer) Result {
	forms := []string{FormChat, FormPrompt}
	if r, ok := tok.(chatRendered); ok && r.ChatRenderer() != nil {
		forms = forms[1:]
	}
	for _, form := range forms {
		local, err := Local(ctx, tok, form)
		if err != nil {
			return Result{Status: Unchecked, Form: form, Position: -1, Err: fmt.Errorf("local tokenizer: %w", err)}
		}
		resp, err := Remote(ctx, c, baseURL, ProbeRequest(form, model))
		if err != nil {
			return Result{Status: Unchecked, Form: form, Position: -1, Err: err}
		}
		if pos := Diff(local, resp.Tokens); pos >= 0 {
			return Result{Status: Mismatch, Form: form, Position: pos, Local: local, Remote: resp.Tokens, RemoteStrs: resp.TokenStrs}
		}
	}
	return Result{Status: Match, Position: -1}
}

// chatRendered is a tokenizer that may render chats otherwise than with
// the model's chat template (hf.Tokenizer.WithChatRenderer).
type chatRendered interface {
	ChatRenderer() tokenizer.ChatRenderer
}

// contextTokens is how many ids either side of the first difference
// Describe shows.
const contextTokens = 3

// Describe says where a mismatch is: the form, the position and the ids
// (with their text) around it on both sides, local text from tok.
func (r Result) Describe(tok tokenizer.Tokenizer) string {
	switch r.Status {
	case Match:
		return "match"
	case Unchecked:
		if r.Err != nil {
			return "unchecked: " + r.Err.Error()
		}
		return "unchecked"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s probe differs at token %d (router %d tokens, worker %d): router ", r.Form, r.Position, len(r.Local), len(r.Remote))
	window(&b, r.Local, r.Position, func(i int) string { return tok.Decode(r.Local[i : i+1]) })
	b.WriteString(", worker ")
	window(&b, r.Remote, r.Position, func(i int) string {
		if r.RemoteStrs != nil {
			return r.RemoteStrs[i]
		}
		return "?"
	})
	return b.String()
}

func window(b *strings.Builder, ids []uint32, pos int, str func(int) string) {
	lo, hi := max(0, pos-contextTokens), min(len(ids), pos+contextTokens+1)
	b.WriteByte('[')
	if lo > 0 {
		b.WriteString("… ")
	}
	for i := lo; i < hi; i++ {
		if i > lo {
			b.WriteByte(' ')
		}
		if i == pos {
			b.WriteString(">>")
		}
		b.WriteString(strconv.FormatUint(uint64(ids[i]), 10))
		b.WriteString(strconv.Quote(str(i)))
	}
	if pos >= len(ids) {
		b.WriteString(" >>(end)")
	}
	if hi < len(ids) {
		b.WriteString(" …")
	}
	b.WriteByte(']')
}
