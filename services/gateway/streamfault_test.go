package gateway

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	"github.com/switchyard-dev/switchyard/internal/sim"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

// streamWithSDK streams a chat completion through the gateway with the
// official OpenAI client and returns the text received, the stream's
// error and the request id.
func streamWithSDK(t *testing.T, e *env) (text, id string, err error) {
	t.Helper()
	var hdr *http.Response
	client := openai.NewClient(option.WithBaseURL(e.url+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	stream := client.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
		Model:    testModel,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	}, option.WithResponseInto(&hdr))
	var b strings.Builder
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			b.WriteString(ch.Delta.Content)
		}
	}
	err = stream.Err()
	_ = stream.Close()
	if hdr != nil {
		id = hdr.Header.Get(RequestIDHeader)
		if hdr.StatusCode != http.StatusOK {
			t.Errorf("status %d, want 200 (the stream had started)", hdr.StatusCode)
		}
	}
	return b.String(), id, err
}

// TestStreamBrokenMidway: a worker dying mid-stream reaches the client as
// an error event (which the OpenAI SDK raises) before the connection
// closes, and the usage event says the upstream broke.
func TestStreamBrokenMidway(t *testing.T) {
	e := newEnv(t, envOpts{})
	broken := newVLLM(t, modeAbortAfter1)
	e.router.setTargets(testModel, broken.target("broken"))

	_, id, err := streamWithSDK(t, e)
	if err == nil || !strings.Contains(err.Error(), "upstream_broken") {
		t.Fatalf("SDK stream error = %v, want the gateway's upstream_broken error event", err)
	}
	ev := e.usageEvent(t, id)
	if ev.GetOutcome() != bus.UsageOutcomeUpstreamBroken || ev.GetErrorType() != openaiapi.ErrTypeServer {
		t.Errorf("usage outcome %q error type %q, want %q %q", ev.GetOutcome(), ev.GetErrorType(), bus.UsageOutcomeUpstreamBroken, openaiapi.ErrTypeServer)
	}
}

// TestStreamBrokenRaw checks the wire shape: the relayed events, then one
// data event holding the OpenAI error envelope, then a cut connection (no
// clean end a careless client could take for a complete answer).
func TestStreamBrokenRaw(t *testing.T) {
	e := newEnv(t, envOpts{})
	broken := newVLLM(t, modeAbortAfter1)
	e.router.setTargets(testModel, broken.target("broken"))

	resp := e.post(t, "/v1/chat/completions", chatStreamBody(false), nil)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if first, err := readEvent(br); err != nil || !strings.Contains(first, `"role":"assistant"`) {
		t.Fatalf("first event %q, %v", first, err)
	}
	last, err := readEvent(br)
	if err != nil {
		t.Fatalf("error event: %q, %v", last, err)
	}
	data, ok := strings.CutPrefix(last, "data: ")
	if !ok {
		t.Fatalf("error event %q is not a data event", last)
	}
	var body openaiapi.ErrorBody
	if err := json.Unmarshal([]byte(data), &body); err != nil || body.Error.Code == nil || *body.Error.Code != "upstream_broken" {
		t.Fatalf("error event %q: %v", data, err)
	}
	if _, err := io.ReadAll(br); !isEOFLike(err) {
		t.Errorf("after the error event: %v, want a cut connection", err)
	}
}

// TestStreamIdleTimeout: a frozen worker (headers and one event sent, then
// silence) is cut after --stream-idle-timeout with an error event.
func TestStreamIdleTimeout(t *testing.T) {
	e := newEnv(t, envOpts{cfg: func(c *Config) { c.StreamIdleTimeout = 300 * time.Millisecond }})
	frozen := newVLLM(t, modeHoldAfter1)
	e.router.setTargets(testModel, frozen.target("frozen"))

	_, id, err := streamWithSDK(t, e)
	if err == nil || !strings.Contains(err.Error(), "upstream_stalled") {
		t.Fatalf("SDK stream error = %v, want upstream_stalled", err)
	}
	select {
	case <-frozen.canceled:
	case <-time.After(waitLong):
		t.Error("the frozen upstream's request was not cancelled")
	}
	ev := e.usageEvent(t, id)
	if ev.GetOutcome() != bus.UsageOutcomeUpstreamStalled || ev.GetErrorType() != openaiapi.ErrTypeTimeout {
		t.Errorf("usage outcome %q error type %q", ev.GetOutcome(), ev.GetErrorType())
	}
}

// TestUnhealthyEndpointEndsStreams: once the router reports the endpoint
// unhealthy, its silent streams end well before the idle timeout.
func TestUnhealthyEndpointEndsStreams(t *testing.T) {
	e := newEnv(t, envOpts{cfg: func(c *Config) { c.StreamIdleTimeout = time.Hour }})
	frozen := newVLLM(t, modeHoldAfter1)
	e.router.setTargets(testModel, frozen.target("frozen"))
	type result struct {
		err error
		id  string
	}
	done := make(chan result, 1)
	go func() {
		_, id, err := streamWithSDK(t, e)
		done <- result{err, id}
	}()
	e.eventually(t, "the stream in flight", func() bool { return e.gw.live.n.Load() == 1 })
	e.router.setUnhealthy("frozen")
	var res result
	select {
	case res = <-done:
	case <-time.After(waitLong):
		t.Fatal("the stream on the unhealthy endpoint was not ended")
	}
	if res.err == nil || !strings.Contains(res.err.Error(), "upstream_unhealthy") {
		t.Fatalf("SDK stream error = %v, want upstream_unhealthy", res.err)
	}
	if ev := e.usageEvent(t, res.id); ev.GetOutcome() != bus.UsageOutcomeEndpointUnhealthy {
		t.Errorf("usage outcome %q", ev.GetOutcome())
	}
}

// TestStreamOutcomeOK: a whole stream is recorded as ok, and the error
// event machinery stays out of it.
func TestStreamOutcomeOK(t *testing.T) {
	e := newEnv(t, envOpts{})
	up := newVLLM(t, modeOK)
	e.router.setTargets(testModel, up.target("w0"))
	text, id, err := streamWithSDK(t, e)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("stream: %v", err)
	}
	if text != "Hello world!" {
		t.Errorf("text %q", text)
	}
	if ev := e.usageEvent(t, id); ev.GetOutcome() != bus.UsageOutcomeOK {
		t.Errorf("usage outcome %q", ev.GetOutcome())
	}
}

// TestSimulatorKilledMidStream: a real simulated worker whose connections
// all drop mid-stream (as when its process is killed) reaches the official
// client as the gateway's error event after the text it had received.
func TestSimulatorKilledMidStream(t *testing.T) {
	worker := startSimWorker(t) // time scale 20: 256 tokens take about half a second
	p := newTCPProxy(t, strings.TrimPrefix(worker, "http://"))
	e := newEnv(t, envOpts{})
	e.router.setTargets(sim.DefaultServedModelName, &routerv1.Target{
		Id: "sim-0", Url: "http://" + p.addr, Kind: routerv1.TargetKind_TARGET_KIND_LOCAL, Type: "vLLM",
	})
	client := openai.NewClient(option.WithBaseURL(e.url+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	var hdr *http.Response
	stream := client.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
		Model:     sim.DefaultServedModelName,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("tell me a long story")},
		MaxTokens: openai.Int(4000),
	}, option.WithResponseInto(&hdr))
	chunks := 0
	for stream.Next() {
		if chunks++; chunks == 3 {
			p.kill()
		}
	}
	err := stream.Err()
	_ = stream.Close()
	if chunks < 3 || err == nil || !strings.Contains(err.Error(), "upstream_broken") {
		t.Fatalf("after %d chunks: %v, want the upstream_broken error event", chunks, err)
	}
	if ev := e.usageEvent(t, hdr.Header.Get(RequestIDHeader)); ev.GetOutcome() != bus.UsageOutcomeUpstreamBroken || ev.GetCompletionTokens() < 2 {
		t.Errorf("usage outcome %q, %d completion tokens", ev.GetOutcome(), ev.GetCompletionTokens())
	}
}
