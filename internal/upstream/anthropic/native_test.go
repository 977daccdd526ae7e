package anthropic_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/upstream"
	"github.com/switchyard-dev/switchyard/internal/upstream/anthropic"
	"github.com/switchyard-dev/switchyard/internal/upstream/anthropic/anthropictest"
)

// TestNative: a Messages request goes to the provider as it is, with the
// provider's key and version, and its answer comes back as it is; errors
// stay Anthropic's but for a refused key (a 502) and the key, cut out.
func TestNative(t *testing.T) {
	a, err := upstream.NewSet(http.DefaultTransport).For("Anthropic")
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := a.(upstream.Native); !ok || !n.Native(anthropic.NativePath) || n.Native("/v1/chat/completions") {
		t.Fatalf("the Anthropic adapter does not take exactly /v1/messages natively")
	}
	const body = `{"model":"claude-x","max_tokens":9,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],` +
		`"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"}]}`

	t.Run("message", func(t *testing.T) {
		fake := anthropictest.New(t, key)
		msg := anthropictest.TextMessage("claude-x", "Hi.")
		fake.Enqueue(anthropictest.Reply{Body: msg})
		resp := roundTrip(t, fake, anthropic.NativePath, body)
		got, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || string(got) != msg {
			t.Errorf("got %d %s, want the provider's message as it is", resp.StatusCode, got)
		}
		sent := fake.Last(t)
		if string(sent.Body) != body || sent.Header.Get("X-Api-Key") != key || sent.Header.Get("Anthropic-Version") != anthropic.APIVersion ||
			sent.Header.Get("X-Request-Id") != "req-1" || sent.Header.Get("Authorization") != "" {
			t.Errorf("the provider got %s %v", sent.Body, sent.Header)
		}
	})

	t.Run("stream", func(t *testing.T) {
		fake := anthropictest.New(t, key)
		events := anthropictest.TextStream("claude-x", "a", "b")
		fake.Enqueue(anthropictest.Reply{Events: events, Split: true})
		resp := roundTrip(t, fake, anthropic.NativePath, strings.Replace(body, `"max_tokens":9`, `"max_tokens":9,"stream":true`, 1))
		got, _ := io.ReadAll(resp.Body)
		var want strings.Builder
		for _, ev := range events {
			want.WriteString(ev.String())
		}
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || string(got) != want.String() {
			t.Errorf("got %s %s, want the provider's events as they are", resp.Header.Get("Content-Type"), got)
		}
	})

	for _, tc := range []struct {
		name     string
		reply    anthropictest.Reply
		status   int
		typ, msg string
	}{
		{"client error kept", anthropictest.Error(http.StatusBadRequest, "invalid_request_error", "max_tokens: too large"),
			http.StatusBadRequest, "invalid_request_error", "max_tokens: too large"},
		{"overloaded kept", anthropictest.Error(529, "overloaded_error", "Overloaded"), 529, "overloaded_error", "Overloaded"},
		{"refused key is the gateway's", anthropictest.Error(http.StatusUnauthorized, "authentication_error", "invalid x-api-key "+key),
			http.StatusBadGateway, "api_error", "the provider refused the gateway's credentials (HTTP 401): invalid x-api-key [redacted]"},
		{"not an envelope", anthropictest.Reply{Status: http.StatusBadGateway, Body: "<html>bad gateway</html>"},
			http.StatusBadGateway, "api_error", "the provider answered HTTP 502"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := anthropictest.New(t, key)
			fake.Enqueue(tc.reply)
			resp := roundTrip(t, fake, anthropic.NativePath, body)
			e := decode[struct {
				Type  string
				Error struct{ Type, Message string }
			}](t, resp.Body)
			if resp.StatusCode != tc.status || e.Type != "error" || e.Error.Type != tc.typ || e.Error.Message != tc.msg ||
				resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("got %d %+v", resp.StatusCode, e)
			}
			if tc.status == 529 && resp.Header.Get("Retry-After") != "7" {
				t.Errorf("retry-after not kept: %v", resp.Header)
			}
		})
	}
}
