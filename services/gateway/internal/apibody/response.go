package apibody

import (
	"bytes"
	"encoding/json"

	"github.com/switchyard-dev/switchyard/internal/jsonscan"
)

// Usage is the token accounting of one completion, as vLLM and OpenAI report
// it in the "usage" object.
type Usage struct {
	PromptTokens     int64
	CompletionTokens int64
	// CachedTokens is usage.prompt_tokens_details.cached_tokens; vLLM fills
	// it only when started with --enable-prompt-tokens-details.
	CachedTokens int64
	// ReasoningTokens is usage.completion_tokens_details.reasoning_tokens,
	// the part of CompletionTokens a reasoning model spent thinking, where
	// the upstream reports it (OpenAI's reasoning models do).
	ReasoningTokens int64
}

type wireUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

var usageKey = []byte(`"usage"`)

// BodyUsage reads the usage object of a non-streamed response body.
func BodyUsage(body []byte) (Usage, bool) {
	c := InspectChunk(body)
	return c.Usage, c.HasUsage
}

// Chunk is what the gateway learns from one streamed data payload.
type Chunk struct {
	// Done is the terminating "[DONE]" sentinel.
	Done bool
	// HasUsage: the chunk carries a non-null usage object.
	HasUsage bool
	Usage    Usage
	// UsageOnly: the chunk is the final usage chunk vLLM and OpenAI send when
	// stream_options.include_usage is set (usage present, choices empty).
	UsageOnly bool
}

// InspectChunk reads one SSE data payload (a JSON chunk or [DONE]). It is
// cheap for the common token chunk: without a "usage" key it only compares
// bytes.
func InspectChunk(data []byte) Chunk {
	trimmed := bytes.TrimSpace(data)
	if string(trimmed) == "[DONE]" {
		return Chunk{Done: true}
	}
	if !bytes.Contains(data, usageKey) {
		return Chunk{}
	}
	var usage, choices jsonscan.Member
	var hasUsage, hasChoices bool
	kind, _, err := jsonscan.Members(data, func(m jsonscan.Member) {
		switch {
		case m.KeyIs("usage"):
			usage, hasUsage = m, true
		case m.KeyIs("choices"):
			choices, hasChoices = m, true
		}
	})
	if err != nil || kind != jsonscan.Object || !hasUsage || usage.Kind != jsonscan.Object {
		return Chunk{}
	}
	var w wireUsage
	if err := json.Unmarshal(usage.Value, &w); err != nil {
		return Chunk{}
	}
	c := Chunk{HasUsage: true, Usage: Usage{PromptTokens: max(w.PromptTokens, 0), CompletionTokens: max(w.CompletionTokens, 0)}}
	if w.PromptTokensDetails != nil {
		c.Usage.CachedTokens = max(w.PromptTokensDetails.CachedTokens, 0)
	}
	if w.CompletionTokensDetails != nil {
		c.Usage.ReasoningTokens = min(max(w.CompletionTokensDetails.ReasoningTokens, 0), c.Usage.CompletionTokens)
	}
	c.UsageOnly = hasChoices && choices.Kind == jsonscan.Array && isEmptyArray(choices.Value)
	return c
}
