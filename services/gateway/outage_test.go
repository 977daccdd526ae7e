package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/natsembed"
	"github.com/switchyard-dev/switchyard/internal/testkit"
)

// TestStartsDuringNATSOutage: a gateway whose NATS is down at start
// serves requests (it used to exit); once NATS is up it makes the usage
// stream and meters. The events of requests served during the outage are
// not kept: before its first connection nats.go refuses messages with
// headers, and the gateway has no spool of its own yet.
func TestStartsDuringNATSOutage(t *testing.T) {
	port := testkit.FreePort(t)
	up := newVLLM(t, modeOK)
	e := newEnv(t, envOpts{noNATS: true, cfg: func(c *Config) { c.NATS.URL = fmt.Sprintf("nats://127.0.0.1:%d", port) }})
	e.router.setTargets(testModel, up.target("w0"))
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
	send()

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
	id := send()
	if ev := e.usageEvent(t, id); ev.GetStatusCode() != http.StatusOK {
		t.Errorf("usage event %v", ev)
	}
}
