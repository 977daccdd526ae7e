package kvtracker

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/testkit"
)

// TestSilentStreamWarns replays the dev-catalog mistake: a worker whose
// kv-events-config endpoint has no wildcard connects instead of binding, so
// the tracker's dial is refused. The tracker must say so (log and gauge);
// once the worker binds, the connection and the events show, and a
// connected stream that stays quiet gets its own, milder warning.
func TestSilentStreamWarns(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end; skipped in -short")
	}
	e := newEnv(t)
	port := freePort(t)
	endpoint := fmt.Sprintf("tcp://127.0.0.1:%d", port)
	cfg := e.config("r1")
	cfg.SilenceWarning = 300 * time.Millisecond
	cfg.WorkerSpecs = []WorkerSpec{{ID: "w0", KVEndpoint: endpoint}}

	logs := &testkit.SyncBuffer{}
	tr, err := New(cfg, zerolog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	tr.leaseTick = 100 * time.Millisecond
	testkit.Serve(t, tr.Serve)

	// The wrong topology: the worker connects to the address the tracker
	// dials. Requests are served, nothing arrives.
	wrong := simConfig(1, "map")
	wrong.KVEventsConfig = kvEventsConfig(endpoint, "")
	wrongFleet := startFleet(t, wrong)
	p := newPrompter("silence")
	const unreachable = "kv events endpoint not reachable"
	eventually(t, 10*time.Second, func() error {
		prompt, _ := p.next()
		complete(t, wrongFleet.Workers()[0], prompt)
		if strings.Count(logs.String(), unreachable) == 0 {
			return errors.New("no unreachable warning yet")
		}
		return nil
	})
	if got := tr.metric(t, "switchyard_kvtracker_worker_connected", "worker", "w0"); got != 0 {
		t.Errorf("connected = %v while the dial is refused", got)
	}
	if got := tr.metric(t, "switchyard_kvtracker_events_total"); got != 0 {
		t.Errorf("%v events ingested from a worker nobody could reach", got)
	}
	// Readiness names the worker and why, without failing the tracker: its
	// other workers (none here) are still served.
	base := "http://" + tr.HTTPAddr()
	if body := readyzVerbose(t, base); !strings.Contains(body, "[-]kv-events (optional): 1 of 1 workers ingested here not flowing: "+e.pool+"/w0: kv events endpoint "+endpoint+" not reachable") {
		t.Errorf("readyz?verbose while the endpoint is unreachable:\n%s", body)
	}
	if code := testkit.HTTPStatus(t, base+"/readyz"); code != http.StatusOK {
		t.Errorf("readyz %d: one worker's stream made the tracker not ready", code)
	}
	time.Sleep(4 * cfg.SilenceWarning)
	if n := strings.Count(logs.String(), unreachable); n != 1 {
		t.Errorf("unreachable warning logged %d times during one silence, want once", n)
	}
	if err := wrongFleet.Close(); err != nil {
		t.Fatal(err)
	}

	// vLLM's wildcard endpoint binds (on the simulator's --host).
	right := simConfig(1, "map")
	right.KVEventsConfig = kvEventsConfig(fmt.Sprintf("tcp://*:%d", port), "")
	rightFleet := startFleet(t, right)
	eventually(t, 10*time.Second, func() error {
		if tr.metric(t, "switchyard_kvtracker_worker_connected", "worker", "w0") != 1 {
			return errors.New("not connected yet")
		}
		return nil
	})
	const quiet = "no kv events from worker"
	eventually(t, 10*time.Second, func() error {
		if strings.Count(logs.String(), quiet) == 0 {
			return errors.New("no warning for a connected, quiet stream")
		}
		return nil
	})
	if body := readyzVerbose(t, base); !strings.Contains(body, e.pool+"/w0: no kv events yet") {
		t.Errorf("readyz?verbose while connected and quiet:\n%s", body)
	}
	before := time.Now()
	eventually(t, 10*time.Second, func() error {
		prompt, _ := p.next()
		complete(t, rightFleet.Workers()[0], prompt)
		if tr.metric(t, "switchyard_kvtracker_events_total", "type", "BlockStored") == 0 {
			return errors.New("no BlockStored ingested")
		}
		return nil
	})
	if body := readyzVerbose(t, base); !strings.Contains(body, "[+]kv-events (optional) ok") {
		t.Errorf("readyz?verbose once events flow:\n%s", body)
	}
	last := tr.metric(t, "switchyard_kvtracker_worker_last_event_timestamp_seconds", "worker", "w0")
	if last < float64(before.Add(-time.Second).Unix()) {
		t.Errorf("last event timestamp %v, want about %v", last, before.Unix())
	}
}
