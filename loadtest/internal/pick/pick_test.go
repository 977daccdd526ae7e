package pick

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/loadtest/internal/fakeoai"
	"github.com/switchyard-dev/switchyard/loadtest/internal/results"
)

func targets(n int) []Target {
	out := make([]Target, n)
	for i := range out {
		out[i] = Target{ID: fmt.Sprint(i), URL: fmt.Sprintf("http://127.0.0.1:1/%d", i)}
	}
	return out
}

func picks(t *testing.T, p Picker, n int) []int {
	t.Helper()
	out := make([]int, n)
	for i := range out {
		idx, release, err := p.Pick(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		release()
		out[i] = idx
	}
	return out
}

func TestSimpleStrategies(t *testing.T) {
	rr, _ := New(results.RoundRobin, targets(3), Options{})
	if got := fmt.Sprint(picks(t, rr, 7)); got != "[0 1 2 0 1 2 0]" {
		t.Errorf("round-robin picks %s", got)
	}
	r1, _ := New(results.Random, targets(3), Options{Seed: 9})
	r2, _ := New(results.Random, targets(3), Options{Seed: 9})
	a, b := picks(t, r1, 300), picks(t, r2, 300)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Error("random with one seed gave two sequences")
	}
	count := make([]int, 3)
	for _, i := range a {
		count[i]++
	}
	for i, c := range count {
		if c < 60 {
			t.Errorf("random picked target %d %d times of 300", i, c)
		}
	}
	d, _ := New(results.Direct, targets(1), Options{})
	if got := picks(t, d, 2); got[0] != 0 || got[1] != 0 {
		t.Errorf("direct picks %v", got)
	}
	if _, err := New(results.Direct, targets(2), Options{}); err == nil {
		t.Error("direct over two targets accepted")
	}
	if _, err := New("fastest", targets(2), Options{}); err == nil {
		t.Error("unknown strategy accepted")
	}
	if _, err := New(results.Random, nil, Options{}); err == nil {
		t.Error("no targets accepted")
	}
}

func TestLeastQueue(t *testing.T) {
	// Worker 0 reports 5 queued, worker 1 reports 1, worker 2 reports 2.
	queues := []int{5, 1, 2}
	var scrapes atomic.Int64
	var ts []Target
	for i, q := range queues {
		srv := fakeoai.New(fakeoai.Echo)
		defer srv.Close()
		srv.Metrics = func() string {
			scrapes.Add(1)
			return fmt.Sprintf("# HELP x\nvllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} %d\nvllm:num_requests_running{engine=\"0\",model_name=\"m\"} 0\n", q)
		}
		ts = append(ts, Target{ID: fmt.Sprint(i), URL: srv.URL})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := New(results.LeastQueue, ts, Options{Seed: 1, Background: func(fn func(context.Context)) { go fn(ctx) }})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for scrapes.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatal("no scrape within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	lq := p.(*leastQueue)
	for {
		lq.mu.Lock()
		done := lq.scraped[0] == 5 && lq.scraped[1] == 1 && lq.scraped[2] == 2
		lq.mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("scrapes did not land")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// In flight counts on top of the scrape: 1 → worker 1 (1), then worker
	// 1 and 2 tie at 2, …; the first pick must be worker 1, and worker 0
	// only once the others reach 5.
	var releases []func()
	counts := make([]int, 3)
	for range 3 {
		i, rel, _ := p.Pick(context.Background(), nil)
		counts[i]++
		releases = append(releases, rel)
	}
	if counts[0] != 0 || counts[1] < 1 {
		t.Errorf("picks per worker %v: want none on the longest queue", counts)
	}
	for _, r := range releases {
		r()
		r() // release is idempotent
	}
	lq.mu.Lock()
	defer lq.mu.Unlock()
	for i, n := range lq.inflight {
		if n != 0 {
			t.Errorf("worker %d: %d in flight after every release", i, n)
		}
	}
}

func TestOracle(t *testing.T) {
	ttfts := []float64{0.9, 0.2, 0.5}
	var ts []Target
	for i, v := range ttfts {
		srv := fakeoai.New(fakeoai.Echo)
		defer srv.Close()
		srv.Estimate = func(fakeoai.Request) float64 { return v }
		ts = append(ts, Target{ID: fmt.Sprint(i), URL: srv.URL})
	}
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	p, _ := New(results.Oracle, ts, Options{Seed: 1})
	i, _, err := p.Pick(context.Background(), body)
	if err != nil || i != 1 {
		t.Errorf("oracle picked %d (%v), want 1", i, err)
	}
	// A worker that fails to estimate is skipped; all failing is an error.
	dead := Target{ID: "dead", URL: "http://127.0.0.1:1"}
	p, _ = New(results.Oracle, []Target{dead, ts[2]}, Options{})
	if i, _, err := p.Pick(context.Background(), body); err != nil || i != 1 {
		t.Errorf("with a dead worker: picked %d (%v), want 1", i, err)
	}
	p, _ = New(results.Oracle, []Target{dead}, Options{})
	if _, _, err := p.Pick(context.Background(), body); err == nil {
		t.Error("oracle with no answering worker did not fail")
	}
}

func TestArgminTies(t *testing.T) {
	p, _ := New(results.Random, targets(1), Options{})
	rng := p.(*random).rng
	count := map[int]int{}
	for range 300 {
		count[argmin([]float64{1, 0, 0, math.Inf(1), 0}, rng)]++
	}
	if len(count) != 3 || count[0] != 0 || count[3] != 0 {
		t.Errorf("ties broken as %v, want spread over 1, 2, 4", count)
	}
}

func TestParseGauges(t *testing.T) {
	text := `# HELP vllm:num_requests_waiting Number of requests waiting.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="a}b"} 3
vllm:num_requests_waiting{engine="1",model_name="m \"q\""} 2 1700000000
vllm:num_requests_running{engine="0"} 4.0
vllm:num_requests_running_other 100
vllm:num_requests_running{engine="0"} NaN
vllm:num_requests_running{broken 9
vllm:num_requests_running 1e0
other_metric 7
`
	g := ParseGauges(text, "vllm:num_requests_waiting", "vllm:num_requests_running", "absent")
	if g["vllm:num_requests_waiting"] != 5 || g["vllm:num_requests_running"] != 5 {
		t.Errorf("gauges %v, want waiting 5 running 5", g)
	}
	if _, ok := g["absent"]; ok {
		t.Error("a metric with no sample is present")
	}
}

func FuzzParseGauges(f *testing.F) {
	f.Add("vllm:num_requests_waiting{engine=\"0\"} 3\n")
	f.Add("a{b=\"}\\\"\"} 1 2\n# x\n")
	f.Add("vllm:num_requests_running +Inf\n")
	f.Fuzz(func(t *testing.T, text string) {
		for _, v := range ParseGauges(text, "vllm:num_requests_waiting", "vllm:num_requests_running", "a") {
			if math.IsNaN(v) {
				t.Fatal("NaN gauge")
			}
		}
	})
}
