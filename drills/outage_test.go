package drills

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// outage is how long a killed dependency stays down in the CI drills.
const outage = 5 * time.Second

// outages are the outage lengths of the dependency drills: a short one
// always, and with -drills.long one longer than the gateway's usage
// publish retries (the events wait in the NATS client's reconnect buffer).
func outages() []time.Duration {
	if *flagLong {
		return []time.Duration{outage, 45 * time.Second}
	}
	return []time.Duration{outage}
}

// TestNATSRestart: NATS is SIGKILLed under load and comes back on the
// same port and store after an outage. Clients are served throughout;
// afterwards every request has exactly one usage event (the events of the
// outage delivered late, none twice), usage flows again, and the
// kvtracker (whose KV stream and lease bucket were lost with NATS's
// memory) ingests again, the routers' index following.
func TestNATSRestart(t *testing.T) {
	for _, down := range outages() {
		t.Run(down.String(), func(t *testing.T) {
			f := startFleet(t, defaultOptions())
			l := startLoad(t, f, 6)
			l.waitRequests(t, 12, 30*time.Second)

			t0 := time.Now()
			must(t, f.nats.kill())
			// What is missing is said: the kvtracker, which can do nothing
			// without NATS, is not ready; the gateways and routers, which
			// serve without it, are, and name it in their readiness detail.
			until(t, t0, 10*time.Second, "the kvtracker not ready, the gateways and routers ready, each naming nats", func() bool {
				return missing(f.tracker, "nats", false) && missing(f.gateways[0], "nats", true) && missing(f.routers[0], "nats", true)
			})
			time.Sleep(down - time.Since(t0))
			t1 := time.Now()
			f.restart(f.nats, "")
			deltas := f.routerDeltas()
			took := until(t, t1, 30*time.Second, "usage flows, the tracker ingests, the index follows, every service is ready", func() bool {
				return f.ready() && f.usageAfter(l, t1) && f.trackerIngests(0) && f.indexFollows(deltas)
			})
			l.waitRequests(t, 12, 30*time.Second)
			l.stop()
			steady(t, l, t0, time.Now(), "during and after the NATS outage")
			checkUsage(t, f, l.snapshot(), 60*time.Second)
			report(t, result{
				fault:    fmt.Sprintf("NATS SIGKILLed for %s, restarted on its port and store", fmtDur(down)),
				client:   "every stream served",
				recovery: "usage events flow, KV deltas published and applied by both routers, every /readyz 200",
				took:     took, bound: 10 * time.Second,
			})
		})
	}
}

// TestRedisRestart: Redis is SIGKILLed under load and comes back empty.
// Clients are served throughout, the routers say what they miss, and
// the kvtracker writes every worker's snapshot again.
func TestRedisRestart(t *testing.T) {
	f := startFleet(t, defaultOptions())
	l := startLoad(t, f, 6)
	l.waitRequests(t, 12, 30*time.Second)
	until(t, time.Now(), 15*time.Second, "snapshots in Redis", f.snapshotsInRedis)

	t0 := time.Now()
	must(t, f.redis.kill())
	// The routers, which route without Redis, and the kvtracker, whose
	// deltas still flow over NATS, stay ready and name it.
	until(t, t0, 10*time.Second, "both routers and the kvtracker ready, naming redis as missing", func() bool {
		return missing(f.routers[0], "redis", true) && missing(f.routers[1], "redis", true) && missing(f.tracker, "redis", true)
	})
	time.Sleep(outage - time.Since(t0))
	t1 := time.Now()
	f.restart(f.redis, "")
	f.rollupsLost = true // the meter's counts were in the Redis that died empty
	took := until(t, t1, 30*time.Second, "every worker's snapshot back in Redis, every service ready", func() bool {
		return f.snapshotsInRedis() && f.ready()
	})
	l.waitRequests(t, 12, 30*time.Second)
	l.stop()
	steady(t, l, t0, time.Now(), "during and after the Redis outage")
	checkUsage(t, f, l.snapshot(), 30*time.Second)
	report(t, result{
		fault:    "Redis SIGKILLed for " + fmtDur(outage) + ", restarted empty",
		client:   "every stream served",
		recovery: "every worker's KV snapshot back in Redis, every /readyz 200",
		took:     took, bound: 10 * time.Second,
	})
}

// TestKVTrackerRestart: the kvtracker is SIGKILLed under load and started
// again. Clients are served throughout (routing on the index the routers
// hold); the restarted tracker leases every worker again and the routers'
// index follows its deltas.
func TestKVTrackerRestart(t *testing.T) {
	f := startFleet(t, defaultOptions())
	l := startLoad(t, f, 6)
	l.waitRequests(t, 12, 30*time.Second)
	until(t, time.Now(), 15*time.Second, "tracker leases every worker", func() bool { return f.leasesHeld() == len(f.workers) })

	t0 := time.Now()
	must(t, f.tracker.kill())
	time.Sleep(outage)
	t1 := time.Now()
	seq := f.kvStreamSeq()
	deltas := f.routerDeltas()
	f.restart(f.tracker.proc, f.tracker.httpURL+"/readyz")
	took := until(t, t1, 30*time.Second, "tracker leases every worker, publishes deltas, routers apply them", func() bool {
		return f.trackerIngests(seq) && f.indexFollows(deltas)
	})
	l.waitRequests(t, 12, 30*time.Second)
	l.stop()
	steady(t, l, t0, time.Now(), "during and after the kvtracker outage")
	checkUsage(t, f, l.snapshot(), 30*time.Second)
	report(t, result{
		fault:    "kvtracker SIGKILLed for " + fmtDur(outage) + ", restarted",
		client:   "every stream served",
		recovery: "every worker leased again, deltas published and applied by both routers",
		took:     took, bound: 15 * time.Second,
	})
}

// TestStartWithoutNATS: every service starts while NATS is down. The
// gateways serve (routing needs no NATS); when NATS comes up, the usage
// events of the requests served meanwhile are delivered, each once, the
// kvtracker leases and ingests, and the routers' index follows.
func TestStartWithoutNATS(t *testing.T) {
	o := defaultOptions()
	o.natsDown = true
	f := startFleet(t, o)
	l := startLoad(t, f, 6)
	t0 := time.Now()
	l.waitRequests(t, 12, 30*time.Second)
	t1 := time.Now()
	f.restart(f.nats, "")
	deltas := f.routerDeltas()
	took := until(t, t1, 30*time.Second, "usage flows, the tracker ingests, the index follows, every service is ready", func() bool {
		return f.ready() && f.usageAfter(l, t1) && f.trackerIngests(0) && f.indexFollows(deltas)
	})
	l.waitRequests(t, 12, 30*time.Second)
	l.stop()
	steady(t, l, t0, time.Now(), "before and after NATS came up")
	checkUsage(t, f, l.snapshot(), 60*time.Second)
	report(t, result{
		fault:    "every service started with NATS down; NATS started once 12 requests were served",
		client:   "every stream served",
		recovery: "usage events flow (those from before delivered), KV deltas published and applied by both routers, every /readyz 200",
		took:     took, bound: 15 * time.Second,
	})
}

// missing says whether a service's /readyz?verbose names check as failing
// ([-]check) and its status is 200 exactly when ready.
func missing(s *service, check string, ready bool) bool {
	resp, err := probeClient.Get(s.httpURL + "/readyz?verbose")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return (resp.StatusCode == http.StatusOK) == ready && strings.Contains(string(b), "[-]"+check)
}

// TestKVEndpointUnreachable: one worker's KV event endpoint, as the
// routers and the kvtracker know it, has nobody listening (the
// connect/bind mistake). Clients are served; the kvtracker stays ready
// and names the worker in its readiness detail and metrics.
func TestKVEndpointUnreachable(t *testing.T) {
	o := defaultOptions()
	o.badKV = []int{0}
	o.trackerArgs = []string{"--silence-warning", "3s"}
	t0 := time.Now()
	f := startFleet(t, o)
	l := startLoad(t, f, 4)
	bad := f.workers[0]
	took := until(t, t0, 30*time.Second, "the kvtracker names the unreachable worker", func() bool {
		resp, err := probeClient.Get(f.tracker.httpURL + "/readyz?verbose")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		connected, ok, _ := metric(f.tracker.httpURL+"/metrics", "switchyard_kvtracker_worker_connected", `worker="`+bad.id+`"`)
		return resp.StatusCode == http.StatusOK && strings.Contains(string(b), "[-]kv-events") &&
			strings.Contains(string(b), bad.id) && ok && connected == 0
	})
	l.waitRequests(t, 8, 30*time.Second)
	l.stop()
	steady(t, l, t0, time.Now(), "with a worker's KV events unreachable")
	checkUsage(t, f, l.snapshot(), 30*time.Second)
	report(t, result{
		fault:    "a worker's KV event endpoint unreachable (nobody listens where the fleet says)",
		client:   "every stream served",
		recovery: "the kvtracker, still ready, names the worker in /readyz?verbose and worker_connected 0 (from the fleet's start, --silence-warning 3s)",
		took:     took, bound: 20 * time.Second,
	})
}
