package drills

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-dev/switchyard/internal/bus"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

var flagScale = flag.Bool("scale", false, "run TestScale: 128 simulated workers in 4 processes, 2 kvtrackers, 4 routers (also SWITCHYARD_SCALE=1)")

// The scale run's shape.
const (
	scaleSims       = 4
	scalePerSim     = 32
	scaleRouters    = 4
	scaleTrackers   = 2
	scaleGroups     = 16   // groups of users, each sharing one system prompt
	scalePerGroup   = 4    // requests per group released at once in a wave
	scaleWaves      = 12   // waves per phase
	scaleSystemToks = 6144 // the group's system prompt
	scaleUserToks   = 2048 // each request's own question
)

// TestScale runs a fleet of hundreds of processes' worth of workers —
// 128 simulated workers in 4 `switchyard sim` processes, 2 kvtracker
// replicas sharing them through their leases, 4 router replicas, 2
// gateways (one given the 4 routers, one given router 0 alone) — and
// measures what scale costs and what replica sync buys, printing a table:
//
//   - phase "4 replicas": waves of 8k-token chats through the gateway of
//     the 4 routers: in each wave every group of users sends
//     scalePerGroup requests sharing its 6k-token system prompt, all at
//     once; a wave ends when all have answered;
//   - the eviction storm: every worker's POST /reset_prefix_cache at once
//     (each sends AllBlocksCleared, as vLLM does), timed until every
//     router's index is empty;
//   - phase "1 replica": the same traffic on the emptied caches, through
//     the gateway of router 0 alone.
//
// It asserts that every request was routed and answered, and that every
// router's index saw the storm. Skipped unless -scale or
// SWITCHYARD_SCALE=1 (make bench-scale).
func TestScale(t *testing.T) {
	if !*flagScale && os.Getenv("SWITCHYARD_SCALE") != "1" {
		t.Skip("the scale run is opt-in: -scale or SWITCHYARD_SCALE=1 (make bench-scale)")
	}
	started := time.Now()
	f := startFleet(t, options{
		workers:        scaleSims * scalePerSim,
		workersPerSim:  scalePerSim,
		routers:        scaleRouters,
		trackers:       scaleTrackers,
		gatewayRouters: [][]int{{0, 1, 2, 3}, {0}},
		// The routers' default scrape interval (the drills' 250 ms is for
		// fast detection on 3 workers).
		routerArgs: []string{"--scrape-interval", "1s"},
		simArgs:    []string{"--time-scale", "20"},
	})
	tab := &scaleTable{}
	tab.add("fleet", "started, every process ready", time.Since(started).Round(time.Millisecond).String())

	// Every worker leased by one tracker, every router following them.
	leases := make([]float64, len(f.trackers))
	took := until(t, started, 60*time.Second, "the kvtrackers lease every worker", func() bool {
		total := 0.0
		for i, tr := range f.trackers {
			leases[i], _, _ = metric(tr.httpURL+"/metrics", "switchyard_kvtracker_leases_held")
			total += leases[i]
		}
		return total == float64(len(f.workers))
	})
	tab.add("fleet", "kvtrackers hold every lease", fmt.Sprintf("%v after start; split %v", took.Round(time.Millisecond), leases))
	// The first replica up takes what it can in its first lease round,
	// before it has seen the others; above its fair share it sheds one
	// worker a round (a second) to the others.
	fair := float64((len(f.workers) + len(f.trackers) - 1) / len(f.trackers))
	tookFair := until(t, started, 90*time.Second, "the kvtrackers split the workers fairly", func() bool {
		total, most := 0.0, 0.0
		for i, tr := range f.trackers {
			leases[i], _, _ = metric(tr.httpURL+"/metrics", "switchyard_kvtracker_leases_held")
			total += leases[i]
			most = max(most, leases[i])
		}
		return total == float64(len(f.workers)) && most <= fair
	})
	tab.add("fleet", "kvtrackers at their fair shares", fmt.Sprintf("%v after start; split %v", tookFair.Round(time.Millisecond), leases))

	// The idle fleet: every router scraping every worker each second and
	// following the kvtrackers, no requests.
	idle0 := f.cpuNow()
	time.Sleep(3 * time.Second)
	tab.add("fleet", "CPU at idle", cpuUse(idle0, f.cpuNow(), runtime.NumCPU()))

	obs := observeNATS(t, f.natsURL)
	for _, r := range f.routers {
		r.collect()
	}
	baseHeap := make([]float64, len(f.routers))
	for i, r := range f.routers {
		h, err := r.heapInuse()
		must(t, err)
		baseHeap[i] = h
	}

	prompts := newScalePrompts()
	client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}

	// Phase A: the 4 replicas.
	histA := routeHistograms(t, f.routers)
	jsA := kvStreamState(t, f.natsURL)
	obs.phase(1)
	cpuA := f.cpuNow()
	recsA := runWaves(t, client, f.gateways[0], prompts, "a")
	cpuA2 := f.cpuNow()
	obs.phase(0)
	jsA2 := kvStreamState(t, f.natsURL)
	histA2 := routeHistograms(t, f.routers)

	// Memory: the heap each router holds for its index, after a forced
	// collection, over the blocks it holds.
	for i, r := range f.routers {
		r.collect()
		h, err := r.heapInuse()
		must(t, err)
		blocks, _, _ := metric(r.httpURL+"/metrics", "switchyard_router_kv_index_blocks")
		if blocks == 0 {
			t.Fatalf("%s: its index holds no blocks after the load", r.name)
		}
		rss, _ := r.rss()
		tab.add("memory", r.name, fmt.Sprintf("heap in use %.1f MiB (%.1f MiB before the load), %.0f blocks: %.0f B/block over the idle heap; RSS %.1f MiB",
			h/(1<<20), baseHeap[i]/(1<<20), blocks, (h-baseHeap[i])/blocks, float64(rss)/(1<<20)))
	}

	// The eviction storm.
	storm := evictionStorm(t, f, obs)
	for _, l := range storm {
		tab.add("storm", l[0], l[1])
	}

	// Phase B: router 0 alone, same traffic on emptied caches.
	histB := routeHistograms(t, f.routers[:1])
	jsB := kvStreamState(t, f.natsURL)
	obs.phase(2)
	cpuB := f.cpuNow()
	recsB := runWaves(t, client, f.gateways[1], prompts, "b")
	cpuB2 := f.cpuNow()
	obs.phase(0)
	jsB2 := kvStreamState(t, f.natsURL)
	histB2 := routeHistograms(t, f.routers[:1])

	// Direct Route calls, one at a time, on an idle fleet: the client's
	// view of a decision over 128 candidates.
	histD := routeHistograms(t, f.routers[:1])
	cpuD := f.cpuNow()
	direct := directRoutes(t, f.routers[0], prompts, 300)
	cpuD2 := f.cpuNow()
	histD2 := routeHistograms(t, f.routers[:1])

	time.Sleep(500 * time.Millisecond) // the last completions reach the observer
	decs := obs.decisions()
	var workerIDs []string
	for _, w := range f.workers {
		workerIDs = append(workerIDs, w.id)
	}
	for _, ph := range []struct {
		name       string
		recs       []scaleRecord
		h0, h1     histogram
		js0, js1   jetstream.StreamState
		counts     map[string][2]int64
		replicaSet string
		cpu0, cpu1 cpuSample
	}{
		{"4 replicas", recsA, histA, histA2, jsA, jsA2, obs.counts(1), "gateway-0 → routers 0-3", cpuA, cpuA2},
		{"1 replica", recsB, histB, histB2, jsB, jsB2, obs.counts(2), "gateway-1 → router 0", cpuB, cpuB2},
	} {
		n := len(ph.recs)
		if fails := scaleFailures(ph.recs); len(fails) > 0 {
			t.Errorf("%s: %d of %d requests failed, e.g. %+v", ph.name, len(fails), n, fails[0])
		}
		d := ph.h1.minus(ph.h0)
		tab.add(ph.name, "requests", fmt.Sprintf("%d (%s), %d waves of %d groups × %d at once, %.1fs",
			n, ph.replicaSet, scaleWaves, scaleGroups, scalePerGroup, wallOf(ph.recs).Seconds()))
		tab.add(ph.name, "Route (router histogram)", fmt.Sprintf("p50 %s, p90 %s, p99 %s over %d decisions; %.0f over 25 ms, %.0f over 100 ms",
			fmtSecs(d.quantile(0.5)), fmtSecs(d.quantile(0.9)), fmtSecs(d.quantile(0.99)), int(d.count), d.over(0.025), d.over(0.1)))
		tab.add(ph.name, "CPU during the waves", cpuUse(ph.cpu0, ph.cpu1, runtime.NumCPU()))
		var msgs, byts int64
		for _, c := range ph.counts {
			msgs += c[0]
			byts += c[1]
		}
		tab.add(ph.name, "NATS per routed request", fmt.Sprintf("%.1f messages, %.0f B in all", float64(msgs)/float64(n), float64(byts)/float64(n)))
		for _, class := range slices.Sorted(maps.Keys(ph.counts)) {
			c := ph.counts[class]
			tab.add(ph.name, "  "+class, fmt.Sprintf("%.2f msgs, %.0f B", float64(c[0])/float64(n), float64(c[1])/float64(n)))
		}
		tab.add(ph.name, "  KV stream (JetStream)", fmt.Sprintf("%.2f deltas, %.0f B stored per request; each delivered to %d routers",
			float64(ph.js1.Msgs-ph.js0.Msgs)/float64(n), float64(ph.js1.Bytes-ph.js0.Bytes)/float64(n), scaleRouters))
		q := routingQuality(workerIDs, ph.recs, decs)
		tab.add(ph.name, "cache hits", fmt.Sprintf("%.1f%% of prompt tokens cached (%.1f%% predicted by the routers)", q.hitPct, q.predictedPct))
		tab.add(ph.name, "group spread", fmt.Sprintf("%.1f workers per group on average (%d-%d); %d workers served", q.spreadMean, q.spreadMin, q.spreadMax, q.workers))
		cross := "none on different replicas"
		if q.crossPairs > 0 {
			cross = fmt.Sprintf("on different replicas %.1f%% of %d", 100*float64(q.crossDups)/float64(q.crossPairs), q.crossPairs)
		}
		tab.add(ph.name, "duplicate picks in the sync window", fmt.Sprintf("%.1f%% of %d pairs, %s (random among the equally good free workers: %.1f%%)",
			q.dupPct, q.pairs, cross, q.randomPct))
		if len(ph.recs) > 0 && q.decided < n {
			t.Errorf("%s: %d of %d requests have no route decision on NATS", ph.name, n-q.decided, n)
		}
	}
	tab.add("direct Route", "router 0, 8k-token chats, 128 candidates", direct)
	d := histD2.minus(histD)
	tab.add("direct Route", "  router 0's histogram of the same calls", fmt.Sprintf("p50 %s, p90 %s, p99 %s; %.0f over 25 ms",
		fmtSecs(d.quantile(0.5)), fmtSecs(d.quantile(0.9)), fmtSecs(d.quantile(0.99)), d.over(0.025)))
	tab.add("direct Route", "  CPU", cpuUse(cpuD, cpuD2, runtime.NumCPU()))
	t.Logf("scale run (%d workers in %d sim processes, %d kvtrackers, %d routers, 2 gateways; %s):\n%s",
		len(f.workers), scaleSims, scaleTrackers, scaleRouters, time.Since(started).Round(time.Second), tab)
}

// scaleTable is the run's figures, printed in the log.
type scaleTable struct{ rows [][3]string }

func (t *scaleTable) add(section, what, value string) {
	t.rows = append(t.rows, [3]string{section, what, value})
}

func (t *scaleTable) String() string {
	var b strings.Builder
	w0, w1 := 0, 0
	for _, r := range t.rows {
		w0, w1 = max(w0, len(r[0])), max(w1, len(r[1]))
	}
	for _, r := range t.rows {
		fmt.Fprintf(&b, "| %-*s | %-*s | %s\n", w0, r[0], w1, r[1], r[2])
	}
	return b.String()
}

// scalePrompts are the groups' system prompts (scaleSystemToks tokens
// each for the simulator's tokenizer: a word of four letters after a
// space is one token) and a source of questions of scaleUserToks tokens
// that no other request shares.
type scalePrompts struct {
	system []string
	rng    *rand.Rand
	mu     sync.Mutex
}

func newScalePrompts() *scalePrompts {
	p := &scalePrompts{rng: rand.New(rand.NewPCG(1, 2))}
	for g := range scaleGroups {
		r := rand.New(rand.NewPCG(uint64(g), 7))
		p.system = append(p.system, fmt.Sprintf("You are assistant %d.", g)+words(r, scaleSystemToks))
	}
	return p
}

func words(r *rand.Rand, n int) string {
	var b strings.Builder
	b.Grow(5 * n)
	for range n {
		b.WriteByte(' ')
		for range 4 {
			b.WriteByte(byte('a' + r.IntN(26)))
		}
	}
	return b.String()
}

func (p *scalePrompts) question() string {
	p.mu.Lock()
	seed := p.rng.Uint64()
	p.mu.Unlock()
	return "Question:" + words(rand.New(rand.NewPCG(seed, 3)), scaleUserToks)
}

func (p *scalePrompts) body(g int) []byte {
	b, _ := json.Marshal(map[string]any{"model": model, "max_tokens": 4, "messages": []map[string]string{
		{"role": "system", "content": p.system[g]}, {"role": "user", "content": p.question()}}})
	return b
}

// scaleRecord is one request of a phase, as its client saw it.
type scaleRecord struct {
	group      int
	id         string
	status     int
	err        string
	start, end time.Time
	prompt     int64
	cached     int64
}

func scaleFailures(rs []scaleRecord) []scaleRecord {
	var out []scaleRecord
	for _, r := range rs {
		if r.status != http.StatusOK || r.err != "" {
			out = append(out, r)
		}
	}
	return out
}

func wallOf(rs []scaleRecord) time.Duration {
	if len(rs) == 0 {
		return 0
	}
	first, last := rs[0].start, rs[0].end
	for _, r := range rs {
		if r.start.Before(first) {
			first = r.start
		}
		if r.end.After(last) {
			last = r.end
		}
	}
	return last.Sub(first)
}

// runWaves sends the phase's waves through gateway g.
func runWaves(t *testing.T, c *http.Client, g *service, p *scalePrompts, tag string) []scaleRecord {
	t.Helper()
	var mu sync.Mutex
	var out []scaleRecord
	for wave := range scaleWaves {
		bodies := make([][]byte, 0, scaleGroups*scalePerGroup)
		for i := range scaleGroups * scalePerGroup {
			bodies = append(bodies, p.body(i%scaleGroups))
		}
		var wg sync.WaitGroup
		release := make(chan struct{})
		for i, body := range bodies {
			wg.Go(func() {
				<-release
				r := scaleRecord{group: i % scaleGroups, start: time.Now()}
				req, _ := http.NewRequest(http.MethodPost, g.httpURL+"/v1/chat/completions", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Request-Id", fmt.Sprintf("scale-%s-%d-%d", tag, wave, i))
				resp, err := c.Do(req)
				if err != nil {
					r.err = err.Error()
				} else {
					r.status = resp.StatusCode
					r.id = resp.Header.Get("X-Request-Id")
					var v struct {
						Usage struct {
							PromptTokens  int64 `json:"prompt_tokens"`
							PromptDetails struct {
								CachedTokens int64 `json:"cached_tokens"`
							} `json:"prompt_tokens_details"`
						} `json:"usage"`
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						r.err = string(b)
					} else if err := json.Unmarshal(b, &v); err != nil {
						r.err = err.Error()
					}
					r.prompt, r.cached = v.Usage.PromptTokens, v.Usage.PromptDetails.CachedTokens
				}
				r.end = time.Now()
				mu.Lock()
				out = append(out, r)
				mu.Unlock()
			})
		}
		close(release)
		wg.Wait()
	}
	return out
}

// natsObserver counts every message on switchyard.> by class of subject
// and phase, and keeps the route decisions and completions it decodes.
type natsObserver struct {
	mu    sync.Mutex
	cur   int
	count [3]map[string][2]int64
	decs  map[string]observedDecision
}

// observedDecision is a route decision and when the observer heard it.
type observedDecision struct {
	*eventsv1.RouteDecision
	heard time.Time
}

func observeNATS(t *testing.T, url string) *natsObserver {
	t.Helper()
	o := &natsObserver{decs: map[string]observedDecision{}}
	for i := range o.count {
		o.count[i] = map[string][2]int64{}
	}
	nc, err := nats.Connect(url)
	must(t, err)
	t.Cleanup(nc.Close)
	sub, err := nc.Subscribe("switchyard.>", func(m *nats.Msg) {
		heard := time.Now()
		class := subjectClass(m.Subject)
		var d *eventsv1.RouteDecision
		if m.Subject == bus.SubjectRouteDecided {
			d = &eventsv1.RouteDecision{}
			if proto.Unmarshal(m.Data, d) != nil {
				d = nil
			}
		}
		o.mu.Lock()
		x := o.count[o.cur][class]
		o.count[o.cur][class] = [2]int64{x[0] + 1, x[1] + int64(len(m.Subject)+len(m.Data)+len(m.Reply))}
		if d != nil {
			o.decs[d.GetRequestId()] = observedDecision{d, heard}
		}
		o.mu.Unlock()
	})
	must(t, err)
	must(t, sub.SetPendingLimits(-1, -1))
	must(t, nc.Flush())
	return o
}

func subjectClass(s string) string {
	switch {
	case s == bus.SubjectRouteDecided:
		return "replica sync: route.decided"
	case s == bus.SubjectRouteCompleted:
		return "replica sync: route.completed"
	case strings.HasPrefix(s, strings.TrimSuffix(bus.KVDeltaSubjectAll, ">")):
		return "KV deltas: kv.<pool>.<worker>"
	case strings.HasPrefix(s, strings.TrimSuffix(bus.KVSummarySubjectAll, ">")):
		return "KV summaries: kvsummary.*"
	case strings.HasPrefix(s, strings.TrimSuffix(bus.UsageSubjectAll, "*")):
		return "usage: usage.*"
	default:
		parts := strings.SplitN(s, ".", 4)
		if len(parts) >= 3 {
			return "other: " + strings.Join(parts[:3], ".") + ".*"
		}
		return "other: " + s
	}
}

// phase switches the counters: 0 is between phases.
func (o *natsObserver) phase(p int) {
	o.mu.Lock()
	o.cur = p
	o.mu.Unlock()
}

func (o *natsObserver) counts(p int) map[string][2]int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.count[p])
}

func (o *natsObserver) decisions() map[string]observedDecision {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.decs)
}

// quality is how a phase was routed.
type quality struct {
	hitPct, predictedPct         float64
	spreadMean                   float64
	spreadMin, spreadMax         int
	workers                      int
	decided                      int
	pairs, crossPairs, crossDups int
	dupPct, randomPct            float64
	promptTokens, cachedTokens   int64
	predictedTok, decidedPrompt  int64
}

// routingQuality measures a phase's routing from its records and the
// decisions and completions heard on NATS.
//
// Duplicate picks. A pair is two requests a and b of the same group
// (same system prompt, so the same workers are good for both) where b
// was decided after a but before a's decision reached the test's NATS
// subscriber (decided_at(a) <= decided_at(b) < heard(a)): b's replica,
// unless it is a's own, could not know of a's pick — the sync window.
// The equally good free workers for the pair are a's pick and every
// worker that was free when a was decided (no request of the phase
// decided to it whose completion had been heard by then) and in the same
// state for the group as a's pick: warm (a request of the group was
// decided to it earlier in the phase and heard before a's decision) or
// cold alike. A pair counts when there is at least one such worker other
// than a's pick; it is a duplicate when b picked a's worker. The random
// expectation is the mean over counted pairs of 1 / (number of equally
// good free workers): what b would do picking among them blindly.
// With one replica, both of a pair are decided by the same router,
// which knows its own first pick.
func routingQuality(fleet []string, recs []scaleRecord, decs map[string]observedDecision) quality {
	var q quality
	type req struct {
		group    int
		dec      observedDecision
		finished time.Time // completion heard (or the client's answer)
	}
	var rs []req
	for _, r := range recs {
		q.promptTokens += r.prompt
		q.cachedTokens += r.cached
		d, ok := decs[r.id]
		if !ok {
			continue
		}
		q.decided++
		q.predictedTok += d.GetPredictedCachedTokens()
		q.decidedPrompt += d.GetPromptTokens()
		rs = append(rs, req{group: r.group, dec: d, finished: r.end})
	}
	if q.promptTokens > 0 {
		q.hitPct = 100 * float64(q.cachedTokens) / float64(q.promptTokens)
	}
	if q.decidedPrompt > 0 {
		q.predictedPct = 100 * float64(q.predictedTok) / float64(q.decidedPrompt)
	}
	sort.Slice(rs, func(i, j int) bool {
		return rs[i].dec.GetDecidedAt().AsTime().Before(rs[j].dec.GetDecidedAt().AsTime())
	})
	workers := map[string]bool{}
	groups := map[int]map[string]bool{}
	for _, r := range rs {
		workers[r.dec.GetEndpointId()] = true
		if groups[r.group] == nil {
			groups[r.group] = map[string]bool{}
		}
		groups[r.group][r.dec.GetEndpointId()] = true
	}
	q.workers = len(workers)
	q.spreadMin = math.MaxInt
	for _, g := range groups {
		q.spreadMean += float64(len(g)) / float64(len(groups))
		q.spreadMin, q.spreadMax = min(q.spreadMin, len(g)), max(q.spreadMax, len(g))
	}
	if len(groups) == 0 {
		q.spreadMin = 0
	}
	var dups int
	var random float64
	for i, a := range rs {
		at := a.dec.GetDecidedAt().AsTime()
		pick := a.dec.GetEndpointId()
		good := -1 // computed at a's first pair
		for _, b := range rs[i+1:] {
			if !b.dec.GetDecidedAt().AsTime().Before(a.dec.heard) {
				break
			}
			if b.group != a.group {
				continue
			}
			if good < 0 {
				// The fleet as of a's decision, from the decisions heard
				// before it.
				busy, warm := map[string]bool{}, map[string]bool{}
				for _, r := range rs[:i] {
					if !r.dec.heard.Before(at) {
						continue
					}
					w := r.dec.GetEndpointId()
					if r.group == a.group {
						warm[w] = true
					}
					if r.finished.After(at) {
						busy[w] = true
					}
				}
				good = 1
				for _, w := range fleet {
					if w != pick && !busy[w] && warm[w] == warm[pick] {
						good++
					}
				}
			}
			if good < 2 {
				continue
			}
			q.pairs++
			cross := b.dec.GetRouterId() != a.dec.GetRouterId()
			if cross {
				q.crossPairs++
			}
			random += 1 / float64(good)
			if b.dec.GetEndpointId() == pick {
				dups++
				if cross {
					q.crossDups++
				}
			}
		}
	}
	if q.pairs > 0 {
		q.dupPct = 100 * float64(dups) / float64(q.pairs)
		q.randomPct = 100 * random / float64(q.pairs)
	}
	return q
}

// histogram is a Prometheus histogram's cumulative buckets, summed over
// label sets.
type histogram struct {
	le     []float64
	counts []float64
	count  float64
}

func routeHistograms(t *testing.T, rs []*service) histogram {
	t.Helper()
	var h histogram
	for _, r := range rs {
		x, err := readHistogram(r.httpURL+"/metrics", "switchyard_router_route_duration_seconds")
		must(t, err)
		h = h.plus(x)
	}
	return h
}

func readHistogram(url, name string) (histogram, error) {
	resp, err := probeClient.Get(url)
	if err != nil {
		return histogram{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return histogram{}, err
	}
	byLE := map[float64]float64{}
	var h histogram
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, name+"_bucket{"); ok {
			i := strings.Index(rest, `le="`)
			if i < 0 {
				continue
			}
			v := rest[i+4:]
			le := v[:strings.IndexByte(v, '"')]
			var x, n float64
			if le == "+Inf" {
				x = math.Inf(1)
			} else if _, err := fmt.Sscan(le, &x); err != nil {
				continue
			}
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &n); err != nil {
				continue
			}
			byLE[x] += n
		} else if rest, ok := strings.CutPrefix(line, name+"_count"); ok {
			var n float64
			_, _ = fmt.Sscan(strings.TrimSpace(rest[strings.LastIndexByte(rest, ' ')+1:]), &n)
			h.count += n
		}
	}
	h.le = slices.Sorted(func(yield func(float64) bool) {
		for k := range byLE {
			if !yield(k) {
				return
			}
		}
	})
	for _, le := range h.le {
		h.counts = append(h.counts, byLE[le])
	}
	return h, nil
}

func (h histogram) plus(x histogram) histogram {
	if len(h.le) == 0 {
		return x
	}
	out := histogram{le: h.le, count: h.count + x.count}
	for i := range h.le {
		out.counts = append(out.counts, h.counts[i]+x.counts[i])
	}
	return out
}

func (h histogram) minus(x histogram) histogram {
	if len(x.le) == 0 {
		return h
	}
	out := histogram{le: h.le, count: h.count - x.count}
	for i := range h.le {
		out.counts = append(out.counts, h.counts[i]-x.counts[i])
	}
	return out
}

// over counts the observations above le, one of the histogram's bounds.
func (h histogram) over(le float64) float64 {
	for i, b := range h.le {
		if b == le {
			return h.count - h.counts[i]
		}
	}
	return math.NaN()
}

// quantile interpolates linearly inside the bucket that holds it.
func (h histogram) quantile(q float64) float64 {
	if h.count == 0 {
		return math.NaN()
	}
	rank := q * h.count
	prevLE, prevN := 0.0, 0.0
	for i, le := range h.le {
		if n := h.counts[i]; n >= rank {
			if math.IsInf(le, 1) {
				return math.Inf(1) // past the top bucket
			}
			if n == prevN {
				return le
			}
			return prevLE + (le-prevLE)*(rank-prevN)/(n-prevN)
		}
		prevLE, prevN = le, h.counts[i]
	}
	return prevLE
}

func fmtSecs(s float64) string {
	if math.IsNaN(s) {
		return "-"
	}
	if math.IsInf(s, 1) {
		return "above the top bucket"
	}
	return fmt.Sprintf("%.2f ms", s*1e3)
}

func kvStreamState(t *testing.T, url string) jetstream.StreamState {
	t.Helper()
	nc, err := nats.Connect(url)
	must(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, bus.StreamKV)
	must(t, err)
	info, err := st.Info(ctx)
	must(t, err)
	return info.State
}

// evictionStorm resets every worker's prefix cache at once and times
// until each router's index and each kvtracker's block count are empty.
func evictionStorm(t *testing.T, f *fleet, obs *natsObserver) [][2]string {
	t.Helper()
	var blocks []float64
	for _, r := range f.routers {
		v, _, _ := metric(r.httpURL+"/metrics", "switchyard_router_kv_index_blocks")
		blocks = append(blocks, v)
	}
	var trackerBlocks float64
	for _, tr := range f.trackers {
		v, _, _ := metric(tr.httpURL+"/metrics", "switchyard_kvtracker_cached_blocks")
		trackerBlocks += v
	}
	lag0 := trackerLag(t, f)
	obs.phase(0)
	before := obs.counts(0)

	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(f.workers))
	for _, w := range f.workers {
		wg.Go(func() {
			for try := 0; ; try++ {
				resp, err := c.Post(w.url+"/reset_prefix_cache", "", nil)
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						return
					}
				}
				if try == 50 {
					errs <- fmt.Errorf("%s: reset_prefix_cache: %v %v", w.id, resp, err)
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	sent := time.Since(start)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	emptied := make([]time.Duration, len(f.routers))
	var trackerEmpty time.Duration
	deadline := start.Add(60 * time.Second)
	for time.Now().Before(deadline) {
		done := true
		for i, r := range f.routers {
			if emptied[i] > 0 {
				continue
			}
			if v, ok, _ := metric(r.httpURL+"/metrics", "switchyard_router_kv_index_blocks"); ok && v == 0 {
				emptied[i] = time.Since(start)
			} else {
				done = false
			}
		}
		if trackerEmpty == 0 {
			var n float64
			for _, tr := range f.trackers {
				v, _, _ := metric(tr.httpURL+"/metrics", "switchyard_kvtracker_cached_blocks")
				n += v
			}
			if n == 0 {
				trackerEmpty = time.Since(start)
			} else {
				done = false
			}
		}
		if done {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	for i, d := range emptied {
		if d == 0 {
			v, _, _ := metric(f.routers[i].httpURL+"/metrics", "switchyard_router_kv_index_blocks")
			t.Errorf("%s: its index still holds %.0f of %.0f blocks a minute after the storm", f.routers[i].name, v, blocks[i])
		}
	}
	time.Sleep(200 * time.Millisecond)
	lag := trackerLag(t, f).minus(lag0)
	after := obs.counts(0)
	var msgs, byts int64
	for k, v := range after {
		if strings.HasPrefix(k, "KV deltas") {
			msgs += v[0] - before[k][0]
			byts += v[1] - before[k][1]
		}
	}
	sorted := slices.Clone(emptied)
	slices.Sort(sorted)
	rounded := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	var heaps []string
	for _, r := range f.routers {
		r.collect()
		h, _ := r.heapInuse()
		heaps = append(heaps, fmt.Sprintf("%.1f", h/(1<<20)))
	}
	return [][2]string{
		{"blocks before", fmt.Sprintf("%.0f on the kvtrackers (all %d workers); each router's index %v", trackerBlocks, len(f.workers), blocks)},
		{"resets sent", fmt.Sprintf("%d POST /reset_prefix_cache at once, all answered in %s", len(f.workers), rounded(sent))},
		{"kvtrackers' cached_blocks at 0", rounded(trackerEmpty) + " after the first reset (the gauge follows the summaries)"},
		{"routers' indexes empty", fmt.Sprintf("first %s, last %s after the first reset", rounded(sorted[0]), rounded(sorted[len(sorted)-1]))},
		{"kvtracker lag (engine ts → delta published)", fmt.Sprintf("p50 %s, p99 %s over %d batches", fmtSecs(lag.quantile(0.5)), fmtSecs(lag.quantile(0.99)), int(lag.count))},
		{"KV deltas on NATS", fmt.Sprintf("%d messages, %.1f KiB", msgs, float64(byts)/1024)},
		{"router heaps after the storm", strings.Join(heaps, ", ") + " MiB"},
	}
}

func trackerLag(t *testing.T, f *fleet) histogram {
	t.Helper()
	var h histogram
	for _, tr := range f.trackers {
		x, err := readHistogram(tr.httpURL+"/metrics", "switchyard_kvtracker_lag_seconds")
		must(t, err)
		h = h.plus(x)
	}
	return h
}

// directRoutes calls Route on r n times, one at a time, with the groups'
// 8k-token chats, and summarises the client's latencies.
func directRoutes(t *testing.T, r *service, p *scalePrompts, n int) string {
	t.Helper()
	conn, err := grpc.NewClient(r.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	defer conn.Close()
	rc := routerv1.NewRouterClient(conn)
	var lat []time.Duration
	for i := range n {
		body := p.body(i % scaleGroups)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t0 := time.Now()
		resp, err := rc.Route(ctx, &routerv1.RouteRequest{RequestId: fmt.Sprintf("direct-%d", i), Tenant: "t", Model: model,
			Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: body})
		d := time.Since(t0)
		cancel()
		if err != nil || resp.GetTarget() == nil {
			t.Fatalf("direct Route %d: %v %v", i, resp, err)
		}
		lat = append(lat, d)
	}
	slices.Sort(lat)
	pct := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	slow := 0
	for _, d := range lat {
		if d > 20*time.Millisecond {
			slow++
		}
	}
	return fmt.Sprintf("client side: p50 %s, p90 %s, p99 %s, max %s over %d calls one at a time (%d over 20 ms)", pct(0.5).Round(10*time.Microsecond),
		pct(0.9).Round(10*time.Microsecond), pct(0.99).Round(10*time.Microsecond), lat[len(lat)-1].Round(10*time.Microsecond), n, slow)
}
