package router

import (
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/kvblock"
	"github.com/switchyard-dev/switchyard/services/router/internal/scrape"
)

// restartSink passes scrapes on to the load table and watches each worker's
// process start time (vLLM's process_start_time_seconds). A new one is a
// restarted worker whose prefix cache is empty: the router's own guesses
// about it (the approximate index, the speculative entries) are dropped at
// once, so prompts are not sent there for a cache it no longer has. Its
// confirmed blocks are the kvtracker's, which reads the same start time and
// starts the worker in a new epoch.
type restartSink struct {
	next       scrape.Sink
	kv, approx *kvblock.Index
	log        zerolog.Logger
	// restarted, when set, hears every restart (the tokenizer check
	// probes the restarted worker again: it may run another build).
	restarted func(id string)

	mu     sync.Mutex
	starts map[string]float64 // by endpoint id
}

func newRestartSink(next scrape.Sink, kv, approx *kvblock.Index, log zerolog.Logger) *restartSink {
	return &restartSink{next: next, kv: kv, approx: approx, log: log, starts: map[string]float64{}}
}

// Observe implements scrape.Sink.
func (r *restartSink) Observe(id string, started time.Time, res scrape.Result) {
	if res.Err == nil && res.StartTime > 0 {
		r.mu.Lock()
		prev := r.starts[id]
		r.starts[id] = res.StartTime
		r.mu.Unlock()
		if prev != 0 && prev != res.StartTime {
			r.approx.Forget(id)
			r.kv.DropSpeculative(id)
			r.log.Info().Str("endpoint", id).Time("started", time.Unix(0, int64(res.StartTime*1e9))).
				Msg("worker restarted: its cache is empty, the router's guesses about it dropped")
			if r.restarted != nil {
				r.restarted(id)
			}
		}
	}
	r.next.Observe(id, started, res)
}
