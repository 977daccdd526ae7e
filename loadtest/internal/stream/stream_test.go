package stream

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/loadtest/internal/fakeoai"
)

// scriptedClock returns base+at[i] on its i-th call, so a test knows the
// exact instant the client attributes to each event.
type scriptedClock struct {
	mu    sync.Mutex
	base  time.Time
	at    []time.Duration
	calls int
}

func (c *scriptedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := c.calls
	c.calls++
	if i >= len(c.at) {
		return c.base.Add(time.Hour) // more reads than the script: make it show
	}
	return c.base.Add(c.at[i])
}

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

func body(t *testing.T, maxTokens int) []byte {
	t.Helper()
	b, err := ChatRequest{Model: "m", Messages: []Message{{Role: "user", Content: "hello there"}}, MaxTokens: maxTokens}.Body()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestScriptedStream checks TTFT, every inter-token gap and E2E against a
// real SSE stream whose event instants are known: the client reads the
// clock once when it sends and once per event (role chunk, text chunks,
// usage chunk, [DONE]).
func TestScriptedStream(t *testing.T) {
	tests := []struct {
		name     string
		chunks   []string
		clock    []time.Duration // sent, role, chunks…, usage, done
		wantTTFT time.Duration
		wantGaps []time.Duration
		wantE2E  time.Duration
	}{
		{
			name:     "role chunk does not count as the first token",
			chunks:   []string{"a", "b", "c", "d"},
			clock:    ms(0, 100, 250, 300, 400, 400, 410, 420),
			wantTTFT: 250 * time.Millisecond,
			wantGaps: ms(50, 100, 0),
			wantE2E:  420 * time.Millisecond,
		},
		{
			name:     "single token has no gap",
			chunks:   []string{"only"},
			clock:    ms(0, 5, 1000, 1001, 1002),
			wantTTFT: time.Second,
			wantE2E:  1002 * time.Millisecond,
		},
		{
			name:     "regular decode",
			chunks:   []string{"x", "y", "z"},
			clock:    ms(0, 1, 300, 330, 360, 361, 362),
			wantTTFT: 300 * time.Millisecond,
			wantGaps: ms(30, 30),
			wantE2E:  362 * time.Millisecond,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeoai.New(func(fakeoai.Request) fakeoai.Script {
				return fakeoai.Script{Chunks: tc.chunks, PromptTokens: 40, CachedTokens: 16, SimTTFT: 1.5, SimWorker: 2}
			})
			defer srv.Close()
			clk := &scriptedClock{base: time.Unix(1000, 0), at: tc.clock}
			c := NewClient(1)
			c.Now = clk.Now
			res := c.Chat(context.Background(), srv.URL+"/v1", body(t, len(tc.chunks)), true)
			if !res.OK() {
				t.Fatalf("request failed: %s", res.Err)
			}
			if res.TTFT != tc.wantTTFT {
				t.Errorf("TTFT %v, want %v", res.TTFT, tc.wantTTFT)
			}
			if !slices.Equal(res.Gaps, tc.wantGaps) {
				t.Errorf("gaps %v, want %v", res.Gaps, tc.wantGaps)
			}
			if res.E2E != tc.wantE2E {
				t.Errorf("E2E %v, want %v", res.E2E, tc.wantE2E)
			}
			if clk.calls != len(tc.clock) {
				t.Errorf("clock read %d times, script has %d instants", clk.calls, len(tc.clock))
			}
			if res.Chunks != len(tc.chunks) || res.Text != strings.Join(tc.chunks, "") {
				t.Errorf("chunks %d text %q, want %d %q", res.Chunks, res.Text, len(tc.chunks), strings.Join(tc.chunks, ""))
			}
			if !res.Usage || res.PromptTokens != 40 || res.CachedTokens != 16 || res.CompletionToks != len(tc.chunks) {
				t.Errorf("usage %v prompt %d cached %d completion %d", res.Usage, res.PromptTokens, res.CachedTokens, res.CompletionToks)
			}
			if res.SimTTFT != 1.5 || res.SimWorker != 2 {
				t.Errorf("sim TTFT %v worker %d, want 1.5 and 2", res.SimTTFT, res.SimWorker)
			}
		})
	}
}

// TestRealGaps streams with real pauses: whatever the scheduling noise,
// the last token cannot arrive, counted from the send, before the server's
// pauses add up (the gaps alone can shrink when the client reads late).
func TestRealGaps(t *testing.T) {
	const gap = 15 * time.Millisecond
	srv := fakeoai.New(func(fakeoai.Request) fakeoai.Script {
		return fakeoai.Script{Chunks: []string{"a", "b", "c", "d", "e"}, Gap: gap}
	})
	defer srv.Close()
	res := NewClient(1).Chat(context.Background(), srv.URL+"/v1", body(t, 5), false)
	if !res.OK() {
		t.Fatal(res.Err)
	}
	if len(res.Gaps) != 4 {
		t.Fatalf("%d gaps, want 4", len(res.Gaps))
	}
	var sum time.Duration
	for _, g := range res.Gaps {
		sum += g
	}
	if res.TTFT+sum < 4*gap {
		t.Errorf("last token %v after the send, before the server's 4×%v of pauses", res.TTFT+sum, gap)
	}
	if res.E2E < res.TTFT+sum {
		t.Errorf("E2E %v shorter than TTFT %v plus gaps %v", res.E2E, res.TTFT, sum)
	}
}

func TestFailures(t *testing.T) {
	tests := []struct {
		name     string
		script   fakeoai.Script
		wantShed bool
		wantErr  string
		status   int
	}{
		{"rate limited is shed", fakeoai.Script{Status: http.StatusTooManyRequests}, true, "status 429: scripted status 429", 429},
		{"unavailable is shed", fakeoai.Script{Status: http.StatusServiceUnavailable}, true, "status 503", 503},
		{"bad request is an error", fakeoai.Script{Status: http.StatusBadRequest}, false, "status 400", 400},
		{"error event mid-stream", fakeoai.Script{Chunks: []string{"a", "b", "c"}, ErrorAfter: 2}, false, "error event: scripted failure", 200},
		{"cut-off stream", fakeoai.Script{Chunks: []string{"a"}, NoDone: true}, false, "without [DONE]", 200},
		{"no tokens", fakeoai.Script{}, false, "no tokens", 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeoai.New(func(fakeoai.Request) fakeoai.Script { return tc.script })
			defer srv.Close()
			res := NewClient(1).Chat(context.Background(), srv.URL+"/v1", body(t, 3), false)
			if res.OK() {
				t.Fatal("request succeeded, want a failure")
			}
			if res.Shed != tc.wantShed || res.Status != tc.status || !strings.Contains(res.Err, tc.wantErr) {
				t.Errorf("shed %v status %d err %q; want shed %v status %d err containing %q",
					res.Shed, res.Status, res.Err, tc.wantShed, tc.status, tc.wantErr)
			}
		})
	}
}

func TestUnreachable(t *testing.T) {
	srv := fakeoai.New(fakeoai.Echo)
	url := srv.URL
	srv.Close()
	res := NewClient(1).Chat(context.Background(), url+"/v1", body(t, 1), false)
	if res.OK() || res.Status != 0 || res.Shed {
		t.Errorf("got ok=%v status %d shed %v, want a transport error", res.OK(), res.Status, res.Shed)
	}
}

func TestRequestBody(t *testing.T) {
	srv := fakeoai.New(fakeoai.Echo)
	defer srv.Close()
	c := NewClient(1)
	c.APIKey = "sk-test"
	res := c.Chat(context.Background(), srv.URL+"/v1/", body(t, 2), false)
	if !res.OK() {
		t.Fatal(res.Err)
	}
	seen := srv.Seen()
	if len(seen) != 1 {
		t.Fatalf("%d requests seen", len(seen))
	}
	r := seen[0]
	if !r.Stream || r.StreamOptions == nil || !r.StreamOptions.IncludeUsage || r.MaxTokens != 2 || r.Model != "m" {
		t.Errorf("request %+v: want a streaming request asking for usage", r)
	}
	n, err := c.CountPrompt(context.Background(), srv.URL+"/v1", "m", strings.Repeat("abcd", 100))
	if err != nil || n != 100 {
		t.Errorf("CountPrompt = %d, %v; want 100", n, err)
	}
}

func TestEventReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"lf", "data: a\n\ndata: b\n\n", []string{"a", "b"}},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"a", "b"}},
		{"no space after colon", "data:a\n\n", []string{"a"}},
		{"multi-line data", "data: a\ndata: b\n\n", []string{"a\nb"}},
		{"comments and other fields", ": keepalive\nevent: x\nid: 3\ndata: a\n\n", []string{"a"}},
		{"blank lines between", "\n\n\ndata: a\n\n\n", []string{"a"}},
		{"cut-off event dropped", "data: a\n\ndata: b", []string{"a"}},
		{"unterminated last event dropped", "data: a\n\ndata: b\n", []string{"a"}},
		{"empty data", "data:\n\n", []string{""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			er := NewEventReader(strings.NewReader(tc.in))
			var got []string
			for {
				d, err := er.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, string(d))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("events %q, want %q", got, tc.want)
			}
		})
	}
}

func TestEventTooLarge(t *testing.T) {
	in := "data: " + strings.Repeat("x", maxEventBytes+10) + "\n\n"
	if _, err := NewEventReader(strings.NewReader(in)).Next(); err != ErrEventTooLarge {
		t.Errorf("err %v, want ErrEventTooLarge", err)
	}
}

// FuzzEventStream feeds arbitrary bytes through the event reader and the
// chunk decoder: neither may panic, and every event respects the size
// bound.
func FuzzEventStream(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"usage\":{\"prompt_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":1}}}\r\n\r\n"))
	f.Add([]byte("data: {\"error\":{\"message\":\"x\"}}\n\n: c\ndata: a\ndata: b\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"text\":\"x\"}],\"sim_timing\":{\"ttft_seconds\":0.5}}\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		er := NewEventReader(strings.NewReader(string(in)))
		for range 10_000 {
			d, err := er.Next()
			if err != nil {
				return
			}
			if len(d) > maxEventBytes {
				t.Fatalf("event of %d bytes", len(d))
			}
			_, _, _ = decodeEvent(d)
		}
	})
}

// TestRefusal: a refusal's reason comes from x-switchyard-shed-reason, else
// the error body's code; its Retry-After is read; the client's key and
// extra headers reach the server.
func TestRefusal(t *testing.T) {
	srv := fakeoai.New(fakeoai.Echo)
	defer srv.Close()
	srv.Refuse("with-reason", fakeoai.Refusal{Reasons: []string{"tenant_over_share"}, RetryAfter: "7"})
	srv.Refuse("code-only", fakeoai.Refusal{Status: http.StatusServiceUnavailable})
	for _, tc := range []struct {
		key, reason string
		status      int
		retryAfter  time.Duration
	}{
		{"with-reason", "tenant_over_share", 429, 7 * time.Second},
		{"code-only", "rate_limit_exceeded", 503, -1},
		{"welcome", "", 200, -1},
	} {
		c := NewClient(1)
		c.APIKey = tc.key
		c.Header = http.Header{PriorityHeader: {"sheddable"}}
		res := c.Chat(context.Background(), srv.URL+"/v1", body(t, 2), false)
		if res.Status != tc.status || res.Reason != tc.reason || res.RetryAfter != tc.retryAfter {
			t.Errorf("key %s: status %d reason %q retry-after %v; want %d %q %v", tc.key, res.Status, res.Reason, res.RetryAfter,
				tc.status, tc.reason, tc.retryAfter)
		}
	}
	for _, r := range srv.Seen() {
		if r.Priority != "sheddable" {
			t.Errorf("key %s: priority header %q", r.Key, r.Priority)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"", -1},
		{"0", 0},
		{" 3 ", 3 * time.Second},
		{"99999999999999999999", 24 * time.Hour},
		{"-1", -1},
		{"1.5", -1},
		{"soon", -1},
		{"Tue, 01 Dec 2026 12:00:30 GMT", 30 * time.Second},
		{"Tue, 01 Dec 2026 11:00:00 GMT", 0},
	} {
		if got := ParseRetryAfter(tc.in, now); got != tc.want {
			t.Errorf("ParseRetryAfter(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestPredictedTTFTHeader(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  float64
	}{
		{"0.3125", 0.3125}, {" 2 ", 2}, {"", -1}, {"0", -1}, {"-1", -1}, {"NaN", -1}, {"+Inf", -1}, {"soon", -1},
	} {
		h := http.Header{}
		if tc.value != "" {
			h.Set(PredictedTTFTHeader, tc.value)
		}
		if got := predictedTTFT(h); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.value, got, tc.want)
		}
	}
}
