package drills

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/vllm"
)

// decisions is the Route decisions a router has made.
func decisions(s *service) float64 {
	v, _, _ := metric(s.httpURL+"/metrics", "switchyard_router_decisions_total")
	return v
}

// healthyOnRouters says whether every router sees worker w as healthy
// (want true) or unhealthy (want false).
func (f *fleet) healthyOnRouters(w *worker, want bool) bool {
	for _, r := range f.routers {
		v, ok, err := metric(r.httpURL+"/metrics", "switchyard_router_endpoint_healthy", `endpoint="`+w.id+`"`)
		if err != nil || !ok || (v > 0) != want {
			return false
		}
	}
	return true
}

// epochChanges is, per router, the worker state restarts it applied.
func (f *fleet) epochChanges() []float64 {
	var out []float64
	for _, r := range f.routers {
		v, _, _ := metric(r.httpURL+"/metrics", "switchyard_router_kv_sync_events_total", `event="epoch_change"`)
		out = append(out, v)
	}
	return out
}

// epochChangesSince says whether every router applied a worker state
// restart since before was taken.
func (f *fleet) epochChangesSince(before []float64) bool {
	for i, v := range f.epochChanges() {
		if v <= before[i] {
			return false
		}
	}
	return true
}

// running is the streams a worker is generating.
func (w *worker) running() float64 {
	v, _, _ := metric(w.url+"/metrics", vllm.MetricNumRequestsRunning)
	return v
}

// TestRouterKilled: one of the two router replicas is SIGKILLed under
// load; both gateways know both. No request fails (a Route to the dead
// replica is retried on the other); started again, the replica takes
// Route calls again within the bound.
func TestRouterKilled(t *testing.T) {
	f := startFleet(t, defaultOptions())
	l := startLoad(t, f, 6)
	l.waitRequests(t, 12, 30*time.Second)
	victim := f.routers[0]

	t0 := time.Now()
	must(t, victim.kill())
	time.Sleep(outage)
	t1 := time.Now()
	f.restart(victim.proc, victim.httpURL+"/readyz")
	took := until(t, t1, 30*time.Second, "the restarted router makes decisions again", func() bool {
		return decisions(victim) >= 4
	})
	l.waitRequests(t, 12, 30*time.Second)
	l.stop()
	steady(t, l, t0, time.Now(), "with a router replica dead, then back")
	checkUsage(t, f, l.snapshot(), 30*time.Second)
	report(t, result{
		fault:    "one of two routers SIGKILLed for " + fmtDur(outage) + ", restarted",
		client:   "every stream served (Route retried on the other replica)",
		recovery: "the restarted replica routes again (from its restart command)",
		took:     took, bound: 10 * time.Second,
	})
}

// midStream starts clients long streams (2000 tokens, about a minute)
// beside the steady load, waits until they stream, and returns them with
// the worker generating the most streams: a fault on it lands mid-stream
// for sure. The long streams still running at the end of the drill are
// cut by their stop (outcome cut), not counted as failures.
func midStream(t *testing.T, f *fleet, clients int) (*load, *worker) {
	t.Helper()
	long := startLoadOf(t, f, clients, 2000)
	var victim *worker
	until(t, time.Now(), 30*time.Second, "a worker generates two long streams or more", func() bool {
		best := 0.0
		for _, w := range f.workers {
			if r := w.running(); r > best {
				best, victim = r, w
			}
		}
		return best >= 2
	})
	// Past their first tokens: a stream broken now has reached its client.
	time.Sleep(time.Second)
	return long, victim
}

// brokenStreams checks the requests the fault broke: each started before
// the fault, got its 200 and then an error event in the OpenAI shape (not
// a bare close), and its usage event says why (outcomes). Every request
// that started after the fault was served whole. It returns the broken
// ones.
func brokenStreams(t *testing.T, rs []record, f *fleet, t0 time.Time, outcomes ...string) []record {
	t.Helper()
	var broken []record
	for _, r := range failures(rs) {
		switch {
		case r.start.After(t0):
			t.Errorf("a request started after the fault failed: %s", describe([]record{r}))
		case r.outcome != streamError || r.status != 200:
			t.Errorf("a broken stream did not end with an error event: %s", describe([]record{r}))
		}
		broken = append(broken, r)
	}
	if len(broken) == 0 {
		t.Error("the fault broke no stream: nothing was tested")
	}
	usage := checkUsage(t, f, rs, 30*time.Second)
	for _, r := range broken {
		ev := usage[r.id]
		if ev == nil {
			continue
		}
		found := false
		for _, o := range outcomes {
			found = found || ev.GetOutcome() == o
		}
		if !found {
			t.Errorf("request %s broken mid-stream: usage outcome %q, want one of %v", r.id, ev.GetOutcome(), outcomes)
		}
	}
	return broken
}

// TestWorkerKilledMidStream: a worker is SIGKILLed while it streams.
// Its streams end with an error event (never a bare close) and usage
// events whose outcome says so; every request started after the kill is
// served whole (retried before its first byte); the worker, started
// again, is back in both routers' rotation, its old blocks dropped from
// their index, within the bound.
func TestWorkerKilledMidStream(t *testing.T) {
	f := startFleet(t, defaultOptions())
	l := startLoad(t, f, 8)
	l.waitRequests(t, 16, 30*time.Second)
	long, victim := midStream(t, f, 6)

	t0 := time.Now()
	must(t, victim.kill())
	until(t, t0, 10*time.Second, "both routers mark the dead worker unhealthy", func() bool { return f.healthyOnRouters(victim, false) })
	time.Sleep(outage)
	epochs := f.epochChanges()
	t1 := time.Now()
	f.restart(victim.proc, victim.url+"/health")
	took := until(t, t1, 30*time.Second, "both routers see the restarted worker healthy", func() bool { return f.healthyOnRouters(victim, true) })
	// Its blocks died with it: the routers drop them before it publishes
	// any event (its process start time changed).
	dropped := until(t, t1, 30*time.Second, "both routers drop the restarted worker's blocks", func() bool { return f.epochChangesSince(epochs) })
	l.waitRequests(t, 16, 30*time.Second)
	l.stop()
	long.stop()
	broken := brokenStreams(t, append(l.snapshot(), long.snapshot()...), f, t0, bus.UsageOutcomeUpstreamBroken)
	report(t, result{
		fault:    "a worker SIGKILLed mid-stream, restarted after " + fmtDur(outage),
		client:   fmt.Sprintf("its %d streams end with an OpenAI error event; every later request served", len(broken)),
		recovery: "both routers see the restarted worker healthy and have dropped its old blocks (from its restart command)",
		took:     max(took, dropped), bound: 10 * time.Second,
	})
}

// TestWorkerFrozenMidStream: a worker is SIGSTOPped while it streams
// and thawed later. Its silent streams are ended with an error event
// once the routers mark it unhealthy, well before the gateway's idle
// timeout; every request started after the freeze is served whole; after
// SIGCONT the worker is back in both routers' rotation.
func TestWorkerFrozenMidStream(t *testing.T) {
	f := startFleet(t, defaultOptions())
	l := startLoad(t, f, 8)
	l.waitRequests(t, 16, 30*time.Second)
	long, victim := midStream(t, f, 6)

	const frozen = 10 * time.Second
	t0 := time.Now()
	must(t, victim.signal(syscall.SIGSTOP))
	t.Cleanup(func() { _ = victim.signal(syscall.SIGCONT) })
	time.Sleep(frozen)
	t1 := time.Now()
	must(t, victim.signal(syscall.SIGCONT))
	rejoin := until(t, t1, 30*time.Second, "both routers see the thawed worker healthy", func() bool { return f.healthyOnRouters(victim, true) })
	l.waitRequests(t, 16, 30*time.Second)
	l.stop()
	long.stop()
	broken := brokenStreams(t, append(l.snapshot(), long.snapshot()...), f, t0, bus.UsageOutcomeEndpointUnhealthy, bus.UsageOutcomeUpstreamStalled)
	var ended time.Duration
	for _, r := range broken {
		ended = max(ended, r.end.Sub(t0))
	}
	t.Logf("thawed worker healthy again after %v", rejoin.Round(time.Millisecond))
	// Identical workers: the rates learned from their TTFTs, frozen one
	// included, stay of one order.
	for _, r := range f.routers {
		var rates []float64
		for _, w := range f.workers {
			v, _, _ := metric(r.httpURL+"/metrics", "switchyard_router_endpoint_prefill_rate_tokens_per_second", `endpoint="`+w.id+`"`)
			rates = append(rates, v)
		}
		t.Logf("%s: learned prefill rates %.0f tokens/s", r.name, rates)
		if lo, hi := slices.Min(rates), slices.Max(rates); lo <= 0 || hi > 10*lo {
			t.Errorf("%s: prefill rates of identical workers diverged after the freeze: %.0f tokens/s", r.name, rates)
		}
	}
	report(t, result{
		fault:    "a worker SIGSTOPped mid-stream for " + fmtDur(frozen) + ", then SIGCONT",
		client:   fmt.Sprintf("its %d silent streams end with an OpenAI error event; every later request served", len(broken)),
		recovery: "every stream of the frozen worker ended (from the SIGSTOP)",
		took:     ended, bound: 5 * time.Second,
	})
}

// TestMeterKilled: the meter is SIGKILLed under load (mid-batch: between
// counting a batch and acking it, or anywhere else) and started again.
// Clients never notice; the restarted meter gets what it had not acked
// again and, having counted part of it already, counts each request
// exactly once: its totals equal the stream's request ids.
func TestMeterKilled(t *testing.T) {
	f := startFleet(t, defaultOptions())
	l := startLoad(t, f, 6)
	l.waitRequests(t, 12, 30*time.Second)

	t0 := time.Now()
	must(t, f.meter.kill())
	l.waitRequests(t, 6, 30*time.Second) // served while it is dead
	t1 := time.Now()
	f.restart(f.meter.proc, f.meter.httpURL+"/readyz")
	counted := func() float64 {
		v, _, _ := metric(f.meter.httpURL+"/metrics", "switchyard_meter_events_total")
		return v
	}
	took := until(t, t1, 30*time.Second, "the restarted meter consumes again", func() bool { return counted() > 0 })
	l.waitRequests(t, 12, 30*time.Second)
	l.stop()
	steady(t, l, t0, time.Now(), "with the meter dead, then back")
	checkUsage(t, f, l.snapshot(), 60*time.Second)
	report(t, result{
		fault:    "meter SIGKILLed under load, restarted",
		client:   "every stream served",
		recovery: "the meter consumes again; in the end each request counted once (its totals equal the stream's)",
		took:     took, bound: 10 * time.Second,
	})
}

// TestGatewayKilledDuringNATSOutage: NATS dies, the gateways serve on
// with their usage events in their spools on disk, and then one gateway
// is SIGKILLed holding them. Started again on the same spool, and NATS
// back, the events of every request a client saw complete reach the
// stream, each once, and the meter counts them once. (A request the kill
// cut off mid-answer has no usage: its gateway died with it.)
func TestGatewayKilledDuringNATSOutage(t *testing.T) {
	f := startFleet(t, defaultOptions())
	l := startLoad(t, f, 6)
	l.waitRequests(t, 12, 30*time.Second)
	victim := f.gateways[0]
	spooled := func(g *service) float64 {
		v, _, _ := metric(g.metricsURL, "switchyard_gateway_usage_spool_events")
		return v
	}

	must(t, f.nats.kill())
	until(t, time.Now(), 30*time.Second, "the victim holds usage events in its spool", func() bool { return spooled(victim) >= 4 })
	held := spooled(victim)
	must(t, victim.kill())
	time.Sleep(time.Second)
	t1 := time.Now()
	f.restart(victim.proc, victim.httpURL+"/readyz")
	f.restart(f.nats, "")
	took := until(t, t1, 30*time.Second, "both gateways' spools empty, every service ready", func() bool {
		return spooled(f.gateways[0]) == 0 && spooled(f.gateways[1]) == 0 && f.ready()
	})
	l.waitRequests(t, 12, 30*time.Second)
	l.stop()
	var completed []record
	for _, r := range l.snapshot() {
		if r.outcome == ok {
			completed = append(completed, r)
		}
	}
	checkUsage(t, f, completed, 60*time.Second)
	report(t, result{
		fault:    fmt.Sprintf("NATS SIGKILLed, then a gateway SIGKILLed holding %d usage events in its spool; both restarted", int(held)),
		client:   "requests on the killed gateway fail until it is back",
		recovery: "both spools sent, every completed request's usage stored and metered once, every /readyz 200",
		took:     took, bound: 15 * time.Second,
	})
}
