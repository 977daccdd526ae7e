package gateway

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

// Ending responses whose worker died without closing them.
//
// A worker that freezes (SIGSTOP, a hung engine, a host gone without a FIN)
// leaves its responses open and silent. Two things end them: the stream idle
// timeout (Config.StreamIdleTimeout, on every response), and, sooner, the
// routers' view of the fleet: while any response is in flight, the gateway
// asks a router for its endpoints every healthPoll, and ends the responses
// of an endpoint marked unhealthy that have been silent for unhealthyQuiet.
//
// Why poll ListEndpoints: the routers already scrape every worker and keep
// its health; the gateway already calls ListEndpoints (GET /v1/models) over
// the connection it routes with, so this adds no contract, works without
// NATS, and costs one small call a second per gateway only while it has
// responses in flight. A pushed signal (a NATS subject of health changes)
// would save at most the poll interval, at the price of a new publisher in
// every router. A response still receiving data is left alone: its worker
// is plainly serving it, whatever its metrics endpoint says.
const (
	healthPoll     = time.Second
	unhealthyQuiet = time.Second
)

// liveResponse is one upstream response being relayed.
type liveResponse struct {
	cancel   context.CancelCauseFunc
	lastRead atomic.Int64 // unix nanoseconds of the last data read
}

func (l *liveResponse) touch() { l.lastRead.Store(time.Now().UnixNano()) }

// liveSet holds the responses being relayed, by endpoint.
type liveSet struct {
	mu   sync.Mutex
	byEP map[string]map[*liveResponse]struct{}
	n    atomic.Int64
}

func (s *liveSet) add(endpoint string, cancel context.CancelCauseFunc) *liveResponse {
	l := &liveResponse{cancel: cancel}
	l.touch()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byEP == nil {
		s.byEP = map[string]map[*liveResponse]struct{}{}
	}
	m := s.byEP[endpoint]
	if m == nil {
		m = map[*liveResponse]struct{}{}
		s.byEP[endpoint] = m
	}
	m[l] = struct{}{}
	s.n.Add(1)
	return l
}

func (s *liveSet) remove(endpoint string, l *liveResponse) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.byEP[endpoint]; m != nil {
		if _, ok := m[l]; ok {
			delete(m, l)
			s.n.Add(-1)
		}
		if len(m) == 0 {
			delete(s.byEP, endpoint)
		}
	}
}

// endQuiet ends endpoint's responses silent for at least quiet, and
// returns how many.
func (s *liveSet) endQuiet(endpoint string, quiet time.Duration, cause error) int {
	cutoff := time.Now().Add(-quiet).UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for l := range s.byEP[endpoint] {
		if l.lastRead.Load() <= cutoff {
			l.cancel(cause)
			n++
		}
	}
	return n
}

// watchHealth ends the silent responses of endpoints the router reports
// unhealthy, until ctx ends.
func (g *Gateway) watchHealth(ctx context.Context) error {
	t := time.NewTicker(healthPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if g.live.n.Load() == 0 {
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, g.cfg.RouteTimeout)
		resp, err := g.router.ListEndpoints(lctx, &routerv1.ListEndpointsRequest{})
		cancel()
		if err != nil {
			// The idle timeout still bounds every response.
			continue
		}
		for _, ep := range resp.GetEndpoints() {
			if ep.GetHealthy() {
				continue
			}
			if n := g.live.endQuiet(ep.GetId(), unhealthyQuiet, errEndpointUnhealthy); n > 0 {
				g.log.Warn().Str("endpoint", ep.GetId()).Str("reason", ep.GetLastError()).Int("responses", n).
					Msg("ending silent responses of an endpoint the router marked unhealthy")
			}
		}
	}
}
