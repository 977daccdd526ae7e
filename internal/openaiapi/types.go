package openaiapi

// Shapes shared by the chat and completions APIs.

// Object names OpenAI (and vLLM) put in the "object" field.
const (
	ObjectChatCompletion      = "chat.completion"
	ObjectChatCompletionChunk = "chat.completion.chunk"
	ObjectTextCompletion      = "text_completion"
	ObjectList                = "list"
	ObjectModel               = "model"
)

// Finish reasons.
const (
	FinishStop   = "stop"
	FinishLength = "length"
)

// StreamOptions is the stream_options request field.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage,omitempty"`
	// ContinuousUsageStats is a vLLM extension: usage on every chunk.
	ContinuousUsageStats bool `json:"continuous_usage_stats,omitempty"`
}

// Usage is the token accounting of one response.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// PromptTokensDetails is null unless the server reports it (vLLM:
	// --enable-prompt-tokens-details).
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details"`
}

// PromptTokensDetails splits the prompt tokens.
type PromptTokensDetails struct {
	// CachedTokens were served from the prefix cache, not recomputed.
	CachedTokens int `json:"cached_tokens"`
}

// Model is one entry of GET /v1/models, with vLLM's extra fields.
type Model struct {
	ID          string  `json:"id"`
	Object      string  `json:"object"`
	Created     int64   `json:"created"`
	OwnedBy     string  `json:"owned_by"`
	Root        string  `json:"root,omitempty"`
	Parent      *string `json:"parent"`
	MaxModelLen int     `json:"max_model_len,omitempty"`
}

// ModelList is the GET /v1/models response.
type ModelList struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}
