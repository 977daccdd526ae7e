package meter

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/natsembed"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	"github.com/switchyard-dev/switchyard/internal/usage"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
)

// env is a NATS server of the test's own, the machine's Redis under a key
// prefix of the test's own, and a JetStream context to publish events.
type env struct {
	t      *testing.T
	nats   *natsembed.Server
	nc     *nats.Conn
	js     jetstream.JetStream
	rdb    *redis.Client
	redis  string
	prefix string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	url, rdb := testkit.Redis(t)
	ns, nc := testkit.NATS(t, 0)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, nats: ns, nc: nc, js: js, rdb: rdb, redis: url, prefix: testkit.KeyPrefix(t, rdb, "switchyard-test:usage:")}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := bus.EnsureUsageStream(ctx, js); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) config() Config {
	cfg := DefaultConfig()
	cfg.NATS.URL, cfg.Redis.URL = e.nats.URL(), e.redis
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.KeyPrefix = e.prefix
	cfg.Tenants, cfg.Models = "team-a,team-b,team.c", "qwen,llama"
	cfg.BatchWait = 20 * time.Millisecond
	cfg.ShutdownTimeout = 5 * time.Second
	return cfg
}

// start runs a meter until the test ends (or stop is called).
func (e *env) start(cfg Config, hook func([]jetstream.Msg) bool) (*Meter, context.CancelFunc) {
	e.t.Helper()
	log := zerolog.Nop()
	if testing.Verbose() {
		log = zerolog.New(zerolog.NewTestWriter(e.t)).Level(zerolog.InfoLevel)
	}
	m, err := New(cfg, log)
	if err != nil {
		e.t.Fatal(err)
	}
	m.beforeAck = hook
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Serve(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("meter: %v", err)
			}
		})
	}
	e.t.Cleanup(stop)
	testkit.Eventually(e.t, 10*time.Second, "meter ready", func() bool {
		return testkit.HTTPStatus(e.t, "http://"+m.HTTPAddr()+"/readyz") == http.StatusOK
	})
	return m, stop
}

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// usageEvent is a request of tenant for model, finished at t0+at.
func usageEvent(id, tenant, model, outcome string, at time.Duration) *eventsv1.UsageEvent {
	return &eventsv1.UsageEvent{
		RequestId: id, Tenant: tenant, Model: model, ServedModel: model, Api: "chat.completions", TargetKind: "local", TargetType: "vLLM",
		PromptTokens: 1000, CachedPromptTokens: 600, CompletionTokens: 50, ReasoningTokens: 5,
		TtftSeconds: 0.25, ItlMeanSeconds: 0.02, E2ESeconds: 1.5, StatusCode: 200, Outcome: outcome,
		StartedAt: timestamppb.New(t0.Add(at - 1500*time.Millisecond)), FinishedAt: timestamppb.New(t0.Add(at)),
	}
}

// publish puts ev on the usage stream; msgID "" publishes without
// Nats-Msg-Id, which the stream does not de-duplicate.
func (e *env) publish(ev *eventsv1.UsageEvent, msgID string) {
	e.t.Helper()
	data, err := proto.Marshal(ev)
	if err != nil {
		e.t.Fatal(err)
	}
	var opts []jetstream.PublishOpt
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := e.js.Publish(ctx, bus.UsageSubject(ev.GetTenant()), data, opts...); err != nil {
		e.t.Fatal(err)
	}
}

// usage asks a meter's API.
func usageOf(t *testing.T, m *Meter, query string) usage.Answer {
	t.Helper()
	resp, err := http.Get("http://" + m.HTTPAddr() + "/v1/usage?" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("usage %s: %d %s", query, resp.StatusCode, body)
	}
	var a usage.Answer
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

func window() string {
	return "from=" + t0.Add(-time.Hour).Format(time.RFC3339) + "&to=" + t0.Add(3*time.Hour).Format(time.RFC3339)
}

func scrape(t *testing.T, m *Meter) string {
	t.Helper()
	resp, err := http.Get("http://" + m.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// Each request is counted once though it arrives twice (a gateway's
// re-send after the stream's duplicate window, here published without an
// id): the rollups, the usage API, the metrics and the tenant feed agree.
// Unknown tenants and models are "other"; undecodable events are dropped.
func TestCountsEachRequestOnce(t *testing.T) {
	e := newEnv(t)
	feed := make(chan *nats.Msg, 64)
	sub, err := e.nc.ChanSubscribe(bus.TenantSubjects("team-a"), feed)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	for i := range 10 {
		ev := usageEvent(fmt.Sprintf("a-%d", i), "team-a", "qwen", bus.UsageOutcomeOK, time.Duration(i)*10*time.Second)
		e.publish(ev, ev.GetRequestId())
		e.publish(ev, "") // the same request again, past de-duplication
	}
	e.publish(usageEvent("b-1", "team-b", "llama", bus.UsageOutcomeShed, 90*time.Minute), "b-1")
	e.publish(usageEvent("x-1", "stranger", "secret-model", bus.UsageOutcomeOK, time.Minute), "x-1")
	if _, err := e.js.Publish(context.Background(), bus.UsageSubject("team-a"), []byte("not protobuf")); err != nil {
		t.Fatal(err)
	}
	m, _ := e.start(e.config(), nil)

	testkit.Eventually(t, 10*time.Second, "every event consumed", func() bool {
		return strings.Contains(scrape(t, m), `switchyard_meter_events_total{result="duplicate"} 10`)
	})
	a := usageOf(t, m, "tenant=team-a&by=model&"+window())
	if len(a.Rows) != 1 || a.Rows[0].Model != "qwen" {
		t.Fatalf("rows %+v", a.Rows)
	}
	r := a.Rows[0]
	if r.Requests != 10 || r.Outcomes["ok"] != 10 || r.CachedInput != 6000 || r.UncachedInput != 4000 || r.Output != 500 || r.Reasoning != 50 {
		t.Errorf("team-a counted %+v, want 10 requests once each", r.Counters)
	}
	if r.TTFTMean != 0.25 || r.E2EMean != 1.5 {
		t.Errorf("means %v %v", r.TTFTMean, r.E2EMean)
	}
	if a.Total.Requests != 10 {
		t.Errorf("total %+v", a.Total)
	}
	// The day and month rollups keep the tokens the gateway's budgets
	// read, once each however often an event came.
	for _, res := range []string{usage.Day.Name, usage.Month} {
		keys, err := e.rdb.Keys(context.Background(), e.prefix+"{team-a}:"+res+":*").Result()
		if err != nil || len(keys) == 0 {
			t.Fatalf("%s rollups of team-a: %v %v", res, keys, err)
		}
		var all, qwen int64
		for _, k := range keys {
			h := e.rdb.HMGet(context.Background(), k, usage.BudgetField(""), usage.BudgetField("qwen")).Val()
			for i, v := range h {
				n, _ := strconv.ParseInt(fmt.Sprint(v), 10, 64)
				if i == 0 {
					all += n
				} else {
					qwen += n
				}
			}
		}
		if want := r.Tokens(); all != want || qwen != want {
			t.Errorf("%s rollups' budget tokens: %d of every model, %d of qwen; want %d", res, all, qwen, want)
		}
	}
	if o := usageOf(t, m, "tenant=other&"+window()); o.Total.Requests != 1 {
		t.Errorf("a tenant nobody configured: %+v under other, want 1", o.Total)
	}
	if b := usageOf(t, m, "tenant=team-b&by=hour&"+window()); len(b.Rows) != 4 || b.Rows[2].Outcomes["shed"] != 1 || b.Rows[0].Requests != 0 {
		t.Errorf("team-b by hour: %+v", b.Rows)
	}

	metrics := scrape(t, m)
	for _, want := range []string{
		`switchyard_meter_requests_total{model="qwen",outcome="ok",target_kind="local",tenant="team-a"} 10`,
		`switchyard_meter_input_tokens_total{cache="hit",model="qwen",target_kind="local",tenant="team-a"} 6000`,
		`switchyard_meter_input_tokens_total{cache="miss",model="qwen",target_kind="local",tenant="team-a"} 4000`,
		`switchyard_meter_output_tokens_total{model="qwen",target_kind="local",tenant="team-a"} 500`,
		`switchyard_meter_requests_total{model="other",outcome="ok",target_kind="local",tenant="other"} 1`,
		`gen_ai_client_token_usage_count{gen_ai_operation_name="chat",gen_ai_request_model="qwen",gen_ai_token_type="input",target_kind="local",tenant="team-a"} 10`,
		`gen_ai_client_token_usage_sum{gen_ai_operation_name="chat",gen_ai_request_model="qwen",gen_ai_token_type="output",target_kind="local",tenant="team-a"} 500`,
		`gen_ai_server_time_to_first_token_seconds_count{gen_ai_request_model="qwen",target_kind="local",tenant="team-a"} 10`,
		`gen_ai_server_time_per_output_token_seconds_count{gen_ai_request_model="qwen",target_kind="local",tenant="team-a"} 10`,
		`gen_ai_server_request_duration_seconds_count{gen_ai_request_model="qwen",target_kind="local",tenant="team-a"} 10`,
		`switchyard_meter_events_total{result="counted"} 12`,
		`switchyard_meter_events_total{result="undecodable"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// The feed: each of team-a's requests once, readable JSON.
	seen := map[string]bool{}
	timeout := time.After(5 * time.Second)
	for len(seen) < 10 {
		select {
		case msg := <-feed:
			var u bus.TenantUsage
			if err := json.Unmarshal(msg.Data, &u); err != nil {
				t.Fatalf("feed payload %q: %v", msg.Data, err)
			}
			if msg.Subject != bus.TenantUsageSubject("team-a", "qwen") || u.Tenant != "team-a" || u.OutputTokens != 50 || u.CachedInputTokens != 600 {
				t.Errorf("feed message on %s: %+v", msg.Subject, u)
			}
			if seen[u.RequestID] {
				t.Errorf("request %s on the feed twice", u.RequestID)
			}
			seen[u.RequestID] = true
		case <-timeout:
			t.Fatalf("feed carried %d of 10 requests", len(seen))
		}
	}
	select {
	case msg := <-feed:
		t.Errorf("an extra feed message: %s", msg.Data)
	case <-time.After(200 * time.Millisecond):
	}
}

// A meter killed after counting a batch but before acking it loses
// nothing and counts nothing twice: another replica gets the batch again
// and finds every event counted.
func TestRedeliveredBatchCountedOnce(t *testing.T) {
	e := newEnv(t)
	for i := range 50 {
		ev := usageEvent(fmt.Sprintf("r-%d", i), "team-a", "qwen", bus.UsageOutcomeOK, time.Duration(i)*time.Second)
		e.publish(ev, ev.GetRequestId())
	}
	cfg := e.config()
	cfg.AckWait = time.Second
	counted := make(chan int, 16)
	_, stop := e.start(cfg, func(b []jetstream.Msg) bool {
		counted <- len(b)
		return false // killed before the acks
	})
	n := 0
	for n < 50 {
		select {
		case k := <-counted:
			n += k
		case <-time.After(10 * time.Second):
			t.Fatalf("the first meter counted %d of 50", n)
		}
	}
	stop()
	second, _ := e.start(cfg, nil)
	testkit.Eventually(t, 15*time.Second, "the batch delivered again and found counted", func() bool {
		return strings.Contains(scrape(t, second), `switchyard_meter_events_total{result="duplicate"} 50`)
	})
	if a := usageOf(t, second, "tenant=team-a&"+window()); a.Total.Requests != 50 {
		t.Errorf("counted %d, want 50", a.Total.Requests)
	}
	if !strings.Contains(scrape(t, second), `switchyard_meter_events_total{result="counted"} 0`) {
		t.Error("the second meter counted an event again")
	}
}

// A minute's summary is its tenant's minute rollup, published once however
// many replicas try (the minute's lock), on the tenant's own subject.
func TestMinuteSummary(t *testing.T) {
	e := newEnv(t)
	for i := range 4 {
		ev := usageEvent(fmt.Sprintf("s-%d", i), "team.c", "qwen", bus.UsageOutcomeOK, time.Duration(i)*time.Second)
		e.publish(ev, ev.GetRequestId())
	}
	m, _ := e.start(e.config(), nil)
	testkit.Eventually(t, 10*time.Second, "counted", func() bool {
		return strings.Contains(scrape(t, m), `switchyard_meter_events_total{result="counted"} 4`)
	})
	sums := make(chan *nats.Msg, 4)
	sub, err := e.nc.ChanSubscribe(bus.TenantSummarySubject("team.c"), sums)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if sub.Subject != "switchyard.v1.tenant.team%2Ec.summary" {
		t.Errorf("summary subject %s", sub.Subject)
	}
	minute := usage.Minute.Start(t0)
	m.summarize(context.Background(), m.nc.Load().Conn, m.rdb.Load(), minute)
	m.summarize(context.Background(), m.nc.Load().Conn, m.rdb.Load(), minute) // another replica, later
	select {
	case msg := <-sums:
		var s bus.TenantSummary
		if err := json.Unmarshal(msg.Data, &s); err != nil {
			t.Fatal(err)
		}
		if s.Tenant != "team.c" || !s.Start.Equal(t0) || len(s.Models) != 1 || s.Models[0].Requests != 4 || s.Models[0].OutputTokens != 200 || s.Models[0].Outcomes["ok"] != 4 {
			t.Errorf("summary %+v", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no summary")
	}
	select {
	case msg := <-sums:
		t.Errorf("a second summary of the minute: %s", msg.Data)
	case <-time.After(200 * time.Millisecond):
	}
}

// Two replicas share the durable consumer: each counts part of the
// stream, together every event once.
func TestReplicasShareTheWork(t *testing.T) {
	e := newEnv(t)
	const n = 3000
	for i := range n {
		ev := usageEvent(fmt.Sprintf("w-%d", i), []string{"team-a", "team-b"}[i%2], "qwen", bus.UsageOutcomeOK, time.Duration(i)*time.Second)
		data, _ := proto.Marshal(ev)
		if _, err := e.js.PublishAsync(bus.UsageSubject(ev.GetTenant()), data, jetstream.WithMsgID(ev.GetRequestId())); err != nil {
			t.Fatal(err)
		}
	}
	<-e.js.PublishAsyncComplete()
	cfg := e.config()
	cfg.Batch = 50 // many batches, for both to take some
	a, _ := e.start(cfg, nil)
	b, _ := e.start(cfg, nil)
	counted := func(m *Meter) float64 { return testutil.ToFloat64(m.metrics.counted) }
	testkit.Eventually(t, 20*time.Second, "every event counted", func() bool { return counted(a)+counted(b) >= n })
	if counted(a)+counted(b) != n || counted(a) == 0 || counted(b) == 0 {
		t.Errorf("counted %v and %v: want %d in all, some by each", counted(a), counted(b), n)
	}
	total := usageOf(t, a, "tenant=team-a&"+window()).Total.Requests + usageOf(t, b, "tenant=team-b&"+window()).Total.Requests
	if total != n {
		t.Errorf("the rollups hold %d requests, want %d", total, n)
	}
}
