package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/natsembed"
	"github.com/switchyard-dev/switchyard/internal/testkit"
)

// TestStartsDuringNATSOutage: a gateway whose NATS is down at start
// serves requests (it used to exit); once NATS is up it makes the usage
// stream and meters, the requests served during the outage included (their
// events waited in the publisher: nats.go refuses messages with headers
// before its first connection).
func TestStartsDuringNATSOutage(t *testing.T) {
	port := testkit.FreePort(t)
	up := newVLLM(t, modeOK)
	e := newEnv(t, envOpts{noNATS: true, cfg: func(c *Config) { c.NATS.URL = fmt.Sprintf("nats://127.0.0.1:%d", port) }})
	e.router.setTargets(testModel, up.target("w0"))
	// Serving, and saying what it misses.
	e.eventually(t, "ready with NATS down (NATS is optional)", func() bool {
		return testkit.HTTPStatus(t, e.url+"/readyz") == http.StatusOK
	})
	verbose := scrape(t, e.url+"/readyz?verbose")
	if !strings.Contains(verbose, "[+]router ok") || !strings.Contains(verbose, "[-]nats") || !strings.Contains(verbose, "[-]usage-stream") {
		t.Errorf("/readyz?verbose does not say NATS is missing:\n%s", verbose)
	}
	deps := grepLines(scrape(t, e.metricsURL), "switchyard_dependency_up{")
	for _, want := range []string{`check="nats"`, `check="usage-stream"`, `check="router"`} {
		if !strings.Contains(deps, want) {
			t.Errorf("switchyard_dependency_up lacks %s:\n%s", want, deps)
		}
	}
	if !strings.Contains(grepLines(deps, `check="nats"`), "} 0") || !strings.Contains(grepLines(deps, `check="router"`), "} 1") {
		t.Errorf("switchyard_dependency_up with NATS down:\n%s", deps)
	}
	send := func() string {
		t.Helper()
		resp := e.post(t, "/v1/chat/completions", `{"model":"test-model","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`, nil)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request: %d %s", resp.StatusCode, b)
		}
		return resp.Header.Get(RequestIDHeader)
	}
	early := send()

	ns, err := natsembed.Start(natsembed.Options{Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	if e.nc, err = nats.Connect(ns.URL()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.nc.Close)
	if e.js, err = jetstream.New(e.nc); err != nil {
		t.Fatal(err)
	}
	// Once the gateway is connected, it makes the usage stream.
	e.eventually(t, "the usage stream", func() bool {
		_, err := e.js.Stream(context.Background(), bus.StreamUsage)
		return err == nil
	})
	for _, id := range []string{early, send()} {
		if ev := e.usageEvent(t, id); ev.GetStatusCode() != http.StatusOK {
			t.Errorf("usage event %v", ev)
		}
	}
}

// TestNATSOutageLosesNoUsage: NATS stopped under load for many ack
// timeouts (three of which used to count an event lost, while nats.go's
// reconnect buffer delivered it later) and restarted: every request has
// exactly one usage event, and the gateway counts none lost.
func TestNATSOutageLosesNoUsage(t *testing.T) {
	defer func(d time.Duration) { usageAckTimeout = d }(usageAckTimeout)
	usageAckTimeout = 100 * time.Millisecond
	port := testkit.FreePort(t)
	store := t.TempDir()
	ns, err := natsembed.Start(natsembed.Options{Port: port, StoreDir: store})
	if err != nil {
		t.Fatal(err)
	}
	up := newVLLM(t, modeOK)
	e := newEnv(t, envOpts{noNATS: true, cfg: func(c *Config) { c.NATS.URL = ns.URL() }})
	e.router.setTargets(testModel, up.target("w0"))
	var ids []string
	send := func(n int) { ids = append(ids, sendChats(t, e, n)...) }
	send(20)
	ns.Shutdown()
	send(20)
	time.Sleep(10 * usageAckTimeout) // > MaxAttempts ack timeouts
	send(20)
	ns, err = natsembed.Start(natsembed.Options{Port: port, StoreDir: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	send(10)
	if e.nc, err = nats.Connect(ns.URL()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.nc.Close)
	if e.js, err = jetstream.New(e.nc); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e.eventually(t, "every usage event stored", func() bool {
		s, err := e.js.Stream(ctx, bus.StreamUsage)
		if err != nil {
			return false
		}
		info, err := s.Info(ctx)
		return err == nil && info.State.Msgs >= uint64(len(ids))
	})
	time.Sleep(5 * usageAckTimeout) // a duplicate would land by now
	seen := storedUsageIDs(t, e.js)
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("request %s has %d usage events, want 1", id, seen[id])
		}
	}
	if len(seen) != len(ids) {
		t.Errorf("%d usage events for %d requests", len(seen), len(ids))
	}
	metrics := scrape(t, e.metricsURL)
	if strings.Contains(metrics, "switchyard_gateway_event_publish_failures_total{") {
		t.Errorf("events counted lost:\n%s", grepLines(metrics, "publish_failures"))
	}
}

// TestUsageSpoolOutlivesRestart: with --usage-spool-dir, requests served
// while NATS is down wait on disk; the gateway stopped during the outage
// and a new one started on the same directory sends them once NATS is
// back: every request has exactly one usage event, none counted lost.
func TestUsageSpoolOutlivesRestart(t *testing.T) {
	defer func(d time.Duration) { usageAckTimeout = d }(usageAckTimeout)
	usageAckTimeout = 100 * time.Millisecond
	port := testkit.FreePort(t)
	store, spoolDir := t.TempDir(), t.TempDir()
	ns, err := natsembed.Start(natsembed.Options{Port: port, StoreDir: store})
	if err != nil {
		t.Fatal(err)
	}
	up := newVLLM(t, modeOK)
	withSpool := func(c *Config) {
		c.NATS.URL = fmt.Sprintf("nats://127.0.0.1:%d", port)
		c.UsageSpoolDir = spoolDir
		// Gives up on NATS soon (the publisher's flush is 4/5 of it): the
		// spool keeps the rest. The fifth left is the publisher's own
		// close, the spool's fsync among it, which under load took over
		// the 60 ms a 300 ms timeout leaves it, failing Serve.
		c.ShutdownTimeout = 2 * time.Second
	}
	var ids []string
	send := func(e *env, n int) { ids = append(ids, sendChats(t, e, n)...) }
	first := newEnv(t, envOpts{noNATS: true, cfg: withSpool})
	first.router.setTargets(testModel, up.target("w0"))
	send(first, 10)
	// All ten acked, not merely none spooled yet: the spool is written
	// off the requests' path, so it may still be empty when they return.
	first.eventually(t, "the first events acked", func() bool {
		m := scrape(t, first.metricsURL)
		return strings.Contains(m, `switchyard_gateway_events_published_total{event="usage"} 10`+"\n") &&
			strings.Contains(m, "switchyard_gateway_usage_spool_events 0\n")
	})
	ns.Shutdown()
	send(first, 40)
	// The spool is written off the requests' path: the last events may
	// reach it a moment after their responses.
	first.eventually(t, "40 events spooled", func() bool {
		return strings.Contains(scrape(t, first.metricsURL), "switchyard_gateway_usage_spool_events 40\n")
	})
	first.cancel() // stopped during the outage
	if err := <-first.served; err != nil {
		t.Fatal(err)
	}
	first.served <- nil // for its cleanup

	second := newEnv(t, envOpts{noNATS: true, cfg: withSpool})
	second.router.setTargets(testModel, up.target("w0"))
	send(second, 10)
	ns, err = natsembed.Start(natsembed.Options{Port: port, StoreDir: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	nc, err := nats.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	second.eventually(t, "every usage event stored", func() bool {
		s, err := js.Stream(ctx, bus.StreamUsage)
		if err != nil {
			return false
		}
		info, err := s.Info(ctx)
		return err == nil && info.State.Msgs >= uint64(len(ids))
	})
	time.Sleep(5 * usageAckTimeout)
	seen := storedUsageIDs(t, js)
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("request %s has %d usage events, want 1", id, seen[id])
		}
	}
	if len(seen) != len(ids) {
		t.Errorf("%d usage events for %d requests", len(seen), len(ids))
	}
	if m := scrape(t, second.metricsURL); strings.Contains(m, "switchyard_gateway_event_publish_failures_total{") {
		t.Errorf("events counted lost:\n%s", grepLines(m, "publish_failures"))
	}
}

// storedUsageIDs counts the usage stream's events by Nats-Msg-Id.
// sendChats sends n chat completions that must succeed and returns their
// request ids.
func sendChats(t *testing.T, e *env, n int) []string {
	t.Helper()
	ids := make([]string, 0, n)
	for range n {
		resp := e.post(t, "/v1/chat/completions", chatStreamBody(false), nil)
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request: %d", resp.StatusCode)
		}
		ids = append(ids, resp.Header.Get(RequestIDHeader))
	}
	return ids
}

func storedUsageIDs(t *testing.T, js jetstream.JetStream) map[string]int {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, bus.StreamUsage)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		seen[m.Header.Get(jetstream.MsgIDHeader)]++
	}
	return seen
}
