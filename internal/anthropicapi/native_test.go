package anthropicapi

import (
	"encoding/json"
	"testing"
)

func TestWithModel(t *testing.T) {
	for _, tc := range []struct{ name, in, served, want string }{
		{"renamed, nothing else", `{"model":"m","system":[{"type":"text","text":"model","cache_control":{"type":"ephemeral"}}],"max_tokens":1}`, "claude-x",
			`{"model":"claude-x","system":[{"type":"text","text":"model","cache_control":{"type":"ephemeral"}}],"max_tokens":1}`},
		{"spacing kept", "{ \"max_tokens\": 1,\n \"model\" : \"m\" }", "c", "{ \"max_tokens\": 1,\n \"model\" : \"c\" }"},
		{"the last of a repeated key", `{"model":"a","metadata":{"model":"x"},"model":"b"}`, "c", `{"model":"a","metadata":{"model":"x"},"model":"c"}`},
		{"escaped", `{"model":"m"}`, `a"b`, `{"model":"a\"b"}`},
		{"same name", `{"model":"m"}`, "m", `{"model":"m"}`},
		{"no served name", `{"model":"m"}`, "", `{"model":"m"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := WithModel([]byte(tc.in), tc.served); string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestMeter(t *testing.T) {
	var m Meter
	if _, ok := m.Usage(); ok {
		t.Fatal("usage before any was read")
	}
	for _, ev := range []struct {
		data         string
		stop, output bool
	}{
		{`{"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":11,"cache_creation_input_tokens":2,"cache_read_input_tokens":5,"output_tokens":1}}}`, false, false},
		{`{"type":"ping"}`, false, false},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"usage"}}`, false, true},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`, false, true},
		{`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}}`, false, false},
		{`{"type":"message_stop"}`, true, false},
	} {
		if stop, output := m.Event([]byte(ev.data)); stop != ev.stop || output != ev.output {
			t.Errorf("%s: stop %v output %v", ev.data, stop, output)
		}
	}
	if u, ok := m.Usage(); !ok || u != (Usage{InputTokens: 11, CacheCreationInputTokens: 2, CacheReadInputTokens: 5, OutputTokens: 7}) {
		t.Errorf("stream usage %+v", u)
	}

	// A message_delta repeating the input counts (as with server tools)
	// replaces them; a negative count is none.
	m.Event([]byte(`{"type":"message_delta","usage":{"input_tokens":12,"cache_read_input_tokens":-1,"output_tokens":8}}`))
	if u, _ := m.Usage(); u != (Usage{InputTokens: 12, CacheCreationInputTokens: 2, CacheReadInputTokens: 0, OutputTokens: 8}) {
		t.Errorf("usage after a fuller delta %+v", u)
	}

	if m.Failed() {
		t.Error("a complete stream failed")
	}
	var broken Meter
	if stop, _ := broken.Event([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)); !stop || !broken.Failed() {
		t.Error("an error event does not end the stream as failed")
	}

	var body Meter
	msg, _ := json.Marshal(map[string]any{"type": "message", "usage": map[string]int{"input_tokens": 3, "cache_read_input_tokens": 4, "output_tokens": 5}})
	body.Message(msg)
	if u, ok := body.Usage(); !ok || u != (Usage{InputTokens: 3, CacheReadInputTokens: 4, OutputTokens: 5}) {
		t.Errorf("message usage %+v", u)
	}
}
