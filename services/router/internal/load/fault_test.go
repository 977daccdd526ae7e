package load_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/internal/sim"
	"github.com/switchyard-dev/switchyard/internal/tokenizer"
	"github.com/switchyard-dev/switchyard/services/router/internal/endpoints"
	"github.com/switchyard-dev/switchyard/services/router/internal/load"
	"github.com/switchyard-dev/switchyard/services/router/internal/predict"
	"github.com/switchyard-dev/switchyard/services/router/internal/scrape"
)

// picker is default routing.
type picker struct {
	bs []policy.Backend
	d  policy.Decision
}

func (p *picker) Pick(rows []load.Backend, rotation uint64) int {
	p.bs = p.bs[:0]
	for i := range rows {
		p.bs = append(p.bs, rows[i].Policy())
	}
	policy.DefaultProgram().Evaluate(&policy.Request{Model: sim.DefaultServedModelName, Rotation: rotation}, p.bs, &p.d)
	return p.d.Chosen
}

// loop is a router's load table in front of simulated workers, as the
// router and gateway use it: scraped, deciding, learning from each
// request's wall-clock TTFT.
type loop struct {
	t     *testing.T
	fleet *sim.Fleet
	table *load.Table
	urls  map[string]string
	tok   *tokenizer.Simple

	mu     sync.Mutex
	mup    sync.Mutex // serialises Decide with its picker
	pick   picker
	chosen []string // every decision's endpoint, in order
	n      int
}

func (l *loop) request(ctx context.Context, r *rand.Rand) {
	// A new prefix every time: cached nowhere, the requests the failure
	// sent all to one worker.
	var b strings.Builder
	words := strings.Fields(tokenizer.SampleText)
	b.WriteString(strconv.FormatUint(r.Uint64(), 36))
	for range 500 + r.IntN(2000) {
		b.WriteByte(' ')
		b.WriteString(words[r.IntN(len(words))])
	}
	prompt := b.String()
	l.mu.Lock()
	l.n++
	id := "r" + strconv.Itoa(l.n)
	l.mu.Unlock()
	l.mup.Lock()
	rows, i := l.table.Decide(load.Request{Model: sim.DefaultServedModelName, ID: id, PromptTokens: int64(len(l.tok.Encode(prompt)))},
		[]string{sim.DefaultServedModelName}, time.Now(), nil, &l.pick, true)
	l.mup.Unlock()
	if i < 0 {
		time.Sleep(10 * time.Millisecond) // every worker unhealthy
		return
	}
	ep := rows[i].EndpointID
	l.mu.Lock()
	l.chosen = append(l.chosen, ep)
	l.mu.Unlock()
	body, _ := json.Marshal(map[string]any{"model": sim.DefaultServedModelName, "prompt": prompt, "max_tokens": 1})
	start := time.Now()
	c := load.Completion{RequestID: id, EndpointID: ep}
	defer func() { c.At = time.Now(); l.table.Complete(c) }()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, l.urls[ep]+"/v1/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	var out struct {
		Usage struct {
			PromptTokens        int64 `json:"prompt_tokens"`
			PromptTokensDetails struct {
				CachedTokens int64 `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&out) != nil {
		return
	}
	// One token, not streamed: the answer's arrival is the first token's.
	c.Success, c.TTFTSeconds = true, time.Since(start).Seconds()
	c.PromptTokens, c.CachedTokens = out.Usage.PromptTokens, out.Usage.PromptTokensDetails.CachedTokens
}

// drive runs clients concurrent request loops for d.
func (l *loop) drive(clients int, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano())))
			for ctx.Err() == nil {
				l.request(ctx, r)
			}
		})
	}
	wg.Wait()
}

// rates are the prefill rates decisions use now (own blended with the
// fleet's), and the endpoints' own learned ones.
func (l *loop) rates() (used, own map[string]float64) {
	used, own = map[string]float64{}, map[string]float64{}
	l.mup.Lock()
	rows, _ := l.table.Decide(load.Request{Model: sim.DefaultServedModelName, PromptTokens: 1000}, []string{sim.DefaultServedModelName}, time.Now(), nil, &l.pick, false)
	l.mup.Unlock()
	for _, r := range rows {
		if r.Available() {
			used[r.EndpointID] = r.Estimate.PrefillRate
		}
	}
	for _, v := range l.table.Endpoints("") {
		own[v.ID] = v.PrefillRate
	}
	return used, own
}

func spread(m map[string]float64) float64 {
	lo, hi := math.Inf(1), 0.0
	for _, v := range m {
		lo, hi = min(lo, v), max(hi, v)
	}
	return hi / lo
}

// TestEstimatesReconvergeAfterAFreeze is the drill that found learned
// prefill rates diverging for good: four identical simulated workers under
// steady load of new prefixes, two of them frozen (one long enough to
// fail scrapes, one shorter than a scrape timeout, twice). Afterwards the
// rates decisions use agree within a small factor, and new prefixes
// spread over every worker.
func TestEstimatesReconvergeAfterAFreeze(t *testing.T) {
	if testing.Short() {
		t.Skip("drives simulated workers for several seconds")
	}
	cfg := sim.DefaultConfig()
	cfg.Port, cfg.Workers, cfg.TimeScale, cfg.DefaultMaxTokens = 0, 4, 20, 1
	cfg.ShutdownTimeout = 5 * time.Second
	fleet, err := sim.StartFleet(context.Background(), cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Close() })

	table := load.NewTable(load.Config{Prior: predict.DefaultPrior(), RecomputeWeight: 1, PressureWeight: 1,
		FleetHalfLife: 2 * time.Second, ProbeInterval: time.Second})
	l := &loop{t: t, fleet: fleet, table: table, urls: map[string]string{}, tok: tokenizer.NewSimple()}
	var specs []endpoints.Spec
	for _, w := range fleet.Workers() {
		id := "sim-" + strconv.Itoa(w.ID)
		l.urls[id] = w.URL
		specs = append(specs, endpoints.Spec{ID: id, URL: w.URL, Kind: endpoints.KindLocal, Models: []string{sim.DefaultServedModelName}})
	}
	table.SetEndpoints(specs)
	ctx, cancel := context.WithCancel(context.Background())
	scr := scrape.NewManager(scrape.Config{Interval: 50 * time.Millisecond, Timeout: 300 * time.Millisecond, Sink: table, Log: zerolog.Nop()})
	scr.Set(ctx, specs)
	t.Cleanup(func() { cancel(); scr.Wait() })
	<-table.FirstRound()

	l.drive(6, 2*time.Second)
	used, own := l.rates()
	t.Logf("before the faults: used %v, own %v", used, own)

	// The faults, under load: sim-0 frozen for 1.5 s (30 model seconds;
	// its scrapes fail), sim-1 twice for 0.2 s (4 model seconds; a scrape
	// only slows down).
	faults := make(chan struct{})
	go func() {
		defer close(faults)
		time.Sleep(200 * time.Millisecond)
		_ = fleet.Freeze(0, 1500*time.Millisecond)
		for range 2 {
			time.Sleep(400 * time.Millisecond)
			_ = fleet.Freeze(1, 200*time.Millisecond)
		}
	}()
	l.drive(6, 2500*time.Millisecond)
	<-faults

	// Recovery under load, then what decisions look like.
	l.drive(6, 3*time.Second)
	l.mu.Lock()
	from := len(l.chosen)
	l.mu.Unlock()
	l.drive(6, 2*time.Second)
	used, own = l.rates()
	l.mu.Lock()
	count := map[string]int{}
	for _, ep := range l.chosen[from:] {
		count[ep]++
	}
	total := len(l.chosen) - from
	l.mu.Unlock()
	var views []string
	for _, v := range table.Endpoints("") {
		views = append(views, fmt.Sprintf("%s: learned %d rejected %d rate %.0f base %.4f perQueued %.4f", v.ID, v.Learned, v.Rejected, v.PrefillRate, v.Base, v.PerQueued))
	}
	t.Logf("after: used %v, own %v; last %d new prefixes went %v\n%s", used, own, total, count, strings.Join(views, "\n"))
	if len(used) != 4 {
		t.Fatalf("not every worker is healthy again: %v", used)
	}
	// Learned from wall-clock TTFTs on a shared machine, identical
	// workers' rates differ by up to about 2x; diverged, they differed by
	// orders of magnitude.
	if s := spread(used); s > 3 {
		t.Errorf("the rates decisions use differ by %.1fx across identical workers, want at most 3x: %v", s, used)
	}
	for _, n := range count {
		if n < total/8 {
			t.Errorf("new prefixes did not spread: %v of %d", count, total)
			break
		}
	}
	if len(count) != 4 {
		t.Errorf("new prefixes did not reach every worker: %v", count)
	}
}
