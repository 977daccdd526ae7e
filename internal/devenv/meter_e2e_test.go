package devenv_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	"github.com/switchyard-dev/switchyard/internal/usage"
)

// TestDevMeters: `switchyard dev` with a Redis runs the meter. A tenant's
// requests through the gateway show on its feed (what `nats sub
// 'switchyard.v1.tenant.team-a.>'` prints), in the usage API, and in the
// meter's metrics, with the same totals as the OpenAI client's usage.
func TestDevMeters(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end; skipped in -short")
	}
	redisURL, rdb := testkit.Redis(t)
	prefix := testkit.KeyPrefix(t, rdb, "switchyard-test:dev-usage:")
	cfg := catalogConfig()
	cfg.Sim.Port = 0
	cfg.Sim.KVEventsConfig = ""
	cfg.Auth = true
	cfg.Tenants = []string{"team-a", "team-b"}
	cfg.RedisURL, cfg.UsageKeyPrefix = redisURL, prefix
	s := start(t, cfg)
	if s.MeterURL() == "" {
		t.Fatal("no meter with a Redis")
	}
	nc, err := nats.Connect(s.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	feed := make(chan *nats.Msg, 16)
	if _, err := nc.ChanSubscribe("switchyard.v1.tenant.team-a.>", feed); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	client := openai.NewClient(option.WithBaseURL(s.GatewayURL()+"/v1"), option.WithAPIKey(s.APIKeys()["team-a"]), option.WithMaxRetries(0))
	var input, output int64
	for range 3 {
		resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there, meter")}, MaxTokens: openai.Int(6),
		})
		if err != nil {
			t.Fatal(err)
		}
		input += resp.Usage.PromptTokens
		output += resp.Usage.CompletionTokens
	}
	for i := range 3 {
		select {
		case msg := <-feed:
			var u bus.TenantUsage
			if err := json.Unmarshal(msg.Data, &u); err != nil || u.Tenant != "team-a" || u.Model != model || u.OutputTokens != 6 {
				t.Errorf("feed %s: %s (%v)", msg.Subject, msg.Data, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the feed carried %d of 3 requests", i)
		}
	}

	get := func(url string) string {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", url, resp.StatusCode, b)
		}
		return string(b)
	}
	var a usage.Answer
	if err := json.Unmarshal([]byte(get(s.MeterURL()+"/v1/usage?tenant=team-a&since=1h&by=model")), &a); err != nil {
		t.Fatal(err)
	}
	if len(a.Rows) != 1 || a.Rows[0].Model != model || a.Total.Requests != 3 || a.Total.Output != output ||
		a.Total.CachedInput+a.Total.UncachedInput != input || a.Total.Outcomes["ok"] != 3 {
		t.Errorf("usage %+v; the client counted %d input and %d output tokens", a, input, output)
	}
	metrics := get(s.MeterURL() + "/metrics")
	for _, want := range []string{
		`switchyard_meter_requests_total{model="` + model + `",outcome="ok",target_kind="local",tenant="team-a"} 3`,
		`switchyard_meter_output_tokens_total{model="` + model + `",target_kind="local",tenant="team-a"} ` + strconv.FormatInt(output, 10),
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("meter /metrics lacks %s", want)
		}
	}
}
