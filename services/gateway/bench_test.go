package gateway

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testkit"
)

// BenchmarkGatewayOverhead sends the same request to the upstream directly
// and through the gateway (test router over gRPC, NATS publishing on),
// alternating, and reports the latency the gateway adds at p50 and p99.
// Latency is to the last byte of the response. non-stream-ratelimit adds
// the ratelimit step with every kind of limit (two Redis round trips: the
// request at admission, the tokens once routed, and the settlement).
func BenchmarkGatewayOverhead(b *testing.B) {
	for _, tc := range []struct {
		name    string
		body    string
		limited bool
	}{
		{"stream", chatStreamBody(false), false},
		{"non-stream", chatBody, false},
		{"non-stream-ratelimit", chatBody, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var o envOpts
			if tc.limited {
				url, _ := testkit.Redis(b)
				o.cfg = rateLimited(b, url, "tenants:\n  default: {requestsPerMinute: 1000000000, inputTokensPerMinute: 1000000000, outputTokensPerMinute: 1000000000, tokensPerDay: 1000000000000, tokensPerMonth: 1000000000000}\n", nil)
			}
			e := newEnv(b, o)
			up := newVLLM(b, modeOK)
			e.router.setTargets(testModel, up.target("w0"))
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			defer client.CloseIdleConnections()
			do := func(base string) time.Duration { return timedChat(b, client, base, tc.body) }
			for range 50 { // warm connections on both paths
				do(up.srv.URL)
				do(e.url)
			}
			var direct, via []time.Duration
			for b.Loop() {
				direct = append(direct, do(up.srv.URL))
				via = append(via, do(e.url))
			}
			d50, d99 := percentiles(direct)
			g50, g99 := percentiles(via)
			b.ReportMetric(float64(d50.Microseconds()), "direct-p50-µs")
			b.ReportMetric(float64(g50.Microseconds()), "gateway-p50-µs")
			b.ReportMetric(float64((g50 - d50).Microseconds()), "added-p50-µs")
			b.ReportMetric(float64((g99 - d99).Microseconds()), "added-p99-µs")
		})
	}
}

// BenchmarkUsageSpool is the usage spool's cost: two gateways on one
// NATS, their usage events held in memory and in a spool on disk, asked
// turn about.
//
//	go test -run XXX -bench BenchmarkUsageSpool -benchtime 3000x ./services/gateway/
func BenchmarkUsageSpool(b *testing.B) {
	mem := newEnv(b, envOpts{})
	spooled := newEnv(b, envOpts{cfg: func(c *Config) { c.NATS.URL = mem.nats.URL(); c.UsageSpoolDir = b.TempDir() }})
	up := newVLLM(b, modeOK)
	mem.router.setTargets(testModel, up.target("w0"))
	spooled.router.setTargets(testModel, up.target("w0"))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	do := func(base string) time.Duration { return timedChat(b, client, base, chatBody) }
	for range 50 {
		do(mem.url)
		do(spooled.url)
	}
	var m, s []time.Duration
	for b.Loop() {
		m = append(m, do(mem.url))
		s = append(s, do(spooled.url))
	}
	m50, m99 := percentiles(m)
	s50, s99 := percentiles(s)
	b.ReportMetric(float64(m50.Microseconds()), "memory-p50-µs")
	b.ReportMetric(float64(s50.Microseconds()), "spool-p50-µs")
	b.ReportMetric(float64((s50 - m50).Microseconds()), "spool-added-p50-µs")
	b.ReportMetric(float64((s99 - m99).Microseconds()), "spool-added-p99-µs")
}

// timedChat posts a chat completion to base and reads the answer whole,
// and returns how long that took.
func timedChat(b *testing.B, client *http.Client, base, body string) time.Duration {
	t0 := time.Now()
	resp, err := client.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("status %d, %v", resp.StatusCode, err)
	}
	return time.Since(t0)
}

func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)*50/100], s[min(len(s)-1, len(s)*99/100)]
}
