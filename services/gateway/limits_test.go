package gateway

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// clientFrom is an HTTP client whose connections come from ip (any
// 127.0.0.0/8 address works on loopback), so a test can be two clients.
func clientFrom(t *testing.T, ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// TestMaxStreamsPerClient: a client at its cap gets a 429 in the OpenAI
// shape with Retry-After, before anything is routed; another client is
// served meanwhile, and the first is served again once a stream ends.
func TestMaxStreamsPerClient(t *testing.T) {
	e := newEnv(t, envOpts{cfg: func(c *Config) { c.MaxStreamsPerClient = 2 }})
	held := newVLLM(t, modeGateAfter1)
	e.router.setTargets(testModel, held.target("w0"))
	hog := clientFrom(t, "127.0.0.1")
	open := func() *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/chat/completions", strings.NewReader(chatStreamBody(false)))
		resp, err := hog.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream: %d", resp.StatusCode)
		}
		if _, err := readEvent(bufio.NewReader(resp.Body)); err != nil {
			t.Fatal(err)
		}
		return resp
	}
	first, second := open(), open()
	defer second.Body.Close()
	routed := len(e.router.calls())

	// The third, through the official client: a rate limit error.
	sdk := openai.NewClient(option.WithBaseURL(e.url+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0), option.WithHTTPClient(hog))
	var raw *http.Response
	_, err := sdk.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model: testModel, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	}, option.WithResponseInto(&raw))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Type != "rate_limit_error" {
		t.Fatalf("third request: %v, want a 429 rate_limit_error", err)
	}
	if ra := apiErr.Response.Header.Get("Retry-After"); ra == "" {
		t.Error("429 without Retry-After")
	}
	if n := len(e.router.calls()); n != routed {
		t.Errorf("the refused request was routed (%d Route calls, want %d)", n, routed)
	}

	// Another client is not held back.
	other := clientFrom(t, "127.0.0.2")
	req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/chat/completions", strings.NewReader(chatStreamBody(false)))
	resp, err := other.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("another client: %d", resp.StatusCode)
	}

	// A stream ends: the hog may open another.
	first.Body.Close()
	e.eventually(t, "the slot released", func() bool {
		req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/chat/completions", strings.NewReader(chatBody))
		resp, err := hog.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode != http.StatusTooManyRequests
	})
	line := grepLines(scrape(t, e.metricsURL), "switchyard_gateway_client_limited_total ")
	if line == "" || strings.HasSuffix(line, " 0") {
		t.Errorf("the refusal is not counted: %q", line)
	}
}
