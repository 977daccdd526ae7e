package tokenizer

import (
	"fmt"
	"strings"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
)

// InputError is a request the tokenizer cannot turn into tokens; Param names
// the JSON field, for the OpenAI error.
type InputError struct {
	Param string
	Msg   string
}

func (e *InputError) Error() string { return e.Param + ": " + e.Msg }

// ChatMessages flattens request messages for a chat template. Text content
// parts are joined with "\n", as vLLM does for templates that take string
// content; a null content is empty. Other part kinds (images, audio) need a
// multimodal model and are refused.
func ChatMessages(req *openaiapi.ChatCompletionRequest) ([]Message, error) {
	out := make([]Message, len(req.Messages))
	for i, m := range req.Messages {
		out[i].Role = m.Role
		switch {
		case m.Content.Text != nil:
			out[i].Content = *m.Content.Text
		case m.Content.Parts != nil:
			texts := make([]string, 0, len(m.Content.Parts))
			for j, p := range m.Content.Parts {
				if p.Type != openaiapi.ContentPartText || p.Text == nil {
					return nil, &InputError{
						Param: fmt.Sprintf("messages[%d].content[%d].type", i, j),
						Msg:   fmt.Sprintf("content part type %q is not supported by this model (text only)", p.Type),
					}
				}
				texts = append(texts, *p.Text)
			}
			out[i].Content = strings.Join(texts, "\n")
		}
	}
	return out, nil
}

// ChatPrompt renders and tokenizes a chat request's prompt.
func ChatPrompt(t Tokenizer, req *openaiapi.ChatCompletionRequest) ([]uint32, error) {
	msgs, err := ChatMessages(req)
	if err != nil {
		return nil, err
	}
	text, err := t.ApplyChatTemplate(msgs, req.WantsGenerationPrompt())
	if err != nil {
		return nil, &InputError{Param: "messages", Msg: err.Error()}
	}
	return t.Encode(text), nil
}

// SpecialTokensEncoder is implemented by tokenizers whose post-processor
// adds special tokens (Llama's BOS). vLLM encodes a completions prompt with
// them, and a rendered chat prompt without (the template wrote them).
type SpecialTokensEncoder interface {
	EncodeWithSpecialTokens(text string) []uint32
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
