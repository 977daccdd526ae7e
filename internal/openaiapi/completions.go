package openaiapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/switchyard-dev/switchyard/internal/jsonscan"
)

// CompletionRequest is the body of POST /v1/completions.
type CompletionRequest struct {
	Model         string         `json:"model"`
	Prompt        Prompt         `json:"prompt"`
	MaxTokens     *int           `json:"max_tokens,omitempty"`
	N             *int           `json:"n,omitempty"`
	Stream        bool           `json:"stream,omitempty"`
	StreamOptions *StreamOptions `json:"stream_options,omitempty"`
	Seed          *int64         `json:"seed,omitempty"`
	Temperature   *float64       `json:"temperature,omitempty"`
	TopP          *float64       `json:"top_p,omitempty"`
	Echo          bool           `json:"echo,omitempty"`
	User          string         `json:"user,omitempty"`
}

// OutputLimit is max_tokens, or 0 for the server default.
func (r *CompletionRequest) OutputLimit() int {
	if r.MaxTokens != nil {
		return *r.MaxTokens
	}
	return 0
}

// Prompt is the completions prompt: a string, an array of strings, an array
// of token ids, or an array of token id arrays. Exactly one of Texts and
// TokenIDs is set after decoding; each holds one entry per prompt.
type Prompt struct {
	Texts    []string
	TokenIDs [][]uint32
}

// Len is the number of prompts (a batch when > 1).
func (p Prompt) Len() int { return len(p.Texts) + len(p.TokenIDs) }

// UnmarshalJSONFrom is UnmarshalJSON for the decoder decodeBody uses: a
// string prompt, the long common case, is decoded in place rather than
// captured and decoded again; the array forms go through UnmarshalJSON.
func (p *Prompt) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if dec.PeekKind() == '"' {
		var s string
		if err := jsonv2.UnmarshalDecode(dec, &s); err != nil {
			return err
		}
		*p = Prompt{Texts: []string{s}}
		return nil
	}
	raw, err := dec.ReadValue()
	if err != nil {
		return err
	}
	return p.UnmarshalJSON(raw)
}

// UnmarshalJSON accepts the four OpenAI prompt forms.
func (p *Prompt) UnmarshalJSON(b []byte) error {
	*p = Prompt{}
	b = bytes.TrimSpace(b)
	if len(b) == 0 || bytes.Equal(b, []byte("null")) {
		return nil
	}
	if b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		p.Texts = []string{s}
		return nil
	}
	if b[0] != '[' {
		return errors.New("prompt must be a string, an array of strings, or an array of token ids")
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if len(raw) == 0 {
		return errors.New("prompt must not be an empty array")
	}
	first := bytes.TrimSpace(raw[0])
	switch {
	case len(first) > 0 && first[0] == '"':
		texts := make([]string, len(raw))
		for i, r := range raw {
			if err := json.Unmarshal(r, &texts[i]); err != nil {
				return fmt.Errorf("prompt[%d]: want a string", i)
			}
		}
		p.Texts = texts
	case len(first) > 0 && first[0] == '[':
		ids := make([][]uint32, len(raw))
		for i, r := range raw {
			var nums []json.Number
			if err := json.Unmarshal(r, &nums); err != nil {
				return fmt.Errorf("prompt[%d]: want an array of token ids", i)
			}
			if len(nums) == 0 {
				return fmt.Errorf("prompt[%d]: empty token array", i)
			}
			one, err := tokenIDs(nums)
			if err != nil {
				return fmt.Errorf("prompt[%d]: %w", i, err)
			}
			ids[i] = one
		}
		p.TokenIDs = ids
	default:
		var nums []json.Number
		if err := json.Unmarshal(b, &nums); err != nil {
			return errors.New("prompt must be a string, an array of strings, or an array of token ids")
		}
		one, err := tokenIDs(nums)
		if err != nil {
			return err
		}
		p.TokenIDs = [][]uint32{one}
	}
	return nil
}

// MarshalJSON writes the most compact equivalent form.
func (p Prompt) MarshalJSON() ([]byte, error) {
	switch {
	case len(p.Texts) == 1:
		return json.Marshal(p.Texts[0])
	case p.Texts != nil:
		return json.Marshal(p.Texts)
	case len(p.TokenIDs) == 1:
		return json.Marshal(p.TokenIDs[0])
	case p.TokenIDs != nil:
		return json.Marshal(p.TokenIDs)
	}
	return []byte("null"), nil
}

func tokenIDs(nums []json.Number) ([]uint32, error) {
	out := make([]uint32, len(nums))
	for i, n := range nums {
		v, err := n.Int64()
		if err != nil || v < 0 || v > math.MaxUint32 {
			return nil, fmt.Errorf("token id %s at %d is not a non-negative 32-bit integer", n.String(), i)
		}
		out[i] = uint32(v)
	}
	return out, nil
}

// Completion is the non-streaming response, and (with object
// text_completion too) each streamed chunk.
type Completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []CompletionChoice `json:"choices"`
	Usage   *Usage             `json:"usage,omitempty"`
}

// CompletionChoice is one choice of a Completion.
type CompletionChoice struct {
	Index        int             `json:"index"`
	Text         string          `json:"text"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

// ParseCompletionRequest decodes and validates a completions body.
func ParseCompletionRequest(body []byte) (*CompletionRequest, *APIError) {
	var req CompletionRequest
	if apiErr := decodeBody(body, &req); apiErr != nil {
		// The prompt decoder's messages are precise; keep them on the field.
		if apiErr.Param == "" && isPromptError(body) {
			apiErr.Param = "prompt"
		}
		return nil, apiErr
	}
	if req.Prompt.Len() == 0 {
		return nil, InvalidRequest("prompt", "prompt is required")
	}
	if apiErr := validateCommon(req.N, req.Stream, req.StreamOptions); apiErr != nil {
		return nil, apiErr
	}
	if apiErr := validateLimit("max_tokens", req.MaxTokens); apiErr != nil {
		return nil, apiErr
	}
	return &req, nil
}

// isPromptError reports whether the prompt field alone fails to decode.
func isPromptError(body []byte) bool {
	m, found, _ := jsonscan.Last(body, "prompt")
	if !found {
		return false
	}
	var p Prompt
	return p.UnmarshalJSON(m.Value) != nil
}
