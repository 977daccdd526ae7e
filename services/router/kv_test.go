package router_test

import (
	"context"
	"encoding/json"

	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/kvblock"
	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	"github.com/switchyard-dev/switchyard/internal/rediskeys"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	"github.com/switchyard-dev/switchyard/internal/tokenizer"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router"
)

// doc is a long shared prefix: about 8k tokens with the simple tokenizer.
func doc(topic string) string {
	return topic + ": " + strings.Repeat(tokenizer.SampleText+" ", 54)
}

func chatBody(system, question string) []byte {
	b, _ := json.Marshal(map[string]any{
		"model": "m",
		"messages": []map[string]string{
			{"role": "system", "content": system},
			{"role": "user", "content": question},
		},
	})
	return b
}

// workerBlocks is what a worker caches after serving body: every full
// 16-token block of its prompt, in Switchyard hashes — what the kvtracker
// publishes.
func workerBlocks(t testing.TB, body []byte) []uint64 {
	t.Helper()
	req, apiErr := openaiapi.ParseChatCompletionRequest(body)
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	toks, err := tokenizer.ChatPrompt(tokenizer.NewSimple(), req)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, h := range kvblock.Chain(nil, kvblock.Root, toks, 16, "") {
		out = append(out, uint64(h))
	}
	return out
}

// kvPublisher plays the kvtracker on a real JetStream.
type kvPublisher struct {
	t    testing.TB
	js   jetstream.JetStream
	pool string
	seq  map[string]uint64
	last uint64 // stream sequence of the last publish
}

func newKVPublisher(t testing.TB, nc *nats.Conn) *kvPublisher {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := bus.EnsureKVStream(ctx, js); err != nil {
		t.Fatal(err)
	}
	return &kvPublisher{t: t, js: js, pool: "router-test-" + strconv.FormatUint(rand.Uint64(), 36), seq: map[string]uint64{}}
}

func (p *kvPublisher) store(worker string, blocks []uint64) {
	p.t.Helper()
	p.seq[worker]++
	data, err := proto.Marshal(&eventsv1.KVBlockDelta{Pool: p.pool, WorkerId: worker, Model: "m", Epoch: 1, Seq: p.seq[worker],
		Stored: blocks, BlockSize: 16, Ts: timestamppb.Now()})
	if err != nil {
		p.t.Fatal(err)
	}
	ack, err := p.js.Publish(context.Background(), bus.KVDeltaSubject(p.pool, worker), data)
	if err != nil {
		p.t.Fatal(err)
	}
	p.last = ack.Sequence
}

func (tr *testRouter) explain(t testing.TB, body []byte) *routerv1.ExplainResponse {
	t.Helper()
	return tr.explainModel(t, "m", body)
}

func (tr *testRouter) explainModel(t testing.TB, model string, body []byte) *routerv1.ExplainResponse {
	t.Helper()
	resp, err := tr.client.Explain(context.Background(), &routerv1.RouteRequest{
		RequestId: "explain", Model: model, Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: body,
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func cachedOn(resp *routerv1.ExplainResponse, id string) int64 {
	for _, c := range resp.GetCandidates() {
		if c.GetEndpoint().GetId() == id {
			return c.GetCachedTokens()
		}
	}
	return -1
}

func (tr *testRouter) routeBody(t testing.TB, id string, body []byte) *routerv1.RouteResponse {
	t.Helper()
	resp, err := tr.client.Route(context.Background(), &routerv1.RouteRequest{
		RequestId: id, Tenant: "t", Model: "m", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: body,
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetTarget() == nil {
		t.Fatalf("not routed: %v", resp.GetRejection())
	}
	return resp
}

// TestSharedPrefixGoesToHolder: with the index told (over the real KV
// stream) that b holds a long prefix, requests sharing it go to b, with
// the decision saying how much is cached; when b is saturated, the router
// moves on.
func TestSharedPrefixGoesToHolder(t *testing.T) {
	ns, nc := startNATS(t)
	a, b, c := newFakeWorker(t, "m"), newFakeWorker(t, "m"), newFakeWorker(t, "m")
	tr := startRouter(t, func(cfg *router.Config) { cfg.NATS.URL = ns.URL() }, a, b, c)
	pub := newKVPublisher(t, nc)
	system := doc("contracts")
	pub.store("b", workerBlocks(t, chatBody(system, "What is clause 4 about?")))
	body := chatBody(system, "Summarise the termination terms.")
	waitFor(t, "index has b's blocks", func() bool { return cachedOn(tr.explain(t, body), "b") > 7000 })

	ex := tr.explain(t, body)
	if cachedOn(ex, "a") != 0 || cachedOn(ex, "c") != 0 {
		t.Fatalf("cached tokens on a/c: %d/%d", cachedOn(ex, "a"), cachedOn(ex, "c"))
	}
	if !strings.Contains(ex.GetResult().GetDecision().GetReason(), "next best") {
		t.Fatalf("explain reason %q", ex.GetResult().GetDecision().GetReason())
	}
	resp := tr.routeBody(t, "s1", body)
	d := resp.GetDecision()
	t.Logf("holder: %s", d.GetReason())
	if resp.GetTarget().GetId() != "b" || d.GetCachedTokens() < 7000 || d.GetPromptTokens() <= d.GetCachedTokens() ||
		d.GetStrategy() != "kv-ttft" || d.GetPredictedTtftSeconds() <= 0 {
		t.Fatalf("routed to %s with %v", resp.GetTarget().GetId(), d)
	}
	// Another question on the same document: b again.
	if got := tr.routeBody(t, "s2", chatBody(system, "Who signs?")).GetTarget().GetId(); got != "b" {
		t.Fatalf("second request went to %s", got)
	}
	// An unrelated document has nothing cached anywhere.
	if resp := tr.routeBody(t, "u1", chatBody(doc("weather"), "Rain?")); resp.GetDecision().GetCachedTokens() != 0 {
		t.Fatalf("unrelated prompt claims %d cached", resp.GetDecision().GetCachedTokens())
	}

	// b saturates: its queue now costs more than recomputing the prefix.
	b.setLoad(40, 60)
	tr.waitLoads(t, a, b, c)
	resp = tr.routeBody(t, "s3", chatBody(system, "And the penalties?"))
	if got := resp.GetTarget().GetId(); got == "b" {
		t.Fatalf("still routed to saturated b: %s", resp.GetDecision().GetReason())
	}
	t.Logf("saturated holder: %s", resp.GetDecision().GetReason())
	if !strings.Contains(resp.GetDecision().GetReason(), "recompute") {
		t.Fatalf("reason does not mention the recompute charge: %s", resp.GetDecision().GetReason())
	}
}

// TestBurstStaysTogether sends a burst sharing a prefix no worker holds yet
// (and whose workers send no KV events): speculative entries keep it on
// one worker, with the model's tokenizer and, for a model without one, in
// the approximate index.
func TestBurstStaysTogether(t *testing.T) {
	for _, tok := range []string{"*=simple", "*=none"} {
		t.Run(tok, func(t *testing.T) {
			workers := []*fakeWorker{newFakeWorker(t, "m"), newFakeWorker(t, "m"), newFakeWorker(t, "m")}
			tr := startRouter(t, func(cfg *router.Config) {
				slowScrapes(cfg)
				cfg.Tokenizers = tok
			}, workers...)
			system := doc("burst " + tok)
			counts := map[string]int{}
			for i := range 12 {
				resp := tr.routeBody(t, "b"+strconv.Itoa(i), chatBody(system, "Question number "+strconv.Itoa(i)+"?"))
				counts[resp.GetTarget().GetId()]++
				if i > 0 && resp.GetDecision().GetCachedTokens() < 7000 {
					t.Fatalf("request %d: %d cached predicted, want the burst's prefix", i, resp.GetDecision().GetCachedTokens())
				}
			}
			if len(counts) != 1 {
				t.Fatalf("burst scattered: %v", counts)
			}
			// Unrelated prompts still spread over the idle workers.
			other := map[string]bool{}
			for i := range 2 {
				other[tr.routeBody(t, "o"+strconv.Itoa(i), chatBody(doc("other "+strconv.Itoa(i)), "q")).GetTarget().GetId()] = true
			}
			for id := range counts {
				if other[id] {
					t.Fatalf("unrelated prompts went to the busy burst worker %s", id)
				}
			}
		})
	}
}

func redisURL(t testing.TB) (string, *redis.Client) { return testkit.Redis(t) }

// TestRouterStartedLate: the kvtracker has been running; the router starts
// afterwards and must know what is cached from the Redis snapshots plus the
// deltas published after them.
func TestRouterStartedLate(t *testing.T) {
	rawURL, rdb := redisURL(t)
	ns, nc := startNATS(t)
	pub := newKVPublisher(t, nc)
	docA, docB, docC := doc("alpha"), doc("beta"), doc("gamma")
	// a served docA, then its state was snapshotted; then it served docB.
	pub.store("a", workerBlocks(t, chatBody(docA, "x")))
	snap, err := proto.Marshal(&eventsv1.WorkerKVSnapshot{Pool: pub.pool, WorkerId: "a", Model: "m", Epoch: 1, Seq: 1,
		BlockSize: 16, Blocks: workerBlocks(t, chatBody(docA, "x")), StreamSeq: pub.last})
	if err != nil {
		t.Fatal(err)
	}
	key := rediskeys.KVSnapshot(pub.pool, "a")
	if err := rdb.Set(context.Background(), key, snap, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Del(context.Background(), key) })
	pub.store("a", workerBlocks(t, chatBody(docB, "y")))
	// c has no snapshot: its deltas alone.
	pub.store("c", workerBlocks(t, chatBody(docC, "z")))

	a, b, c := newFakeWorker(t, "m"), newFakeWorker(t, "m"), newFakeWorker(t, "m")
	tr := startRouter(t, func(cfg *router.Config) {
		cfg.NATS.URL = ns.URL()
		cfg.Redis.URL = rawURL
	}, a, b, c)
	for _, tc := range []struct{ doc, want string }{{docA, "a"}, {docB, "a"}, {docC, "c"}} {
		body := chatBody(tc.doc, "new question")
		waitFor(t, "index knows "+tc.want, func() bool { return cachedOn(tr.explain(t, body), tc.want) > 7000 })
		if got := tr.routeBody(t, "late-"+tc.want+strconv.Itoa(len(tc.doc)), body).GetTarget().GetId(); got != tc.want {
			t.Fatalf("routed to %s, want %s", got, tc.want)
		}
	}
	metrics := tr.metricsText(t)
	for _, want := range []string{`switchyard_router_kv_sync_events_total{event="snapshot_loaded"}`, "switchyard_router_kv_index_blocks"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func (tr *testRouter) metricsText(t testing.TB) string {
	t.Helper()
	return metricsAt(t, tr.srv.HTTPAddr())
}

// metricsAt is the /metrics page of the router serving HTTP at addr.
func metricsAt(t testing.TB, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestLearnsPrefillRateFromCompletions: completions published like the
// gateway does carry TTFTs from a worker faster than the prior; the
// router's learned rate moves to it.
func TestLearnsPrefillRateFromCompletions(t *testing.T) {
	ns, nc := startNATS(t)
	a := newFakeWorker(t, "m")
	tr := startRouter(t, func(cfg *router.Config) {
		slowScrapes(cfg)
		cfg.NATS.URL = ns.URL()
	}, a)
	warmUp(t, nc, tr)
	const rate = 12000.0
	for i := range 80 {
		id := "learn-" + strconv.Itoa(i)
		resp := tr.routeBody(t, id, chatBody(doc("learn "+strconv.Itoa(i)), "q"))
		prompt := resp.GetDecision().GetPromptTokens()
		data, _ := proto.Marshal(&eventsv1.RouteCompletion{RequestId: id, EndpointId: "a", CompletedAt: timestamppb.Now(),
			Success: true, TtftSeconds: 0.03 + float64(prompt)/rate, PromptTokens: prompt})
		if err := nc.Publish(bus.SubjectRouteCompleted, data); err != nil {
			t.Fatal(err)
		}
		_ = nc.Flush()
		waitFor(t, "completion applied", func() bool { return tr.endpoints(t, "")["a"].GetInFlight() == 0 })
	}
	waitFor(t, "learned rate", func() bool {
		r := metricValue(tr.metricsText(t), `switchyard_router_endpoint_prefill_rate_tokens_per_second{endpoint="a"}`)
		return r > 0.85*rate && r < 1.15*rate
	})
}

func metricValue(text, series string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v
		}
	}
	return -1
}
