package router_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/tokenizer"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router"
)

// BenchmarkRouteHFChat is Route end to end over real gRPC, 16 endpoints,
// with a real Hugging Face tokenizer and chat template (Qwen3 fixture from
// `make testdata`): what a router pays per request on a real model,
// render + tokenize included. Modes:
//   - cold: every request is a conversation never seen before;
//   - multi-turn: the history was sent on the previous turn and one new
//     assistant + user exchange is appended, as chat clients do.
func BenchmarkRouteHFChat(b *testing.B) {
	dir := filepath.Join("..", "..", "testdata-cache", "tokenizers", "qwen3")
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		b.Skipf("SKIP: fixture tokenizer not fetched; run `make testdata` (%v)", err)
	}
	workers := make([]*fakeWorker, 16)
	for i := range workers {
		workers[i] = newFakeWorker(b, "m")
		workers[i].setLoad(int64(i%4), int64(i%3))
	}
	tr := startRouter(b, func(c *router.Config) {
		slowScrapes(c)
		c.Tokenizers = "*=hf:" + dir
	}, workers...)
	ctx := context.Background()
	for _, kTokens := range []int{1, 8, 32} {
		for _, mode := range []string{"cold", "multi-turn"} {
			b.Run(fmt.Sprintf("%dk/%s", kTokens, mode), func(b *testing.B) {
				// About 4.4 characters per Qwen3 token on this English text.
				chars := kTokens * 1000 * 44 / 10
				history := conversation(chars, "")
				req := &routerv1.RouteRequest{Tenant: "bench", Model: "m", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS}
				lat := make([]time.Duration, 0, 1<<14)
				// One reused body buffer: the client's garbage would
				// otherwise be collected on the router's clock, which a
				// router in its own process does not pay.
				var body []byte
				for i := 0; b.Loop(); i++ {
					msgs := history
					if mode == "cold" {
						msgs = conversation(chars, strconv.Itoa(i)+" ")
					} else {
						msgs = append(history[:len(history):len(history)],
							chatMessage{"assistant", "Noted, entry " + strconv.Itoa(i) + "."},
							chatMessage{"user", "Question " + strconv.Itoa(i) + ": who signed the ledger after the storm?"})
					}
					body = appendChatBody(body[:0], "m", msgs)
					req.Body = body
					req.RequestId = "hf-" + strconv.Itoa(i)
					start := time.Now()
					resp, err := tr.client.Route(ctx, req)
					lat = append(lat, time.Since(start))
					if err != nil || resp.GetTarget() == nil {
						b.Fatalf("route: %v %v", resp, err)
					}
				}
				b.StopTimer()
				reportPercentiles(b, lat)
			})
		}
	}
}

type chatMessage struct{ role, content string }

// conversation is a system prompt and alternating turns totalling about
// chars characters; salt makes every message unique.
func conversation(chars int, salt string) []chatMessage {
	msgs := []chatMessage{{"system", salt + "You keep a harbour town's archive."}}
	n := 0
	for i := 0; n < chars; i++ {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		c := salt + "Turn " + strconv.Itoa(i) + ". " + strings.Repeat(tokenizer.SampleText+" ", 2)
		msgs = append(msgs, chatMessage{role, c})
		n += len(c)
	}
	return msgs
}

// appendChatBody appends a chat completions body for msgs to dst. Go
// quoting is JSON quoting for the printable ASCII this benchmark writes.
func appendChatBody(dst []byte, model string, msgs []chatMessage) []byte {
	dst = append(dst, `{"model":`...)
	dst = strconv.AppendQuote(dst, model)
	dst = append(dst, `,"messages":[`...)
	for i, m := range msgs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"role":`...)
		dst = strconv.AppendQuote(dst, m.role)
		dst = append(dst, `,"content":`...)
		dst = strconv.AppendQuote(dst, m.content)
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}
