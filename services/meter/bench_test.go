package meter

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/testkit"
)

// BenchmarkIngest is the meter's ingest rate: b.N usage events (8
// tenants, 4 models) waiting in the stream of a nats-server of its own
// (a separate process, so its CPU is not the meter's), then one meter
// replica consuming, counting in Redis and acking them all. It reports
// events/s of wall time, the meter's CPU per event (events/s/core is a
// million over it) and the Redis server's (from INFO's used_cpu_*). It
// runs the collector as `switchyard meter` does (GOGC 400 unless GOGC is
// set: GOGC=100 measures the default).
//
//	go test -run XXX -bench BenchmarkIngest -benchtime 200000x ./services/meter/
func BenchmarkIngest(b *testing.B) {
	if _, err := os.Stat(natsServerBin); err != nil {
		b.Skipf("needs %s", natsServerBin)
	}
	port := testkit.FreePort(b)
	testkit.Process(b, "nats-server", exec.Command(natsServerBin, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", filepath.Join(b.TempDir(), "js")))
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	var nc *nats.Conn
	testkit.Eventually(b, 10*time.Second, "nats-server up", func() bool {
		var err error
		nc, err = nats.Connect(url)
		return err == nil
	})
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	if err := bus.EnsureUsageStream(ctx, js); err != nil {
		b.Fatal(err)
	}
	redisURL, rdb := testkit.Redis(b)
	prefix := testkit.KeyPrefix(b, rdb, "switchyard-test:bench-usage:")
	tenants := []string{"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"}
	models := []string{"qwen", "llama", "glm", "gemma"}
	for i := range b.N {
		ev := usageEvent(fmt.Sprintf("bench-%d", i), tenants[i%len(tenants)], models[i%len(models)], bus.UsageOutcomeOK, time.Duration(i)*time.Millisecond)
		data, _ := proto.Marshal(ev)
		if _, err := js.PublishAsync(bus.UsageSubject(ev.GetTenant()), data, jetstream.WithMsgID(ev.GetRequestId())); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(5 * time.Minute):
		b.Fatal("publishing timed out")
	}

	cfg := DefaultConfig()
	cfg.NATS.URL, cfg.Redis.URL, cfg.HTTPAddr, cfg.KeyPrefix = url, redisURL, "127.0.0.1:0", prefix
	cfg.Tenants, cfg.Models = strings.Join(tenants, ","), strings.Join(models, ",")
	cfg.SummaryDelay = 0
	if os.Getenv("GOGC") == "" { // as `switchyard meter` runs (tuneGC)
		defer debug.SetGCPercent(debug.SetGCPercent(gcPercent))
	}
	m, err := New(cfg, zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	redisCPU := func() float64 {
		info, _ := rdb.Info(ctx, "cpu").Result()
		var total float64
		for _, l := range strings.Split(info, "\r\n") {
			for _, k := range []string{"used_cpu_user:", "used_cpu_sys:"} {
				if v, ok := strings.CutPrefix(l, k); ok {
					f, _ := strconv.ParseFloat(v, 64)
					total += f
				}
			}
		}
		return total
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	r0, c0 := redisCPU(), cpu()
	b.ResetTimer()
	start := time.Now()
	go func() { done <- m.Serve(rctx) }()
	for testutil.ToFloat64(m.metrics.events.WithLabelValues("counted")) < float64(b.N) {
		time.Sleep(20 * time.Millisecond)
	}
	wall := time.Since(start)
	b.StopTimer()
	c1, r1 := cpu(), redisCPU()
	cancel()
	<-done
	if os.Getenv("BENCH_DEBUG") != "" {
		b.Logf("batches: %s", gather(m))
	}
	b.ReportMetric(float64(b.N)/wall.Seconds(), "events/s")
	b.ReportMetric(float64((c1-c0).Microseconds())/float64(b.N), "meter-cpu-µs/event")
	b.ReportMetric((r1-r0)*1e6/float64(b.N), "redis-cpu-µs/event")
}

// gather is the meter's batch and retry figures, for BENCH_DEBUG.
func gather(m *Meter) string {
	mfs, _ := m.metrics.reg.Gather()
	var out []string
	for _, mf := range mfs {
		switch mf.GetName() {
		case "switchyard_meter_batch_seconds":
			h := mf.GetMetric()[0].GetHistogram()
			out = append(out, fmt.Sprintf("%d batches, %.3fs in them", h.GetSampleCount(), h.GetSampleSum()))
		case "switchyard_meter_retries_total", "switchyard_meter_events_total":
			for _, mm := range mf.GetMetric() {
				out = append(out, fmt.Sprintf("%s%v=%v", mf.GetName(), mm.GetLabel(), mm.GetCounter().GetValue()))
			}
		}
	}
	return strings.Join(out, "; ")
}
