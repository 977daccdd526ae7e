package sim

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"
)

// TestFreeze: a frozen worker answers nothing but the fault endpoint, its
// engine stops with a request inside, and the request's TTFT holds the
// freeze once it is thawed; bad freezes are refused in the API's shape.
func TestFreeze(t *testing.T) {
	cfg := fastConfig()
	cfg.TimeScale = 10 // an 8k prefill takes ~300 ms of wall time
	f := startFleet(t, cfg)
	base := f.Workers()[0].URL

	for _, q := range []string{"", "?freeze=soon", "?freeze=-1s", "?freeze=2h"} {
		resp, body := post(t, base+"/sim/v1/fault"+q, "")
		var e struct {
			Error struct{ Message, Param string }
		}
		if err := json.Unmarshal(body, &e); resp.StatusCode != 400 || err != nil || e.Error.Param != "freeze" {
			t.Errorf("fault%s: %d %s", q, resp.StatusCode, body)
		}
	}

	done := make(chan *simChat, 1)
	go func() {
		resp, body := post(t, base+"/v1/chat/completions", chatBody(longText(1, 8000), 1, nil))
		var c simChat
		if resp.StatusCode != 200 || json.Unmarshal(body, &c) != nil || c.SimTiming == nil {
			t.Errorf("chat: %d %s", resp.StatusCode, body)
		}
		done <- &c
	}()
	waitFor(t, func() bool { return gauge(t, base, "vllm:num_requests_running") == 1 })

	resp, body := post(t, base+"/sim/v1/fault?freeze=1h", "")
	var fr FaultResponse
	if err := json.Unmarshal(body, &fr); resp.StatusCode != 200 || err != nil || fr.FrozenUntil == "" {
		t.Fatalf("freeze: %d %s", resp.StatusCode, body)
	}
	frozeAt := time.Now()
	// Nothing else answers: not /health, not /metrics (a scraper times out).
	for _, path := range []string{"/health", "/metrics"} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		_, err := http.DefaultClient.Do(req)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s answered while frozen: %v", path, err)
		}
	}
	select {
	case <-done:
		t.Fatal("a request finished while its worker was frozen")
	default:
	}
	frozenFor := time.Since(frozeAt)
	if err := f.Freeze(0, 0); err != nil {
		t.Fatal(err)
	}
	c := <-done
	// Model time went on during the freeze, as wall time does for a
	// stopped process: the request's first token came after it.
	if min := frozenFor.Seconds() * cfg.TimeScale; c.SimTiming.TTFT < min {
		t.Fatalf("TTFT %.2f model seconds, want at least the freeze's %.2f", c.SimTiming.TTFT, min)
	}
	if resp, err := http.Get(base + "/health"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("health after thaw: %v %v", resp, err)
	}
	resp, body = post(t, base+"/sim/v1/fault?freeze=0", "")
	if resp.StatusCode != 200 || string(body) != "{}\n" {
		t.Fatalf("thaw: %d %s", resp.StatusCode, body)
	}
	if err := f.Freeze(7, time.Second); err == nil {
		t.Fatal("froze a worker that does not exist")
	}
	// A freeze that ends by itself, and a fleet closed while frozen.
	if err := f.Freeze(0, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return f.workers[0].freezer.frozenUntil().IsZero() })
	if err := f.Freeze(0, time.Hour); err != nil {
		t.Fatal(err)
	}
}
