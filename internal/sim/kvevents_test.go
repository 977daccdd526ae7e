package sim

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
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

// TestKVReplayFormat: --kv-replay-format picks the frames of the replay
// socket's replies, as a raw DEALER receives them (identity stripped,
// delimiter kept): ["", topic, seq, payload] for topic (vLLM since
// #45177), ["", seq, payload] for legacy; kvzmq.Replay reads both.
func TestKVReplayFormat(t *testing.T) {
	for _, tc := range []struct {
		format string
		frames int
	}{{"topic", 4}, {"legacy", 3}} {
		t.Run(tc.format, func(t *testing.T) {
			cfg := fastConfig()
			cfg.KVReplayFormat = tc.format
			cfg.KVEventsConfig = `{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://127.0.0.1:*",` +
				`"replay_endpoint":"tcp://127.0.0.1:*","topic":"kv@w0"}`
			f := startFleet(t, cfg)
			w := f.Workers()[0]
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			dealer := zmq4.NewDealer(ctx)
			defer dealer.Close()
			if err := dealer.Dial(w.ReplayEndpoint); err != nil {
				t.Fatal(err)
			}
			// The publisher sends batches from its own goroutine: ask until
			// the first reply is a batch, not the end marker alone.
			var first zmq4.Msg
			for i := 0; ; i++ {
				if resp, data := post(t, w.URL+"/v1/completions", map[string]any{"prompt": longText(i, 40), "max_tokens": 1}); resp.StatusCode != 200 {
					t.Fatalf("%d %s", resp.StatusCode, data)
				}
				if err := dealer.Send(zmq4.NewMsgFrom([]byte{}, make([]byte, 8))); err != nil {
					t.Fatal(err)
				}
				var replies []zmq4.Msg
				for {
					m, err := dealer.Recv()
					if err != nil {
						t.Fatal(err)
					}
					replies = append(replies, m)
					if len(m.Frames) > 1 && string(m.Frames[len(m.Frames)-2]) == "\xff\xff\xff\xff\xff\xff\xff\xff" {
						break
					}
				}
				if len(replies) > 1 {
					first = replies[0]
					if end := replies[len(replies)-1]; len(end.Frames) != tc.frames {
						t.Fatalf("end marker %x: %d frames, want %d", end.Frames, len(end.Frames), tc.frames)
					}
					break
				}
				if ctx.Err() != nil {
					t.Fatal("no batch replayed")
				}
				time.Sleep(20 * time.Millisecond)
			}
			if len(first.Frames) != tc.frames || len(first.Frames[0]) != 0 || len(first.Frames[tc.frames-2]) != 8 {
				t.Fatalf("reply frames %q, want %d with the delimiter first", first.Frames, tc.frames)
			}
			if tc.format == "topic" && string(first.Frames[1]) != "kv@w0" {
				t.Fatalf("topic frame %q, want the publisher's topic", first.Frames[1])
			}
			var dec kvevents.Decoder
			var b kvevents.Batch
			if err := dec.Decode(first.Frames[tc.frames-1], &b); err != nil || len(b.Events) == 0 {
				t.Fatalf("payload: %+v, %v", b, err)
			}
			var replayed int
			if err := kvzmq.Replay(ctx, w.ReplayEndpoint, 0, func(uint64, []byte) error { replayed++; return nil }); err != nil || replayed == 0 {
				t.Fatalf("kvzmq.Replay: %d batches, %v", replayed, err)
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
