package kvtracker

import (
	"context"
	"fmt"
	"slices"
	"strings"
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
	endpoint  string           // dialled, or the --bind endpoint
	connected prometheus.Gauge // nil for workers that connect to --bind
	lastEvent prometheus.Gauge

	started   atomic.Int64 // unix nanoseconds the watch began (the lease was taken)
	dialledAt atomic.Int64 // unix nanoseconds of the successful dial; 0 not yet
	last      atomic.Int64 // unix nanoseconds of the last message; 0 none yet
}

// Stream states, as the watch reports them.
const (
	flowing     = iota
	unreachable // the dial has not succeeded for the silence period
	quiet       // connected (or bound), no event for the silence period
)

// status says whether the stream flows at now, and for how long it has
// been silent.
func (w *streamWatch) status(now time.Time) (state int, silent time.Duration) {
	since := time.Unix(0, w.started.Load())
	for _, t := range []int64{w.dialledAt.Load(), w.last.Load()} {
		if t != 0 && time.Unix(0, t).After(since) {
			since = time.Unix(0, t)
		}
	}
	silent = now.Sub(since)
	switch {
	case silent < w.after:
		return flowing, silent
	case w.connected != nil && w.dialledAt.Load() == 0:
		return unreachable, silent
	default:
		return quiet, silent
	}
}

// problem describes a stream that does not flow, nil when it does: what
// the readiness detail says of the worker.
func (w *streamWatch) problem(now time.Time) error {
	switch state, silent := w.status(now); state {
	case unreachable:
		return fmt.Errorf("kv events endpoint %s not reachable for %s", w.endpoint, silent.Round(time.Second))
	case quiet:
		if w.last.Load() == 0 {
			return fmt.Errorf("no kv events yet after %s (idle, or the stream does not reach the tracker)", silent.Round(time.Second))
		}
		return fmt.Errorf("no kv events for %s (idle, or the stream stopped reaching the tracker)", silent.Round(time.Second))
	}
	return nil
}

// watch reports on one worker's stream until ctx ends.
func (w *streamWatch) watch(ctx context.Context) {
	tick := time.NewTicker(w.after / 4)
	defer tick.Stop()
	// warned is the state last warned about, so each is said once until
	// the stream recovers or the state changes.
	warned := flowing
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			state, silent := w.status(now)
			switch {
			case state == flowing || state == warned:
			case state == unreachable:
				w.log.Warn().Str("endpoint", w.endpoint).Dur("for", silent.Round(time.Second)).
					Msg("kv events endpoint not reachable: nothing accepts connections there. " +
						"A vLLM worker binds only when its kv-events-config endpoint has a wildcard host " +
						"(tcp://*:5557); with a plain address it connects instead")
			default:
				w.log.Warn().Str("endpoint", w.endpoint).Dur("for", silent.Round(time.Second)).
					Bool("ever", w.last.Load() != 0).
					Msg("no kv events from worker: either it is idle, or its stream does not reach the tracker " +
						"(check the worker's kv-events-config topic and that enable_kv_cache_events is true)")
			}
			warned = state
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

// maxListed bounds the workers the readiness detail names.
const maxListed = 10

// probeKVEvents is the optional "kv-events" readiness check: the workers
// this replica ingests whose stream does not flow, each with why.
func (t *Tracker) probeKVEvents() error {
	now := time.Now()
	t.mu.Lock()
	var problems []string
	for _, r := range t.runs {
		if err := r.watch.problem(now); err != nil {
			problems = append(problems, r.spec.Key()+": "+err.Error())
		}
	}
	n := len(t.runs)
	t.mu.Unlock()
	if len(problems) == 0 {
		return nil
	}
	slices.Sort(problems)
	failing, more := len(problems), ""
	if len(problems) > maxListed {
		more = fmt.Sprintf("; and %d more", len(problems)-maxListed)
		problems = problems[:maxListed]
	}
	return fmt.Errorf("%d of %d workers ingested here not flowing: %s%s", failing, n, strings.Join(problems, "; "), more)
}
