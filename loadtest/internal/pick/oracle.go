package pick

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
)

// oracle asks every worker for the TTFT it would give the request if it
// arrived now (the simulator's POST /sim/v1/estimate) and picks the
// smallest: the ceiling a router can reach with perfect knowledge of each
// worker's queue and cache, though blind to requests picked at the same
// instant.
type oracle struct {
	targets []Target
	http    *http.Client
	mu      sync.Mutex
	rng     *rand.Rand
}

func newOracle(targets []Target, o Options) *oracle {
	return &oracle{targets: targets, http: o.HTTP, rng: rand.New(rand.NewPCG(o.Seed, 0x0ac1e))}
}

func (o *oracle) Pick(ctx context.Context, body []byte) (int, func(), error) {
	scores := make([]float64, len(o.targets))
	errs := make([]error, len(o.targets))
	var wg sync.WaitGroup
	for i, t := range o.targets {
		wg.Go(func() { scores[i], errs[i] = o.estimate(ctx, t.URL, body) })
	}
	wg.Wait()
	ok := false
	for i, err := range errs {
		if err != nil {
			scores[i] = math.Inf(1)
		} else {
			ok = true
		}
	}
	if !ok {
		return 0, noop, fmt.Errorf("oracle: %w", errors.Join(errs...))
	}
	o.mu.Lock()
	i := argmin(scores, o.rng)
	o.mu.Unlock()
	return i, noop, nil
}

func (o *oracle) estimate(ctx context.Context, base string, body []byte) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base, "/")+"/sim/v1/estimate", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := o.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("estimate at %s: %w", base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, fmt.Errorf("estimate at %s: %w", base, err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("estimate at %s: status %d: %s", base, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	var est struct {
		TTFT *float64 `json:"ttft_seconds"`
	}
	if err := json.Unmarshal(b, &est); err != nil || est.TTFT == nil || math.IsNaN(*est.TTFT) {
		return 0, fmt.Errorf("estimate at %s: no ttft_seconds in the answer", base)
	}
	return *est.TTFT, nil
}
