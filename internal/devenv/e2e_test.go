package devenv_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/devenv"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
)

// startStack runs the whole system in-process on free ports: the gateway
// and router packages the binary runs, three simulated workers, and an
// embedded NATS server.
func startStack(t *testing.T) *devenv.Stack {
	t.Helper()
	cfg := devenv.DefaultConfig()
	cfg.GatewayAddr, cfg.GatewayMetricsAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.RouterGRPCAddr = "127.0.0.1:0"
	cfg.RouterHTTPAddr = "127.0.0.1:0"
	cfg.KVTrackerHTTPAddr = "127.0.0.1:0"
	cfg.RedisURL = devenv.NoRedis // snapshots are the kvtracker's and router's own tests' business, usage the meter test's
	cfg.MeterHTTPAddr = "127.0.0.1:0"
	cfg.Sim.Port = 0
	cfg.Sim.KVEventsConfig = `{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://127.0.0.1:*"}`
	// Fast enough for a test, slow enough that a 64-token answer is still
	// being generated when its first chunk reaches the client.
	cfg.Sim.TimeScale = 10
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	if testing.Verbose() || os.Getenv("E2E_LOG") != "" {
		log = log.Level(zerolog.DebugLevel)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := devenv.Start(ctx, cfg, log)
	if err != nil {
		cancel()
		t.Fatalf("start stack: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := s.Stop(); err != nil {
			t.Errorf("stop stack: %v", err)
		}
	})
	return s
}

func client(s *devenv.Stack) openai.Client {
	return openai.NewClient(
		option.WithBaseURL(s.GatewayURL()+"/v1"),
		option.WithAPIKey("unused"),
		option.WithMaxRetries(0),
	)
}

const model = "qwen-3.6-27b"

func TestEndToEndWithOpenAIClient(t *testing.T) {
	s := startStack(t)
	c := client(s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	t.Run("chat non-streaming", func(t *testing.T) {
		resp, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:     model,
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are terse."), openai.UserMessage("Name three rivers.")},
			MaxTokens: openai.Int(12),
		})
		if err != nil {
			t.Fatalf("chat: %v", err)
		}
		if len(resp.Choices) != 1 || strings.TrimSpace(resp.Choices[0].Message.Content) == "" {
			t.Fatalf("choices = %+v", resp.Choices)
		}
		if resp.Choices[0].FinishReason != "length" {
			t.Errorf("finish_reason = %q, want length (max_tokens reached)", resp.Choices[0].FinishReason)
		}
		if resp.Model != model {
			t.Errorf("model = %q", resp.Model)
		}
		u := resp.Usage
		if u.CompletionTokens != 12 || u.PromptTokens <= 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
			t.Errorf("usage = prompt %d completion %d total %d", u.PromptTokens, u.CompletionTokens, u.TotalTokens)
		}
	})

	t.Run("chat streaming arrives before the response ends", func(t *testing.T) {
		stream := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model:         model,
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me a long story.")},
			MaxTokens:     openai.Int(64),
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		defer stream.Close()
		var (
			content       strings.Builder
			chunks        int
			sawRunning    bool
			usage         openai.CompletionUsage
			finishReasons []string
		)
		for stream.Next() {
			ch := stream.Current()
			if len(ch.Choices) > 0 {
				chunks++
				content.WriteString(ch.Choices[0].Delta.Content)
				if ch.Choices[0].FinishReason != "" {
					finishReasons = append(finishReasons, ch.Choices[0].FinishReason)
				}
				// On the first content chunk, the request must still be
				// generating on a worker: the gateway did not wait for the
				// whole response before passing chunks on.
				if ch.Choices[0].Delta.Content != "" && !sawRunning {
					sawRunning = true
					if n := runningOnWorkers(t, s); n < 1 {
						t.Errorf("first chunk arrived but no worker reports a running request (running=%d): the response was buffered", n)
					}
				}
			}
			if ch.Usage.TotalTokens > 0 {
				usage = ch.Usage
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		if chunks < 64 {
			t.Errorf("got %d chunks, want one per token (64) at least", chunks)
		}
		if content.Len() == 0 {
			t.Error("empty streamed content")
		}
		if len(finishReasons) != 1 || finishReasons[0] != "length" {
			t.Errorf("finish reasons = %v", finishReasons)
		}
		if usage.CompletionTokens != 64 || usage.PromptTokens <= 0 {
			t.Errorf("usage = %+v", usage)
		}
	})

	t.Run("completions", func(t *testing.T) {
		resp, err := c.Completions.New(ctx, openai.CompletionNewParams{
			Model:     openai.CompletionNewParamsModel(model),
			Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
			MaxTokens: openai.Int(5),
		})
		if err != nil {
			t.Fatalf("completions: %v", err)
		}
		if len(resp.Choices) != 1 || resp.Choices[0].Text == "" || resp.Usage.CompletionTokens != 5 {
			t.Fatalf("resp = %+v", resp)
		}
	})

	t.Run("repeated prompt reports cached tokens on the same worker", func(t *testing.T) {
		// Load-only routing may send a repeat elsewhere; ask one worker
		// directly through the same client library to see the cache.
		w := s.Workers()[0]
		direct := openai.NewClient(option.WithBaseURL(w.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
		prompt := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40)
		var cached []int64
		for range 2 {
			resp, err := direct.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
				Model:     model,
				Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
				MaxTokens: openai.Int(2),
			})
			if err != nil {
				t.Fatalf("chat: %v", err)
			}
			cached = append(cached, resp.Usage.PromptTokensDetails.CachedTokens)
		}
		if cached[0] != 0 || cached[1] <= 0 {
			t.Errorf("cached tokens over two identical requests = %v, want 0 then > 0", cached)
		}
	})

	t.Run("models", func(t *testing.T) {
		page, err := c.Models.List(ctx)
		if err != nil {
			t.Fatalf("models: %v", err)
		}
		var ids []string
		for _, m := range page.Data {
			ids = append(ids, m.ID)
		}
		if len(ids) != 1 || ids[0] != model {
			t.Errorf("models = %v", ids)
		}
	})

	t.Run("unknown model is a 404 the SDK understands", func(t *testing.T) {
		_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "no-such-model",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("err = %v, want *openai.Error", err)
		}
		if apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "model_not_found" {
			t.Errorf("status %d code %q", apiErr.StatusCode, apiErr.Code)
		}
	})

	t.Run("one usage event per request lands in JetStream", func(t *testing.T) {
		nc, err := nats.Connect(s.NATSURL())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		// Chat (2), completions (1), unknown model (1) went through the
		// gateway above; the direct worker calls did not.
		const want = 4
		cons, err := js.OrderedConsumer(ctx, bus.StreamUsage, jetstream.OrderedConsumerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		got := map[int32]int{}
		deadline := time.Now().Add(10 * time.Second)
		for n := 0; n < want && time.Now().Before(deadline); {
			msg, err := cons.Next(jetstream.FetchMaxWait(time.Until(deadline)))
			if err != nil {
				t.Fatalf("after %d usage events: %v", n, err)
			}
			var ev eventsv1.UsageEvent
			if err := proto.Unmarshal(msg.Data(), &ev); err != nil {
				t.Fatalf("decode usage event: %v", err)
			}
			if msg.Headers().Get(nats.MsgIdHdr) != ev.GetRequestId() || ev.GetRequestId() == "" {
				t.Errorf("Nats-Msg-Id %q, request id %q", msg.Headers().Get(nats.MsgIdHdr), ev.GetRequestId())
			}
			if ev.GetStatusCode() == http.StatusOK && (ev.GetPromptTokens() <= 0 || ev.GetCompletionTokens() <= 0) {
				t.Errorf("usage event without tokens: %+v", &ev)
			}
			got[ev.GetStatusCode()]++
			n++
		}
		if got[http.StatusOK] != 3 || got[http.StatusNotFound] != 1 {
			t.Errorf("usage events by status = %v, want 3×200 and 1×404", got)
		}
	})
}

// runningOnWorkers sums vllm:num_requests_running over the workers' own
// /metrics, read directly (not through the router's scrape, which lags).
func runningOnWorkers(t *testing.T, s *devenv.Stack) int {
	t.Helper()
	total := 0
	for _, w := range s.Workers() {
		resp, err := http.Get(w.URL + "/metrics")
		if err != nil {
			t.Fatalf("metrics: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "vllm:num_requests_running{") {
				f := strings.Fields(line)
				if f[len(f)-1] != "0" {
					total++
				}
			}
		}
	}
	return total
}
