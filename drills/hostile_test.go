package drills

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// hostile is one kind of hostile request.
type hostile struct {
	name string
	body func() []byte
	// status is the answer every such request must get.
	status int
	// within bounds each answer.
	within time.Duration
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

// TestHostileBodies: oversized and deeply nested bodies, many at once,
// while the steady load runs. Each gets its clear error in the OpenAI
// shape within its bound, the load is not disturbed, and the gateways'
// and routers' memory comes back.
func TestHostileBodies(t *testing.T) {
	f := startFleet(t, defaultOptions())
	l := startLoad(t, f, 4)
	l.waitRequests(t, 8, 30*time.Second)
	svcs := append(append([]*service{}, f.gateways...), f.routers...)
	before := map[*service]memory{}
	for _, s := range svcs {
		before[s] = s.memory(t)
	}

	kinds := []hostile{
		{name: "oversized (9 MiB)", body: oversized, status: http.StatusRequestEntityTooLarge, within: 10 * time.Second},
		{name: "nested 100k deep", body: deep, status: http.StatusBadRequest, within: 10 * time.Second},
	}
	const each = 16
	t0 := time.Now()
	var wg sync.WaitGroup
	c := &http.Client{Timeout: time.Minute}
	for _, k := range kinds {
		body := k.body()
		for i := range each {
			wg.Go(func() {
				g := f.gateways[i%len(f.gateways)]
				start := time.Now()
				status, _, b, err := post(c, g.httpURL, body)
				took := time.Since(start)
				switch {
				case err != nil && status == 0:
					t.Errorf("%s: %v", k.name, err)
				case status != k.status || !openAIError(b):
					t.Errorf("%s: status %d, body %.200q; want %d with an OpenAI error", k.name, status, b, k.status)
				case took > k.within:
					t.Errorf("%s: answered after %v, over %v", k.name, took, k.within)
				}
			})
		}
	}
	wg.Wait()
	t1 := time.Now()
	peak := map[*service]memory{}
	for _, s := range svcs {
		peak[s] = s.memory(t)
	}
	// The heap comes back once the garbage is collected; the steady load
	// keeps the collector running.
	took := until(t, t1, 60*time.Second, "gateways' and routers' heap back within 32 MiB of before", func() bool {
		for _, s := range svcs {
			h, err := s.heapInuse()
			if err != nil || h > before[s].heap+32*mib {
				return false
			}
		}
		return true
	})
	for _, s := range svcs {
		after := s.memory(t)
		t.Logf("%s: heap %.0f → %.0f → %.0f MiB, rss %.0f → %.0f → %.0f MiB", s.name,
			before[s].heap/mib, peak[s].heap/mib, after.heap/mib, before[s].rss/mib, peak[s].rss/mib, after.rss/mib)
		if after.rss > before[s].rss+256*mib {
			t.Errorf("%s: resident set grew from %.0f to %.0f MiB", s.name, before[s].rss/mib, after.rss/mib)
		}
	}
	l.waitRequests(t, 8, 30*time.Second)
	l.stop()
	steady(t, l, t0, time.Now(), "load beside the hostile requests")
	// A body the gateway cannot read names no model: it is counted in the
	// gateway's metrics, not metered, so only the load has usage events.
	checkUsage(t, f, l.snapshot(), 30*time.Second)
	report(t, result{
		fault:    fmt.Sprintf("%d oversized (9 MiB) and %d 100k-deep bodies at once", each, each),
		client:   "413 / 400 in the OpenAI error shape; the steady load undisturbed",
		recovery: "gateways' and routers' Go heap back within 32 MiB",
		took:     took, bound: 30 * time.Second,
	})
}
