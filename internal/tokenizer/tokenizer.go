// Package tokenizer turns requests into token ids. The simulated worker and
// the router use the same code, so both see the same ids for the same
// request — which is what makes prefix-cache routing precise. Everything a
// worker does between an HTTP body and the engine's token ids (chat
// rendering, content flattening, tokenization) lives here.
//
// The Tokenizer interface is what a Hugging Face tokenizer (BPE plus a Jinja
// chat template) will implement later; Simple is the small deterministic
// default used by the simulator until then.
package tokenizer

// Tokenizer encodes text to token ids and renders chat conversations to the
// text a model is prompted with.
type Tokenizer interface {
	// Encode tokenizes text. Special-token strings in text (as a chat
	// template writes them) become their reserved ids.
	Encode(text string) []uint32
	// Decode turns ids back into text.
	Decode(ids []uint32) string
	// ApplyChatTemplate renders messages as the model's prompt text,
	// followed by the assistant turn opener when addGenerationPrompt.
	ApplyChatTemplate(msgs []Message, addGenerationPrompt bool) (string, error)
}

// Message is a chat message reduced to what a chat template reads.
type Message struct {
	Role    string
	Content string
}
