package ratelimit

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/rediskeys"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	"github.com/switchyard-dev/switchyard/internal/usage"
)

// replica is one gateway replica's limiter: its own Redis client, its own
// connection pool.
func replica(t testing.TB, url, prefix string, o Options) *Limiter {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	o.Prefix = prefix
	if o.UsagePrefix == "" {
		o.UsagePrefix = prefix + "usage:" // the meter's keys, as the test writes them
	}
	return NewLimiter(c, o)
}

// testPrefix keeps a test's keys apart from every other run's.
func testPrefix(t testing.TB) string {
	t.Helper()
	p := "switchyard-test:rl:" + rand.Text()[:10] + ":"
	_, c := testkit.Redis(t)
	t.Cleanup(func() {
		ctx := context.Background()
		keys, _ := c.Keys(ctx, p+"*").Result()
		if len(keys) > 0 {
			c.Del(ctx, keys...)
		}
	})
	return p
}

// Three replicas, each with its own client, take a burst of 300
// concurrent requests against a limit of 60 a minute: together they admit
// what one would. The tolerance is ±2; GCRA's drain (one request a
// second at this limit) is the only source of extra admissions, so the
// measured figure is 60 unless the burst lasts over a second.
func TestReplicasAdmitWhatOneWould(t *testing.T) {
	url, _ := testkit.Redis(t)
	prefix := testPrefix(t)
	var reps []*Limiter
	for range 3 {
		reps = append(reps, replica(t, url, prefix, Options{Timeout: 5 * time.Second}))
	}
	scopes := []Scope{{Limits: Limits{RequestsPerMinute: 60}}}
	var admitted, refused atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	t0 := time.Now()
	for i := range 300 {
		wg.Go(func() {
			<-start
			d, err := reps[i%3].Reserve(context.Background(), "team-a", scopes, Cost{Requests: 1})
			if err != nil {
				t.Error(err)
				return
			}
			if d.Local {
				t.Error("decided locally with Redis up")
			}
			if d.Allowed {
				admitted.Add(1)
			} else {
				refused.Add(1)
				if d.Denied != Requests || d.RetryAfter <= 0 || d.RetryAfter > 2*time.Second {
					t.Errorf("refusal: denied %s, retry after %s", d.Denied, d.RetryAfter)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	t.Logf("3 replicas, 60 req/min, burst of 300 concurrent: %d admitted, %d refused, burst lasted %s",
		admitted.Load(), refused.Load(), time.Since(t0).Round(time.Millisecond))
	if a := admitted.Load(); a < 58 || a > 62 {
		t.Errorf("admitted %d, want 60 ± 2", a)
	}
	if admitted.Load()+refused.Load() != 300 {
		t.Errorf("%d answers for 300 requests", admitted.Load()+refused.Load())
	}
}

// Tokens reserved at admission are corrected with the real usage: a
// refund makes room at once, an overrun is charged.
func TestReservationCorrected(t *testing.T) {
	url, _ := testkit.Redis(t)
	for _, store := range []string{"redis", "local"} {
		t.Run(store, func(t *testing.T) {
			l := replica(t, url, testPrefix(t), Options{Timeout: 5 * time.Second})
			if store == "local" {
				l = downLimiter(t, Options{Down: DownOpen, Replicas: 1})
			}
			ctx := context.Background()
			scopes := []Scope{{Limits: Limits{OutputTokensPerMinute: 1000, InputTokensPerMinute: 10_000, TokensPerDay: 50_000}}}
			first, err := l.Reserve(ctx, "t", scopes, Cost{Requests: 1, Input: 100, Output: 600})
			if err != nil || !first.Allowed {
				t.Fatalf("first: %+v %v", first, err)
			}
			second, err := l.Reserve(ctx, "t", scopes, Cost{Requests: 1, Input: 100, Output: 600})
			if err != nil || second.Allowed || second.Denied != OutputTokens {
				t.Fatalf("second, over the output tokens: %+v %v", second, err)
			}
			// The refusal charged nothing: input tokens and the budget
			// are as the first request left them.
			for _, s := range second.States {
				want := map[Dim]int64{OutputTokens: 400, InputTokens: 9900, TokensPerDay: 49_300}[s.Dim]
				if s.Remaining < want-1 || s.Remaining > want+1 {
					t.Errorf("%s remaining %d after the refusal, want %d", s.Dim, s.Remaining, want)
				}
			}
			// The first used 50 output tokens: 550 refunded.
			l.Correct(ctx, first.Reservation, Cost{Requests: 1, Input: 100, Output: 50})
			third, err := l.Reserve(ctx, "t", scopes, Cost{Requests: 1, Input: 100, Output: 600})
			if err != nil || !third.Allowed {
				t.Fatalf("third, after the refund: %+v %v", third, err)
			}
			// The third overran by 400: the bucket is over full, so even
			// one token waits.
			l.Correct(ctx, third.Reservation, Cost{Requests: 1, Input: 100, Output: 1000})
			fourth, err := l.Reserve(ctx, "t", scopes, Cost{Requests: 1, Input: 1, Output: 1})
			if err != nil || fourth.Allowed || fourth.Denied != OutputTokens || fourth.RetryAfter < 2*time.Second {
				t.Fatalf("fourth, after the overrun: %+v %v", fourth, err)
			}
		})
	}
}

// A budget refuses until its window ends; a refund gives the tokens back.
func TestBudget(t *testing.T) {
	url, _ := testkit.Redis(t)
	l := replica(t, url, testPrefix(t), Options{Timeout: 5 * time.Second})
	ctx := context.Background()
	scopes := []Scope{{Limits: Limits{TokensPerDay: 1000, TokensPerMonth: 1500}}}
	a, err := l.Reserve(ctx, "t", scopes, Cost{Input: 300, Output: 500})
	if err != nil || !a.Allowed {
		t.Fatalf("%+v %v", a, err)
	}
	b, err := l.Reserve(ctx, "t", scopes, Cost{Input: 100, Output: 200})
	if err != nil || b.Allowed || b.Denied != TokensPerDay {
		t.Fatalf("over the day's budget: %+v %v", b, err)
	}
	now := time.Now().UTC()
	midnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	if d := midnight.Sub(now) - b.RetryAfter; d < -5*time.Second || d > 5*time.Second {
		t.Errorf("retry after %s, want until midnight UTC (%s)", b.RetryAfter, midnight.Sub(now))
	}
	l.Correct(ctx, a.Reservation, Cost{Input: 300, Output: 100})
	c, err := l.Reserve(ctx, "t", scopes, Cost{Input: 100, Output: 200})
	if err != nil || !c.Allowed {
		t.Fatalf("after the refund: %+v %v", c, err)
	}
	// The month has 1500 - 400 - 300 = 800 left; the day 300.
	for _, s := range c.States {
		if want := map[Dim]int64{TokensPerDay: 300, TokensPerMonth: 800}[s.Dim]; s.Remaining != want {
			t.Errorf("%s remaining %d, want %d", s.Dim, s.Remaining, want)
		}
	}
}

// Tenant-wide and per-model limits are checked together: either refuses.
func TestModelScope(t *testing.T) {
	url, _ := testkit.Redis(t)
	l := replica(t, url, testPrefix(t), Options{Timeout: 5 * time.Second})
	ctx := context.Background()
	tenant := Scope{Limits: Limits{RequestsPerMinute: 10}}
	small := []Scope{tenant, {Model: "small", Limits: Limits{RequestsPerMinute: 2}}}
	big := []Scope{tenant}
	var smallOK, bigOK int
	for range 20 {
		if d, _ := l.Reserve(ctx, "t", small, Cost{Requests: 1}); d.Allowed {
			smallOK++
		}
		if d, _ := l.Reserve(ctx, "t", big, Cost{Requests: 1}); d.Allowed {
			bigOK++
		}
	}
	if smallOK != 2 || bigOK != 8 {
		t.Errorf("admitted %d on the limited model and %d on the rest, want 2 and 8 (10 for the tenant)", smallOK, bigOK)
	}
}

func TestTooLarge(t *testing.T) {
	url, _ := testkit.Redis(t)
	l := replica(t, url, testPrefix(t), Options{})
	_, err := l.Reserve(context.Background(), "t", []Scope{{Limits: Limits{InputTokensPerMinute: 1000}}}, Cost{Input: 1001})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "1001 input_tokens over a limit of 1000") {
		t.Fatalf("err = %v", err)
	}
}

// downLimiter's Redis is a closed port: every command fails at once.
func downLimiter(t testing.TB, o Options) *Limiter {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", testkit.FreePort(t)), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { c.Close() })
	return NewLimiter(c, o)
}

// With Redis unreachable and the limiter open, each of 3 replicas admits
// its third of the limit; closed, it refuses. Either way it is counted
// and logged once, not per request.
func TestRedisDown(t *testing.T) {
	for _, mode := range []DownMode{DownOpen, DownClosed} {
		t.Run(string(mode), func(t *testing.T) {
			var logs testkit.SyncBuffer
			reg := prometheus.NewRegistry()
			l := downLimiter(t, Options{Down: mode, Replicas: 3, Registerer: reg, Log: zerolog.New(&logs)})
			scopes := []Scope{{Limits: Limits{RequestsPerMinute: 60}}}
			var admitted int
			for range 100 {
				d, err := l.Reserve(context.Background(), "t", scopes, Cost{Requests: 1})
				switch mode {
				case DownOpen:
					if err != nil || !d.Local {
						t.Fatalf("open: %+v %v", d, err)
					}
				case DownClosed:
					if !errors.Is(err, ErrUnavailable) || d.Allowed || d.RetryAfter <= 0 {
						t.Fatalf("closed: %+v %v", d, err)
					}
				}
				if d.Allowed {
					admitted++
				}
			}
			want := map[DownMode]int{DownOpen: 20, DownClosed: 0}[mode]
			if admitted != want {
				t.Errorf("admitted %d of 100 at 60/min over 3 replicas, want %d", admitted, want)
			}
			if n := testutil.ToFloat64(l.down.WithLabelValues(string(mode))); n != 100 {
				t.Errorf("redis_down_total{mode=%s} = %v, want 100", mode, n)
			}
			if n := strings.Count(logs.String(), "Redis unreachable"); n != 1 {
				t.Errorf("%d log lines for 100 decisions, want 1:\n%s", n, logs.String())
			}
		})
	}
}

// Redis coming back is used again once the down mark expires.
func TestRedisBack(t *testing.T) {
	url, _ := testkit.Redis(t)
	l := replica(t, url, testPrefix(t), Options{Timeout: 5 * time.Second})
	l.downUntil.Store(time.Now().Add(-time.Millisecond).UnixNano())
	d, err := l.Reserve(context.Background(), "t", []Scope{{Limits: Limits{RequestsPerMinute: 5}}}, Cost{Requests: 1})
	if err != nil || d.Local || !d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
}

// The local share's arithmetic is the script's: the same sequence gets
// the same answers from both.
func TestLocalMatchesScript(t *testing.T) {
	url, _ := testkit.Redis(t)
	r := replica(t, url, testPrefix(t), Options{Timeout: 5 * time.Second})
	loc := downLimiter(t, Options{Down: DownOpen, Replicas: 1})
	scopes := []Scope{{Limits: Limits{RequestsPerMinute: 7, InputTokensPerMinute: 5000, OutputTokensPerMinute: 3000, TokensPerDay: 9000, TokensPerMonth: 20000}}}
	ctx := context.Background()
	t0 := time.Now()
	for i := range 30 {
		c := Cost{Requests: 1, Input: int64(100 + 37*i), Output: int64(250 + 11*i)}
		a, errA := r.Reserve(ctx, "t", scopes, c)
		b, errB := loc.Reserve(ctx, "t", scopes, c)
		if (errA == nil) != (errB == nil) || a.Allowed != b.Allowed || a.Denied != b.Denied || !b.Local {
			t.Fatalf("request %d: redis %+v %v, local %+v %v", i, a, errA, b, errB)
		}
		for j := range a.States {
			// The two ran at different instants: allow what drains
			// meanwhile.
			slack := 1 + int64(float64(a.States[j].Limit)*time.Since(t0).Minutes())
			if d := a.States[j].Remaining - b.States[j].Remaining; d < -slack || d > slack {
				t.Errorf("request %d %s: remaining %d in redis, %d locally", i, a.States[j].Dim, a.States[j].Remaining, b.States[j].Remaining)
			}
		}
		if a.Allowed && i%3 == 0 {
			r.Correct(ctx, a.Reservation, Cost{Requests: 1, Input: c.Input, Output: c.Output / 2})
			loc.Correct(ctx, b.Reservation, Cost{Requests: 1, Input: c.Input, Output: c.Output / 2})
		}
	}
}

// BenchmarkReserve is one admission's cost with a real Redis round trip
// (EVALSHA of the script over a tenant's five limits).
func BenchmarkReserve(b *testing.B) {
	url, _ := testkit.Redis(b)
	l := replica(b, url, testPrefix(b), Options{Timeout: 5 * time.Second})
	scopes := []Scope{{Limits: Limits{RequestsPerMinute: MaxLimit, InputTokensPerMinute: MaxLimit, OutputTokensPerMinute: MaxLimit, TokensPerDay: MaxLimit, TokensPerMonth: MaxLimit}}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		d, err := l.Reserve(ctx, "bench", scopes, Cost{Requests: 1, Input: 500, Output: 200})
		if err != nil || !d.Allowed {
			b.Fatal(d, err)
		}
	}
}

// BenchmarkReserveParallel is the same from many goroutines at once: the
// throughput one replica gets from one Redis.
func BenchmarkReserveParallel(b *testing.B) {
	url, _ := testkit.Redis(b)
	l := replica(b, url, testPrefix(b), Options{Timeout: 5 * time.Second})
	scopes := []Scope{{Limits: Limits{RequestsPerMinute: MaxLimit, InputTokensPerMinute: MaxLimit, OutputTokensPerMinute: MaxLimit}}}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := l.Reserve(context.Background(), "bench", scopes, Cost{Requests: 1, Input: 500, Output: 200}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkReserveLocal is the fail-open path's cost (no Redis).
func BenchmarkReserveLocal(b *testing.B) {
	l := downLimiter(b, Options{Down: DownOpen, Replicas: 3})
	scopes := []Scope{{Limits: Limits{RequestsPerMinute: MaxLimit, InputTokensPerMinute: MaxLimit}}}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = l.Reserve(context.Background(), "bench", scopes, Cost{Requests: 1, Input: 500})
	}
}

// A budget holds against a tenant the larger of its own count and the
// meter's rollup of the window (what yardctl usage shows) plus what is in
// flight: usage the meter counted but this limiter never saw (a replica
// deciding alone while Redis was down) counts; when everything went
// through the limiter its own count rules, whatever the meter's lag; a
// per-model budget reads its model's tokens alone.
func TestBudgetReadsTheMeter(t *testing.T) {
	url, rdb := testkit.Redis(t)
	prefix := testPrefix(t)
	l := replica(t, url, prefix, Options{Timeout: 5 * time.Second})
	ctx := context.Background()
	now := time.Now()
	day := rediskeys.UsageRollup(prefix+"usage:", "t", usage.Day.Name, usage.Day.Start(now))
	month := rediskeys.UsageRollup(prefix+"usage:", "t", usage.Month, usage.MonthStart(now))
	// metered is the meter counting n tokens of model (its rollups keep
	// their sums in the budget fields).
	metered := func(key, model string, n int64) {
		rdb.HIncrBy(ctx, key, usage.BudgetField(model), n)
		rdb.HIncrBy(ctx, key, usage.BudgetField(""), n)
	}
	// The meter counted 900 tokens today (and in the month) that this
	// limiter did not reserve.
	for _, k := range []string{day, month} {
		metered(k, "m", 800)
		metered(k, "other-model", 100)
	}
	scopes := []Scope{{Limits: Limits{TokensPerDay: 1000, TokensPerMonth: 5000}}}
	if d, err := l.Reserve(ctx, "t", scopes, Cost{Input: 150, Output: 50}); err != nil || d.Allowed || d.Denied != TokensPerDay {
		t.Fatalf("900 metered + 200 over a budget of 1000: %+v %v, want the day's budget to refuse", d, err)
	}
	d, err := l.Reserve(ctx, "t", scopes, Cost{Input: 40, Output: 50})
	if err != nil || !d.Allowed || remaining(d, TokensPerDay) != 10 {
		t.Fatalf("900 + 90 of 1000: %+v %v, want allowed with 10 left", d, err)
	}
	// The request finishes with 60 tokens, which the meter then counts.
	l.Correct(ctx, d.Reservation, Cost{Input: 40, Output: 20})
	metered(day, "m", 60)
	if d, _ := l.Reserve(ctx, "t", scopes, Cost{Input: 41}); d.Allowed {
		t.Errorf("after the meter counted them: 960 + 41 > 1000 was admitted")
	}
	if d, _ := l.Reserve(ctx, "t", scopes, Cost{Input: 40}); !d.Allowed {
		t.Errorf("960 + 40 = 1000 was refused")
	}
	// When every token went through this limiter its own count is the
	// larger, exact at every instant: the meter lagging behind it changes
	// nothing.
	other := []Scope{{Limits: Limits{TokensPerMonth: 5000}}}
	if d, _ := l.Reserve(ctx, "u", other, Cost{Input: 4000}); !d.Allowed {
		t.Fatal("4000 of 5000 refused")
	}
	if d, _ := l.Reserve(ctx, "u", other, Cost{Input: 1001}); d.Allowed {
		t.Error("4000 reserved (none metered yet) + 1001 over 5000 was admitted")
	}
	// A per-model budget reads the model's tokens only: 800 of "m".
	perModel := []Scope{{Model: "other-model", Limits: Limits{TokensPerDay: 150}}}
	if d, _ := l.Reserve(ctx, "t", perModel, Cost{Input: 50}); !d.Allowed {
		t.Errorf("other-model's 100 + 50 of 150 was refused")
	}
	if d, _ := l.Reserve(ctx, "t", perModel, Cost{Input: 1}); d.Allowed {
		t.Errorf("other-model's 150 + 1 over 150 was admitted")
	}
}

func remaining(d Decision, dim Dim) int64 {
	for _, s := range d.States {
		if s.Dim == dim {
			return s.Remaining
		}
	}
	return -1
}
