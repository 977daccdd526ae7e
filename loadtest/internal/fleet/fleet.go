package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// StopTimeout bounds a graceful stop before the process is killed.
const StopTimeout = 20 * time.Second

// Worker is one simulated vLLM worker.
type Worker struct {
	ID  string
	URL string // http://host:port
}

// SimOptions configure StartSim.
type SimOptions struct {
	// Bin is the switchyard binary.
	Bin       string
	Workers   int
	TimeScale float64
	Model     string
	// Args are extra `switchyard sim` flags.
	Args []string
	// LogDir receives sim.log.
	LogDir string
	// Name names the log file (default "sim").
	Name string
}

// Sim is a running `switchyard sim`.
type Sim struct {
	p       *process
	Workers []Worker
}

// StartSim starts the workers on free loopback ports and returns once each
// answers /health.
func StartSim(ctx context.Context, o SimOptions) (*Sim, error) {
	if o.Name == "" {
		o.Name = "sim"
	}
	args := []string{"sim",
		"--workers", strconv.Itoa(o.Workers),
		"--port", "0",
		"--host", "127.0.0.1",
		"--time-scale", strconv.FormatFloat(o.TimeScale, 'g', -1, 64),
		"--log-format", "json",
	}
	if o.Model != "" {
		args = append(args, "--served-model-name", o.Model)
	}
	args = append(args, o.Args...)
	var mu sync.Mutex
	urls := make([]string, o.Workers)
	seen := 0
	found := make(chan struct{})
	p, err := startProcess(o.Name, o.Bin, args, o.LogDir, func(line string) bool {
		var l struct {
			Message string `json:"message"`
			Worker  *int   `json:"worker"`
			URL     string `json:"url"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Message != "simulated vllm worker started" || l.Worker == nil {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if *l.Worker < 0 || *l.Worker >= len(urls) || urls[*l.Worker] != "" {
			return false
		}
		urls[*l.Worker] = l.URL
		if seen++; seen == len(urls) {
			close(found)
			return true
		}
		return false
	})
	if err != nil {
		return nil, err
	}
	s := &Sim{p: p}
	if err := p.waitFor(ctx, found, "its workers"); err != nil {
		_ = p.stop(StopTimeout)
		return nil, err
	}
	for i, u := range urls {
		s.Workers = append(s.Workers, Worker{ID: fmt.Sprintf("sim-%d", i), URL: u})
		if err := waitOK(ctx, p, u+"/health"); err != nil {
			_ = p.stop(StopTimeout)
			return nil, err
		}
	}
	return s, nil
}

// Stop shuts the workers down.
func (s *Sim) Stop() error { return s.p.stop(StopTimeout) }

// LogPath is the sim's log file.
func (s *Sim) LogPath() string { return s.p.logPath }

// GatewayOptions configure StartGateway.
type GatewayOptions struct {
	Bin string
	// Workers are running workers to route over (`switchyard dev
	// --endpoints`). The router then gets no KV events and routes on its
	// approximate index of its own decisions, which cannot see evictions.
	// Empty: dev starts Sim.Workers simulated workers of its own that
	// publish KV events to a kvtracker, as Switchyard is deployed.
	Workers []Worker
	// Sim configures dev's own workers when Workers is empty (Workers,
	// TimeScale; its Args, LogDir and Name are not used).
	Sim   SimOptions
	Model string
	// Args are extra `switchyard dev` flags.
	Args   []string
	LogDir string
	Name   string
}

// Gateway is a running Switchyard stack (router and gateway, with a
// kvtracker and simulated workers when it started its own).
type Gateway struct {
	p *process
	// URL is the gateway's base URL (without /v1).
	URL string
	// routerURL is the router's REST base URL from the banner's next
	// line, once seen.
	routerURL atomic.Pointer[string]
	// workers are the simulated workers the banner lists, once all
	// wantWorkers are seen (workersSeen is closed then).
	workersMu   sync.Mutex
	workers     []Worker
	wantWorkers int
	workersSeen chan struct{}
}

// Workers returns the simulated workers `switchyard dev` started (none
// when it was given --endpoints), waiting for the banner to list them.
func (g *Gateway) Workers(ctx context.Context) ([]Worker, error) {
	if g.wantWorkers == 0 {
		return nil, nil
	}
	if err := g.p.waitFor(ctx, g.workersSeen, "the workers' URLs"); err != nil {
		return nil, err
	}
	g.workersMu.Lock()
	defer g.workersMu.Unlock()
	return slices.Clone(g.workers), nil
}

// workerLine is a line of the banner's worker table: "  sim-0
// qwen-3.6-27b  http://127.0.0.1:8000  tcp://...  tcp://...".
var workerLine = regexp.MustCompile(`^\s*(\S+)\s+\S+\s+(http://\S+)\s+(?:tcp://\S+|-)\s+(?:tcp://\S+|-)\s*$`)

// RouterURL is the router's REST base URL (its /metrics, /v1/endpoints),
// or "" when the banner named none.
func (g *Gateway) RouterURL() string {
	if u := g.routerURL.Load(); u != nil {
		return *u
	}
	return ""
}

// gatewayLine is the line of `switchyard dev`'s banner that names the
// gateway: "  gateway    http://127.0.0.1:8080/v1  OpenAI API".
var gatewayLine = regexp.MustCompile(`(?m)^\s*gateway\s+(http://\S+?)/v1\b`)

// routerLine is the next line: "  router  grpc 127.0.0.1:9090  REST
// http://127.0.0.1:9091: GET /v1/endpoints, ...".
var routerLine = regexp.MustCompile(`(?m)^\s*router\s+grpc\s+\S+\s+REST\s+(http://[^\s/]+?):?(?:\s|$)`)

// StartGateway starts `switchyard dev` on free loopback ports and returns
// once the gateway is ready.
func StartGateway(ctx context.Context, o GatewayOptions) (*Gateway, error) {
	if o.Name == "" {
		o.Name = "switchyard"
	}
	args := []string{"dev",
		"--gateway-addr", "127.0.0.1:0",
		"--router-grpc-addr", "127.0.0.1:0",
		"--router-http-addr", "127.0.0.1:0",
		// The gateway's /metrics and the meter (which dev starts when a
		// Redis answers) listen apart from the API: free ports too, or two
		// stacks on one machine (a run's and a test's) collide on 9094.
		"--gateway-metrics-addr", "127.0.0.1:0",
		"--meter-http-addr", "127.0.0.1:0",
		"--log-format", "json",
	}
	if len(o.Workers) > 0 {
		eps := make([]string, len(o.Workers))
		for i, w := range o.Workers {
			eps[i] = w.ID + "=" + w.URL
		}
		// No shared Redis here either: a kvtracker of an earlier stack
		// (a --kv-events run's) leaves KV snapshots there under the same
		// worker ids, which this router would adopt at start — stale
		// blocks, and workers it would then take for ones that send KV
		// events, so that it never consults its approximate index.
		args = append(args, "--endpoints", strings.Join(eps, ","), "--redis-url", "none")
		if o.Sim.TimeScale > 0 {
			// The router's prior runs at the workers' time scale.
			args = append(args, "--time-scale", strconv.FormatFloat(o.Sim.TimeScale, 'g', -1, 64))
		}
	} else {
		events, err := kvEventsConfig(o.Sim.Workers)
		if err != nil {
			return nil, err
		}
		args = append(args,
			"--workers", strconv.Itoa(o.Sim.Workers),
			"--time-scale", strconv.FormatFloat(o.Sim.TimeScale, 'g', -1, 64),
			"--sim-port", "0",
			"--kv-events-config", events,
			"--kvtracker-http-addr", "127.0.0.1:0",
			// Anonymous workers rather than the example catalog's, and
			// no shared Redis (so no meter): each run is a fresh,
			// self-contained stack.
			"--policies", "",
			"--redis-url", "none",
		)
	}
	if o.Model != "" {
		args = append(args, "--served-model-name", o.Model)
	}
	args = append(args, o.Args...)
	found := make(chan struct{})
	var url string
	g := &Gateway{workersSeen: make(chan struct{})}
	if len(o.Workers) == 0 {
		g.wantWorkers = o.Sim.Workers
	}
	p, err := startProcess(o.Name, o.Bin, args, o.LogDir, func(line string) bool {
		if url == "" {
			if m := gatewayLine.FindStringSubmatch(line); m != nil {
				url = m[1]
				close(found)
			}
			return false
		}
		// The router's line follows the gateway's in the same banner,
		// then the table of workers; the gateway is usable without them.
		if m := routerLine.FindStringSubmatch(line); m != nil {
			u := m[1]
			g.routerURL.Store(&u)
			return g.wantWorkers == 0
		}
		if m := workerLine.FindStringSubmatch(line); m != nil && g.wantWorkers > 0 {
			g.workersMu.Lock()
			defer g.workersMu.Unlock()
			g.workers = append(g.workers, Worker{ID: m[1], URL: m[2]})
			if len(g.workers) == g.wantWorkers {
				close(g.workersSeen)
				return true
			}
		}
		return false
	})
	if err != nil {
		return nil, err
	}
	if err := p.waitFor(ctx, found, "the gateway URL"); err != nil {
		_ = p.stop(StopTimeout)
		return nil, err
	}
	g.p, g.URL = p, url
	if err := waitOK(ctx, p, url+"/readyz"); err != nil {
		_ = p.stop(StopTimeout)
		return nil, err
	}
	return g, nil
}

// Stop shuts the stack down.
func (g *Gateway) Stop() error { return g.p.stop(StopTimeout) }

// LogPath is the stack's log file.
func (g *Gateway) LogPath() string { return g.p.logPath }

// waitOK polls url until it answers 200, the process exits or ctx ends.
func waitOK(ctx context.Context, p *process, url string) error {
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-p.done:
			return p.exited()
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w (last: %s)", url, ctx.Err(), last)
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// kvEventsConfig is vLLM's --kv-events-config for n workers publishing on
// free loopback ports: dev gives worker i the configured ports plus i, so
// it needs n consecutive free ports for events and n for replay. The
// endpoints' host is the wildcard: as in vLLM, a PUB endpoint with a plain
// address (tcp://127.0.0.1:N) makes the worker connect to its subscriber
// instead of binding, and the kvtracker, which dials the workers, then
// finds nothing listening and gets no events at all. dev binds the
// wildcard on its simulated workers' loopback host.
func kvEventsConfig(n int) (string, error) {
	base, err := freePortRange(2 * n)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf(`{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:%d","replay_endpoint":"tcp://*:%d"}`, base, base+n), nil
}

// freePortRange finds n consecutive loopback ports that are free now.
// Another process may still take one before it is bound; the stack then
// fails to start with an error naming the port.
func freePortRange(n int) (int, error) {
	for range 50 {
		base := 20000 + rand.IntN(40000)
		ok := true
		for p := base; p < base+n && ok; p++ {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				ok = false
				continue
			}
			l.Close()
		}
		if ok {
			return base, nil
		}
	}
	return 0, fmt.Errorf("no %d consecutive free loopback ports for KV events", n)
}
