package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	"github.com/switchyard-dev/switchyard/internal/sim/engine"
)

// MaxFreeze bounds one freeze, so that a typo cannot stop a worker for a
// day.
const MaxFreeze = time.Hour

// freezer stops a worker as a SIGSTOP would, for a wall duration: the
// engine takes no step, HTTP handlers (API, /metrics, /health) do not
// answer, and time goes on, so that every request in the worker pays the
// freeze in its TTFT and a scraper times out. Only the fault endpoint
// answers, so the freeze can be lifted early.
type freezer struct {
	mu     sync.Mutex
	until  time.Time
	thawed chan struct{} // nil when not frozen; closed on thaw
	timer  *time.Timer
}

// freeze stops the worker for d from now (replacing any freeze under
// way); d <= 0 thaws it.
func (f *freezer) freeze(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
	if d <= 0 {
		f.thawLocked()
		return
	}
	f.until = time.Now().Add(d)
	if f.thawed == nil {
		f.thawed = make(chan struct{})
	}
	f.timer = time.AfterFunc(d, func() { f.freeze(0) })
}

func (f *freezer) thawLocked() {
	if f.thawed != nil {
		close(f.thawed)
		f.thawed = nil
	}
	f.until = time.Time{}
}

// frozenUntil is the end of the freeze under way, zero when none.
func (f *freezer) frozenUntil() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.until
}

// wait returns once the worker is not frozen, or ctx is done.
func (f *freezer) wait(ctx context.Context) error {
	f.mu.Lock()
	ch := f.thawed
	f.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// frozenClock is the engine's clock with the freeze in front: a step that
// would end during a freeze ends when it is lifted (engine.StopClock).
type frozenClock struct {
	engine.Clock
	f *freezer
}

func (c frozenClock) WaitStopped(ctx context.Context) (time.Duration, error) {
	c.f.mu.Lock()
	ch := c.f.thawed
	c.f.mu.Unlock()
	if ch == nil {
		return 0, nil
	}
	select {
	case <-ch:
		return c.Now(), nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// frozen holds every request until the freeze ends (or its client goes).
func (w *worker) frozen(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if w.freezer.wait(r.Context()) != nil {
			return
		}
		next.ServeHTTP(rw, r)
	})
}

// FaultResponse is the body of POST /sim/v1/fault.
type FaultResponse struct {
	// FrozenUntil is the end of the freeze under way (RFC 3339), empty
	// when the worker is not frozen.
	FrozenUntil string `json:"frozen_until,omitempty"`
}

// handleFault is POST /sim/v1/fault?freeze=DURATION, a simulator-only
// endpoint: freeze the worker for DURATION of wall time (a Go duration, at
// most MaxFreeze; 0 thaws it at once).
func (w *worker) handleFault(rw http.ResponseWriter, r *http.Request) {
	q := r.URL.Query().Get("freeze")
	if q == "" {
		openaiapi.WriteError(rw, openaiapi.InvalidRequest("freeze", "give freeze=DURATION (e.g. freeze=20s; freeze=0 thaws)"))
		return
	}
	d, err := time.ParseDuration(q)
	if err != nil || d < 0 || d > MaxFreeze {
		openaiapi.WriteError(rw, openaiapi.InvalidRequest("freeze", fmt.Sprintf("freeze=%q: want a duration between 0 and %v", q, MaxFreeze)))
		return
	}
	w.freezer.freeze(d)
	w.log.Warn().Dur("freeze", d).Msg("fault injected: worker frozen")
	var resp FaultResponse
	if until := w.freezer.frozenUntil(); !until.IsZero() {
		resp.FrozenUntil = until.UTC().Format(time.RFC3339Nano)
	}
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(resp)
}

// Freeze stops worker id for d of wall time, as POST /sim/v1/fault does;
// d <= 0 thaws it.
func (f *Fleet) Freeze(id int, d time.Duration) error {
	if id < 0 || id >= len(f.workers) {
		return fmt.Errorf("no worker %d (fleet of %d)", id, len(f.workers))
	}
	f.workers[id].freezer.freeze(min(d, MaxFreeze))
	return nil
}
