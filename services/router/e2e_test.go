package router_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/sim"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
	"github.com/switchyard-dev/switchyard/services/gateway"
	"github.com/switchyard-dev/switchyard/services/kvtracker"
	"github.com/switchyard-dev/switchyard/services/router"
)

// e2eStack is the real thing on loopback: simulated vLLM workers publishing
// KV events, a kvtracker, a router and a gateway, over an embedded NATS and
// the shared Redis.
type e2eStack struct {
	fleet   *sim.Fleet
	router  *testRouter
	gateway string
	client  openai.Client
	model   string

	mu          sync.Mutex
	completions map[string]*eventsv1.RouteCompletion
}

func startE2E(t *testing.T) *e2eStack {
	t.Helper()
	redisRaw, _ := redisURL(t)
	ns, nc := startNATS(t)
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	fleet := startSim(t, log, func(sc *sim.Config) {
		sc.Workers = 3
		sc.TimeScale = 20
		sc.DefaultMaxTokens = 2
		// Room for the saturation flood without evicting the shared prefix.
		sc.NumGPUBlocksOverride = 20000
		sc.KVEventsConfig = `{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://127.0.0.1:*","replay_endpoint":"tcp://127.0.0.1:*","topic":"kv"}`
	})
	var kvWorkers, eps []string
	for _, w := range fleet.Workers() {
		id := "sim-" + strconv.Itoa(w.ID) // worker ids in KV deltas are the router's endpoint ids
		kvWorkers = append(kvWorkers, id+"="+w.KVEndpoint+"|"+w.ReplayEndpoint)
		eps = append(eps, id+"="+w.URL)
	}

	kc := kvtracker.DefaultConfig()
	kc.Workers = strings.Join(kvWorkers, ",")
	kc.NATS.URL, kc.Redis.URL = ns.URL(), redisRaw
	kc.Pool = "e2e-" + strconv.FormatUint(rand.Uint64(), 36)
	kc.Model = sim.DefaultServedModelName
	kc.Topic = "kv"
	kc.ReplicaID = "e2e-tracker"
	kc.HTTPAddr = "127.0.0.1:0"
	kc.SnapshotInterval = 200 * time.Millisecond
	kc.ShutdownTimeout = 5 * time.Second
	tracker, err := kvtracker.New(kc, log)
	if err != nil {
		t.Fatal(err)
	}
	serveUntilCleanup(t, "kvtracker", tracker.Serve)
	waitHTTPReady(t, "http://"+tracker.HTTPAddr()+"/readyz")

	tr := startRouter(t, func(c *router.Config) {
		c.Endpoints = strings.Join(eps, ",")
		c.NATS.URL, c.Redis.URL = ns.URL(), redisRaw
		c.ScrapeInterval = 100 * time.Millisecond
		// Only the kvtracker's events may keep a prefix in the index.
		c.SpeculativeTTL, c.ApproxTTL = time.Millisecond, time.Millisecond
	})

	gc := gateway.DefaultConfig()
	gc.Addr, gc.MetricsAddr = "127.0.0.1:0", "127.0.0.1:0"
	gc.RouterAddr = tr.srv.GRPCAddr()
	gc.NATS.URL = ns.URL()
	gw, err := gateway.New(gc, log)
	if err != nil {
		t.Fatal(err)
	}
	serveUntilCleanup(t, "gateway", gw.Serve)
	base := "http://" + gw.Addr()
	waitHTTPReady(t, base+"/readyz")

	s := &e2eStack{fleet: fleet, router: tr, gateway: base, model: sim.DefaultServedModelName,
		completions: map[string]*eventsv1.RouteCompletion{}}
	s.client = openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	sub, err := nc.Subscribe(bus.SubjectRouteCompleted, func(m *nats.Msg) {
		var c eventsv1.RouteCompletion
		if proto.Unmarshal(m.Data, &c) == nil {
			s.mu.Lock()
			s.completions[c.GetRequestId()] = &c
			s.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	_ = nc.Flush()
	return s
}

// startSim runs simulated workers on free ports until the test ends.
func startSim(t *testing.T, log zerolog.Logger, edit func(*sim.Config)) *sim.Fleet {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	sc := sim.DefaultConfig()
	sc.Port = 0
	sc.ShutdownTimeout = 5 * time.Second
	edit(&sc)
	fleet, err := sim.StartFleet(ctx, sc, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Close() })
	return fleet
}

// serveUntilCleanup runs serve until the test ends and checks it returns
// cleanly.
func serveUntilCleanup(t *testing.T, name string, serve func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("%s did not stop", name)
		}
	})
}

func waitHTTPReady(t *testing.T, url string) {
	t.Helper()
	waitFor(t, url, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// chat sends one chat request through the gateway and returns the cached
// tokens the worker reported and the endpoint that served it.
func (s *e2eStack) chat(t *testing.T, system, question string) (cached int64, endpoint string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Streamed: the gateway measures a TTFT only then, and the router
	// learns prefill rates from it.
	var httpResp *http.Response
	stream := s.client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:         s.model,
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system), openai.UserMessage(question)},
		MaxTokens:     openai.Int(2),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}, option.WithResponseInto(&httpResp))
	for stream.Next() {
		if u := stream.Current().Usage; u.TotalTokens > 0 {
			cached = u.PromptTokensDetails.CachedTokens
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("chat: %v", err)
	}
	stream.Close()
	id := httpResp.Header.Get(gateway.RequestIDHeader)
	waitFor(t, "route completion of "+id, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if c := s.completions[id]; c != nil {
			endpoint = c.GetEndpointId()
			return true
		}
		return false
	})
	return cached, endpoint
}

// TestEndToEndKVRouting: sim fleet + kvtracker + router + gateway. Requests
// sharing a long prefix land on the worker whose cache holds it (the
// worker itself reports the cache hits), known to the router through the
// kvtracker's events; when that worker is saturated, the router moves on.
func TestEndToEndKVRouting(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end; skipped in -short")
	}
	s := startE2E(t)
	system := doc("handbook")
	_, holder := s.chat(t, system, "Question zero?")
	// The holder's blocks reach the router through ZMQ, the kvtracker and
	// JetStream (speculative entries are off in this stack).
	waitFor(t, "prefix in the router's index", func() bool {
		ex := s.router.explainModel(t, s.model, chatBodyFor(s.model, system, "probe"))
		return cachedOn(ex, holder) > 7000
	})
	t.Logf("holder %s: %s", holder, s.router.explainModel(t, s.model, chatBodyFor(s.model, system, "probe")).GetResult().GetDecision().GetReason())
	for i := 1; i <= 4; i++ {
		cached, ep := s.chat(t, system, "Question "+strconv.Itoa(i)+"?")
		if ep != holder || cached < 7000 {
			t.Fatalf("request %d served by %s with %d cached tokens; want %s with the prefix cached", i, ep, cached, holder)
		}
	}

	// The streamed completions taught the router the holder's speed (the
	// simulator runs 20 times faster than the prior's GPU).
	if r := metricValue(s.router.metricsText(t), `switchyard_router_endpoint_prefill_rate_tokens_per_second{endpoint="`+holder+`"}`); r < 4*2700 {
		t.Errorf("holder's learned prefill rate %.0f tok/s: not learned from streamed TTFTs", r)
	}
	// Saturate the holder directly (not through the router): a flood of
	// distinct long prompts keeps its queue long.
	var w sim.WorkerInfo
	for _, wi := range s.fleet.Workers() {
		if "sim-"+strconv.Itoa(wi.ID) == holder {
			w = wi
		}
	}
	var flood sync.WaitGroup
	for i := range 60 {
		flood.Add(1)
		go func() {
			defer flood.Done()
			body, _ := json.Marshal(map[string]any{"model": s.model, "max_tokens": 20,
				"messages": []map[string]string{{"role": "user", "content": fmt.Sprintf("flood %d: %s", i, strings.Repeat(" fox river bread", 700))}}})
			resp, err := http.Post(w.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
			if err == nil {
				resp.Body.Close()
			}
		}()
	}
	t.Cleanup(flood.Wait)
	waitFor(t, "router sees the holder saturated", func() bool {
		return s.router.endpoints(t, "")[holder].GetWaiting() >= 20
	})
	ex := s.router.explainModel(t, s.model, chatBodyFor(s.model, system, "while saturated"))
	_, ep := s.chat(t, system, "While it is busy?")
	if ep == holder {
		t.Fatalf("routed to the saturated holder %s; explain said: %s", holder, ex.GetResult().GetDecision().GetReason())
	}
	t.Logf("saturated holder %s: %s", holder, ex.GetResult().GetDecision().GetReason())
}

func chatBodyFor(model, system, question string) []byte {
	b, _ := json.Marshal(map[string]any{"model": model, "messages": []map[string]string{
		{"role": "system", "content": system}, {"role": "user", "content": question}}})
	return b
}

// TestEndToEndKeyRule: a body with a 10-word "messages" and a 4,000-word
// "Messages" goes through the gateway to a simulated worker. vLLM reads
// "messages" and ignores "Messages" (internal/jsonscan has the rule), so
// the router's prompt tokens and the worker's are those of "messages"
// alone: no text the worker never reads can steer the routing.
func TestEndToEndKeyRule(t *testing.T) {
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	fleet := startSim(t, log, func(sc *sim.Config) { sc.TimeScale, sc.DefaultMaxTokens = 100, 1 })
	tr := startRouter(t, func(c *router.Config) { c.Endpoints = "sim-0=" + fleet.Workers()[0].URL })
	gc := gateway.DefaultConfig()
	gc.Addr, gc.MetricsAddr, gc.RouterAddr, gc.NATS.URL = "127.0.0.1:0", "127.0.0.1:0", tr.srv.GRPCAddr(), ""
	gw, err := gateway.New(gc, log)
	if err != nil {
		t.Fatal(err)
	}
	serveUntilCleanup(t, "gateway", gw.Serve)
	waitHTTPReady(t, "http://"+gw.Addr()+"/readyz")

	series := `switchyard_router_prompt_tokens_total{model="` + sim.DefaultServedModelName + `"}`
	// send returns the prompt tokens the router decided on and those the
	// worker counted.
	send := func(body string) (routed, served int64) {
		t.Helper()
		before := max(metricValue(tr.metricsText(t), series), 0)
		resp, err := http.Post("http://"+gw.Addr()+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Usage struct {
				PromptTokens int64 `json:"prompt_tokens"`
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %v", resp.StatusCode, err)
		}
		return int64(metricValue(tr.metricsText(t), series) - before), out.Usage.PromptTokens
	}
	msgs := func(text string) string { return `[{"role":"user","content":"` + text + `"}]` }
	head := `{"model":"` + sim.DefaultServedModelName + `","messages":` + msgs(strings.TrimSpace(strings.Repeat("word ", 10)))
	routedAlone, servedAlone := send(head + `}`)
	routed, served := send(head + `,"Messages":` + msgs(strings.Repeat("steer ", 4000)) + `}`)
	if servedAlone > 40 || routedAlone != servedAlone {
		t.Fatalf("messages alone: the router counted %d prompt tokens, the worker %d (about 20)", routedAlone, servedAlone)
	}
	if routed != routedAlone || served != servedAlone {
		t.Errorf("with Messages: the router counted %d prompt tokens and the worker %d; messages alone gives %d", routed, served, servedAlone)
	}
}
