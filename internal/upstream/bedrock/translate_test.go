package bedrock

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// golden compares got (JSON, indented here) with a golden file.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, got, "", "  "); err != nil {
		t.Fatalf("not JSON: %v: %s", err, got)
	}
	buf.WriteByte('\n')
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("%s differs (-update to accept):\n--- got\n%s--- want\n%s", path, buf.Bytes(), want)
	}
}

// TestToConverseGolden: OpenAI bodies in testdata/requests become the
// Converse requests in their .converse.golden files.
func TestToConverseGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/requests/*.json")
	if len(files) == 0 {
		t.Fatal("no requests")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			body, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			tr, apiErr := toConverse(body)
			if apiErr != nil {
				t.Fatal(apiErr)
			}
			meta, _ := json.Marshal(map[string]any{"modelId": tr.ModelID, "stream": tr.Stream, "includeUsage": tr.IncludeUsage, "body": json.RawMessage(tr.Body)})
			golden(t, strings.TrimSuffix(f, ".json")+".converse.golden", meta)
		})
	}
}

// TestToConverseRefused: what Converse cannot take is a 400 naming the
// field.
func TestToConverseRefused(t *testing.T) {
	for _, tc := range []struct{ name, body, param, msg string }{
		{"not an object", `[1]`, "", "JSON object"},
		{"syntax", `{"model":`, "", "invalid JSON"},
		{"no messages", `{"model":"m","messages":[]}`, "messages", "non-empty"},
		{"no model", `{"messages":[{"role":"user","content":"x"}]}`, "model", "required"},
		{"n", `{"model":"m","n":2,"messages":[{"role":"user","content":"x"}]}`, "n", "one choice"},
		{"role", `{"model":"m","messages":[{"role":"robot","content":"x"}]}`, "messages[0].role", "unsupported role"},
		{"image link", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}`, "messages[0].content[0].image_url.url", "data: URLs"},
		{"image type", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/tiff;base64,AAAA"}}]}]}`, "messages[0].content[0].image_url.url", "not supported"},
		{"image base64", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,@@@"}}]}]}`, "messages[0].content[0].image_url.url", "base64"},
		{"audio", `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]}`, "messages[0].content[0].type", "not supported"},
		{"tool args", `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"[1"}}]}]}`, "messages[1].tool_calls[0].function.arguments", "JSON object"},
		{"tool message id", `{"model":"m","messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id", "tool_call_id"},
		{"tool choice none", `{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`, "tool_choice", "not supported"},
		{"only system", `{"model":"m","messages":[{"role":"system","content":"x"}]}`, "messages", "at least one"},
		{"max tokens", `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"x"}]}`, "max_tokens", "at least 1"},
		{"stop type", `{"model":"m","stop":5,"messages":[{"role":"user","content":"x"}]}`, "stop", "string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, apiErr := toConverse([]byte(tc.body))
			if apiErr == nil {
				t.Fatal("accepted")
			}
			if apiErr.Status != 400 || apiErr.Param != tc.param || !strings.Contains(apiErr.Message, tc.msg) {
				t.Fatalf("got %d %q %q, want 400 %q ~%q", apiErr.Status, apiErr.Param, apiErr.Message, tc.param, tc.msg)
			}
		})
	}
}

// TestFromConverse: text, tool uses, stop reasons and usage come back in
// OpenAI's shape.
func TestFromConverse(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"text", `{"output":{"message":{"role":"assistant","content":[{"text":"Hi"},{"text":" there"}]}},"stopReason":"end_turn","usage":{"inputTokens":5,"outputTokens":2,"totalTokens":17,"cacheReadInputTokens":10}}`,
			`{"id":"X","object":"chat.completion","created":1700000000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi there"},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":15,"completion_tokens":2,"total_tokens":17,"prompt_tokens_details":{"cached_tokens":10}}}`},
		{"tool use", `{"output":{"message":{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"weather","input":{"city":"Paris"}}}]}},"stopReason":"tool_use","usage":{"inputTokens":5,"outputTokens":2}}`,
			`{"id":"X","object":"chat.completion","created":1700000000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"t1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7,"prompt_tokens_details":null}}`},
		{"length", `{"output":{"message":{"role":"assistant","content":[{"text":"a"}]}},"stopReason":"max_tokens"}`,
			`{"id":"X","object":"chat.completion","created":1700000000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"a"},"logprobs":null,"finish_reason":"length"}],"usage":null}`},
		{"stop sequence", `{"output":{"message":{"role":"assistant","content":[{"text":"a"}]}},"stopReason":"stop_sequence"}`,
			`{"id":"X","object":"chat.completion","created":1700000000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"a"},"logprobs":null,"finish_reason":"stop"}],"usage":null}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fromConverse([]byte(tc.body), "m", time.Unix(1700000000, 0))
			if err != nil {
				t.Fatal(err)
			}
			got = normalizeID(got)
			if string(got) != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func normalizeID(b []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return b
	}
	if _, ok := m["id"]; !ok {
		return b
	}
	i := bytes.Index(b, []byte(`"id":"chatcmpl-`))
	if i < 0 {
		return b
	}
	j := bytes.IndexByte(b[i+6:], '"')
	return append(append(append([]byte{}, b[:i]...), `"id":"X"`...), b[i+6+j+1:]...)
}

// TestTranslateError: each Bedrock exception gets its status and OpenAI
// error type; a refusal of the credentials does not repeat Bedrock's
// message.
func TestTranslateError(t *testing.T) {
	for _, tc := range []struct {
		typ          string
		status, want int
		errType      string
	}{
		{"ValidationException", 400, 400, "invalid_request_error"},
		{"AccessDeniedException", 403, 403, "permission_error"},
		{"ResourceNotFoundException", 404, 404, "not_found_error"},
		{"ThrottlingException", 429, 429, "rate_limit_error"},
		{"ServiceUnavailableException", 503, 503, "service_unavailable_error"},
		{"ModelNotReadyException", 429, 503, "service_unavailable_error"},
		{"InternalServerException", 500, 500, "server_error"},
		{"ModelTimeoutException", 408, 504, "timeout_error"},
		{"SomethingNewException", 418, 418, "invalid_request_error"},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			e := translateError(tc.status, tc.typ+":http://internal.amazon.com/coral/com.amazon.bedrock/", []byte(`{"message":"User: arn:aws:iam::123:user/x says no"}`))
			if e.Status != tc.want || e.Type != tc.errType || e.Code != tc.typ {
				t.Fatalf("got %d %s %s", e.Status, e.Type, e.Code)
			}
			if tc.want == 403 && strings.Contains(e.Message, "arn:") {
				t.Fatalf("message repeats the principal: %s", e.Message)
			}
		})
	}
	if e := translateError(400, "", []byte(`{"__type":"com.amazon.coral.validate#ValidationException","Message":"bad"}`)); e.Code != "ValidationException" || e.Message != "Amazon Bedrock: bad" {
		t.Fatalf("body __type: %+v", e)
	}
}
