package kvtracker

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/vllm/kvzmq"
	"github.com/switchyard-dev/switchyard/services/kvtracker/internal/ingest"
)

// streamWatch tells the operator when a worker's KV event stream does not
// flow. A tracker whose stream is dead looks healthy otherwise: the routers'
// index simply stops learning, and routing quietly degrades to guesses. The
// usual cause is the connect/bind topology: a vLLM worker binds its PUB
// socket only when its --kv-events-config endpoint holds a wildcard
// (tcp://*:5557); with a plain address it connects instead, and a tracker
// dialling it is refused forever. So the watch warns when the dial has not
// succeeded after the silence period, and, less surely (an idle worker
// publishes nothing), when a connected stream has carried no event for
// that long. Each warning is logged once per silence; the gauges tell the
// rest.
type streamWatch struct {
	after     time.Duration
	log       zerolog.Logger
	connected prometheus.Gauge // nil for workers that connect to --bind
	lastEvent prometheus.Gauge

	dialledAt atomic.Int64 // unix nanoseconds of the successful dial; 0 not yet
	last      atomic.Int64 // unix nanoseconds of the last message; 0 none yet
}

// watch reports on one worker's stream until ctx ends.
func (w *streamWatch) watch(ctx context.Context, endpoint string) {
	start := time.Now()
	tick := time.NewTicker(w.after / 4)
	defer tick.Stop()
	// warned is the state last warned about, so each is said once until
	// the stream recovers or the state changes.
	const (
		none = iota
		unreachable
		quiet
	)
	warned := none
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			since := start
			for _, t := range []int64{w.dialledAt.Load(), w.last.Load()} {
				if t != 0 && time.Unix(0, t).After(since) {
					since = time.Unix(0, t)
				}
			}
			silent := now.Sub(since)
			state := quiet
			if w.connected != nil && w.dialledAt.Load() == 0 {
				state = unreachable
			}
			switch {
			case silent < w.after:
				warned = none
			case warned == state:
			case state == unreachable:
				w.log.Warn().Str("endpoint", endpoint).Dur("for", silent.Round(time.Second)).
					Msg("kv events endpoint not reachable: nothing accepts connections there. " +
						"A vLLM worker binds only when its kv-events-config endpoint has a wildcard host " +
						"(tcp://*:5557); with a plain address it connects instead")
			default:
				w.log.Warn().Str("endpoint", endpoint).Dur("for", silent.Round(time.Second)).
					Bool("ever", w.last.Load() != 0).
					Msg("no kv events from worker: either it is idle, or its stream does not reach the tracker " +
						"(check the worker's kv-events-config topic and that enable_kv_cache_events is true)")
			}
			if silent >= w.after {
				warned = state
			}
		}
	}
}

// connectedNow records a successful dial.
func (w *streamWatch) connectedNow() {
	w.dialledAt.Store(time.Now().UnixNano())
	if w.connected != nil {
		w.connected.Set(1)
	}
}

// source counts every message src delivers.
func (w *streamWatch) source(src ingest.Source) ingest.Source {
	return watchedSource{src: src, w: w}
}

var (
	_ ingest.Reconnecting = (*kvzmq.Subscriber)(nil)
	_ ingest.Reconnecting = watchedSource{}
)

type watchedSource struct {
	src ingest.Source
	w   *streamWatch
}

func (s watchedSource) Recv(ctx context.Context) (kvzmq.Message, error) {
	m, err := s.src.Recv(ctx)
	if err == nil {
		now := time.Now()
		s.w.last.Store(now.UnixNano())
		s.w.lastEvent.Set(float64(now.UnixNano()) / 1e9)
	}
	return m, err
}

// ConnectionErrors passes on the wrapped source's count, which the ingest
// pipeline reads to tell a reconnect from a gap; a source without one never
// reconnects, which 0 says as well.
func (s watchedSource) ConnectionErrors() uint64 {
	if c, ok := s.src.(ingest.Reconnecting); ok {
		return c.ConnectionErrors()
	}
	return 0
}
