package anthropicapi

import (
	"bytes"

	"github.com/go-json-experiment/json"

	"github.com/switchyard-dev/switchyard/internal/jsonscan"
)

// WithModel is a Messages body as its client sent it with the model member
// (the one that counts, by the key rule) set to served: the one change a
// request passed through natively to an Anthropic provider gets, the bytes
// of that member only. body is returned as it is when served is empty or
// the name it already has, or when body is not an object with a model
// (Parse accepted it, so it is).
func WithModel(body []byte, served string) []byte {
	if served == "" {
		return body
	}
	m, found, _ := jsonscan.Last(body, "model")
	if !found {
		return body
	}
	if name, ok := jsonscan.Unquote(m.Value); ok && name == served {
		return body
	}
	return jsonscan.Splice(body, jsonscan.Edit{From: m.Offset, To: m.End(), Text: jsonscan.AppendString(nil, served)})
}

// Meter reads the usage of one answer of the Messages API as Anthropic
// sends it: a message's usage, or a stream's events, message_start's
// message.usage (the input counts) and message_delta's usage (the output
// count so far, and the input counts again where the API repeats them;
// members absent keep their earlier value). The zero Meter is ready.
type Meter struct {
	u      meterUsage
	has    bool
	failed bool
}

type meterUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
}

func (m *Meter) merge(v *meterUsage) {
	if v == nil {
		return
	}
	m.has = true
	for _, f := range []struct{ dst, src **int64 }{
		{&m.u.InputTokens, &v.InputTokens}, {&m.u.OutputTokens, &v.OutputTokens},
		{&m.u.CacheCreationInputTokens, &v.CacheCreationInputTokens}, {&m.u.CacheReadInputTokens, &v.CacheReadInputTokens},
	} {
		if *f.src != nil {
			n := max(**f.src, 0)
			*f.dst = &n
		}
	}
}

var (
	typeDelta = []byte(`"content_block_delta"`)
	usageKey  = []byte(`"usage"`)
)

// Event reads one event's data: whether it ends the stream (message_stop,
// the answer complete, or an error event: Failed) and whether it carries
// output (a content block delta). A content block delta, most of a
// stream, is told by its bytes without decoding.
func (m *Meter) Event(data []byte) (stop, output bool) {
	if bytes.Contains(data, typeDelta) && !bytes.Contains(data, usageKey) {
		return false, true
	}
	var ev struct {
		Type    string `json:"type"`
		Message *struct {
			Usage *meterUsage `json:"usage"`
		} `json:"message"`
		Usage *meterUsage `json:"usage"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return false, false
	}
	switch ev.Type {
	case "message_start":
		if ev.Message != nil {
			m.merge(ev.Message.Usage)
		}
	case "message_delta":
		m.merge(ev.Usage)
	case "message_stop":
		return true, false
	case "error":
		m.failed = true
		return true, false
	case "content_block_delta":
		return false, true
	}
	return false, false
}

// Failed reports whether the stream ended with an error event: the
// provider failed the answer after it began.
func (m *Meter) Failed() bool { return m.failed }

// Message reads a non-streamed message's usage.
func (m *Meter) Message(body []byte) {
	var msg struct {
		Usage *meterUsage `json:"usage"`
	}
	if json.Unmarshal(body, &msg) == nil {
		m.merge(msg.Usage)
	}
}

// Usage is what was read, and whether any usage was.
func (m *Meter) Usage() (Usage, bool) {
	v := func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	}
	return Usage{InputTokens: v(m.u.InputTokens), OutputTokens: v(m.u.OutputTokens),
		CacheCreationInputTokens: v(m.u.CacheCreationInputTokens), CacheReadInputTokens: v(m.u.CacheReadInputTokens)}, m.has
}
