package drills

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard-dev/switchyard/internal/bus"
	sfleet "github.com/switchyard-dev/switchyard/internal/fleet"
	"github.com/switchyard-dev/switchyard/internal/rediskeys"
)

// until polls cond every 50 ms until it holds and returns the time since
// from; it fails the test after within.
func until(t *testing.T, from time.Time, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(from)
}

// steady asserts that every request that started in [from, to) ended ok.
func steady(t *testing.T, l *load, from, to time.Time, what string) int {
	t.Helper()
	rs := between(l.snapshot(), from, to)
	if bad := failures(rs); len(bad) > 0 {
		t.Errorf("%s: %d of %d requests failed:\n%s", what, len(bad), len(rs), describe(bad))
	}
	if len(rs) == 0 {
		t.Errorf("%s: no request finished", what)
	}
	return len(rs)
}

// routerDeltas is the KV deltas a router has applied to its index.
func routerDeltas(s *service) float64 {
	v, _, _ := metric(s.httpURL+"/metrics", "switchyard_router_kv_deltas_total", `result="applied"`)
	return v
}

// indexFollows says whether every router applied KV deltas since the
// counts in before were taken.
func (f *fleet) indexFollows(before []float64) bool {
	for i, r := range f.routers {
		if routerDeltas(r) <= before[i] {
			return false
		}
	}
	return true
}

func (f *fleet) routerDeltas() []float64 {
	var out []float64
	for _, r := range f.routers {
		out = append(out, routerDeltas(r))
	}
	return out
}

// usageAfter says whether a usage event of a request that started after
// from is in the stream: usage flows again.
func (f *fleet) usageAfter(l *load, from time.Time) bool {
	var ids []string
	for _, r := range l.snapshot() {
		if r.start.After(from) && r.id != "" {
			ids = append(ids, r.id)
		}
	}
	if len(ids) == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := usageEvents(ctx, f.natsURL)
	if err != nil {
		return false
	}
	for _, id := range ids {
		if len(counts[id]) > 0 {
			return true
		}
	}
	return false
}

// kvStreamSeq is the last sequence of the KV delta stream (0 when NATS or
// the stream is not there).
func (f *fleet) kvStreamSeq() uint64 {
	nc, err := nats.Connect(f.natsURL, nats.Timeout(time.Second))
	if err != nil {
		return 0
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, bus.StreamKV)
	if err != nil {
		return 0
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0
	}
	return info.State.LastSeq
}

// snapshotsInRedis says whether Redis holds every worker's KV snapshot.
func (f *fleet) snapshotsInRedis() bool {
	opt, err := redis.ParseURL(f.redisURL)
	if err != nil {
		return false
	}
	rc := redis.NewClient(opt)
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, w := range f.workers {
		n, err := rc.Exists(ctx, rediskeys.KVSnapshot(sfleet.DefaultPool, w.id)).Result()
		if err != nil || n == 0 {
			return false
		}
	}
	return true
}

// leasesHeld is the kvtracker's leased workers.
func (f *fleet) leasesHeld() int {
	v, _, _ := metric(f.tracker.httpURL+"/metrics", "switchyard_kvtracker_leases_held")
	return int(v)
}

func (f *fleet) trackerIngests(before uint64) bool {
	return f.ready(f.tracker) && f.leasesHeld() == len(f.workers) && f.kvStreamSeq() > before
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
