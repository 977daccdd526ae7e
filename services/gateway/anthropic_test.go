package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/switchyard-dev/switchyard/internal/anthropicapi"
	"github.com/switchyard-dev/switchyard/internal/apikey"
	"github.com/switchyard-dev/switchyard/internal/bus"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

const messagesBody = `{"model":"` + testModel + `","max_tokens":16,"system":"Be brief.",` +
	`"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],` +
	`"messages":[{"role":"user","content":"Weather?"},` +
	`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Oslo"}}]},` +
	`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"snow"}]}]}`

func anthropicSDK(e *env) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(e.url), aoption.WithAPIKey("unused"), aoption.WithMaxRetries(0))
}

// TestMessagesTranslated: the router and the worker both get the chat
// completions body the request translates to, and the completion comes
// back as a message with Anthropic's usage (cache hits apart).
func TestMessagesTranslated(t *testing.T) {
	e := newEnv(t, envOpts{})
	v := newVLLM(t, modeOK)
	e.router.setTargets(testModel, v.target("w"))

	resp := e.post(t, "/v1/messages", messagesBody, map[string]string{"anthropic-version": "2023-06-01"})
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	parsed, apiErr := anthropicapi.Parse([]byte(messagesBody), false)
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	want := parsed.ToChat(testModel)
	if got := v.lastBody(); !bytes.Equal(got, want) {
		t.Errorf("worker got  %s\nwant        %s", got, want)
	}
	calls := e.router.calls()
	if len(calls) != 1 || calls[0].GetApi() != routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS || !bytes.Equal(calls[0].GetBody(), want) {
		t.Errorf("router calls = %v: want one chat completions call with the translated body", calls)
	}
	var msg anthropic.Message
	if err := json.Unmarshal(raw, &msg); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	if msg.Type != "message" || len(msg.Content) != 1 || msg.Content[0].Text != "Hello world!" || msg.StopReason != anthropic.StopReasonEndTurn {
		t.Errorf("message = %s", raw)
	}
	if u := msg.Usage; u.InputTokens != promptTokens-cachedTokens || u.CacheReadInputTokens != cachedTokens || u.OutputTokens != completionTokens {
		t.Errorf("usage = %+v, want input %d cache_read %d output %d", u, promptTokens-cachedTokens, cachedTokens, completionTokens)
	}
	if resp.Header.Get("Content-Length") != "" && resp.Header.Get("Content-Length") != itoa(len(raw)) {
		t.Errorf("Content-Length %s for a %d-byte body", resp.Header.Get("Content-Length"), len(raw))
	}
	if ev := e.usageEvent(t, resp.Header.Get(RequestIDHeader)); ev.GetApi() != "messages" || ev.GetPromptTokens() != promptTokens {
		t.Errorf("usage event api %q prompt %d", ev.GetApi(), ev.GetPromptTokens())
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestMessagesStream: the chat stream comes back as Messages events the
// SDK accumulates, the usage in message_delta.
func TestMessagesStream(t *testing.T) {
	e := newEnv(t, envOpts{})
	v := newVLLM(t, modeOK)
	e.router.setTargets(testModel, v.target("w"))
	client := anthropicSDK(e)
	stream := client.Messages.NewStreaming(t.Context(), anthropic.MessageNewParams{
		Model: testModel, MaxTokens: 16, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	defer stream.Close()
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Content) != 1 || acc.Content[0].Text != "Hello world!" || acc.StopReason != anthropic.StopReasonEndTurn {
		t.Errorf("message = %+v", acc)
	}
	if u := acc.Usage; u.InputTokens != promptTokens-cachedTokens || u.CacheReadInputTokens != cachedTokens || u.OutputTokens != completionTokens {
		t.Errorf("usage = %+v", u)
	}
}

// TestMessagesStreamBroken: a worker dying mid-stream reaches an Anthropic
// client as an error event, then a cut connection; the usage event says
// the upstream broke.
func TestMessagesStreamBroken(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.router.setTargets(testModel, newVLLM(t, modeAbortAfter1).target("broken"))
	body := `{"model":"` + testModel + `","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	resp := e.post(t, "/v1/messages", body, nil)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var names []string
	var last string
	for {
		ev, err := readEvent(br)
		if err != nil {
			break
		}
		names = append(names, strings.TrimPrefix(strings.SplitN(ev, "\n", 2)[0], "event: "))
		last = ev
	}
	if strings.Join(names, ",") != "message_start,ping,error" {
		t.Fatalf("events = %v, want message_start, ping, error", names)
	}
	if !strings.Contains(last, `"type":"error"`) || !strings.Contains(last, `"api_error"`) || !strings.Contains(last, "stopped mid-response") {
		t.Errorf("error event = %q", last)
	}
	ev := e.usageEvent(t, resp.Header.Get(RequestIDHeader))
	if ev.GetOutcome() != bus.UsageOutcomeUpstreamBroken {
		t.Errorf("usage outcome %q", ev.GetOutcome())
	}

	// The SDK raises it.
	client := anthropicSDK(e)
	stream := client.Messages.NewStreaming(t.Context(), anthropic.MessageNewParams{
		Model: testModel, MaxTokens: 16, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	for stream.Next() {
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "mid-response") {
		t.Errorf("SDK stream error = %v", err)
	}
	_ = stream.Close()
}

// TestMessagesErrors: the gateway's and the workers' errors reach an
// Anthropic client in Anthropic's shape and statuses.
func TestMessagesErrors(t *testing.T) {
	e := newEnv(t, envOpts{noNATS: true})
	e.router.setTargets(testModel, newVLLM(t, modeFail500).target("dead"))
	e.router.mu.Lock()
	e.router.reject = map[string]*routerv1.Rejection{"busy": {Code: routerv1.RejectCode_REJECT_CODE_NO_HEALTHY_ENDPOINT}}
	e.router.mu.Unlock()
	client := anthropicSDK(e)
	for _, tc := range []struct {
		model   string
		status  int
		errType anthropic.ErrorType
	}{
		{"no-such-model", http.StatusNotFound, anthropic.ErrorTypeNotFoundError},
		{"busy", anthropicapi.StatusOverloaded, anthropic.ErrorTypeOverloadedError},
		{testModel, http.StatusInternalServerError, anthropic.ErrorTypeAPIError},
	} {
		_, err := client.Messages.New(t.Context(), anthropic.MessageNewParams{
			Model: anthropic.Model(tc.model), MaxTokens: 4, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
		})
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("%s: err = %v", tc.model, err)
		}
		if apiErr.StatusCode != tc.status || apiErr.Type() != tc.errType {
			t.Errorf("%s: status %d type %q, want %d %q", tc.model, apiErr.StatusCode, apiErr.Type(), tc.status, tc.errType)
		}
	}
}

// TestMessagesAPIKeys: with API keys, an Anthropic client's x-api-key names
// its tenant; a wrong key is a 401 authentication_error, before the body is
// read, with nothing routed; count_tokens is admitted the same way.
func TestMessagesAPIKeys(t *testing.T) {
	key := apikey.Generate()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "gateway.yaml"), []byte(keyedCatalog(map[string]string{"team-a": key})), 0o600); err != nil {
		t.Fatal(err)
	}
	pdAddr := servePolicydFiles(t, dir)
	e := newEnv(t, envOpts{noNATS: true, cfg: func(c *Config) { c.PolicydAddr, c.GatewayBackend = pdAddr, "keyed" }})
	e.router.setTargets(testModel, newVLLM(t, modeOK).target("w0"))
	e.eventually(t, "policy snapshot", func() bool { p := e.gw.catalog.program(); return p != nil && p.AuthKeys() == 1 })

	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}
	for _, k := range []string{key, "sy-wrong"} {
		client := anthropic.NewClient(aoption.WithBaseURL(e.url), aoption.WithAPIKey(k), aoption.WithMaxRetries(0))
		_, err := client.Messages.New(t.Context(), anthropic.MessageNewParams{Model: testModel, MaxTokens: 4, Messages: msgs})
		_, cerr := client.Messages.CountTokens(t.Context(), anthropic.MessageCountTokensParams{Model: testModel, Messages: msgs})
		if k == key {
			if err != nil {
				t.Fatalf("right key: %v", err)
			}
			continue
		}
		for _, err := range []error{err, cerr} {
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || apiErr.Type() != anthropic.ErrorTypeAuthenticationError {
				t.Errorf("wrong key: err = %v, want 401 authentication_error", err)
			}
		}
	}
	// A malformed body with a wrong key is still a 401: admission first.
	resp := e.post(t, "/v1/messages", `{not json`, map[string]string{"x-api-key": "sy-wrong"})
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("malformed body, wrong key: status %d, want 401", resp.StatusCode)
	}
	calls := e.router.calls()
	if len(calls) != 2 || calls[0].GetTenant() != "team-a" {
		t.Errorf("router calls = %d (tenant %q), want the right key's two (team-a)", len(calls), calls[0].GetTenant())
	}
}

// TestMessagesTooLarge: a body over --max-body-bytes is a 413
// request_too_large in Anthropic's shape, and nothing is routed.
func TestMessagesTooLarge(t *testing.T) {
	e := newEnv(t, envOpts{noNATS: true, cfg: func(c *Config) { c.MaxBodyBytes = 1 << 10 }})
	e.router.setTargets(testModel, newVLLM(t, modeOK).target("w"))
	big := `{"model":"` + testModel + `","max_tokens":4,"messages":[{"role":"user","content":"` + strings.Repeat("x", 2<<10) + `"}]}`
	for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
		resp := e.post(t, path, big, nil)
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(raw), `"request_too_large"`) {
			t.Errorf("%s: %d %s", path, resp.StatusCode, raw)
		}
	}
	if n := len(e.router.calls()); n != 0 {
		t.Errorf("%d oversized requests routed", n)
	}
}

// toolCallWorker answers every chat request with a call of get_weather,
// streamed in argument fragments as vLLM's tool parsers stream them.
func toolCallWorker(t *testing.T) *routerv1.Target {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		usage := `{"prompt_tokens":20,"completion_tokens":9,"prompt_tokens_details":{"cached_tokens":16}}`
		if !bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"chatcmpl-t","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,`+
				`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Oslo\"}"}}]},"finish_reason":"tool_calls"}],"usage":`+usage+`}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range []string{
			`{"role":"assistant","content":""}`,
			`{"content":"Checking."}`,
			`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}`,
			`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": "}}]}`,
			`{"tool_calls":[{"index":0,"function":{"arguments":"\"Oslo\"}"}}]}`,
		} {
			_, _ = io.WriteString(w, `data: {"id":"chatcmpl-t","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":`+d+`,"finish_reason":null}]}`+"\n\n")
		}
		_, _ = io.WriteString(w, `data: {"id":"chatcmpl-t","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`+"\n\n")
		_, _ = io.WriteString(w, `data: {"id":"chatcmpl-t","object":"chat.completion.chunk","model":"m","choices":[],"usage":`+usage+"}\n\n")
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return &routerv1.Target{Id: "tools", Url: srv.URL, Kind: routerv1.TargetKind_TARGET_KIND_LOCAL, ServedModel: testModel, Type: "vLLM"}
}

// TestMessagesToolUse: a worker's tool call reaches the Anthropic SDK as a
// tool_use block with its input object, streamed (input_json_delta) and
// not, with stop_reason tool_use.
func TestMessagesToolUse(t *testing.T) {
	e := newEnv(t, envOpts{noNATS: true})
	e.router.setTargets(testModel, toolCallWorker(t))
	client := anthropicSDK(e)
	params := anthropic.MessageNewParams{
		Model: testModel, MaxTokens: 64,
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather",
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Oslo?"))},
	}
	check := func(name string, m *anthropic.Message, wantText bool) {
		t.Helper()
		var tool *anthropic.ContentBlockUnion
		for i := range m.Content {
			if m.Content[i].Type == "tool_use" {
				tool = &m.Content[i]
			}
		}
		var input struct{ City string }
		if tool == nil || tool.ID != "call_1" || tool.Name != "get_weather" || json.Unmarshal(tool.Input, &input) != nil || input.City != "Oslo" {
			t.Fatalf("%s: content = %+v", name, m.Content)
		}
		if wantText && (len(m.Content) != 2 || m.Content[0].Text != "Checking.") {
			t.Errorf("%s: content = %+v", name, m.Content)
		}
		if m.StopReason != anthropic.StopReasonToolUse || m.Usage.InputTokens != 4 || m.Usage.CacheReadInputTokens != 16 || m.Usage.OutputTokens != 9 {
			t.Errorf("%s: stop %q usage %+v", name, m.StopReason, m.Usage)
		}
	}
	msg, err := client.Messages.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	check("whole", msg, false)

	stream := client.Messages.NewStreaming(t.Context(), params)
	defer stream.Close()
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	check("stream", &acc, true)
}

// TestMessagesTooManyStreams: a client at --max-streams-per-client gets
// Anthropic's 429 rate_limit_error with Retry-After.
func TestMessagesTooManyStreams(t *testing.T) {
	e := newEnv(t, envOpts{noNATS: true, cfg: func(c *Config) { c.MaxStreamsPerClient = 1 }})
	held := newVLLM(t, modeGateAfter1)
	e.router.setTargets(testModel, held.target("w0"))
	body := `{"model":"` + testModel + `","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	first := e.post(t, "/v1/messages", body, nil)
	defer first.Body.Close()
	if ev, err := readEvent(bufio.NewReader(first.Body)); err != nil || !strings.HasPrefix(ev, "event: message_start") {
		t.Fatalf("first stream: %q %v", ev, err)
	}
	client := anthropicSDK(e)
	_, err := client.Messages.New(t.Context(), anthropic.MessageNewParams{
		Model: testModel, MaxTokens: 4, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Type() != anthropic.ErrorTypeRateLimitError {
		t.Fatalf("second request: %v, want a 429 rate_limit_error", err)
	}
	if apiErr.Response.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	close(held.gate)
}
