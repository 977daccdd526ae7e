package devenv_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/switchyard-dev/switchyard/internal/devenv"
	"github.com/switchyard-dev/switchyard/internal/testkit"
)

// TestShippedCatalogKVEvents runs `switchyard dev` as `make run` does: the
// shipped catalog on its own addresses (workers on 8000-8002, providers on
// 8100-8101, KV events on 5557-5559, replays on 5567-5569) with the default
// KV events configuration. Only dev's own service ports are free ones; the
// catalog's are fixed, so this test cannot run beside a `make run`.
//
// It checks what the demo exists to show: the workers' KV events reach the
// router's index, so a prompt a worker caches is routed back to it even
// when the router never routed it (no guess of its own can explain the
// hit), and a routed prompt repeated after the router's speculative guess
// expired still lands on its holder.
func TestShippedCatalogKVEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end; skipped in -short")
	}
	cfg := catalogConfig()
	if cfg.Sim.Port == 0 || cfg.Sim.KVEventsConfig != devenv.DefaultKVEventsConfig {
		t.Fatalf("dev's defaults changed (sim port %d, kv events %q): this test must run what make run runs", cfg.Sim.Port, cfg.Sim.KVEventsConfig)
	}
	s := start(t, cfg) // if it cannot bind: is `make run` running? It holds the same ports.
	ctx := context.Background()

	t.Run("banner lists every address", func(t *testing.T) {
		var b strings.Builder
		s.PrintBanner(&b, cfg)
		want := []string{s.GatewayURL() + "/v1", s.GatewayMetricsURL(), s.RouterGRPCAddr(), s.RouterURL(), s.PolicydAddr(), s.KVTrackerURL(), s.NATSURL()}
		for _, u := range []string{s.RouterURL(), s.KVTrackerURL()} {
			want = append(want, u+"/metrics")
		}
		for i := range 3 {
			want = append(want, fmt.Sprintf("http://127.0.0.1:%d", 8000+i), fmt.Sprintf("tcp://127.0.0.1:%d", 5557+i), fmt.Sprintf("tcp://127.0.0.1:%d", 5567+i))
		}
		want = append(want, "http://127.0.0.1:8100", "http://127.0.0.1:8101/v1")
		for _, w := range want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("banner lacks %s:\n%s", w, b.String())
			}
		}
	})

	c := client(s)
	rctx, rcancel := context.WithTimeout(ctx, 90*time.Second)
	defer rcancel()

	// chat sends prompt through the gateway and returns its cached tokens.
	chat := func(prompt string) int64 {
		t.Helper()
		resp, err := c.Chat.Completions.New(rctx, openai.ChatCompletionNewParams{
			Model:     model,
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
			MaxTokens: openai.Int(1),
		})
		if err != nil {
			t.Fatalf("chat: %v", err)
		}
		return resp.Usage.PromptTokensDetails.CachedTokens
	}

	// The qwen workers of the catalog, straight at their own addresses.
	workers := map[string]string{"sim-0": "http://127.0.0.1:8000", "sim-1": "http://127.0.0.1:8001"}
	const perWorker = 3
	storedBefore := metricValue(t, s.KVTrackerURL()+"/metrics", `switchyard_kvtracker_events_total{type="BlockStored"}`)
	var prompts []string
	for id, url := range workers {
		for i := range perWorker {
			p := longPrompt(fmt.Sprintf("%s-direct-%d", id, i))
			direct(t, url, p)
			prompts = append(prompts, p)
		}
	}
	testkit.Eventually(t, 20*time.Second, "KV events in the kvtracker and the router's index", func() bool {
		return metricValue(t, s.KVTrackerURL()+"/metrics", `switchyard_kvtracker_events_total{type="BlockStored"}`) > storedBefore &&
			metricValue(t, s.RouterURL()+"/metrics", "switchyard_router_kv_index_blocks") >= float64(len(prompts)*100)
	})
	// The router never saw these prompts: only the index can send each
	// back to the worker that holds it (by luck: 1 in 2^6).
	for i, p := range prompts {
		if got := chat(p); got < 1000 {
			t.Errorf("prompt %d cached on one worker was served with %d cached tokens: not routed to its holder", i, got)
		}
	}

	// The scenario: routed once, repeated once the router's own
	// guess (kv-speculative-ttl after the predicted first token) is gone.
	var routed []string
	for i := range 2 {
		p := longPrompt(fmt.Sprintf("routed-%d", i))
		if got := chat(p); got != 0 {
			t.Fatalf("a new prompt came back with %d cached tokens", got)
		}
		routed = append(routed, p)
	}
	time.Sleep(devenvSpeculativeTTL + 3*time.Second)
	for i, p := range routed {
		if got := chat(p); got < 1000 {
			t.Errorf("routed prompt %d repeated after the guess expired: %d cached tokens", i, got)
		}
	}
}

// devenvSpeculativeTTL is the router's default --kv-speculative-ttl, which
// dev does not change.
const devenvSpeculativeTTL = 2 * time.Second

// longPrompt is about 1,500 simulator tokens, unique from its first word so
// no two prompts share a block.
func longPrompt(salt string) string {
	var b strings.Builder
	b.WriteString(salt)
	for i := range 1500 {
		fmt.Fprintf(&b, " w%d", i)
	}
	return b.String()
}

// direct sends a chat request to a worker itself, bypassing the gateway.
func direct(t *testing.T, url, prompt string) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}],"max_tokens":1}`, model, prompt)
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("direct request to %s: %s %s", url, resp.Status, b)
	}
}

// metricValue reads one sample, by its exact name and labels, from a
// Prometheus text page; 0 when absent.
func metricValue(t *testing.T, url, series string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("metrics %s: %v", url, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", url, line, err)
			}
			return f
		}
	}
	return 0
}
