package kvtracker

import (
	"fmt"
	"net/http"
	"testing"
	"time"

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
