package gateway

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/apikey"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	"github.com/switchyard-dev/switchyard/services/gateway/ratelimit"
)

// rateLimited configures a gateway with the ratelimit step, the given
// limits file and a Redis key prefix of the test's own.
func rateLimited(t testing.TB, redisURL, limits string, more func(*Config)) func(*Config) {
	t.Helper()
	p := "switchyard-test:gw-rl:" + rand.Text()[:10] + ":"
	old := rateLimitPrefix
	rateLimitPrefix = p
	t.Cleanup(func() { rateLimitPrefix = old })
	if _, c := testkit.Redis(t); c != nil {
		t.Cleanup(func() {
			keys, _ := c.Keys(context.Background(), p+"*").Result()
			if len(keys) > 0 {
				c.Del(context.Background(), keys...)
			}
		})
	}
	file := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(file, []byte(limits), 0o600); err != nil {
		t.Fatal(err)
	}
	return func(c *Config) {
		c.Admission = "apikey,default-tenant,ratelimit"
		c.Redis.URL = redisURL
		c.RateLimit.LimitsFile = file
		if more != nil {
			more(c)
		}
	}
}

// TestRateLimitRequests: over its requests per minute, the tenant gets
// 429 with Retry-After and OpenAI's x-ratelimit headers, and nothing is
// routed.
func TestRateLimitRequests(t *testing.T) {
	url, _ := testkit.Redis(t)
	up := newVLLM(t, modeOK)
	e := newEnv(t, envOpts{noNATS: true, cfg: rateLimited(t, url, "tenants:\n  default:\n    requestsPerMinute: 3\n", nil)})
	e.router.setTargets(testModel, up.target("w0"))
	var ok, limited int
	for range 5 {
		resp := e.post(t, "/v1/chat/completions", chatBody, nil)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			ok++
			// An answer carries the limit's state, as OpenAI's do.
			h := resp.Header
			if h.Get("x-ratelimit-limit-requests") != "3" || h.Get("x-ratelimit-remaining-requests") != strconv.Itoa(3-ok) || h.Get("x-ratelimit-reset-requests") == "" {
				t.Errorf("answer %d's rate-limit headers: %v", ok, h)
			}
		case http.StatusTooManyRequests:
			limited++
			h := resp.Header
			if h.Get("Retry-After") == "" || h.Get("x-ratelimit-limit-requests") != "3" || h.Get("x-ratelimit-remaining-requests") != "0" || h.Get("x-ratelimit-reset-requests") == "" {
				t.Errorf("429 headers: %v", h)
			}
		default:
			t.Errorf("status %d", resp.StatusCode)
		}
	}
	if ok != 3 || limited != 2 {
		t.Errorf("%d served, %d limited; want 3 and 2", ok, limited)
	}
	if n := len(e.router.calls()); n != 3 {
		t.Errorf("%d requests routed, want 3", n)
	}
	resp := e.post(t, "/v1/chat/completions", chatBody, nil)
	d := decodeError(t, resp)
	if resp.StatusCode != http.StatusTooManyRequests || d.Type != "rate_limit_error" || d.Code == nil || *d.Code != "rate_limit_exceeded" || !strings.Contains(d.Message, "3 requests per minute") {
		t.Errorf("429 body: %d %+v", resp.StatusCode, d)
	}
}

// TestRateLimitTokens: output tokens are reserved from max_tokens and
// settled with the usage (3 tokens): room comes back at once. A request
// larger than the limit is refused as one that can never fit.
func TestRateLimitTokens(t *testing.T) {
	url, _ := testkit.Redis(t)
	up := newVLLM(t, modeOK)
	e := newEnv(t, envOpts{noNATS: true, cfg: rateLimited(t, url, `
tenants:
  default:
    outputTokensPerMinute: 100
    models:
      test-model: {inputTokensPerMinute: 1000}
`, nil)})
	e.router.setTargets(testModel, up.target("w0"))
	body := func(max int) string {
		return fmt.Sprintf(`{"model":"test-model","messages":[{"role":"user","content":"hi"}],"max_tokens":%d}`, max)
	}
	// Each asks 60 of 100 and uses 3: without the refund the second
	// would be refused.
	for i := range 4 {
		resp := e.post(t, "/v1/chat/completions", body(60), nil)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %d %v", i, resp.StatusCode, resp.Header)
		}
		// 60 of 100 reserved for this one; the earlier ones settled at 3.
		if h := resp.Header; h.Get("x-ratelimit-limit-tokens") != "1000" || h.Get("x-ratelimit-remaining-tokens") == "" {
			t.Errorf("request %d's token headers: %v", i, h)
		}
		e.eventually(t, "the reservation settled", func() bool { return e.gw.settling.Load() == 0 && e.gw.inflight.Load() == 0 })
	}
	resp := e.post(t, "/v1/chat/completions", body(101), nil)
	d := decodeError(t, resp)
	if resp.StatusCode != http.StatusBadRequest || d.Code == nil || *d.Code != "request_exceeds_rate_limit" || !strings.Contains(d.Message, "101 output_tokens over a limit of 100") {
		t.Errorf("too large: %d %+v", resp.StatusCode, d)
	}
	// Two streams holding 60 each: the second waits (refused) until the
	// first settles.
	gated := newVLLM(t, modeGateAfter1)
	e.router.setTargets(testModel, gated.target("w1"))
	first := make(chan int, 1)
	go func() {
		r := e.post(t, "/v1/chat/completions", `{"model":"test-model","stream":true,"messages":[{"role":"user","content":"hi"}],"max_tokens":60}`, nil)
		_, _ = r.Body.Read(make([]byte, 1))
		first <- r.StatusCode
		defer r.Body.Close()
		<-gated.gate
	}()
	e.eventually(t, "the first stream reserved", func() bool { return gated.hits.Load() == 1 })
	resp = e.post(t, "/v1/chat/completions", body(60), nil)
	d = decodeError(t, resp)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("x-ratelimit-limit-tokens") != "100" || resp.Header.Get("x-ratelimit-remaining-tokens") == "" {
		t.Errorf("second while the first holds 60: %d %+v %v", resp.StatusCode, d, resp.Header)
	}
	close(gated.gate)
	if s := <-first; s != http.StatusOK {
		t.Errorf("first stream: %d", s)
	}
}

// TestRateLimitRedisDown: Redis unreachable, the gateway neither fails
// nor lets everything through: open admits this replica's share, closed
// refuses with 503; both are counted.
func TestRateLimitRedisDown(t *testing.T) {
	for _, mode := range []ratelimit.DownMode{ratelimit.DownOpen, ratelimit.DownClosed} {
		t.Run(string(mode), func(t *testing.T) {
			up := newVLLM(t, modeOK)
			e := newEnv(t, envOpts{noNATS: true, cfg: rateLimited(t, "redis://"+closedAddr(t), "tenants:\n  default:\n    requestsPerMinute: 6\n", func(c *Config) {
				c.RateLimit.RedisDown = mode
				c.RateLimit.Replicas = 3
			})})
			e.router.setTargets(testModel, up.target("w0"))
			codes := map[int]int{}
			for range 5 {
				resp := e.post(t, "/v1/chat/completions", chatBody, nil)
				resp.Body.Close()
				codes[resp.StatusCode]++
				if resp.StatusCode != http.StatusOK && resp.Header.Get("Retry-After") == "" {
					t.Errorf("%d without Retry-After", resp.StatusCode)
				}
			}
			want := map[ratelimit.DownMode]map[int]int{
				ratelimit.DownOpen:   {http.StatusOK: 2, http.StatusTooManyRequests: 3},
				ratelimit.DownClosed: {http.StatusServiceUnavailable: 5},
			}[mode]
			if fmt.Sprint(codes) != fmt.Sprint(want) {
				t.Errorf("statuses %v, want %v", codes, want)
			}
			m := scrape(t, e.metricsURL)
			if !strings.Contains(m, `switchyard_gateway_ratelimit_redis_down_total{mode="`+string(mode)+`"} 5`) {
				t.Errorf("metrics:\n%s", grepLines(m, "ratelimit"))
			}
			// Ready (Redis is optional), saying what is missing and what
			// that means for the limits.
			e.eventually(t, "redis reported down", func() bool {
				return strings.Contains(scrape(t, e.url+"/readyz?verbose"), "[-]redis")
			})
			if st := testkit.HTTPStatus(t, e.url+"/readyz"); st != http.StatusOK {
				t.Errorf("/readyz %d with Redis down, want 200", st)
			}
			if v := scrape(t, e.url+"/readyz?verbose"); !strings.Contains(v, map[ratelimit.DownMode]string{
				ratelimit.DownOpen: "enforced per replica", ratelimit.DownClosed: "cannot be checked"}[mode]) {
				t.Errorf("/readyz?verbose:\n%s", v)
			}
		})
	}
}

func TestRateLimitConfig(t *testing.T) {
	for _, tt := range []struct {
		name string
		set  func(*Config)
		want string
	}{
		{"no redis", func(c *Config) { c.Admission = "default-tenant,ratelimit" }, "redis-url: required by the ratelimit admission step"},
		{"first", func(c *Config) { c.Admission = "ratelimit,default-tenant"; c.Redis.URL = "redis://x:6379" }, "ratelimit must come after"},
		{"before the tenant", func(c *Config) { c.Admission = "apikey,ratelimit,default-tenant"; c.Redis.URL = "redis://x:6379" }, "ratelimit must come after default-tenant"},
		{"bad mode", func(c *Config) {
			c.Admission, c.Redis.URL, c.RateLimit.RedisDown = "default-tenant,ratelimit", "redis://x:6379", "maybe"
		}, `ratelimit-redis-down "maybe": want open or closed`},
		{"replicas", func(c *Config) {
			c.Admission, c.Redis.URL, c.RateLimit.Replicas = "default-tenant,ratelimit", "redis://x:6379", 0
		}, "ratelimit-replicas 0"},
	} {
		c := DefaultConfig()
		tt.set(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}

// TestRateLimitFromGatewayBackend: limits on a GatewayBackend tenant
// entry (policyd, files mode) hold that tenant, found by its API key; a
// tenant without limits is not held.
func TestRateLimitFromGatewayBackend(t *testing.T) {
	url, _ := testkit.Redis(t)
	keyA, keyB := apikey.Generate(), apikey.Generate()
	dir := t.TempDir()
	doc := keyedCatalog(map[string]string{"team-a": keyA, "team-b": keyB}) + "    limits:\n      requestsPerMinute: 2\n"
	if err := os.WriteFile(filepath.Join(dir, "gateway.yaml"), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	pdAddr := servePolicydFiles(t, dir)
	up := newVLLM(t, modeOK)
	e := newEnv(t, envOpts{noNATS: true, cfg: rateLimited(t, url, "", func(c *Config) { c.PolicydAddr, c.GatewayBackend = pdAddr, "keyed" })})
	e.router.setTargets(testModel, up.target("w0"))
	e.eventually(t, "policy snapshot", func() bool { p := e.gw.catalog.program(); return p != nil && p.AuthKeys() == 2 })
	count := func(key string) map[int]int {
		codes := map[int]int{}
		for range 4 {
			resp := e.post(t, "/v1/chat/completions", chatBody, map[string]string{"Authorization": "Bearer " + key})
			resp.Body.Close()
			codes[resp.StatusCode]++
		}
		return codes
	}
	// team-b is the last tenant of keyedCatalog: the limits are its.
	if got := count(keyB); got[http.StatusOK] != 2 || got[http.StatusTooManyRequests] != 2 {
		t.Errorf("team-b (2 a minute): %v", got)
	}
	if got := count(keyA); got[http.StatusOK] != 4 {
		t.Errorf("team-a (no limits): %v", got)
	}
}

// TestRateLimitAnthropic: a Messages client over its limit gets
// Anthropic's 429 rate_limit_error with anthropic-ratelimit-* headers,
// and its tokens are reserved from its max_tokens like any request.
func TestRateLimitAnthropic(t *testing.T) {
	url, _ := testkit.Redis(t)
	up := newVLLM(t, modeOK)
	e := newEnv(t, envOpts{noNATS: true, cfg: rateLimited(t, url, "tenants:\n  default:\n    requestsPerMinute: 1\n    outputTokensPerMinute: 1000\n", nil)})
	e.router.setTargets(testModel, up.target("w0"))
	hdr := map[string]string{"anthropic-version": "2023-06-01"}
	resp := e.post(t, "/v1/messages", `{"model":"test-model","max_tokens":2000,"messages":[{"role":"user","content":"hi"}]}`, hdr)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"type":"error"`) || !strings.Contains(string(body), "2000 output_tokens over a limit of 1000") {
		t.Errorf("max_tokens over the limit: %d %s", resp.StatusCode, body)
	}
	resp = e.post(t, "/v1/messages", `{"model":"test-model","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, hdr)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), `"rate_limit_error"`) {
		t.Fatalf("second request in the minute: %d %s", resp.StatusCode, body)
	}
	h := resp.Header
	if h.Get("Retry-After") == "" || h.Get("anthropic-ratelimit-requests-limit") != "1" || h.Get("anthropic-ratelimit-requests-remaining") != "0" || h.Get("anthropic-ratelimit-requests-reset") == "" || h.Get("x-ratelimit-limit-requests") != "" {
		t.Errorf("headers: %v", h)
	}
}
