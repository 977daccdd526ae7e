package router_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testkit"
	"github.com/switchyard-dev/switchyard/internal/tokenizer"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router"
)

// BenchmarkRoute measures Route end to end over real gRPC on loopback, 16
// endpoints, one client call at a time, and reports latency percentiles.
// In-flight entries pile up (no completions); the score stays cheap either
// way because it reads per-endpoint counters, not entries.
func BenchmarkRoute(b *testing.B) {
	workers := make([]*fakeWorker, 16)
	for i := range workers {
		workers[i] = newFakeWorker(b, "m")
		workers[i].setLoad(int64(i%4), int64(i%3))
	}
	tr := startRouter(b, slowScrapes, workers...)
	ctx := context.Background()
	req := &routerv1.RouteRequest{Tenant: "bench", Model: "m", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS,
		ExcludeEndpoints: []string{"c"}}
	ids := make([]string, 0, 1<<16)
	for i := range cap(ids) {
		ids = append(ids, "bench-"+strconv.Itoa(i))
	}
	lat := make([]time.Duration, 0, 1<<16)
	for i := 0; b.Loop(); i++ {
		req.RequestId = ids[i%len(ids)] + "-" + strconv.Itoa(i/len(ids))
		start := time.Now()
		resp, err := tr.client.Route(ctx, req)
		lat = append(lat, time.Since(start))
		if err != nil || resp.GetTarget() == nil {
			b.Fatalf("route: %v %v", resp, err)
		}
	}
	b.StopTimer()
	testkit.ReportPercentiles(b, "", lat)
}

// BenchmarkRoute8k is Route end to end over real gRPC with an 8k-token chat
// body and 16 endpoints: body parsing and tokenization included (see
// BenchmarkDecide8k for the decision alone). Every request shares the
// system prompt, so the index (speculative entries here: no kvtracker)
// finds it cached on one worker and the full prefix is walked each time.
func BenchmarkRoute8k(b *testing.B) {
	workers := make([]*fakeWorker, 16)
	for i := range workers {
		workers[i] = newFakeWorker(b, "m")
		workers[i].setLoad(int64(i%4), int64(i%3))
	}
	tr := startRouter(b, slowScrapes, workers...)
	ctx := context.Background()
	body := chatBody(doc("bench"), "Summarise.")
	req := &routerv1.RouteRequest{Tenant: "bench", Model: "m", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: body}
	lat := make([]time.Duration, 0, 1<<16)
	for i := 0; b.Loop(); i++ {
		req.RequestId = "bench8k-" + strconv.Itoa(i)
		start := time.Now()
		resp, err := tr.client.Route(ctx, req)
		lat = append(lat, time.Since(start))
		if err != nil || resp.GetTarget() == nil {
			b.Fatalf("route: %v %v", resp, err)
		}
	}
	b.StopTimer()
	testkit.ReportPercentiles(b, "", lat)
}

// BenchmarkRouteHostile is Route end to end over real gRPC with the bodies
// that used to pin a core: one 200 KB message of 20,000 <|im_end|>, and
// 20,000 one-character messages (680 KB), with the simple tokenizer. The
// limits are off, so the whole prompt is read.
func BenchmarkRouteHostile(b *testing.B) {
	msgs := make([]map[string]string, 20000)
	for i := range msgs {
		msgs[i] = map[string]string{"role": "user", "content": "a"}
	}
	tiny, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs})
	bodies := map[string][]byte{
		"specials": chatBody(strings.Repeat(tokenizer.IMEnd, 20000), "q"),
		"tiny":     tiny,
	}
	w := newFakeWorker(b, "m")
	tr := startRouter(b, func(c *router.Config) {
		slowScrapes(c)
		c.MaxMessages, c.MaxPromptBytes, c.MaxTemplateBytes = 0, 0, 0
	}, w)
	for _, name := range []string{"specials", "tiny"} {
		b.Run(name, func(b *testing.B) {
			req := &routerv1.RouteRequest{Tenant: "bench", Model: "m", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: bodies[name]}
			b.SetBytes(int64(len(req.Body)))
			for i := 0; b.Loop(); i++ {
				req.RequestId = "hostile-" + strconv.Itoa(i)
				if resp, err := tr.client.Route(context.Background(), req); err != nil || resp.GetTarget() == nil {
					b.Fatalf("route: %v %v", resp, err)
				}
			}
		})
	}
}
