package drills

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// hostile is one kind of hostile request.
type hostile struct {
	name string
	body func() []byte
	// statuses are the answers such a request may get; an error answer
	// must be in the OpenAI shape.
	statuses []int
	// within bounds each answer.
	within time.Duration
	// each is how many are sent at once.
	each int
}

// oversized is a chat body just over the gateway's default 8 MiB limit.
func oversized() []byte {
	return []byte(`{"model":"` + model + `","messages":[{"role":"user","content":"` + strings.Repeat("a", 9<<20) + `"}]}`)
}

// deep nests arrays past the JSON nesting limit every reader applies.
func deep() []byte {
	return []byte(`{"model":"` + model + `","messages":[{"role":"user","content":"hi"}],"x":` +
		strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + `}`)
}

// post sends body to a gateway and returns the status, the request id
// and the body of the answer.
func post(c *http.Client, url string, body []byte) (int, string, []byte, error) {
	resp, err := c.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header.Get("X-Request-Id"), b, err
}

// openAIError says whether b is an error in the OpenAI API's shape.
func openAIError(b []byte) bool {
	var e struct {
		Error *struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	return json.Unmarshal(b, &e) == nil && e.Error != nil && e.Error.Message != "" && e.Error.Type != ""
}

// memory is what a service holds: its Go heap and resident set.
type memory struct{ heap, rss float64 }

func (s *service) memory(t *testing.T) memory {
	t.Helper()
	h, err := s.heapInuse()
	must(t, err)
	r, err := s.rss()
	must(t, err)
	return memory{heap: h, rss: float64(r)}
}

const mib = 1 << 20

// memWatch follows the Go heap and resident set of services across a
// hostile drill.
type memWatch struct {
	svcs   []*service
	before map[*service]memory
}

func watchMemory(t *testing.T, svcs ...*service) *memWatch {
	m := &memWatch{svcs: svcs, before: map[*service]memory{}}
	for _, s := range svcs {
		m.before[s] = s.memory(t)
	}
	return m
}

// back waits until every router's live heap (collected on request) is
// back within slack of where it was, and every gateway's heap (collected
// when its own pacing says: it serves no profiles) within 2×slack; it logs
// the numbers and returns the time since from. A resident set that grew by
// more than 256 MiB fails the drill.
func (m *memWatch) back(t *testing.T, from time.Time, slack float64) time.Duration {
	t.Helper()
	peak := map[*service]memory{}
	for _, s := range m.svcs {
		peak[s] = s.memory(t)
	}
	took := until(t, from, 60*time.Second, "heap back where it was", func() bool {
		for _, s := range m.svcs {
			limit := m.before[s].heap + slack
			if s.pprof {
				s.collect()
			} else {
				limit += slack
			}
			h, err := s.heapInuse()
			if err != nil || h > limit {
				return false
			}
		}
		return true
	})
	for _, s := range m.svcs {
		if s.pprof {
			// Twice: what sync.Pools hold goes at the second collection.
			s.collect()
			s.collect()
		}
		after := s.memory(t)
		b := m.before[s]
		t.Logf("%s: heap %.0f → %.0f → %.0f MiB, rss %.0f → %.0f → %.0f MiB", s.name,
			b.heap/mib, peak[s].heap/mib, after.heap/mib, b.rss/mib, peak[s].rss/mib, after.rss/mib)
		if after.rss > b.rss+256*mib {
			t.Errorf("%s: resident set grew from %.0f to %.0f MiB", s.name, b.rss/mib, after.rss/mib)
		}
	}
	return took
}

// sendHostile sends every kind's requests at once, round-robin over the
// gateways, checks each answer, and returns them as records (with the
// request ids the gateways gave).
func sendHostile(t *testing.T, f *fleet, kinds []hostile) []record {
	t.Helper()
	var mu sync.Mutex
	var out []record
	var wg sync.WaitGroup
	c := &http.Client{Timeout: 2 * time.Minute}
	for _, k := range kinds {
		body := k.body()
		var slowest time.Duration
		var statuses []int
		defer func() {
			t.Logf("%s ×%d: statuses %v, slowest answer %v", k.name, k.each, statuses, slowest.Round(time.Millisecond))
		}()
		for i := range k.each {
			wg.Go(func() {
				g := f.gateways[i%len(f.gateways)]
				start := time.Now()
				status, id, b, err := post(c, g.httpURL, body)
				took := time.Since(start)
				switch {
				case err != nil && status == 0:
					t.Errorf("%s: %v", k.name, err)
				case !slices.Contains(k.statuses, status) || (status >= 400 && !openAIError(b)):
					t.Errorf("%s: status %d, body %.200q; want one of %v, errors in the OpenAI shape", k.name, status, b, k.statuses)
				case took > k.within:
					t.Errorf("%s: answered after %v, over %v", k.name, took, k.within)
				}
				mu.Lock()
				out = append(out, record{id: id, status: status, start: start, end: time.Now()})
				slowest = max(slowest, took)
				statuses = append(statuses, status)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	return out
}

// cpuSeconds is a service's CPU time so far.
func (s *service) cpuSeconds() float64 {
	v, _, _ := metric(s.httpURL+"/metrics", "process_cpu_seconds_total")
	return v
}

// inflight is the requests a router counts in flight on every endpoint.
func inflight(s *service) float64 {
	v, _, _ := metric(s.httpURL+"/metrics", "switchyard_router_endpoint_inflight_requests")
	return v
}

// TestHostileBodies: oversized and deeply nested bodies, many at once,
// while the steady load runs. Each gets its clear error in the OpenAI
// shape within its bound, the load is not disturbed, and the gateways'
// and routers' memory comes back.
func TestHostileBodies(t *testing.T) {
	f := startFleet(t, defaultOptions())
	l := startLoad(t, f, 4)
	l.waitRequests(t, 8, 30*time.Second)
	mem := watchMemory(t, append(append([]*service{}, f.gateways...), f.routers...)...)

	t0 := time.Now()
	sendHostile(t, f, []hostile{
		{name: "oversized (9 MiB)", body: oversized, statuses: []int{http.StatusRequestEntityTooLarge}, within: 10 * time.Second, each: 16},
		{name: "nested 100k deep", body: deep, statuses: []int{http.StatusBadRequest}, within: 10 * time.Second, each: 16},
	})
	took := mem.back(t, time.Now(), 32*mib)
	l.waitRequests(t, 8, 30*time.Second)
	l.stop()
	steady(t, l, t0, time.Now(), "load beside the hostile requests")
	// A body the gateway cannot read names no model: it is counted in the
	// gateway's metrics, not metered, so only the load has usage events.
	checkUsage(t, f, l.snapshot(), 30*time.Second)
	report(t, result{
		fault:    "16 oversized (9 MiB) and 16 100k-deep bodies at once",
		client:   "413 / 400 in the OpenAI error shape; the steady load undisturbed",
		recovery: "routers' live heap back within 32 MiB, gateways' heap within 64 MiB",
		took:     took, bound: 30 * time.Second,
	})
}

// TestHostilePrompts: bodies the gateway accepts whose prompts are costly
// to read — 20k special tokens in one 200 KB message, 20k tiny messages —
// several at once. Each is answered (served or refused
// in the OpenAI shape) within its bound; the routers do not keep a core
// busy afterwards nor count phantom requests in flight; their memory and
// the gateways' comes back.
func TestHostilePrompts(t *testing.T) {
	f := startFleet(t, defaultOptions())
	l := startLoad(t, f, 4)
	l.waitRequests(t, 8, 30*time.Second)
	mem := watchMemory(t, append(append([]*service{}, f.gateways...), f.routers...)...)
	answers := []int{http.StatusOK, http.StatusBadRequest, http.StatusRequestEntityTooLarge}

	t0 := time.Now()
	hs := sendHostile(t, f, []hostile{
		{name: "20k special tokens in one message", body: specials, statuses: answers, within: 5 * time.Second, each: 4},
		{name: "20k tiny messages", body: manyMessages, statuses: answers, within: 5 * time.Second, each: 4},
	})
	t1 := time.Now()
	// With the answers out, the routers are back to the steady load's
	// work: well under a core each.
	time.Sleep(time.Second)
	var cpu0 []float64
	for _, r := range f.routers {
		cpu0 = append(cpu0, r.cpuSeconds())
	}
	const window = 2 * time.Second
	time.Sleep(window)
	for i, r := range f.routers {
		if used := r.cpuSeconds() - cpu0[i]; used > 0.5*window.Seconds() {
			t.Errorf("%s: %.2f s of CPU in the %v after the hostile requests were answered: still working on them", r.name, used, window)
		}
	}
	took := mem.back(t, t1, 64*mib)
	l.waitRequests(t, 8, 30*time.Second)
	l.stop()
	steady(t, l, t0, time.Now(), "load beside the hostile requests")
	until(t, time.Now(), 10*time.Second, "no request in flight on any router once the load stopped", func() bool {
		for _, r := range f.routers {
			if inflight(r) != 0 {
				return false
			}
		}
		return true
	})
	var metered []record
	for _, r := range hs {
		if r.status == http.StatusOK {
			metered = append(metered, r)
		}
	}
	checkUsage(t, f, append(l.snapshot(), metered...), 30*time.Second)
	report(t, result{
		fault:    "4 × 20k special tokens (200 KB) and 4 × 20k tiny messages (600 KB) at once",
		client:   "each answered within 5 s, errors in the OpenAI shape; the steady load undisturbed",
		recovery: "routers idle again, none in flight, their live heap back within 64 MiB, the gateways' within 128 MiB (from the last answer)",
		took:     took, bound: 30 * time.Second,
	})
}

// TestHostileHugePrompt: messages of 7 MiB, under the gateway's body
// limit and over the router's prompt limit, several at once. Each is
// refused with a 400 in the OpenAI shape at once; the load is not
// disturbed; the memory they took comes back.
func TestHostileHugePrompt(t *testing.T) {
	f := startFleet(t, defaultOptions())
	l := startLoad(t, f, 4)
	l.waitRequests(t, 8, 30*time.Second)
	mem := watchMemory(t, append(append([]*service{}, f.gateways...), f.routers...)...)
	t0 := time.Now()
	sendHostile(t, f, []hostile{
		{name: "one 7 MiB message", body: longMessage, statuses: []int{http.StatusBadRequest}, within: 2 * time.Second, each: 4},
	})
	took := mem.back(t, time.Now(), 32*mib)
	l.waitRequests(t, 8, 30*time.Second)
	l.stop()
	steady(t, l, t0, time.Now(), "load beside the hostile requests")
	checkUsage(t, f, l.snapshot(), 30*time.Second)
	report(t, result{
		fault:    "4 messages of 7 MiB at once (under the body limit, over the prompt limit)",
		client:   "400 in the OpenAI shape within 2 s; the steady load undisturbed",
		recovery: "routers' live heap back within 32 MiB, gateways' heap within 64 MiB",
		took:     took, bound: 30 * time.Second,
	})
}

// specials is one 200 KB message of 20k special tokens (a quadratic scan
// took seconds on it).
func specials() []byte {
	return chatBody(`[{"role":"user","content":"` + strings.Repeat("<|im_end|>", 20_000) + `"}]`)
}

// manyMessages is 20k tiny messages in one body.
func manyMessages() []byte {
	return chatBody("[" + strings.TrimSuffix(strings.Repeat(`{"role":"user","content":"a"},`, 20_000), ",") + "]")
}

// longMessage is one 7 MiB message of words, under the gateway's body
// limit.
func longMessage() []byte {
	return chatBody(`[{"role":"user","content":"` + strings.Repeat("lorem ", 7<<20/6) + `"}]`)
}

func chatBody(messages string) []byte {
	return []byte(`{"model":"` + model + `","max_tokens":4,"messages":` + messages + `}`)
}
