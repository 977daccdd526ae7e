package tokenizer

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"unicode"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
)

// InputError is a request the tokenizer cannot turn into tokens; Param names
// the JSON field, for the OpenAI error.
type InputError struct {
	Param string
	Msg   string
}

func (e *InputError) Error() string { return e.Param + ": " + e.Msg }

// ChatMessages flattens request messages for a chat template, as vLLM does
// for templates that take string content: text parts (text, input_text,
// output_text, refusal) are joined with "\n", a null content is empty.
// Other part kinds (images, audio) need a multimodal model and are refused.
// The fields templates read beside role and content come along: an
// assistant's tool_calls and reasoning, a tool message's tool_call_id, the
// name.
func ChatMessages(req *openaiapi.ChatCompletionRequest) ([]Message, error) {
	out := make([]Message, len(req.Messages))
	for i, m := range req.Messages {
		out[i].Role = m.Role
		out[i].Name = m.Name
		out[i].Source = &req.Messages[i]
		switch m.Role {
		case openaiapi.RoleAssistant:
			if !isJSONNull(m.ToolCalls) {
				out[i].ToolCalls = m.ToolCalls
			}
			out[i].Reasoning = m.Reasoning
			if out[i].Reasoning == nil {
				out[i].Reasoning = m.ReasoningContent
			}
		case openaiapi.RoleTool:
			out[i].ToolCallID = m.ToolCallID
		}
		switch {
		case m.Content.Text != nil:
			out[i].Content = *m.Content.Text
		case m.Content.Parts != nil:
			texts := make([]string, 0, len(m.Content.Parts))
			for j, p := range m.Content.Parts {
				switch {
				case textPartTypes[p.Type] && p.Text != nil:
					texts = append(texts, *p.Text)
				case p.Type == "refusal" && p.Refusal != nil:
					texts = append(texts, *p.Refusal)
				default:
					return nil, &InputError{
						Param: fmt.Sprintf("messages[%d].content[%d].type", i, j),
						Msg:   fmt.Sprintf("content part type %q is not supported by this model (text only)", p.Type),
					}
				}
			}
			out[i].Content = strings.Join(texts, "\n")
		}
	}
	return out, nil
}

// textPartTypes are the content parts whose "text" vLLM reads as text.
var textPartTypes = map[string]bool{"text": true, "input_text": true, "output_text": true}

func isJSONNull(raw []byte) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// ChatOf is the template input of a chat request.
func ChatOf(req *openaiapi.ChatCompletionRequest) (*Chat, error) {
	if req.ChatTemplate != nil {
		return nil, &InputError{Param: "chat_template", Msg: "a per-request chat template is not supported"}
	}
	continueFinal := req.ContinueFinalMessage != nil && *req.ContinueFinalMessage
	if continueFinal && req.WantsGenerationPrompt() {
		// vLLM's words; add_generation_prompt defaults to true there too.
		return nil, &InputError{Param: "continue_final_message", Msg: "cannot set both continue_final_message and add_generation_prompt to true"}
	}
	msgs, err := ChatMessages(req)
	if err != nil {
		return nil, err
	}
	c := &Chat{Messages: msgs, AddGenerationPrompt: req.WantsGenerationPrompt(), ContinueFinalMessage: continueFinal, ReasoningEffort: req.ReasoningEffort}
	if !isJSONNull(req.Tools) {
		c.Tools = req.Tools
	}
	if !isJSONNull(req.ChatTemplateKwargs) {
		c.Kwargs = req.ChatTemplateKwargs
	}
	if !isJSONNull(req.Documents) {
		c.Documents = req.Documents
	}
	return c, nil
}

// ChatText renders a chat request's prompt text.
func ChatText(t Tokenizer, req *openaiapi.ChatCompletionRequest) (string, error) {
	return ChatTextContext(context.Background(), t, req, 0)
}

// ChatTextContext is ChatText under ctx, with the rendered prompt capped at
// maxBytes (0: no cap; see Tokenizer.ApplyChatTemplateContext). ctx's
// error and ErrTooLarge come back as they are; what the request got wrong
// is an *InputError.
func ChatTextContext(ctx context.Context, t Tokenizer, req *openaiapi.ChatCompletionRequest, maxBytes int) (string, error) {
	c, err := ChatOf(req)
	if err != nil {
		return "", err
	}
	return RenderChatContext(ctx, t, c, maxBytes)
}

// RenderChatContext renders c with t's template under ctx, as
// ChatTextContext does for a request.
func RenderChatContext(ctx context.Context, t Tokenizer, c *Chat, maxBytes int) (string, error) {
	text, err := t.ApplyChatTemplateContext(ctx, c, maxBytes)
	if err != nil {
		var ie *InputError
		if errors.As(err, &ie) || errors.Is(err, ErrTooLarge) ||
			errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return "", err
		}
		return "", &InputError{Param: "messages", Msg: err.Error()}
	}
	return text, nil
}

// ChatPrompt renders and tokenizes a chat request's prompt.
func ChatPrompt(t Tokenizer, req *openaiapi.ChatCompletionRequest) ([]uint32, error) {
	return AppendChatPrompt(nil, t, req)
}

// AppendChatPrompt is ChatPrompt appending to dst, for callers that reuse
// a buffer (an 8k-token prompt's ids are 32 KB).
func AppendChatPrompt(dst []uint32, t Tokenizer, req *openaiapi.ChatCompletionRequest) ([]uint32, error) {
	return AppendChatPromptContext(context.Background(), dst, t, req, 0)
}

// AppendChatPromptContext is AppendChatPrompt under ctx, with the rendered
// prompt capped at maxTemplateBytes (see ChatTextContext).
func AppendChatPromptContext(ctx context.Context, dst []uint32, t Tokenizer, req *openaiapi.ChatCompletionRequest, maxTemplateBytes int) ([]uint32, error) {
	text, err := ChatTextContext(ctx, t, req, maxTemplateBytes)
	if err != nil {
		return dst, err
	}
	if dst == nil {
		dst = make([]uint32, 0, len(text)/3+8)
	}
	return t.AppendEncodeContext(ctx, dst, text)
}

// SpecialTokensEncoder is implemented by tokenizers whose post-processor
// adds special tokens (Llama's BOS). vLLM encodes a completions prompt with
// them, and a rendered chat prompt without (the template wrote them).
type SpecialTokensEncoder interface {
	EncodeWithSpecialTokens(text string) []uint32
	// AppendEncodeWithSpecialTokensContext is EncodeWithSpecialTokens
	// appending to dst under ctx, as Tokenizer.AppendEncodeContext.
	AppendEncodeWithSpecialTokensContext(ctx context.Context, dst []uint32, text string) ([]uint32, error)
}

// CompletionPromptContext tokenizes one completions prompt text as the
// worker does (special tokens added when the tokenizer adds them), under
// ctx.
func CompletionPromptContext(ctx context.Context, t Tokenizer, text string) ([]uint32, error) {
	dst := make([]uint32, 0, len(text)/3+8)
	if st, ok := t.(SpecialTokensEncoder); ok {
		return st.AppendEncodeWithSpecialTokensContext(ctx, dst, text)
	}
	return t.AppendEncodeContext(ctx, dst, text)
}

// CompletionPrompts tokenizes a completions request: one id slice per
// prompt (token-id prompts are used as given).
func CompletionPrompts(t Tokenizer, req *openaiapi.CompletionRequest) ([][]uint32, error) {
	if req.Prompt.TokenIDs != nil {
		return req.Prompt.TokenIDs, nil
	}
	encode := t.Encode
	if st, ok := t.(SpecialTokensEncoder); ok {
		encode = st.EncodeWithSpecialTokens
	}
	out := make([][]uint32, len(req.Prompt.Texts))
	for i, s := range req.Prompt.Texts {
		out[i] = encode(s)
	}
	return out, nil
}

// ContinueFinal cuts a rendered chat right after the final message's text,
// as transformers' apply_chat_template does for continue_final_message: at
// the last occurrence of that text stripped of whitespace, keeping the
// message's trailing whitespace only when the template kept it and the
// message has no leading whitespace. A template that does not render the
// text is an error.
func ContinueFinal(rendered string, msgs []Message) (string, error) {
	if len(msgs) == 0 {
		return rendered, nil
	}
	final := msgs[len(msgs)-1].Content
	stripped := strings.TrimFunc(final, pyIsSpace)
	at := lastIndex(rendered, stripped)
	if at < 0 {
		return "", &InputError{Param: "continue_final_message",
			Msg: "the final message does not appear in the prompt the chat template renders, so it cannot be continued"}
	}
	if lstripped := strings.TrimLeftFunc(final, pyIsSpace); strings.HasPrefix(rendered[at:], final) && len(lstripped) == len(final) {
		return rendered[:at+len(final)], nil
	}
	return rendered[:at+len(stripped)], nil
}

// lastIndex is strings.LastIndex in time linear in len(s)+len(sub), for a
// client's text searched in a prompt built from the client's text.
// strings.LastIndex rolls a fixed, public hash and compares the text at
// every position whose hash matches: a client who builds windows that
// collide with the final message and differ only at their ends makes it
// compare the whole message at nearly every position, O(len(s)·len(sub)).
// Here the rolling hash is modulo the prime 2^61-1 with a base drawn at
// random per process, which no client can build collisions for.
func lastIndex(s, sub string) int {
	n, m := len(s), len(sub)
	if m <= 64 || m > n {
		// Short patterns cost strings.LastIndex at most 64 compares per
		// position whatever the text.
		return strings.LastIndex(s, sub)
	}
	base := hashBase
	pow := uint64(1) // base^(m-1)
	for range m - 1 {
		pow = mulMod(pow, base)
	}
	var hs, hw uint64
	for i := 0; i < m; i++ { // the hash reads from the window's end
		hs = addMod(mulMod(hs, base), uint64(sub[m-1-i])+1)
		hw = addMod(mulMod(hw, base), uint64(s[n-1-i])+1)
	}
	for i := n - m; ; i-- {
		if hw == hs && s[i:i+m] == sub {
			return i
		}
		if i == 0 {
			return -1
		}
		// Slide left: drop s[i+m-1], take s[i-1].
		hw = addMod(hw, mersenne61-mulMod(uint64(s[i+m-1])+1, pow))
		hw = addMod(mulMod(hw, base), uint64(s[i-1])+1)
	}
}

const mersenne61 = 1<<61 - 1

// hashBase is lastIndex's base, secret to the process.
var hashBase = func() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return 256 + binary.LittleEndian.Uint64(b[:])%(mersenne61-512)
}()

func mulMod(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	// a·b = hi·2^64 + lo; 2^64 ≡ 2^3 (mod 2^61-1).
	r := (lo & mersenne61) + (lo >> 61) + (hi << 3)
	r = (r & mersenne61) + (r >> 61)
	if r >= mersenne61 {
		r -= mersenne61
	}
	return r
}

func addMod(a, b uint64) uint64 {
	r := a + b
	if r >= mersenne61 {
		r -= mersenne61
	}
	return r
}

// pyIsSpace is Python's str.isspace, what strip() removes: Unicode
// White_Space and the separators U+001C–U+001F.
func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}
