package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
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
	Bin     string
	Workers []Worker
	Model   string
	// Args are extra `switchyard dev` flags.
	Args   []string
	LogDir string
	Name   string
}

// Gateway is a running Switchyard stack (router and gateway) in front of
// existing workers.
type Gateway struct {
	p *process
	// URL is the gateway's base URL (without /v1).
	URL string
}

var gatewayLine = regexp.MustCompile(`gateway \(OpenAI API\)\s+(http://\S+?)/v1\b`)

// StartGateway starts `switchyard dev --endpoints` on free loopback ports
// and returns once the gateway is ready.
func StartGateway(ctx context.Context, o GatewayOptions) (*Gateway, error) {
	if o.Name == "" {
		o.Name = "switchyard"
	}
	eps := make([]string, len(o.Workers))
	for i, w := range o.Workers {
		eps[i] = w.ID + "=" + w.URL
	}
	args := []string{"dev",
		"--endpoints", strings.Join(eps, ","),
		"--gateway-addr", "127.0.0.1:0",
		"--router-grpc-addr", "127.0.0.1:0",
		"--router-http-addr", "127.0.0.1:0",
		"--log-format", "json",
	}
	if o.Model != "" {
		args = append(args, "--served-model-name", o.Model)
	}
	args = append(args, o.Args...)
	found := make(chan struct{})
	var url string
	p, err := startProcess(o.Name, o.Bin, args, o.LogDir, func(line string) bool {
		if m := gatewayLine.FindStringSubmatch(line); m != nil {
			url = m[1]
			close(found)
			return true
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
	g := &Gateway{p: p, URL: url}
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
