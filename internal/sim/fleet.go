// Package sim is `switchyard sim`: simulated vLLM workers that stand in for
// GPUs in every test and benchmark. Each worker serves vLLM's OpenAI API
// (chat and completions, streaming and not, with usage and cached tokens),
// vLLM's /metrics names and labels, /health, /v1/models and
// /reset_prefix_cache, and publishes KV cache events in vLLM's ZMQ wire
// format. Behind the API runs internal/sim/engine, a model of vLLM v1's
// continuous-batching scheduler and prefix-cached block pool whose step
// times come from a cost model of a 27B FP8 model on an L40S-class GPU (see
// engine.L40S27BFP8), run on a model clock that --time-scale speeds up.
//
// Timings the simulator reports (metrics, the sim_timing response field,
// POST /sim/v1/estimate) are model time; a client's wall-clock measurements
// are model time divided by the time scale.
package sim

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"
)

// WorkerInfo describes one running worker.
type WorkerInfo struct {
	ID    int
	URL   string // http://host:port
	Model string // first served model name
	// KVEndpoint and ReplayEndpoint are where the worker's KV events can be
	// subscribed to and replayed from; empty without KV events (or, for
	// ReplayEndpoint, without a replay endpoint).
	KVEndpoint     string
	ReplayEndpoint string
}

// Fleet is a set of workers running in this process.
type Fleet struct {
	workers []*worker
	cancel  context.CancelFunc
	done    chan struct{}
	err     error
	once    sync.Once
}

// StartFleet starts cfg.Workers workers. Their listeners are bound when it
// returns. They run until ctx ends or Close is called; then each marks
// itself not ready, lets in-flight requests finish for up to
// cfg.ShutdownTimeout, stops its engine and closes its KV event publisher.
func StartFleet(ctx context.Context, cfg Config, log zerolog.Logger) (*Fleet, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tok, err := cfg.loadTokenizer()
	if err != nil {
		return nil, err
	}
	f := &Fleet{done: make(chan struct{})}
	for i := range cfg.Workers {
		w, err := newWorker(i, &cfg, tok, log)
		if err != nil {
			f.closeUnstarted()
			return nil, err
		}
		f.workers = append(f.workers, w)
	}

	ctx, f.cancel = context.WithCancel(ctx)
	g, gctx := errgroup.WithContext(ctx)
	for _, w := range f.workers {
		engCtx, stopEngine := context.WithCancel(context.Background())
		g.Go(func() error { return w.eng.Run(engCtx) })
		g.Go(func() error {
			if err := w.srv.Serve(w.ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
		g.Go(func() error {
			<-gctx.Done()
			w.ready.Store(false)
			w.freezer.freeze(0) // a frozen worker still drains
			dctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
			defer cancel()
			if err := w.srv.Shutdown(dctx); err != nil {
				w.log.Warn().Err(err).Msg("drain timed out, closing connections")
				_ = w.srv.Close()
			}
			stopEngine()
			return nil
		})
		w.ready.Store(true)
		wi := w.info()
		w.log.Info().Str("url", wi.URL).Str("model", wi.Model).Str("kv_endpoint", wi.KVEndpoint).
			Str("replay_endpoint", wi.ReplayEndpoint).Msg("simulated vllm worker started")
	}
	go func() {
		err := g.Wait()
		for _, w := range f.workers {
			if w.pub == nil {
				continue
			}
			// zmq4 reports connections subscribers already closed; the
			// publisher is gone either way, so this is not a failed shutdown.
			if cerr := w.pub.Close(); cerr != nil {
				w.log.Warn().Err(cerr).Msg("kv event publisher close")
			}
		}
		f.err = err
		close(f.done)
	}()
	return f, nil
}

func (f *Fleet) closeUnstarted() {
	for _, w := range f.workers {
		_ = w.ln.Close()
		if w.pub != nil {
			_ = w.pub.Close()
		}
	}
}

// Workers lists the workers in ID order.
func (f *Fleet) Workers() []WorkerInfo {
	out := make([]WorkerInfo, len(f.workers))
	for i, w := range f.workers {
		out[i] = w.info()
	}
	return out
}

// Done is closed once every worker has stopped.
func (f *Fleet) Done() <-chan struct{} { return f.done }

// Close shuts the fleet down gracefully and waits for it.
func (f *Fleet) Close() error {
	f.once.Do(f.cancel)
	<-f.done
	return f.err
}

// Run is `switchyard sim`: start the fleet and serve until ctx ends.
func Run(ctx context.Context, cfg Config, log zerolog.Logger) error {
	f, err := StartFleet(ctx, cfg, log)
	if err != nil {
		return err
	}
	<-f.Done()
	return f.err
}
