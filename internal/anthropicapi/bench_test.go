package anthropicapi

import (
	"strings"
	"testing"
)

// benchBody is a realistic agent turn: a 30 kB system prompt, two tools,
// ten turns with a tool call and its result.
func benchBody() []byte {
	var b strings.Builder
	b.WriteString(`{"model":"qwen-3.6-27b","max_tokens":1024,"system":"` + strings.Repeat("You follow the house rules. ", 1100) + `",`)
	b.WriteString(`"tools":[{"name":"search","description":"Search the docs","input_schema":{"type":"object","properties":{"q":{"type":"string"}}}},` +
		`{"name":"read","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}}],"messages":[`)
	for i := range 10 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"role":"user","content":"Where is clause 4 defined and what does it say about termination?"},` +
			`{"role":"assistant","content":[{"type":"text","text":"Searching."},{"type":"tool_use","id":"toolu_1","name":"search","input":{"q":"clause 4"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"` + strings.Repeat("Clause 4 covers termination. ", 20) + `"}]},` +
			`{"role":"assistant","content":"It is in section 2."}`)
	}
	b.WriteString(`,{"role":"user","content":"Thanks, summarise."}]}`)
	return []byte(b.String())
}

// BenchmarkParseToChat is the gateway's added work per Messages request:
// parse and check, then encode the chat body.
func BenchmarkParseToChat(b *testing.B) {
	body := benchBody()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		req, err := Parse(body, false)
		if err != nil {
			b.Fatal(err)
		}
		_ = req.ToChat(req.Model)
	}
}

// BenchmarkStreamChunk is the added work per streamed token.
func BenchmarkStreamChunk(b *testing.B) {
	req, apiErr := Parse([]byte(`{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"x"}]}`), false)
	if apiErr != nil {
		b.Fatal(apiErr)
	}
	chunk := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}`)
	st := req.NewStream("m")
	out := st.Chunk(nil, chunk)
	b.ReportAllocs()
	for b.Loop() {
		out = st.Chunk(out[:0], chunk)
	}
}
