package bedrock_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/switchyard-dev/switchyard/internal/upstream"
	"github.com/switchyard-dev/switchyard/internal/upstream/bedrock"
	"github.com/switchyard-dev/switchyard/internal/upstream/bedrock/bedrocktest"
)

const served = "anthropic.claude-3-5-sonnet-20240620-v1:0"

// envCredentials points the AWS default chain at the fake's key pair in
// the environment, and nowhere else.
func envCredentials(t *testing.T) {
	t.Helper()
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CONFIG_FILE", empty)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", empty)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_ACCESS_KEY_ID", bedrocktest.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", bedrocktest.SecretAccessKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
}

func secretDir(t *testing.T, id, secret, token string) string {
	t.Helper()
	dir := t.TempDir()
	for name, v := range map[string]string{bedrock.KeyAccessKeyID: id, bedrock.KeySecretAccessKey: secret, bedrock.KeySessionToken: token} {
		if v == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func target(fake *bedrocktest.Server, dir string) upstream.Target {
	return upstream.Target{Type: "Bedrock", BaseURL: fake.URL, Provider: "inference/bedrock",
		Settings: upstream.Settings{Region: bedrocktest.Region}, Credentials: upstream.CredentialsRef{Dir: dir}}
}

func chatBody(stream bool, usage bool) []byte {
	b, _ := json.Marshal(map[string]any{"model": served, "stream": stream, "stream_options": map[string]bool{"include_usage": usage},
		"messages": []map[string]string{{"role": "user", "content": "Hello!"}}, "max_tokens": 16})
	if !stream {
		b, _ = json.Marshal(map[string]any{"model": served, "messages": []map[string]string{{"role": "user", "content": "Hello!"}}, "max_tokens": 16})
	}
	return b
}

func send(t *testing.T, a upstream.Adapter, tg upstream.Target, path string, body []byte) *http.Response {
	t.Helper()
	resp, err := a.RoundTrip(context.Background(), tg, upstream.Request{Path: path, Body: body, Header: http.Header{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readJSON(t *testing.T, resp *http.Response) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestConverse: a signed Converse call from the default chain's
// environment credentials, answered as a chat.completion; the model id is
// the served name, escaped in the path.
func TestConverse(t *testing.T) {
	envCredentials(t)
	fake := bedrocktest.New()
	defer fake.Close()
	a := bedrock.New(http.DefaultTransport)
	resp := send(t, a, target(fake, ""), "/v1/chat/completions", chatBody(false, false))
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	m := readJSON(t, resp)
	msg := m["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	if msg["content"] != "echo: Hello!" || m["object"] != "chat.completion" || m["model"] != served {
		t.Fatalf("got %v", m)
	}
	if u := m["usage"].(map[string]any); u["prompt_tokens"] != 7.0 || u["completion_tokens"] != 3.0 {
		t.Fatalf("usage %v", u)
	}
	reqs := fake.Requests()
	if len(reqs) != 1 || reqs[0].ModelID != served || reqs[0].RawPath != "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse" {
		t.Fatalf("requests %+v", reqs)
	}
}

// TestConverseStream: the event stream becomes chat.completion.chunk
// events as it arrives: the first text chunk is read while the fake is
// still sending, then the finish, the usage chunk and [DONE].
func TestConverseStream(t *testing.T) {
	fake := bedrocktest.New()
	defer fake.Close()
	fake.SetReply(func(bedrocktest.Request) bedrocktest.Reply {
		return bedrocktest.Reply{Text: []string{"Hel", "lo", "!"}, Usage: bedrocktest.Usage{Input: 4, Output: 3, CacheRead: 6}, Pause: 50 * time.Millisecond}
	})
	dir := secretDir(t, bedrocktest.AccessKeyID, bedrocktest.SecretAccessKey, "")
	a := bedrock.New(http.DefaultTransport)
	start := time.Now()
	resp := send(t, a, target(fake, dir), "/v1/chat/completions", chatBody(true, true))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	var events []string
	var firstText time.Duration
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("not a data line: %q", line)
		}
		if strings.Contains(data, `"content":"Hel"`) {
			firstText = time.Since(start)
		}
		events = append(events, data)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	total := time.Since(start)
	// 7 messages, 50 ms apart: the first text must not wait for the end.
	if firstText == 0 || total-firstText < 150*time.Millisecond {
		t.Fatalf("first text at %v of %v: the stream was buffered", firstText, total)
	}
	var text strings.Builder
	var finish string
	var usage map[string]any
	for _, e := range events[:len(events)-1] {
		var c struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage map[string]any `json:"usage"`
		}
		if err := json.Unmarshal([]byte(e), &c); err != nil || c.Object != "chat.completion.chunk" {
			t.Fatalf("event %q: %v", e, err)
		}
		for _, ch := range c.Choices {
			text.WriteString(ch.Delta.Content)
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
		if c.Usage != nil {
			if len(c.Choices) != 0 {
				t.Fatalf("usage chunk has choices: %s", e)
			}
			usage = c.Usage
		}
	}
	if events[len(events)-1] != "[DONE]" || text.String() != "Hello!" || finish != "stop" {
		t.Fatalf("events %q", events)
	}
	if usage["prompt_tokens"] != 10.0 || usage["completion_tokens"] != 3.0 || usage["prompt_tokens_details"].(map[string]any)["cached_tokens"] != 6.0 {
		t.Fatalf("usage %v", usage)
	}
	if r := fake.Requests(); len(r) != 1 || !r[0].Stream || !strings.HasSuffix(r[0].RawPath, "/converse-stream") {
		t.Fatalf("requests %+v", r)
	}
}

// TestStreamTools: streamed tool uses become tool_calls deltas with their
// index, id, name and argument pieces; the finish is tool_calls.
func TestStreamTools(t *testing.T) {
	fake := bedrocktest.New()
	defer fake.Close()
	fake.SetReply(func(bedrocktest.Request) bedrocktest.Reply {
		return bedrocktest.Reply{Text: []string{"Checking."}, ToolUses: []bedrocktest.ToolUse{{ID: "tu1", Name: "weather", Input: `{"city":"Paris"}`}}}
	})
	a := bedrock.New(http.DefaultTransport)
	resp := send(t, a, target(fake, secretDir(t, bedrocktest.AccessKeyID, bedrocktest.SecretAccessKey, "")), "/v1/chat/completions", chatBody(true, false))
	b, _ := io.ReadAll(resp.Body)
	s := string(b)
	for _, want := range []string{
		`"tool_calls":[{"index":0,"id":"tu1","type":"function","function":{"name":"weather","arguments":""}}]`,
		`"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]`,
		`"finish_reason":"tool_calls"`,
		"data: [DONE]\n\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("stream lacks %s:\n%s", want, s)
		}
	}
	if strings.Contains(s, `"usage"`) {
		t.Errorf("usage without include_usage:\n%s", s)
	}
}

// TestStreamException: an exception event after the headers makes the
// body fail with ErrStreamException, after the text before it.
func TestStreamException(t *testing.T) {
	fake := bedrocktest.New()
	defer fake.Close()
	fake.SetReply(func(bedrocktest.Request) bedrocktest.Reply {
		return bedrocktest.Reply{Text: []string{"partial"}, Exception: "ThrottlingException"}
	})
	a := bedrock.New(http.DefaultTransport)
	resp := send(t, a, target(fake, secretDir(t, bedrocktest.AccessKeyID, bedrocktest.SecretAccessKey, "")), "/v1/chat/completions", chatBody(true, true))
	b, err := io.ReadAll(resp.Body)
	if !errors.Is(err, bedrock.ErrStreamException) || !strings.Contains(err.Error(), "ThrottlingException") {
		t.Fatalf("err %v", err)
	}
	if !strings.Contains(string(b), "partial") || strings.Contains(string(b), "[DONE]") {
		t.Fatalf("body %s", b)
	}
}

// TestErrors: Bedrock's exceptions come back in OpenAI's shape with a
// matching status.
func TestErrors(t *testing.T) {
	fake := bedrocktest.New()
	defer fake.Close()
	dir := secretDir(t, bedrocktest.AccessKeyID, bedrocktest.SecretAccessKey, "")
	a := bedrock.New(http.DefaultTransport)
	for _, tc := range []struct {
		typ          string
		status, want int
	}{
		{"ValidationException", 400, 400},
		{"AccessDeniedException", 403, 403},
		{"ResourceNotFoundException", 404, 404},
		{"ThrottlingException", 429, 429},
		{"ServiceUnavailableException", 503, 503},
		{"ModelNotReadyException", 429, 503},
		{"InternalServerException", 500, 500},
	} {
		for _, stream := range []bool{false, true} {
			fake.SetReply(func(bedrocktest.Request) bedrocktest.Reply {
				return bedrocktest.Reply{Status: tc.status, ErrorType: tc.typ, ErrorMessage: "no " + tc.typ}
			})
			resp := send(t, a, target(fake, dir), "/v1/chat/completions", chatBody(stream, false))
			m := readJSON(t, resp)
			e, _ := m["error"].(map[string]any)
			if resp.StatusCode != tc.want || e == nil || e["code"] != tc.typ {
				t.Errorf("%s stream=%v: %d %v", tc.typ, stream, resp.StatusCode, m)
			}
		}
	}
}

// TestCompletionsRefused: the Converse API has no text completions.
func TestCompletionsRefused(t *testing.T) {
	fake := bedrocktest.New()
	defer fake.Close()
	resp := send(t, bedrock.New(http.DefaultTransport), target(fake, ""), "/v1/completions", []byte(`{"model":"m","prompt":"x"}`))
	m := readJSON(t, resp)
	if resp.StatusCode != 400 || !strings.Contains(m["error"].(map[string]any)["message"].(string), "chat completions only") {
		t.Fatalf("%d %v", resp.StatusCode, m)
	}
	if len(fake.Requests()) != 0 {
		t.Fatal("sent upstream")
	}
}

// TestCredentials: a directory's key pair (with a session token), a
// wrong key refused by the fake's signature check without echoing it, a
// rotated directory picked up, and a missing file an error that names
// the file and no key.
func TestCredentials(t *testing.T) {
	fake := bedrocktest.New()
	defer fake.Close()
	tok := "FwoGZXIvYXdzEFAKE-session-token"
	fake.SetCredentials(aws.Credentials{AccessKeyID: "ASIAFAKETEMPORARY01", SecretAccessKey: bedrocktest.SecretAccessKey, SessionToken: tok})
	a := bedrock.New(http.DefaultTransport)
	dir := secretDir(t, "ASIAFAKETEMPORARY01", bedrocktest.SecretAccessKey, tok)
	if resp := send(t, a, target(fake, dir), "/v1/chat/completions", chatBody(false, false)); resp.StatusCode != 200 {
		t.Fatalf("session credentials: %d", resp.StatusCode)
	}
	if got := fake.Requests()[0].Header.Get("X-Amz-Security-Token"); got != tok {
		t.Fatalf("security token %q", got)
	}
	// A fresh adapter: the SDK's signer caches the derived signing key by
	// access key id for the day.
	wrong := secretDir(t, "ASIAFAKETEMPORARY01", "not-the-secret-key-0000", tok)
	resp := send(t, bedrock.New(http.DefaultTransport), target(fake, wrong), "/v1/chat/completions", chatBody(false, false))
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 403 || !strings.Contains(string(b), "InvalidSignatureException") || strings.Contains(string(b), "not-the-secret") {
		t.Fatalf("wrong key: %d %s", resp.StatusCode, b)
	}
	missing := t.TempDir()
	_, err := a.RoundTrip(context.Background(), target(fake, missing), upstream.Request{Path: "/v1/chat/completions", Body: chatBody(false, false)})
	if err == nil || !strings.Contains(err.Error(), bedrock.KeyAccessKeyID) {
		t.Fatalf("missing files: %v", err)
	}
	// The default chain, from the environment.
	envCredentials(t)
	fake.SetCredentials(bedrocktest.Credentials())
	if resp := send(t, a, target(fake, ""), "/v1/chat/completions", chatBody(false, false)); resp.StatusCode != 200 {
		t.Fatalf("environment: %d", resp.StatusCode)
	}
}

// TestSignatureChecked: the fake refuses a request whose body changed
// after signing, so the tests above prove the signature.
func TestSignatureChecked(t *testing.T) {
	fake := bedrocktest.New()
	defer fake.Close()
	a := bedrock.New(tamper{http.DefaultTransport})
	resp := send(t, a, target(fake, secretDir(t, bedrocktest.AccessKeyID, bedrocktest.SecretAccessKey, "")), "/v1/chat/completions", chatBody(false, false))
	if resp.StatusCode != 403 {
		t.Fatalf("tampered request: %d", resp.StatusCode)
	}
}

type tamper struct{ rt http.RoundTripper }

func (t tamper) RoundTrip(r *http.Request) (*http.Response, error) {
	b, _ := io.ReadAll(r.Body)
	b = bytes.Replace(b, []byte("Hello"), []byte("Jello"), 1)
	r.Body = io.NopCloser(bytes.NewReader(b))
	return t.rt.RoundTrip(r)
}
