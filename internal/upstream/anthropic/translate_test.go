package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const testCreated = 1764633600

// golden compares got with the file, or writes it with -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("got:\n%s\nwant (%s):\n%s", got, path, want)
	}
}

func indent(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatalf("invalid JSON: %v\n%s", err, b)
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// TestRequestGolden: each testdata/request/NAME.in.json (a chat
// completions body) translates to the Messages body in NAME.messages.json.
func TestRequestGolden(t *testing.T) {
	ins, _ := filepath.Glob("testdata/request/*.in.json")
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
			tr, apiErr := toMessages(body)
			if apiErr != nil {
				t.Fatalf("refused: %v", apiErr)
			}
			golden(t, strings.TrimSuffix(in, ".in.json")+".messages.json", indent(t, tr.body))
		})
	}
}

// TestResponseGolden: each testdata/response/NAME.message.json (a Messages
// response) translates to the chat completion in NAME.chat.json.
func TestResponseGolden(t *testing.T) {
	ins, _ := filepath.Glob("testdata/response/*.message.json")
	if len(ins) == 0 {
		t.Fatal("no golden inputs")
	}
	for _, in := range ins {
		name := strings.TrimSuffix(filepath.Base(in), ".message.json")
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			out, apiErr := fromMessage(body, testCreated)
			if apiErr != nil {
				t.Fatalf("unreadable: %v", apiErr)
			}
			golden(t, strings.TrimSuffix(in, ".message.json")+".chat.json", indent(t, out))
		})
	}
}

// translateStream runs a stream through streamBody, the upstream's bytes
// cut into pieces of step bytes (0: all at once), and returns the client's
// bytes and how the body ended.
func translateStream(in []byte, step int, includeUsage bool) ([]byte, error) {
	src := &pieces{b: in, step: step}
	body := newStreamBody(io.NopCloser(src), newStreamTranslator(testCreated, includeUsage, "sk-ant-secret"))
	var out bytes.Buffer
	p := make([]byte, 7) // a small reader: the output is handed out in parts too
	for {
		n, err := body.Read(p)
		out.Write(p[:n])
		if err != nil {
			return out.Bytes(), err
		}
	}
}

type pieces struct {
	b    []byte
	step int
}

func (p *pieces) Read(b []byte) (int, error) {
	if len(p.b) == 0 {
		return 0, io.EOF
	}
	n := len(p.b)
	if p.step > 0 {
		n = min(n, p.step)
	}
	n = copy(b, p.b[:n])
	p.b = p.b[n:]
	return n, nil
}

// TestStreamGolden: each testdata/stream/NAME.sse (a Messages event
// stream) translates to the chat stream in NAME.chunks, followed by how
// the stream ended; however the upstream's bytes are cut, the output is
// the same. NAME starting with nousage- is a client that did not ask for
// the usage chunk.
func TestStreamGolden(t *testing.T) {
	ins, _ := filepath.Glob("testdata/stream/*.sse")
	if len(ins) == 0 {
		t.Fatal("no golden inputs")
	}
	for _, in := range ins {
		name := strings.TrimSuffix(filepath.Base(in), ".sse")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			usage := !strings.HasPrefix(name, "nousage-")
			var first []byte
			for _, step := range []int{0, 1, 2, 3, 17, 4096} {
				out, err := translateStream(src, step, usage)
				end := "EOF"
				if err != io.EOF {
					end = fmt.Sprintf("error: %v", err)
				}
				got := append(out, "-- end: "+end+"\n"...)
				if step == 0 {
					first = got
					golden(t, strings.TrimSuffix(in, ".sse")+".chunks", got)
				} else if !bytes.Equal(got, first) {
					t.Errorf("cut in pieces of %d bytes:\n%s\nwant, as whole:\n%s", step, got, first)
				}
				if bytes.Contains(got, []byte("sk-ant-secret")) {
					t.Errorf("the key reached the output")
				}
			}
		})
	}
}

// TestStreamErrorIsBroken: a mid-stream error event ends the body's read
// with a *StreamError, which the gateway takes for a broken upstream (and
// answers with its own error event); the provider's error goes ahead as a
// comment, and nothing after it.
func TestStreamErrorIsBroken(t *testing.T) {
	src, err := os.ReadFile("testdata/stream/error.sse")
	if err != nil {
		t.Fatal(err)
	}
	out, err := translateStream(src, 0, true)
	var se *StreamError
	if !errors.As(err, &se) || se.Type != "overloaded_error" || se.Message != "Overloaded" {
		t.Fatalf("ended with %v, want a *StreamError overloaded_error", err)
	}
	if !bytes.HasSuffix(out, []byte("\n\n: error: overloaded_error: Overloaded\n\n")) {
		t.Errorf("the stream does not end with the provider's error as a comment:\n%s", out)
	}
	if bytes.Contains(out, []byte("never seen")) || bytes.Contains(out, []byte("[DONE]")) {
		t.Errorf("events after the error reached the client:\n%s", out)
	}
}

func TestStreamBounds(t *testing.T) {
	huge := append([]byte("event: content_block_delta\ndata: "), bytes.Repeat([]byte("x"), maxEventBytes+1)...)
	if _, err := translateStream(huge, 64<<10, true); !errors.Is(err, errEventTooLarge) {
		t.Errorf("an event over the bound ended with %v, want errEventTooLarge", err)
	}
	if _, err := translateStream([]byte("event: message_start\ndata: {nope\n\n"), 0, true); err == nil || err == io.EOF {
		t.Errorf("an unreadable event ended with %v, want an error", err)
	}
}

// TestRequestRefused: what Messages cannot do is refused with a 400 in
// OpenAI's shape that names the parameter.
func TestRequestRefused(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	tests := []struct {
		name, body, param, want string
	}{
		{"syntax", `{"model":"m",` + "\n" + `"messages": x}`, "", "line 2"},
		{"not an object", `[1]`, "", "JSON object"},
		{"no model", `{` + msgs + `}`, "model", "model is required"},
		{"no messages", `{"model":"m","messages":[]}`, "messages", "non-empty"},
		{"only system", `{"model":"m","messages":[{"role":"system","content":"x"}]}`, "messages", "besides the system prompt"},
		{"wrong type", `{"model":"m","messages":"hi"}`, "messages", "invalid type"},
		{"n", `{"model":"m","n":2,` + msgs + `}`, "n", "not supported"},
		{"logprobs", `{"model":"m","logprobs":true,` + msgs + `}`, "logprobs", "not supported"},
		{"logit_bias", `{"model":"m","logit_bias":{"1":2},` + msgs + `}`, "logit_bias", "not supported"},
		{"json_schema", `{"model":"m","response_format":{"type":"json_schema"},` + msgs + `}`, "response_format", "json_schema"},
		{"audio", `{"model":"m","audio":{"voice":"x"},` + msgs + `}`, "audio", "not supported"},
		{"reasoning_effort", `{"model":"m","reasoning_effort":"high",` + msgs + `}`, "reasoning_effort", "not supported"},
		{"functions", `{"model":"m","functions":[{"name":"f"}],` + msgs + `}`, "functions", "tools and tool_choice"},
		{"max_tokens zero", `{"model":"m","max_tokens":0,` + msgs + `}`, "max_tokens", "at least 1"},
		{"stream_options without stream", `{"model":"m","stream_options":{"include_usage":true},` + msgs + `}`, "stream_options", "stream is true"},
		{"bad stop", `{"model":"m","stop":5,` + msgs + `}`, "stop", "string or an array"},
		{"role", `{"model":"m","messages":[{"role":"function","content":"x"}]}`, "messages[0].role", "unsupported role"},
		{"empty user", `{"model":"m","messages":[{"role":"user","content":""}]}`, "messages[0].content", "non-empty"},
		{"audio part", `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]}`, "messages[0].content[0].type", "input_audio"},
		{"image in system", `{"model":"m","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://x"}}]},{"role":"user","content":"x"}]}`, "messages[0].content[0].type", "text parts only"},
		{"image from assistant", `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"image_url","image_url":{"url":"https://x"}}]}]}`, "messages[1].content[0].type", "user and tool"},
		{"ftp image", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://x/y.png"}}]}]}`, "messages[0].content[0].image_url.url", "http(s)"},
		{"bad data url", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png,abc"}}]}]}`, "messages[0].content[0].image_url.url", "base64"},
		{"tool without id", `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"tool","content":"r"}]}`, "messages[1].tool_call_id", "required"},
		{"arguments not an object", `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`, "messages[1].tool_calls[0].function.arguments", "JSON object"},
		{"tool call without name", `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"arguments":"{}"}}]}]}`, "messages[1].tool_calls[0]", "function name"},
		{"non-function tool", `{"model":"m","tools":[{"type":"custom","custom":{"name":"x"}}],` + msgs + `}`, "tools[0].type", "not supported"},
		{"tool parameters", `{"model":"m","tools":[{"type":"function","function":{"name":"f","parameters":[1]}}],` + msgs + `}`, "tools[0].function.parameters", "JSON Schema"},
		{"tool_choice value", `{"model":"m","tool_choice":"sometimes","tools":[{"type":"function","function":{"name":"f"}}],` + msgs + `}`, "tool_choice", "sometimes"},
		{"tool_choice without tools", `{"model":"m","tool_choice":"required",` + msgs + `}`, "tool_choice", "needs tools"},
		{"tool_choice object", `{"model":"m","tool_choice":{"type":"allowed_tools"},"tools":[{"type":"function","function":{"name":"f"}}],` + msgs + `}`, "tool_choice", "function"},
		{"too many stops", `{"model":"m","stop":["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"],` + msgs + `}`, "stop", "more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, e := toMessages([]byte(tt.body))
			if e == nil {
				t.Fatal("accepted")
			}
			if e.Status != http.StatusBadRequest || e.Param != tt.param || !strings.Contains(e.Message, tt.want) {
				t.Errorf("got %d param %q %q, want 400 param %q containing %q", e.Status, e.Param, e.Message, tt.param, tt.want)
			}
		})
	}
}

// TestErrorMapping: Anthropic's error answers become OpenAI's, with
// statuses an OpenAI client and the gateway's retries understand.
func TestErrorMapping(t *testing.T) {
	env := func(typ, msg string) []byte {
		return []byte(`{"type":"error","error":{"type":"` + typ + `","message":"` + msg + `"}}`)
	}
	tests := []struct {
		status         int
		body           []byte
		wantStatus     int
		wantType, code string
		wantMsg        string
	}{
		{400, env("invalid_request_error", "max_tokens: Field required"), 400, "invalid_request_error", "invalid_request_error", "max_tokens: Field required"},
		{401, env("authentication_error", "invalid x-api-key"), 502, "server_error", "authentication_error", "refused the gateway's credentials (HTTP 401): invalid x-api-key"},
		{403, env("permission_error", "no access"), 502, "server_error", "permission_error", "HTTP 403"},
		{404, env("not_found_error", "model: claude-x"), 404, "not_found_error", "not_found_error", "model: claude-x"},
		{413, env("request_too_large", "Request exceeds the maximum allowed number of bytes."), 413, "invalid_request_error", "request_too_large", "maximum allowed"},
		{429, env("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"), 429, "rate_limit_error", "rate_limit_error", "rate limit"},
		{500, env("api_error", "Internal server error"), 500, "server_error", "api_error", "Internal server error"},
		{504, env("timeout_error", "Request timed out"), 504, "timeout_error", "timeout_error", "timed out"},
		{529, env("overloaded_error", "Overloaded"), 503, "service_unavailable_error", "overloaded_error", "Overloaded"},
		{502, []byte("<html>bad gateway</html>"), 502, "server_error", "upstream_error", "the provider answered HTTP 502"},
		{400, env("invalid_request_error", "bad key sk-ant-secret here"), 400, "invalid_request_error", "invalid_request_error", "bad key [redacted] here"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status, tt.code), func(t *testing.T) {
			e := fromError(tt.status, tt.body, "sk-ant-secret")
			if e.Status != tt.wantStatus || e.Type != tt.wantType || e.Code != tt.code || !strings.Contains(e.Message, tt.wantMsg) {
				t.Errorf("got %d %s %s %q, want %d %s %s containing %q", e.Status, e.Type, e.Code, e.Message, tt.wantStatus, tt.wantType, tt.code, tt.wantMsg)
			}
			if strings.Contains(e.Message, "sk-ant-secret") {
				t.Errorf("the key is in the message")
			}
		})
	}
}

func TestUnreadableMessage(t *testing.T) {
	for _, b := range []string{``, `{`, `[]`, `{"type":"error"}`, `{"type":"message","content":5}`} {
		if _, e := fromMessage([]byte(b), 0); e == nil || e.Status != http.StatusBadGateway {
			t.Errorf("fromMessage(%q) = %v, want a 502", b, e)
		}
	}
}

// FuzzStream: the stream decoder never panics, and its output is bounded
// by its input (no event is ever more than a few chunks).
func FuzzStream(f *testing.F) {
	ins, _ := filepath.Glob("testdata/stream/*.sse")
	for _, in := range ins {
		b, _ := os.ReadFile(in)
		f.Add(b, uint8(0))
		f.Add(b, uint8(3))
	}
	f.Add([]byte("data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\"}}\n\n"), uint8(1))
	f.Fuzz(func(t *testing.T, in []byte, step uint8) {
		out, _ := translateStream(in, int(step), true)
		if len(out) > 64*len(in)+4096 {
			t.Errorf("%d bytes in, %d out", len(in), len(out))
		}
	})
}

// FuzzMessage: the response decoder never panics, and what it writes is
// JSON.
func FuzzMessage(f *testing.F) {
	ins, _ := filepath.Glob("testdata/response/*.message.json")
	for _, in := range ins {
		b, _ := os.ReadFile(in)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, e := fromMessage(in, 0)
		if e == nil && !json.Valid(out) {
			t.Errorf("invalid JSON out: %s", out)
		}
		e2 := fromError(400, in, "k")
		if !json.Valid(errorBody(e2)) {
			t.Errorf("invalid error JSON")
		}
	})
}

// FuzzRequest: the request translation never panics, and what it sends
// is JSON.
func FuzzRequest(f *testing.F) {
	ins, _ := filepath.Glob("testdata/request/*.in.json")
	for _, in := range ins {
		b, _ := os.ReadFile(in)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		tr, e := toMessages(in)
		if e == nil && !json.Valid(tr.body) {
			t.Errorf("invalid JSON out: %s", tr.body)
		}
	})
}
