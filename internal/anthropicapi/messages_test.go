package anthropicapi

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/translate")

// TestToChatGolden: each testdata/translate/NAME.in.json translates to the
// chat completions body in NAME.chat.json (indented there for reading).
func TestToChatGolden(t *testing.T) {
	ins, _ := filepath.Glob("testdata/translate/*.in.json")
	if len(ins) == 0 {
		t.Fatal("no golden inputs")
	}
	for _, in := range ins {
		name := strings.TrimSuffix(filepath.Base(in), ".in.json")
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			req, apiErr := Parse(body, false)
			if apiErr != nil {
				t.Fatalf("parse: %v", apiErr)
			}
			out := req.ToChat(req.Model)
			var got bytes.Buffer
			if err := json.Indent(&got, out, "", "  "); err != nil {
				t.Fatalf("ToChat wrote invalid JSON: %v\n%s", err, out)
			}
			got.WriteByte('\n')
			golden := strings.TrimSuffix(in, ".in.json") + ".chat.json"
			if *update {
				if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("ToChat(%s):\n%s\nwant (%s):\n%s", in, got.Bytes(), golden, want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	tests := []struct {
		name, body string
		countOnly  bool
		want       string // substring of the message
	}{
		{"empty", ``, false, "empty"},
		{"syntax with position", "{\"model\":\"m\",\n \"max_tokens\": 4x}", false, "line 2"},
		{"not an object", `[1]`, false, "JSON object"},
		{"no model", `{"max_tokens":4,` + msgs + `}`, false, "model: Field required"},
		{"model wrong type", `{"model":7,"max_tokens":4,` + msgs + `}`, false, "/model"},
		{"model too long", `{"model":"` + strings.Repeat("x", MaxModelLen+1) + `","max_tokens":4,` + msgs + `}`, false, "too long"},
		{"no max_tokens", `{"model":"m",` + msgs + `}`, false, "max_tokens: Field required"},
		{"max_tokens zero", `{"model":"m","max_tokens":0,` + msgs + `}`, false, "at least 1"},
		{"no messages", `{"model":"m","max_tokens":4}`, false, "at least one message"},
		{"bad role", `{"model":"m","max_tokens":4,"messages":[{"role":"system","content":"x"}]}`, false, "messages.0.role"},
		{"content missing", `{"model":"m","max_tokens":4,"messages":[{"role":"user"}]}`, false, "messages.0.content: Field required"},
		{"content number", `{"model":"m","max_tokens":4,"messages":[{"role":"user","content":5}]}`, false, "expected a string or an array"},
		{"unknown block", `{"model":"m","max_tokens":4,"messages":[{"role":"user","content":[{"type":"document"}]}]}`, false, `"document" is not supported`},
		{"tool_use from user", `{"model":"m","max_tokens":4,"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]}]}`, false, "only allowed in assistant"},
		{"tool_result without id", `{"model":"m","max_tokens":4,"messages":[{"role":"user","content":[{"type":"tool_result"}]}]}`, false, "tool_use_id"},
		{"tool_result bad content", `{"model":"m","max_tokens":4,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"tool_use"}]}]}]}`, false, "text or image"},
		{"image without source", `{"model":"m","max_tokens":4,"messages":[{"role":"user","content":[{"type":"image"}]}]}`, false, "source"},
		{"image bad source", `{"model":"m","max_tokens":4,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"f"}}]}]}`, false, "base64 or url"},
		{"system image", `{"model":"m","max_tokens":4,"system":[{"type":"image"}],` + msgs + `}`, false, "only text blocks"},
		{"server tool", `{"model":"m","max_tokens":4,"tools":[{"type":"web_search_20250305","name":"web_search"}],` + msgs + `}`, false, "server tool"},
		{"tool without schema", `{"model":"m","max_tokens":4,"tools":[{"name":"f"}],` + msgs + `}`, false, "input_schema"},
		{"tool_choice unknown", `{"model":"m","max_tokens":4,"tool_choice":{"type":"maybe"},` + msgs + `}`, false, "tool_choice.type"},
		{"tool_choice tool without name", `{"model":"m","max_tokens":4,"tool_choice":{"type":"tool"},` + msgs + `}`, false, "tool_choice.name"},
		{"thinking", `{"model":"m","max_tokens":4,"thinking":{"type":"enabled","budget_tokens":1024},` + msgs + `}`, false, "thinking"},
		{"mcp servers", `{"model":"m","max_tokens":4,"mcp_servers":[{"type":"url","url":"https://x","name":"x"}],` + msgs + `}`, false, "mcp_servers"},
		{"stop sequences wrong type", `{"model":"m","max_tokens":4,"stop_sequences":"END",` + msgs + `}`, false, "/stop_sequences"},
		{"count: no messages", `{"model":"m"}`, true, "at least one message"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.body), tc.countOnly)
			if err == nil {
				t.Fatal("no error")
			}
			if err.Status != http.StatusBadRequest || err.Type != ErrTypeInvalidRequest || !strings.Contains(err.Message, tc.want) {
				t.Errorf("got %d %s %q, want 400 invalid_request_error containing %q", err.Status, err.Type, err.Message, tc.want)
			}
		})
	}
	// Accepted: count_tokens needs no max_tokens, thinking disabled, the
	// last of a repeated key counts (vLLM's rule).
	for _, body := range []string{
		`{"model":"m",` + msgs + `}`,
	} {
		if _, err := Parse([]byte(body), true); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
	req, err := Parse([]byte(`{"model":"a","max_tokens":4,"thinking":{"type":"disabled"},"model":"b",`+msgs+`}`), false)
	if err != nil || req.Model != "b" {
		t.Errorf("repeated key: %v %+v", err, req)
	}
}

// TestHostileSizes: deep nesting, many blocks and many messages are
// refused with a 400, not a crash or a long stall.
func TestHostileSizes(t *testing.T) {
	deep := `{"model":"m","max_tokens":4,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":` +
		strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + `}]}]}`
	blocks := `{"model":"m","max_tokens":4,"messages":[{"role":"user","content":[` +
		strings.TrimSuffix(strings.Repeat(`{"type":"text","text":"x"},`, MaxBlocks+1), ",") + `]}]}`
	msgs := `{"model":"m","max_tokens":4,"messages":[` +
		strings.TrimSuffix(strings.Repeat(`{"role":"user","content":"x"},`, MaxMessages+1), ",") + `]}`
	tools := `{"model":"m","max_tokens":4,"messages":[{"role":"user","content":"x"}],"tools":[` +
		strings.TrimSuffix(strings.Repeat(`{"name":"f","input_schema":{}},`, MaxTools+1), ",") + `]}`
	for name, body := range map[string]string{"deep": deep, "blocks": blocks, "messages": msgs, "tools": tools} {
		_, err := Parse([]byte(body), false)
		if err == nil || err.Status != http.StatusBadRequest {
			t.Errorf("%s: err = %v, want a 400", name, err)
		}
	}
	// Just under the block limit is served.
	ok := `{"model":"m","max_tokens":4,"messages":[{"role":"user","content":[` +
		strings.TrimSuffix(strings.Repeat(`{"type":"text","text":"x"},`, MaxBlocks-1), ",") + `]}]}`
	req, err := Parse([]byte(ok), false)
	if err != nil {
		t.Fatal(err)
	}
	if out := req.ToChat("m"); !json.Valid(out) {
		t.Error("invalid translation")
	}
}

func TestFromChat(t *testing.T) {
	req, apiErr := Parse([]byte(`{"model":"alias","max_tokens":9,"stop_sequences":["END"],"messages":[{"role":"user","content":"x"}]}`), false)
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	usage := `"usage":{"prompt_tokens":10,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":6}}`
	tests := []struct {
		name, body, want string
	}{
		{"text, stop", `{"id":"chatcmpl-7","choices":[{"message":{"content":"Hi"},"finish_reason":"stop"}],` + usage + `}`,
			`{"id":"msg_7","type":"message","role":"assistant","model":"alias","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":4,"cache_creation_input_tokens":0,"cache_read_input_tokens":6,"output_tokens":3}}`},
		{"stop sequence", `{"id":"chatcmpl-7","choices":[{"message":{"content":"Hi"},"finish_reason":"stop","stop_reason":"END"}],` + usage + `}`,
			`{"id":"msg_7","type":"message","role":"assistant","model":"alias","content":[{"type":"text","text":"Hi"}],"stop_reason":"stop_sequence","stop_sequence":"END","usage":{"input_tokens":4,"cache_creation_input_tokens":0,"cache_read_input_tokens":6,"output_tokens":3}}`},
		{"length", `{"id":"x","choices":[{"message":{"content":"Hi"},"finish_reason":"length"}]}`,
			`{"id":"msg_x","type":"message","role":"assistant","model":"alias","content":[{"type":"text","text":"Hi"}],"stop_reason":"max_tokens","stop_sequence":null,"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}}`},
		{"tool calls", `{"id":"x","choices":[{"message":{"content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\": 1}"}},{"id":"call_2","type":"function","function":{"name":"g","arguments":"not json"}}]},"finish_reason":"tool_calls"}]}`,
			`{"id":"msg_x","type":"message","role":"assistant","model":"alias","content":[{"type":"tool_use","id":"call_1","name":"f","input":{"a":1}},{"type":"tool_use","id":"call_2","name":"g","input":{"_raw_arguments":"not json"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := req.FromChat([]byte(tc.body), "alias")
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	if _, err := req.FromChat([]byte(`{"choices":[]}`), "alias"); err == nil || err.Status != http.StatusBadGateway {
		t.Errorf("no choices: %v", err)
	}
}

// TestStream: a chat stream with text and two tool calls becomes the
// Messages events in Anthropic's order.
func TestStream(t *testing.T) {
	req, apiErr := Parse([]byte(`{"model":"alias","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"x"}]}`), false)
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	chunks := []string{
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"Let me"}}]}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":" check."}}]}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}}]}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]}}]}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}}]}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"g","arguments":"{}"}}]}}]}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":8}}}`,
		`[DONE]`,
	}
	st := req.NewStream("alias")
	var out []byte
	for _, c := range chunks {
		out = st.Chunk(out, []byte(c))
	}
	want := strings.Join([]string{
		`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"alias","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}}}`,
		`event: ping` + "\n" + `data: {"type":"ping"}`,
		`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me"}}`,
		`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" check."}}`,
		`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":0}`,
		`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"call_1","name":"f","input":{}}}`,
		`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`,
		`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"1}"}}`,
		`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":1}`,
		`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"call_2","name":"g","input":{}}}`,
		`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{}"}}`,
		`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":2}`,
		`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":2,"cache_creation_input_tokens":0,"cache_read_input_tokens":8,"output_tokens":5}}`,
		`event: message_stop` + "\n" + `data: {"type":"message_stop"}`,
	}, "\n\n") + "\n\n"
	if string(out) != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
	if !st.Stopped() {
		t.Error("not stopped after [DONE]")
	}

	// The gateway's mid-stream error chunk becomes an error event, and
	// nothing follows it.
	st = req.NewStream("alias")
	out = st.Chunk(nil, []byte(chunks[1]))
	out = st.Chunk(out, []byte(`{"error":{"message":"the model server stopped mid-response","type":"server_error","code":"upstream_broken"}}`))
	out = st.Chunk(out, []byte(`[DONE]`))
	if !strings.HasSuffix(string(out), "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"the model server stopped mid-response\"}}\n\n") {
		t.Errorf("error stream:\n%s", out)
	}
}

func TestStatusError(t *testing.T) {
	for status, want := range map[int]struct {
		status int
		typ    string
	}{
		400: {400, ErrTypeInvalidRequest}, 401: {401, ErrTypeAuthentication}, 403: {403, ErrTypePermission},
		404: {404, ErrTypeNotFound}, 413: {413, ErrTypeRequestTooLarge}, 429: {429, ErrTypeRateLimit},
		500: {500, ErrTypeAPI}, 502: {502, ErrTypeAPI}, 503: {529, ErrTypeOverloaded}, 504: {504, ErrTypeTimeout},
	} {
		e := FromOpenAIError(status, []byte(`{"error":{"message":"why","type":"x","param":null,"code":null}}`))
		if e.Status != want.status || e.Type != want.typ || e.Message != "why" {
			t.Errorf("%d: got %d %s %q, want %d %s", status, e.Status, e.Type, e.Message, want.status, want.typ)
		}
	}
	if e := FromOpenAIError(502, []byte("Bad Gateway\n")); e.Message != "Bad Gateway" {
		t.Errorf("plain body: %q", e.Message)
	}
}

// FuzzParse: any body either parses into a request whose translation is
// valid JSON, or is refused with a 400; never a panic.
func FuzzParse(f *testing.F) {
	ins, _ := filepath.Glob("testdata/translate/*.in.json")
	for _, in := range ins {
		b, _ := os.ReadFile(in)
		f.Add(b, false)
	}
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"x"}]}]}]}`), true)
	f.Add([]byte(`{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":null}]}]}`), false)
	f.Fuzz(func(t *testing.T, body []byte, countOnly bool) {
		req, err := Parse(body, countOnly)
		if err != nil {
			if err.Status != http.StatusBadRequest || err.Message == "" {
				t.Fatalf("error %d %q", err.Status, err.Message)
			}
			return
		}
		if out := req.ToChat(req.Model); !json.Valid(out) {
			t.Fatalf("invalid translation %s", out)
		}
	})
}
