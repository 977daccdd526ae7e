package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/testkit"
)

// dep is a dependency whose state the test sets.
type dep struct{ down atomic.Pointer[string] }

func (f *dep) set(reason string) {
	if reason == "" {
		f.down.Store(nil)
		return
	}
	f.down.Store(&reason)
}

func (f *dep) probe() error {
	if r := f.down.Load(); r != nil {
		return errors.New(*r)
	}
	return nil
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestChecks: a failing optional check is reported and leaves the service
// ready; a failing required one makes it not ready, names itself in the
// plain answer, and both show in ?verbose and the gauge.
func TestChecks(t *testing.T) {
	var nats, redis dep
	reg := prometheus.NewRegistry()
	api, err := NewAPI(APIConfig{
		HTTPAddr: "127.0.0.1:0",
		Metrics:  reg,
		Checks: []Check{
			{Name: "nats", Required: true, Probe: nats.probe},
			{Name: "redis", Probe: redis.probe},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = api.serve() }()
	t.Cleanup(func() { api.stop(time.Now(), zerolog.Nop()) })
	base := "http://" + api.HTTPAddr()

	redis.set("dial tcp 127.0.0.1:6379: connection refused")
	if code, body := get(t, base+"/readyz"); code != http.StatusOK {
		t.Errorf("optional check down: readyz %d %q, want 200", code, body)
	}
	code, body := get(t, base+"/readyz?verbose")
	want := "[+]service ok\n[+]nats ok\n[-]redis (optional): dial tcp 127.0.0.1:6379: connection refused\nreadyz check passed\n"
	if code != http.StatusOK || body != want {
		t.Errorf("verbose: %d\n%s\nwant 200\n%s", code, body, want)
	}

	nats.set("no servers available")
	if code, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "nats: no servers available") {
		t.Errorf("required check down: readyz %d %q, want 503 naming nats", code, body)
	}
	code, body = get(t, base+"/readyz?verbose")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "[-]nats: no servers available\n") || !strings.HasSuffix(body, "readyz check failed\n") {
		t.Errorf("verbose: %d\n%s", code, body)
	}
	_, metrics := get(t, base+"/metrics")
	for _, line := range []string{
		`switchyard_dependency_up{check="nats",required="true"} 0`,
		`switchyard_dependency_up{check="redis",required="false"} 0`,
	} {
		if !strings.Contains(metrics, line) {
			t.Errorf("metrics lack %s", line)
		}
	}
	nats.set("")
	redis.set("")
	_, metrics = get(t, base+"/metrics")
	if !strings.Contains(metrics, `switchyard_dependency_up{check="nats",required="true"} 1`) {
		t.Errorf("metrics after recovery:\n%s", metrics)
	}
	if code, _ := get(t, base+"/readyz"); code != http.StatusOK {
		t.Errorf("recovered: readyz %d", code)
	}
}

func TestChecksRefused(t *testing.T) {
	_, err := NewAPI(APIConfig{HTTPAddr: "127.0.0.1:0", Checks: []Check{
		{Name: "nats", Probe: func() error { return nil }},
		{Name: "nats", Probe: func() error { return nil }},
		{Name: "Bad Name", Probe: func() error { return nil }},
		{Name: "noprobe"},
	}})
	if err == nil {
		t.Fatal("bad checks accepted")
	}
	for _, want := range []string{`"nats" registered twice`, `name "Bad Name"`, `"noprobe" has no probe`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// TestNATSProbe follows a real connection through an outage.
func TestNATSProbe(t *testing.T) {
	var none *NATSConn
	if err := none.Probe(); err == nil || err.Error() != "not connected yet" {
		t.Errorf("nil conn: %v", err)
	}
	port := freePort(t)
	c, err := DialNATS(NATS{URL: fmt.Sprintf("nats://127.0.0.1:%d", port)}, "test", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Probe(); err == nil {
		t.Error("probe passes with NATS down")
	}
	ns := startNATS(t, &server.Options{Port: port})
	testkit.Eventually(t, 15*time.Second, "probe passes once NATS is up", func() bool { return c.Probe() == nil })
	ns.Shutdown()
	testkit.Eventually(t, 15*time.Second, "probe fails after NATS stops", func() bool { return c.Probe() != nil })
	if err := c.Probe(); !strings.Contains(err.Error(), "reconnecting") {
		t.Errorf("probe during outage: %v, want it to say reconnecting", err)
	}
}

// TestRedisWatch: a reachable Redis passes, an unreachable one fails with
// the dial error.
func TestRedisWatch(t *testing.T) {
	url, _ := testkit.Redis(t)
	up, err := OpenRedis(Redis{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	down, err := OpenRedis(Redis{URL: fmt.Sprintf("redis://127.0.0.1:%d", freePort(t))})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	var none *RedisWatch
	if none.Probe() == nil {
		t.Error("nil watch passes")
	}
	wu, wd := WatchRedis(up), WatchRedis(down)
	if wu.Probe() == nil {
		t.Error("passes before the first ping")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = wu.Run(ctx) }()
	go func() { _ = wd.Run(ctx) }()
	testkit.Eventually(t, 5*time.Second, "reachable redis passes", func() bool { return wu.Probe() == nil })
	testkit.Eventually(t, 5*time.Second, "unreachable redis fails with its dial error", func() bool {
		err := wd.Probe()
		return err != nil && strings.Contains(err.Error(), "connection refused")
	})
}
