package testkit

import (
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard-dev/switchyard/internal/natsembed"
)

// Redis is the shared Redis of the machine: REDIS_URL, default
// redis://127.0.0.1:6379, and a client to it closed when the test ends.
// Without a reachable Redis the test fails in CI (CI=true) and is skipped,
// loudly, elsewhere. Tests share the server: keep your keys apart (a
// random pool name, say) and delete them.
func Redis(tb testing.TB) (string, *redis.Client) {
	tb.Helper()
	raw := os.Getenv("REDIS_URL")
	if raw == "" {
		raw = "redis://127.0.0.1:6379"
	}
	if !strings.Contains(raw, "://") {
		raw = "redis://" + raw
	}
	opts, err := redis.ParseURL(raw)
	if err != nil {
		tb.Fatalf("REDIS_URL: %v", err)
	}
	c := redis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		if os.Getenv("CI") == "true" {
			tb.Fatalf("redis at %s unreachable (CI=true requires it): %v", opts.Addr, err)
		}
		tb.Skipf("SKIPPED: needs Redis at %s (set REDIS_URL): %v", opts.Addr, err)
	}
	tb.Cleanup(func() { c.Close() })
	return raw, c
}

// NATS starts a NATS server of the test's own, with JetStream, on a random
// loopback port (never the machine's 4222), and a connection to it; both
// end with the test. port 0 picks one; a given port lets a test restart
// the server where its clients expect it.
func NATS(tb testing.TB, port int) (*natsembed.Server, *nats.Conn) {
	tb.Helper()
	ns, err := natsembed.Start(natsembed.Options{Port: port})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(ns.Shutdown)
	nc, err := nats.Connect(ns.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	return ns, nc
}

// KeyPrefix is a Redis key prefix of the test's own, base followed by a
// random part, whose keys are deleted when the test ends: tests share the
// machine's Redis.
func KeyPrefix(tb testing.TB, rdb *redis.Client, base string) string {
	tb.Helper()
	p := base + rand.Text()[:10] + ":"
	tb.Cleanup(func() {
		ctx := context.Background()
		keys, _ := rdb.Keys(ctx, p+"*").Result()
		for len(keys) > 0 {
			n := min(len(keys), 1000)
			rdb.Del(ctx, keys[:n]...)
			keys = keys[n:]
		}
	})
	return p
}

// Process starts cmd (a server the test runs: nats-server, prometheus)
// and kills it when the test ends, printing its output if the test
// failed.
func Process(tb testing.TB, name string, cmd *exec.Cmd) {
	tb.Helper()
	var out SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if tb.Failed() {
			tb.Logf("%s:\n%s", name, out.String())
		}
	})
}
