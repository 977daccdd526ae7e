package sim

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/switchyard-dev/switchyard/internal/vllm/kvevents"
	"github.com/switchyard-dev/switchyard/internal/vllm/kvzmq"
)

// TestKVEventsOverZMQ subscribes to a worker's real ZMQ publisher and checks
// a request's prompt blocks arrive as BlockStored with the prompt's token
// ids, then replays them from the replay socket.
func TestKVEventsOverZMQ(t *testing.T) {
	encodings := []string{"map", "array", "array+no-medium+signed-hashes"}
	for _, enc := range encodings {
		t.Run(enc, func(t *testing.T) {
			cfg := fastConfig()
			cfg.Workers = 2
			cfg.KVEventsEncoding = enc
			cfg.KVEventsConfig = `{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://127.0.0.1:*",` +
				`"replay_endpoint":"tcp://127.0.0.1:*","topic":"kv"}`
			f := startFleet(t, cfg)
			ws := f.Workers()
			if ws[0].KVEndpoint == "" || ws[0].ReplayEndpoint == "" || ws[0].KVEndpoint == ws[1].KVEndpoint {
				t.Fatalf("endpoints: %+v", ws)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			sub, err := kvzmq.DialSubscriber(ctx, ws[0].KVEndpoint, "kv")
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()

			// A SUB socket's subscription reaches the publisher a little after
			// it connects; keep sending fresh prompts until one's events show.
			var dec kvevents.Decoder
			var batch kvevents.Batch
			sent := map[uint32][]uint32{}
			for i := uint32(1); ; i++ {
				prompt := make([]uint32, 40)
				for j := range prompt {
					prompt[j] = i*1000 + uint32(j)
				}
				sent[prompt[0]] = prompt
				if resp, data := post(t, ws[0].URL+"/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 1}); resp.StatusCode != 200 {
					t.Fatalf("%d %s", resp.StatusCode, data)
				}
				rctx, rcancel := context.WithTimeout(ctx, 200*time.Millisecond)
				msg, err := sub.Recv(rctx)
				rcancel()
				if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if msg.Topic != "kv" {
					t.Errorf("topic %q", msg.Topic)
				}
				if err := dec.Decode(msg.Payload, &batch); err != nil {
					t.Fatal(err)
				}
				if len(batch.Events) != 1 {
					t.Fatalf("batch events: %+v", batch.Events)
				}
				ev, ok := batch.Events[0].(*kvevents.BlockStored)
				if !ok {
					t.Fatalf("event %T", batch.Events[0])
				}
				want := sent[ev.TokenIDs[0]]
				if want == nil || !slices.Equal(ev.TokenIDs, want[:32]) || len(ev.BlockHashes) != 2 ||
					ev.ParentBlockHash != nil || ev.BlockSize != 16 || ev.LoRAName != nil {
					t.Fatalf("BlockStored %+v, want the first 32 tokens of a sent prompt", ev)
				}
				if batch.TS < float64(time.Now().Add(-time.Minute).Unix()) {
					t.Errorf("batch ts %v is not wall-clock seconds", batch.TS)
				}
				break
			}

			var replayed int
			err = kvzmq.Replay(ctx, ws[0].ReplayEndpoint, 0, func(seq uint64, payload []byte) error {
				replayed++
				return dec.Decode(payload, &batch)
			})
			if err != nil || replayed == 0 {
				t.Errorf("replay: %d batches, %v", replayed, err)
			}
		})
	}
}

// TestOpenAIClient talks to a worker with the official Go SDK.
func TestOpenAIClient(t *testing.T) {
	f := startFleet(t, fastConfig())
	client := openai.NewClient(option.WithBaseURL(f.Workers()[0].URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	params := openai.ChatCompletionNewParams{
		Model:               DefaultServedModelName,
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage(longText(9, 200))},
		MaxCompletionTokens: openai.Int(6),
	}
	first, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if first.Choices[0].Message.Content == "" || first.Usage.CompletionTokens != 6 || first.Choices[0].FinishReason != "length" {
		t.Errorf("completion: %+v", first)
	}

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != first.Choices[0].Message.Content {
		t.Errorf("streamed %q, want %q", acc.Choices[0].Message.Content, first.Choices[0].Message.Content)
	}
	if acc.Usage.PromptTokensDetails.CachedTokens == 0 || acc.Usage.PromptTokens != first.Usage.PromptTokens {
		t.Errorf("streamed usage %+v", acc.Usage)
	}

	models, err := client.Models.List(ctx)
	if err != nil || len(models.Data) != 1 || models.Data[0].ID != DefaultServedModelName {
		t.Errorf("models: %+v %v", models, err)
	}

	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "nope", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" {
		t.Errorf("unknown model error: %v", err)
	}
}
