package kvtracker

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/natsembed"
	"github.com/switchyard-dev/switchyard/internal/testkit"
)

// TestStartsDuringNATSOutage: a tracker started while NATS is down serves
// /healthz, says on /readyz that it is not ready, and once NATS comes up
// sets up its stream and lease bucket by itself and starts ingesting.
func TestStartsDuringNATSOutage(t *testing.T) {
	e := newEnv(t) // Redis, and a pool name of its own
	port := freePort(t)
	fleet := startFleet(t, simConfig(1, "map"))
	cfg := e.config("r1")
	cfg.NATS.URL = fmt.Sprintf("nats://127.0.0.1:%d", port)
	cfg.Workers = shorthand(fleet)
	tr := startTracker(t, cfg, nil)
	base := "http://" + tr.HTTPAddr()

	if code := testkit.HTTPStatus(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("healthz %d during the outage", code)
	}
	time.Sleep(500 * time.Millisecond)
	if code := testkit.HTTPStatus(t, base+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("readyz %d without NATS", code)
	}
	ns, err := natsembed.Start(natsembed.Options{Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	testkit.Eventually(t, 20*time.Second, "ready once NATS is up", func() bool {
		return testkit.HTTPStatus(t, base+"/readyz") == http.StatusOK
	})
	testkit.Eventually(t, 10*time.Second, "the worker leased", func() bool {
		return tr.metric(t, "switchyard_kvtracker_leases_held") == 1
	})
}

// TestRecoversFromNATSRestart: NATS restarts, and with memory storage the
// lease bucket and the KV stream are gone. The tracker is not ready while
// NATS is down, recreates the bucket and the stream when it is back
// (nobody else does here: no router runs), takes its worker again and
// publishes its deltas, and says so on /readyz.
func TestRecoversFromNATSRestart(t *testing.T) {
	e := newEnv(t) // Redis, and a pool name of its own
	port := testkit.FreePort(t)
	ns, nc := testkit.NATS(t, port)
	var err error
	if e.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	fleet := startFleet(t, simConfig(1, "map"))
	w := fleet.Workers()[0]
	cfg := e.config("r1")
	cfg.NATS.URL = ns.URL()
	cfg.Workers = shorthand(fleet)
	tr := startTracker(t, cfg, nil)
	base := "http://" + tr.HTTPAddr()

	p := newPrompter("restart")
	warmUp(t, e.collect(t), w, "w0", p)
	if code := testkit.HTTPStatus(t, base+"/readyz"); code != http.StatusOK {
		t.Fatalf("readyz %d before the restart", code)
	}

	ns.Shutdown()
	testkit.Eventually(t, 10*time.Second, "not ready while NATS is down", func() bool {
		return testkit.HTTPStatus(t, base+"/readyz") == http.StatusServiceUnavailable
	})
	if body := readyzVerbose(t, base); !strings.Contains(body, "[-]nats") {
		t.Errorf("readyz?verbose during the outage does not name NATS:\n%s", body)
	}
	ns2, err := natsembed.Start(natsembed.Options{Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns2.Shutdown)
	restarted := time.Now()

	testkit.Eventually(t, 30*time.Second, "ready again after the restart", func() bool {
		return testkit.HTTPStatus(t, base+"/readyz") == http.StatusOK
	})
	t.Logf("ready %s after NATS came back", time.Since(restarted).Round(10*time.Millisecond))
	if held := tr.metric(t, "switchyard_kvtracker_leases_held"); held != 1 {
		t.Errorf("ready holding %v leases, want 1", held)
	}
	// The tracker made the stream again; its deltas flow into it.
	waitStream(t, e.js)
	l := e.collect(t)
	sendAndSee(t, l, w, "w0", p)
	t.Logf("deltas flowing %s after NATS came back", time.Since(restarted).Round(10*time.Millisecond))
	if body := readyzVerbose(t, base); strings.Contains(body, "[-]") {
		t.Errorf("a check still fails after the recovery:\n%s", body)
	}
}

// waitStream waits for someone else to create the KV stream.
func waitStream(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	testkit.Eventually(t, 20*time.Second, "the kv stream recreated", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.Stream(ctx, bus.StreamKV)
		return err == nil
	})
}

func readyzVerbose(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/readyz?verbose")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
