package publish

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/natsembed"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
	"github.com/switchyard-dev/switchyard/services/gateway/internal/spool"
)

const waitLong = 10 * time.Second

func newMetrics() Metrics {
	return Metrics{
		Published: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "published"}, []string{"event"}),
		Failures:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "failures"}, []string{"event", "reason"}),
	}
}

func value(t *testing.T, c *prometheus.CounterVec, labels ...string) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.WithLabelValues(labels...).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type fixture struct {
	ns *natsembed.Server
	nc *nats.Conn
	js jetstream.JetStream
}

func start(t *testing.T, ackTimeout time.Duration) fixture {
	t.Helper()
	ns, err := natsembed.Start(natsembed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	nc, err := nats.Connect(ns.URL(), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(ackTimeout))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := bus.EnsureUsageStream(ctx, js); err != nil {
		t.Fatal(err)
	}
	return fixture{ns: ns, nc: nc, js: js}
}

func TestPublishes(t *testing.T) {
	f := start(t, AckTimeout)
	comps := make(chan *nats.Msg, 4)
	if _, err := f.nc.ChanSubscribe(bus.SubjectRouteCompleted, comps); err != nil {
		t.Fatal(err)
	}
	if err := f.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	m := newMetrics()
	p := New(f.nc, f.js, zerolog.Nop(), m, Options{})

	p.RequestFinished("team.a", &eventsv1.UsageEvent{RequestId: "r1", Tenant: "team.a", PromptTokens: 10})
	// The same request id again, as after a retried publish: de-duplicated.
	p.RequestFinished("team.a", &eventsv1.UsageEvent{RequestId: "r1", Tenant: "team.a", PromptTokens: 10})
	p.RequestFinished("team.a", &eventsv1.UsageEvent{RequestId: "r2", Tenant: "team.a", PromptTokens: 20})
	p.RouteCompleted(&eventsv1.RouteCompletion{RequestId: "r1", EndpointId: "w0", Success: true})

	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := value(t, m.Published, EventUsage); got != 3 {
		t.Errorf("usage published = %v, want 3 (acks include the duplicate)", got)
	}
	s, err := f.js.Stream(ctx, bus.StreamUsage)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 {
		t.Fatalf("stream holds %d messages, want 2", info.State.Msgs)
	}
	for seq, want := range map[uint64]string{1: "r1", 2: "r2"} {
		msg, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if msg.Subject != bus.UsageSubject("team.a") || msg.Header.Get(jetstream.MsgIDHeader) != want {
			t.Errorf("seq %d: subject %q id %q", seq, msg.Subject, msg.Header.Get(jetstream.MsgIDHeader))
		}
		var ev eventsv1.UsageEvent
		if err := proto.Unmarshal(msg.Data, &ev); err != nil || ev.GetRequestId() != want {
			t.Errorf("seq %d payload %v, %v", seq, &ev, err)
		}
	}
	select {
	case msg := <-comps:
		var c eventsv1.RouteCompletion
		if err := proto.Unmarshal(msg.Data, &c); err != nil || c.GetEndpointId() != "w0" || !c.GetSuccess() {
			t.Errorf("completion %v, %v", &c, err)
		}
	case <-time.After(waitLong):
		t.Fatal("no route completion")
	}
	// After Close, events are counted as lost, never sent on a closed channel.
	p.RequestFinished("team.a", &eventsv1.UsageEvent{RequestId: "late"})
	if got := value(t, m.Failures, EventUsage, ReasonShutdown); got != 1 {
		t.Errorf("shutdown failures = %v, want 1", got)
	}
}

// TestOutageLosesNothing: usage events published while NATS is down for
// many ack timeouts (which used to count them lost after MaxAttempts), or
// before the first connection, are each stored exactly once when a server
// returns, and nothing is counted lost. The returning server is a fresh
// one (memory storage, a reset server): the stream is made again.
func TestOutageLosesNothing(t *testing.T) {
	port := testkit.FreePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	nc, err := nats.Connect(url, nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	const ackTimeout = 100 * time.Millisecond
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(ackTimeout))
	if err != nil {
		t.Fatal(err)
	}
	m := newMetrics()
	p := New(nc, js, zerolog.Nop(), m, Options{})
	var ids []string
	publish := func(n int) {
		for range n {
			id := fmt.Sprintf("r%d", len(ids))
			ids = append(ids, id)
			p.RequestFinished("default", &eventsv1.UsageEvent{RequestId: id})
		}
	}
	// Before the first connection.
	publish(20)
	time.Sleep(5 * ackTimeout)
	ns, err := natsembed.Start(natsembed.Options{Port: port})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first events stored", func() bool { return value(t, m.Published, EventUsage) == 20 })
	publish(20)
	// An outage of many ack timeouts, with events published meanwhile,
	// some of them into the dying connection.
	ns.Shutdown()
	publish(50)
	time.Sleep(10 * ackTimeout)
	publish(50)
	ns, err = natsembed.Start(natsembed.Options{Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	publish(10)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatalf("Close: %v (%d held)", err, p.Held())
	}
	for _, reason := range []string{ReasonNATS, ReasonQueueFull, ReasonShutdown, ReasonMarshal} {
		if got := value(t, m.Failures, EventUsage, reason); got != 0 {
			t.Errorf("%v usage events counted lost (%s)", got, reason)
		}
	}
	// The second server started empty: it holds the events published
	// after the first one died, each once.
	seen := storedIDs(t, url)
	for _, id := range ids[40:] {
		if seen[id] != 1 {
			t.Errorf("event %s stored %d times, want 1", id, seen[id])
		}
	}
	// Events the first server acked are gone with it; none is stored twice.
	for id, n := range seen {
		if n != 1 {
			t.Errorf("event %s stored %d times", id, n)
		}
	}
}

// With a spool, events wait on disk through an outage longer than memory
// could hold, and a publisher stopped during it (a gateway restarted)
// hands them to the next one, which sends them when NATS returns: every
// event stored exactly once, none counted lost. A spool full drops, and
// counts, the rest.
func TestSpoolOutliveOutageAndRestart(t *testing.T) {
	port := testkit.FreePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	dir := t.TempDir()
	connect := func() (*nats.Conn, jetstream.JetStream) {
		nc, err := nats.Connect(url, nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		return nc, js
	}
	ns, err := natsembed.Start(natsembed.Options{Port: port})
	if err != nil {
		t.Fatal(err)
	}
	nc, js := connect()
	sp, err := spool.Open(dir, spool.Options{MaxBytes: 64 << 20, SegmentBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	m := newMetrics()
	p := New(nc, js, zerolog.Nop(), m, Options{Spool: sp})
	var ids []string
	publish := func(p *Publisher, n int) {
		for range n {
			id := fmt.Sprintf("s%d", len(ids))
			ids = append(ids, id)
			p.RequestFinished("default", &eventsv1.UsageEvent{RequestId: id, PromptTokens: 100})
		}
	}
	publish(p, 100)
	eventually(t, "the first events stored", func() bool { return value(t, m.Published, EventUsage) == 100 })
	ns.Shutdown() // a long outage: more events than the memory queue holds
	publish(p, QueueSize+5000)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_ = p.Close(ctx) // the gateway stops, NATS still down
	cancel()
	nc.Close()
	if n := value(t, m.Failures, EventUsage, ReasonShutdown) + value(t, m.Failures, EventUsage, ReasonQueueFull); n != 0 {
		t.Fatalf("%v spooled events counted lost at shutdown", n)
	}

	sp, err = spool.Open(dir, spool.Options{MaxBytes: 64 << 20, SegmentBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := sp.Stats(); n < QueueSize {
		t.Fatalf("the spool holds %d events after the restart, want the outage's %d", n, QueueSize+5000)
	}
	nc, js = connect()
	m2 := newMetrics()
	p = New(nc, js, zerolog.Nop(), m2, Options{Spool: sp})
	publish(p, 50)
	ns, err = natsembed.Start(natsembed.Options{Port: port}) // back, empty
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatalf("Close: %v (%d held)", err, p.Held())
	}
	for _, reason := range []string{ReasonNATS, ReasonQueueFull, ReasonShutdown, ReasonMarshal, ReasonSpool, ReasonSpoolFull} {
		if got := value(t, m2.Failures, EventUsage, reason); got != 0 {
			t.Errorf("%v usage events counted lost (%s)", got, reason)
		}
	}
	seen := storedIDs(t, url)
	// The first server (and the first 100) went with it; everything
	// published since is stored once.
	for _, id := range ids[100:] {
		if seen[id] != 1 {
			t.Fatalf("event %s stored %d times, want 1 (%d of %d stored)", id, seen[id], len(seen), len(ids)-100)
		}
	}
	if n, _ := p.Spooled(); n != 0 {
		t.Errorf("%d events left in the spool", n)
	}

	// A full spool drops the rest, counted.
	full, err := spool.Open(t.TempDir(), spool.Options{MaxBytes: 2048})
	if err != nil {
		t.Fatal(err)
	}
	m3 := newMetrics()
	nc3, js3 := connect()
	p = New(nc3, js3, zerolog.Nop(), m3, Options{Spool: full})
	ns.Shutdown()
	publish(p, 100)
	eventually(t, "the spool's refusals counted", func() bool {
		kept, _ := p.Spooled()
		return kept > 0 && kept+int64(value(t, m3.Failures, EventUsage, ReasonSpoolFull)) == 100
	})
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = p.Close(ctx)
}

// storedIDs counts the usage stream's events at url by Nats-Msg-Id.
func storedIDs(t *testing.T, url string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	s, err := js.Stream(ctx, bus.StreamUsage)
	if err != nil {
		t.Fatalf("the usage stream: %v", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		msg, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		seen[msg.Header.Get(jetstream.MsgIDHeader)]++
	}
	return seen
}
