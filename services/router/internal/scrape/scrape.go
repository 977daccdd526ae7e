package scrape

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/fleet"
	"github.com/switchyard-dev/switchyard/services/router/internal/endpoints"
)

// maxBody bounds what one scrape reads: a vLLM /metrics page is tens of
// kilobytes; a runaway page must not exhaust the router's memory.
const maxBody = 8 << 20

// modelsRefresh is how often discovered model lists are re-read from a
// healthy worker; models change only when a worker restarts, and a restart
// shows up as a failed scrape, which also triggers a re-read.
const modelsRefresh = 30 * time.Second

// Result is one scrape of one endpoint.
type Result struct {
	Metrics
	// Models is the freshly read model list; nil when this scrape did not
	// read it (configured models, or not due).
	Models []string
	// Err is set when the endpoint did not answer properly; the endpoint is
	// then unhealthy until a scrape succeeds.
	Err error
}

// Sink receives every scrape result. started is when the scrape request was
// sent: decisions made after it cannot be in the numbers it returned.
type Sink interface {
	Observe(id string, started time.Time, res Result)
}

// Config for a Manager.
type Config struct {
	Interval time.Duration
	Timeout  time.Duration
	// Client defaults to a client with its own transport.
	Client *http.Client
	Sink   Sink
	// OnError, when set, is called for each failed scrape (metrics).
	OnError func(id string)
	Log     zerolog.Logger
}

// Manager runs one scrape loop per endpoint and reconciles the set of loops
// with the endpoint set it is given. Loops never touch routing state except
// through Sink, so a slow or dead worker never blocks Route.
type Manager struct {
	cfg Config

	mu      sync.Mutex
	workers map[string]*worker
	wg      sync.WaitGroup
}

type worker struct {
	spec   endpoints.Spec
	cancel context.CancelFunc
	done   chan struct{}
}

// NewManager builds a Manager; loops start with Set.
func NewManager(cfg Config) *Manager {
	if cfg.Client == nil {
		cfg.Client = &http.Client{Transport: &http.Transport{
			Proxy:               nil, // workers are in-cluster; never route scrapes through a proxy
			MaxIdleConnsPerHost: 2,
			IdleConnTimeout:     90 * time.Second,
		}}
	}
	return &Manager{cfg: cfg, workers: map[string]*worker{}}
}

// Set makes the running loops match specs: new endpoints start, removed
// ones stop, changed ones restart. Loops run until ctx ends or they are
// removed.
func (m *Manager) Set(ctx context.Context, specs []endpoints.Spec) {
	m.mu.Lock()
	defer m.mu.Unlock()
	want := make(map[string]endpoints.Spec, len(specs))
	for _, s := range specs {
		want[s.ID] = s
	}
	for id, w := range m.workers {
		s, keep := want[id]
		if keep && sameSpec(s, w.spec) {
			continue
		}
		w.cancel()
		<-w.done
		delete(m.workers, id)
	}
	for _, s := range specs {
		if _, running := m.workers[s.ID]; running {
			continue
		}
		wctx, cancel := context.WithCancel(ctx)
		w := &worker{spec: s, cancel: cancel, done: make(chan struct{})}
		m.workers[s.ID] = w
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			defer close(w.done)
			m.loop(wctx, s)
		}()
	}
}

// Wait blocks until every loop has stopped (after ctx given to Set ended).
func (m *Manager) Wait() { m.wg.Wait() }

func sameSpec(a, b endpoints.Spec) bool {
	return a.ID == b.ID && a.URL == b.URL && a.MetricsPath == b.MetricsPath && a.Kind == b.Kind && slices.Equal(a.Models, b.Models)
}

func (m *Manager) loop(ctx context.Context, spec endpoints.Spec) {
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	discover := len(spec.Models) == 0
	var modelsAt time.Time
	healthy := false
	for {
		started := time.Now()
		fetchModels := discover && (!healthy || started.Sub(modelsAt) >= modelsRefresh)
		res := m.scrapeOnce(ctx, spec, fetchModels)
		if ctx.Err() != nil {
			return
		}
		if res.Err != nil {
			if healthy {
				m.cfg.Log.Warn().Str("endpoint", spec.ID).Err(res.Err).Msg("endpoint unhealthy")
			}
			healthy = false
			if m.cfg.OnError != nil {
				m.cfg.OnError(spec.ID)
			}
		} else {
			if !healthy {
				m.cfg.Log.Info().Str("endpoint", spec.ID).Int64("waiting", res.Waiting).Int64("running", res.Running).Msg("endpoint healthy")
			}
			healthy = true
			if fetchModels {
				modelsAt = started
			}
		}
		m.cfg.Sink.Observe(spec.ID, started, res)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (m *Manager) scrapeOnce(ctx context.Context, spec endpoints.Spec, fetchModels bool) Result {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	var res Result
	base, path := spec.URL, cmp.Or(spec.MetricsPath, fleet.DefaultMetricsPath)
	body, err := m.get(ctx, base+path, "text/plain;version=0.0.4")
	if err != nil {
		res.Err = err
		return res
	}
	res.Metrics, err = ParseMetrics(body)
	body.Close()
	if err != nil {
		res.Err = fmt.Errorf("scrape %s%s: %w", base, path, err)
		return res
	}
	if fetchModels {
		// Workers started with --api-key guard /v1/models; list their
		// models in the endpoints file instead of relying on discovery.
		body, err := m.get(ctx, base+"/v1/models", "application/json")
		if err != nil {
			res.Err = err
			return res
		}
		res.Models, err = ParseModels(body)
		body.Close()
		if err != nil {
			res.Err = fmt.Errorf("scrape %s/v1/models: %w", base, err)
			return res
		}
	}
	return res
}

type limitedBody struct {
	io.Reader
	io.Closer
}

func (m *Manager) get(ctx context.Context, url, accept string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	req.Header.Set("Accept", accept)
	resp, err := m.cfg.Client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("scrape %s: no answer within %s", url, m.cfg.Timeout)
		}
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		return nil, fmt.Errorf("scrape %s: status %s", url, resp.Status)
	}
	return limitedBody{Reader: io.LimitReader(resp.Body, maxBody), Closer: resp.Body}, nil
}
