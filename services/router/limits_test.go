package router_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/sim"
	"github.com/switchyard-dev/switchyard/services/gateway"
	"github.com/switchyard-dev/switchyard/services/router"
)

// TestEndToEndLimits: requests over the router's per-request limits,
// sent to a real gateway over HTTP, get a 400 in the OpenAI error shape
// naming the limit; a request within them is served.
func TestEndToEndLimits(t *testing.T) {
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)
	fleet := startSim(t, log, func(sc *sim.Config) { sc.TimeScale, sc.DefaultMaxTokens = 100, 1 })
	tr := startRouter(t, func(c *router.Config) {
		c.Endpoints = "sim-0=" + fleet.Workers()[0].URL
		c.MaxMessages, c.MaxPromptBytes, c.MaxTemplateBytes = 100, 4096, 4096
	})
	gc := gateway.DefaultConfig()
	gc.Addr, gc.MetricsAddr, gc.RouterAddr, gc.NATS.URL = "127.0.0.1:0", "127.0.0.1:0", tr.srv.GRPCAddr(), ""
	gw, err := gateway.New(gc, log)
	if err != nil {
		t.Fatal(err)
	}
	serveUntilCleanup(t, "gateway", gw.Serve)
	waitHTTPReady(t, "http://"+gw.Addr()+"/readyz")

	body := func(n int, content string) string {
		msgs := make([]map[string]string, n)
		for i := range msgs {
			msgs[i] = map[string]string{"role": "user", "content": content}
		}
		b, _ := json.Marshal(map[string]any{"model": sim.DefaultServedModelName, "messages": msgs, "max_tokens": 1})
		return string(b)
	}
	tests := []struct {
		name, body string
		status     int
		wantMsg    []string
	}{
		{"within the limits", body(10, "hello"), http.StatusOK, nil},
		{"too many messages", body(101, "a"), http.StatusBadRequest,
			[]string{"101 messages, more than the limit of 100", "--max-messages"}},
		{"too much prompt text", body(2, strings.Repeat("x", 3000)), http.StatusBadRequest,
			[]string{"prompt text is 6008 bytes, more than the limit of 4096", "--max-prompt-bytes"}},
		{"rendered prompt too large", body(99, strings.Repeat("y", 30)), http.StatusBadRequest,
			[]string{"chat template exceeds the limit of 4096 bytes", "--max-template-bytes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post("http://"+gw.Addr()+"/v1/chat/completions", "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var out struct {
				Error *struct {
					Message string `json:"message"`
					Type    string `json:"type"`
				} `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d (%+v), want %d", resp.StatusCode, out.Error, tt.status)
			}
			if tt.status == http.StatusOK {
				return
			}
			if out.Error == nil || out.Error.Type != "invalid_request_error" {
				t.Fatalf("error %+v, want an invalid_request_error", out.Error)
			}
			for _, w := range tt.wantMsg {
				if !strings.Contains(out.Error.Message, w) {
					t.Errorf("message %q lacks %q", out.Error.Message, w)
				}
			}
		})
	}
}
