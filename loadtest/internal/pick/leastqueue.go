package pick

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

// ScrapeInterval is how often least-queue reads the workers' metrics.
const ScrapeInterval = 100 * time.Millisecond

// vLLM's scheduler gauges.
const (
	metricWaiting = "vllm:num_requests_waiting"
	metricRunning = "vllm:num_requests_running"
)

// leastQueue sends each request to the worker with the fewest requests
// waiting plus running: the last scrape, corrected by the change in this
// picker's own requests in flight there since that scrape (sent ones added,
// finished ones removed). A scrape is a snapshot; without the correction
// every request between two scrapes would pile onto the same worker, and a
// worker that just finished a request would look busier than it is.
type leastQueue struct {
	targets []Target
	http    *http.Client
	mu      sync.Mutex
	rng     *rand.Rand
	scraped []float64 // waiting+running at the last scrape
	// inflight counts this picker's requests per worker; atScrape is the
	// count when the last scrape was taken.
	inflight, atScrape []int
}

func newLeastQueue(targets []Target, o Options) *leastQueue {
	lq := &leastQueue{
		targets: targets, http: o.HTTP, rng: rand.New(rand.NewPCG(o.Seed, 0x1ea57)),
		scraped: make([]float64, len(targets)), inflight: make([]int, len(targets)), atScrape: make([]int, len(targets)),
	}
	if o.Background != nil {
		o.Background(lq.scrapeLoop)
	}
	return lq
}

func (l *leastQueue) Pick(context.Context, []byte) (int, func(), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	scores := make([]float64, len(l.targets))
	for i := range scores {
		scores[i] = max(0, l.scraped[i]+float64(l.inflight[i]-l.atScrape[i]))
	}
	i := argmin(scores, l.rng)
	l.inflight[i]++
	var once sync.Once
	return i, func() {
		once.Do(func() {
			l.mu.Lock()
			l.inflight[i]--
			l.mu.Unlock()
		})
	}, nil
}

func (l *leastQueue) scrapeLoop(ctx context.Context) {
	t := time.NewTicker(ScrapeInterval)
	defer t.Stop()
	for {
		var wg sync.WaitGroup
		for i, tg := range l.targets {
			wg.Go(func() {
				l.mu.Lock()
				before := l.inflight[i]
				l.mu.Unlock()
				q, err := l.scrape(ctx, tg.URL)
				if err != nil {
					return // keep the last value; a worker that stays down still gets its in-flight count
				}
				l.mu.Lock()
				l.scraped[i], l.atScrape[i] = q, before
				l.mu.Unlock()
			})
		}
		wg.Wait()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// maxMetricsBytes bounds a scrape; vLLM's /metrics is tens of kilobytes.
const maxMetricsBytes = 4 << 20

func (l *leastQueue) scrape(ctx context.Context, base string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := l.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("scrape %s: status %d", base, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetricsBytes))
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", base, err)
	}
	g := ParseGauges(string(body), metricWaiting, metricRunning)
	return g[metricWaiting] + g[metricRunning], nil
}
