package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Headers of Switchyard's gateway the client speaks.
const (
	// PriorityHeader carries a request's priority class (critical,
	// standard, sheddable) to the gateway.
	PriorityHeader = "X-Switchyard-Priority"
	// ShedReasonHeader says why the gateway refused a request.
	ShedReasonHeader = "X-Switchyard-Shed-Reason"
)

// Message is one chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ChatRequest is the streaming request the load generator sends.
type ChatRequest struct {
	Model     string
	Messages  []Message
	MaxTokens int
	// IgnoreEOS asks vLLM to generate exactly MaxTokens (vLLM's extension;
	// other servers ignore or refuse it).
	IgnoreEOS bool
}

// Body is the JSON body: streaming, with the usage chunk asked for, since
// cached prompt tokens come only from it.
func (r ChatRequest) Body() ([]byte, error) {
	type streamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	}
	b, err := json.Marshal(struct {
		Model         string        `json:"model"`
		Messages      []Message     `json:"messages"`
		MaxTokens     int           `json:"max_tokens"`
		Stream        bool          `json:"stream"`
		StreamOptions streamOptions `json:"stream_options"`
		IgnoreEOS     bool          `json:"ignore_eos,omitempty"`
	}{r.Model, r.Messages, r.MaxTokens, true, streamOptions{true}, r.IgnoreEOS})
	if err != nil {
		return nil, fmt.Errorf("encode chat request: %w", err)
	}
	return b, nil
}

// Result is one request as the client saw it. Durations are wall time.
type Result struct {
	// Status is the HTTP status; 0 when no response arrived.
	Status int
	// Err says why the request failed; empty on success.
	Err string
	// Shed is a request the server refused for load (429 or 503 before
	// any token), as opposed to one that failed.
	Shed bool
	Sent time.Time
	// TTFT is the time to the first chunk carrying text; zero without one.
	TTFT time.Duration
	// E2E is the time to the end of the stream.
	E2E time.Duration
	// Gaps are the times between consecutive text chunks.
	Gaps []time.Duration
	// Token counts from the usage chunk; Usage says whether there was one.
	Usage                                      bool
	PromptTokens, CachedTokens, CompletionToks int
	// Chunks is the number of text-carrying chunks.
	Chunks int
	// Text is the generated text, kept only when asked for.
	Text string
	// SimTTFT is the simulator's own TTFT in model seconds; -1 when the
	// server is not the simulator.
	SimTTFT float64
	// SimWorker is the index of the simulated worker that served the
	// request; -1 when the server is not the simulator.
	SimWorker int
	// Reason is why the server refused the request (a status other than
	// 200): its X-Switchyard-Shed-Reason header, else the code of its
	// OpenAI error body; empty when it gave neither.
	Reason string
	// RetryAfter is the wait a refusal's Retry-After header asked for;
	// negative without a usable one.
	RetryAfter time.Duration
	// PredictedTTFT is the TTFT the router predicted when it routed the
	// request, in (wall) seconds, from a Switchyard gateway's
	// PredictedTTFTHeader (its --decision-headers); -1 without one.
	PredictedTTFT float64
}

// PredictedTTFTHeader is where a Switchyard gateway with
// --decision-headers says what TTFT the router predicted, in seconds.
const PredictedTTFTHeader = "X-Switchyard-Predicted-TTFT"

// predictedTTFT reads PredictedTTFTHeader: -1 when absent or not a
// positive number.
func predictedTTFT(h http.Header) float64 {
	v, err := strconv.ParseFloat(strings.TrimSpace(h.Get(PredictedTTFTHeader)), 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return -1
	}
	return v
}

// OK reports a complete, successful stream.
func (r *Result) OK() bool { return r.Err == "" }

// Client sends requests. Its transport keeps one connection per concurrent
// request alive, so connection setup stays out of the measurements.
type Client struct {
	HTTP *http.Client
	// APIKey is sent as a bearer token when set.
	APIKey string
	// Header is added to every request (a tenant's priority class).
	Header http.Header
	// Now is the clock measurements read; nil means time.Now. Tests
	// script it to get exact, known gaps.
	Now func() time.Time
}

func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// NewClient returns a client tuned for conns concurrent streams.
func NewClient(conns int) *Client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns + 16,
		MaxIdleConnsPerHost: conns + 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &Client{HTTP: &http.Client{Transport: tr}}
}

// CloseIdle closes idle connections.
func (c *Client) CloseIdle() { c.HTTP.CloseIdleConnections() }

// maxErrorBody is how much of an error response is read for its message.
const maxErrorBody = 8 << 10

// Chat posts body to baseURL+"/chat/completions" and reads the stream.
// keepText keeps the generated text (multi-turn needs the answers).
func (c *Client) Chat(ctx context.Context, baseURL string, body []byte, keepText bool) Result {
	res := Result{SimTTFT: -1, SimWorker: -1, RetryAfter: -1, PredictedTTFT: -1, Sent: c.now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(baseURL, "/")+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		res.Err = fmt.Sprintf("build request: %v", err)
		return res
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	for k, vs := range c.Header {
		req.Header[k] = vs
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		res.E2E = c.now().Sub(res.Sent)
		res.Err = transportError(ctx, err)
		return res
	}
	defer resp.Body.Close()
	res.Status = resp.StatusCode
	res.PredictedTTFT = predictedTTFT(resp.Header)
	if resp.StatusCode != http.StatusOK {
		msg, code := errorMessage(io.LimitReader(resp.Body, maxErrorBody))
		res.E2E = c.now().Sub(res.Sent)
		res.Reason = strings.TrimSpace(resp.Header.Get(ShedReasonHeader))
		if res.Reason == "" {
			res.Reason = code
		}
		res.RetryAfter = ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		res.Shed = resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable
		res.Err = fmt.Sprintf("status %d: %s", resp.StatusCode, msg)
		return res
	}
	c.readStream(ctx, resp.Body, &res, keepText)
	return res
}

// readStream consumes the event stream into res.
func (c *Client) readStream(ctx context.Context, body io.Reader, res *Result, keepText bool) {
	er := NewEventReader(body)
	var text strings.Builder
	var last time.Time
	for {
		data, err := er.Next()
		now := c.now()
		res.E2E = now.Sub(res.Sent)
		if err != nil {
			if errors.Is(err, io.EOF) {
				res.Err = "stream ended without [DONE]"
			} else {
				res.Err = transportError(ctx, err)
			}
			return
		}
		d, done, err := decodeEvent(data)
		if err != nil {
			res.Err = err.Error()
			return
		}
		if done {
			break
		}
		if d.err != "" {
			res.Err = "error event: " + d.err
			return
		}
		if d.tokens {
			if res.Chunks == 0 {
				res.TTFT = now.Sub(res.Sent)
			} else {
				res.Gaps = append(res.Gaps, now.Sub(last))
			}
			last = now
			res.Chunks++
			if keepText {
				text.WriteString(d.content)
			}
		}
		if d.usage {
			res.Usage = true
			res.PromptTokens, res.CachedTokens, res.CompletionToks = d.prompt, d.cached, d.completion
		}
		if d.simTTFT >= 0 {
			res.SimTTFT = d.simTTFT
		}
		if d.simWorker >= 0 {
			res.SimWorker = d.simWorker
		}
	}
	res.Text = text.String()
	if res.Chunks == 0 {
		res.Err = "stream carried no tokens"
	}
}

func transportError(ctx context.Context, err error) string {
	if ctx.Err() != nil {
		return "canceled: " + context.Cause(ctx).Error()
	}
	return err.Error()
}

// errorMessage pulls the message and code out of an OpenAI error body, or
// returns the start of the body.
func errorMessage(r io.Reader) (msg, code string) {
	b, _ := io.ReadAll(r)
	var e struct {
		Error struct {
			Message string `json:"message"`
			// Code is a string in OpenAI's errors, but some servers
			// send a number.
			Code json.RawMessage `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		var s string
		if json.Unmarshal(e.Error.Code, &s) != nil {
			s = ""
		}
		return e.Error.Message, s
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s, ""
}

// maxRetryAfter bounds a Retry-After a server can ask for, so a garbled
// header cannot overflow a Duration.
const maxRetryAfter = 24 * time.Hour

// ParseRetryAfter reads a Retry-After header (RFC 9110: delay-seconds or
// an HTTP date, taken relative to now); negative when v is neither.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return -1
	}
	n, err := strconv.ParseUint(v, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange), err == nil && n > uint64(maxRetryAfter/time.Second):
		return maxRetryAfter
	case err == nil:
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), maxRetryAfter)
	}
	return -1
}

// CountPrompt sends text as the only user message with max_tokens 1 and
// returns the prompt tokens the server reports (for workload calibration).
func (c *Client) CountPrompt(ctx context.Context, baseURL, model, text string) (int, error) {
	body, err := ChatRequest{Model: model, Messages: []Message{{Role: "user", Content: text}}, MaxTokens: 1}.Body()
	if err != nil {
		return 0, err
	}
	res := c.Chat(ctx, baseURL, body, false)
	if !res.OK() {
		return 0, fmt.Errorf("count prompt tokens at %s: %s", baseURL, res.Err)
	}
	if !res.Usage {
		return 0, fmt.Errorf("count prompt tokens at %s: the stream had no usage chunk", baseURL)
	}
	return res.PromptTokens, nil
}
