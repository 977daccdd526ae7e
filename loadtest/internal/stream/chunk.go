package stream

import (
	"encoding/json"
	"fmt"
)

// chunk is the part of a chat.completion.chunk (or a legacy completions
// chunk) the client reads.
type chunk struct {
	Choices []struct {
		Delta struct {
			Content *string `json:"content"`
		} `json:"delta"`
		Text *string `json:"text"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	// SimTiming is the simulator's own account of the request in model
	// seconds (switchyard sim adds it to the last chunk).
	SimTiming *struct {
		TTFT   float64 `json:"ttft_seconds"`
		Worker *int    `json:"worker"`
	} `json:"sim_timing"`
	Error *struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
}

// decoded is what one event contributes to a request's result.
type decoded struct {
	content                    string // concatenated text of every choice
	tokens                     bool   // the event carries generated text
	usage                      bool
	prompt, cached, completion int
	simTTFT                    float64 // -1 when absent
	simWorker                  int     // -1 when absent
	err                        string  // an error event's message
}

// decodeEvent interprets one event's data. "[DONE]" is reported as done.
func decodeEvent(data []byte) (d decoded, done bool, err error) {
	d.simTTFT, d.simWorker = -1, -1
	if string(data) == "[DONE]" {
		return d, true, nil
	}
	var c chunk
	if err := json.Unmarshal(data, &c); err != nil {
		return d, false, fmt.Errorf("decode stream chunk: %w", err)
	}
	if c.Error != nil {
		d.err = c.Error.Message
		if d.err == "" {
			d.err = "error event of type " + c.Error.Type
		}
		return d, false, nil
	}
	for _, ch := range c.Choices {
		for _, s := range []*string{ch.Delta.Content, ch.Text} {
			if s != nil && *s != "" {
				d.content += *s
				d.tokens = true
			}
		}
	}
	if u := c.Usage; u != nil {
		d.usage, d.prompt, d.completion = true, u.PromptTokens, u.CompletionTokens
		if u.PromptTokensDetails != nil {
			d.cached = u.PromptTokensDetails.CachedTokens
		}
	}
	if c.SimTiming != nil {
		d.simTTFT = c.SimTiming.TTFT
		if c.SimTiming.Worker != nil {
			d.simWorker = *c.SimTiming.Worker
		}
	}
	return d, false, nil
}
