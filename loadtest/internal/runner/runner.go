// Package runner drives a workload against targets under a load mode —
// fixed concurrency (closed loop) or a Poisson arrival rate (open loop) —
// bounded by a request count and/or a duration, and records every request.
package runner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-dev/switchyard/loadtest/internal/pick"
	"github.com/switchyard-dev/switchyard/loadtest/internal/results"
	"github.com/switchyard-dev/switchyard/loadtest/internal/stream"
	"github.com/switchyard-dev/switchyard/loadtest/internal/workload"
)

// Mode is a load mode.
type Mode string

// Load modes.
const (
	// Concurrent keeps Concurrency sessions running: each client starts
	// its next session when the last one ends (GuideLLM's concurrent).
	Concurrent Mode = "concurrent"
	// Poisson starts sessions at exponentially distributed intervals at
	// Rate per model second, whatever the server's pace.
	Poisson Mode = "poisson"
)

// ParseMode checks a mode name.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Concurrent, Poisson:
		return m, nil
	}
	return "", fmt.Errorf("unknown mode %q (want concurrent or poisson)", s)
}

// DefaultMaxInFlight caps sessions in flight in Poisson mode when
// Concurrency is 0, so an overloaded server cannot make the generator open
// connections without bound.
const DefaultMaxInFlight = 1024

// Plan is one run.
type Plan struct {
	Workload string
	Strategy string
	Mode     Mode
	// Concurrency is the number of clients (Concurrent) or the cap on
	// sessions in flight (Poisson; 0 means DefaultMaxInFlight).
	Concurrency int
	// Rate is sessions per model second (Poisson).
	Rate float64
	// Requests stops the run after this many requests were sent; 0 means
	// no bound.
	Requests int
	// Duration stops sending after this much model time; 0 means no bound.
	Duration time.Duration
	// TimeScale converts wall to model time (model = wall × TimeScale).
	TimeScale float64
	Model     string
	IgnoreEOS bool
	// RequestTimeout bounds each request in wall time.
	RequestTimeout time.Duration
	// Seed seeds the Poisson arrivals.
	Seed uint64
}

// Validate reports an unusable plan.
func (p Plan) Validate() error {
	var errs []error
	if _, err := ParseMode(string(p.Mode)); err != nil {
		errs = append(errs, err)
	}
	if p.Mode == Concurrent && p.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("concurrency %d: need at least 1", p.Concurrency))
	}
	if p.Mode == Poisson && !(p.Rate > 0 && !math.IsInf(p.Rate, 0)) {
		errs = append(errs, fmt.Errorf("rate %v: need a positive rate", p.Rate))
	}
	if p.Requests < 0 || p.Duration < 0 || p.Concurrency < 0 {
		errs = append(errs, errors.New("requests, duration and concurrency must not be negative"))
	}
	if p.Requests == 0 && p.Duration == 0 {
		errs = append(errs, errors.New("set a request count or a duration: a run must end"))
	}
	if !(p.TimeScale > 0) {
		errs = append(errs, fmt.Errorf("time scale %v: must be positive", p.TimeScale))
	}
	if p.RequestTimeout <= 0 {
		errs = append(errs, fmt.Errorf("request timeout %v: must be positive", p.RequestTimeout))
	}
	return errors.Join(errs...)
}

// Target is a server requests go to.
type Target struct {
	ID string
	// APIBase is the OpenAI base URL (ending in /v1).
	APIBase string
}

// Env is what a run sends through.
type Env struct {
	Client  *stream.Client
	Targets []Target
	Picker  pick.Picker
	// OnDone, when set, is called after each request (from many
	// goroutines).
	OnDone func(*results.Record)
}

// run is one Run's state.
type run struct {
	plan   Plan
	env    Env
	start  time.Time
	end    time.Time // zero: no duration bound
	issued atomic.Int64
	keep   bool

	genMu sync.Mutex
	gen   *workload.Generator

	recMu sync.Mutex
	recs  []results.Record
}

// Run sends the workload and returns every request's record. It returns
// early, with the records so far and ctx's error, when ctx ends.
func Run(ctx context.Context, plan Plan, gen *workload.Generator, env Env) ([]results.Record, error) {
	if err := plan.Validate(); err != nil {
		return nil, err
	}
	if len(env.Targets) == 0 || env.Picker == nil || env.Client == nil {
		return nil, errors.New("run: need a client, targets and a picker")
	}
	r := &run{plan: plan, env: env, gen: gen, keep: gen.Spec().Kind == workload.MultiTurn, start: time.Now()}
	if plan.Duration > 0 {
		r.end = r.start.Add(time.Duration(float64(plan.Duration) / plan.TimeScale))
	}
	var wg sync.WaitGroup
	switch plan.Mode {
	case Concurrent:
		for range plan.Concurrency {
			wg.Go(func() {
				for ctx.Err() == nil && r.session(ctx) {
				}
			})
		}
	case Poisson:
		r.arrivals(ctx, &wg)
	}
	wg.Wait()
	return r.recs, ctx.Err()
}

// arrivals starts sessions at Poisson times until the budget runs out.
func (r *run) arrivals(ctx context.Context, wg *sync.WaitGroup) {
	rng := rand.New(rand.NewPCG(r.plan.Seed, 0xa441a1))
	inFlight := r.plan.Concurrency
	if inFlight == 0 {
		inFlight = DefaultMaxInFlight
	}
	slots := make(chan struct{}, inFlight)
	wallRate := r.plan.Rate * r.plan.TimeScale
	next := time.Now()
	stop := make(chan struct{})
	var stopOnce sync.Once
	for {
		next = next.Add(time.Duration(rng.ExpFloat64() / wallRate * float64(time.Second)))
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-stop:
			t.Stop()
			return
		case <-t.C:
		}
		if !r.open() {
			return
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		wg.Go(func() {
			defer func() { <-slots }()
			if !r.session(ctx) {
				stopOnce.Do(func() { close(stop) })
			}
		})
	}
}

// open reports whether the budget still allows a request, without taking it.
func (r *run) open() bool {
	if r.plan.Requests > 0 && r.issued.Load() >= int64(r.plan.Requests) {
		return false
	}
	return r.end.IsZero() || time.Now().Before(r.end)
}

// take reserves one request of the budget.
func (r *run) take() bool {
	if !r.end.IsZero() && !time.Now().Before(r.end) {
		return false
	}
	n := r.issued.Add(1)
	return r.plan.Requests == 0 || n <= int64(r.plan.Requests)
}

// session plays the next session; false when the budget ran out.
func (r *run) session(ctx context.Context) bool {
	r.genMu.Lock()
	s := r.gen.Next()
	r.genMu.Unlock()
	var answers []string
	for k := range s.Turns {
		if !r.take() {
			return false
		}
		rec, answer := r.request(ctx, &s, k, answers)
		r.recMu.Lock()
		r.recs = append(r.recs, rec)
		r.recMu.Unlock()
		if r.env.OnDone != nil {
			r.env.OnDone(&rec)
		}
		if !rec.OK() {
			// A conversation cannot go on without the answer it builds on.
			return ctx.Err() == nil
		}
		answers = append(answers, answer)
	}
	return true
}

func (r *run) request(ctx context.Context, s *workload.Session, k int, answers []string) (results.Record, string) {
	p := r.plan
	rec := results.Record{
		Workload: p.Workload, Strategy: p.Strategy, Concurrency: p.Concurrency,
		Session: s.ID, Turn: k, Group: s.Group,
		TTFTS: results.NaN, E2ES: results.NaN, ITLMeanS: results.NaN,
		WallTTFTS: results.NaN, WallE2ES: results.NaN, SimTTFTS: results.NaN, ProjectedTTFTS: results.NaN,
	}
	if p.Mode == Poisson {
		rec.Concurrency, rec.Rate = 0, p.Rate
	}
	msgs := s.Messages(k, answers)
	sm := make([]stream.Message, len(msgs))
	for i, m := range msgs {
		sm[i] = stream.Message{Role: m.Role, Content: m.Content}
	}
	now := time.Now()
	rec.StartWallS = now.Sub(r.start).Seconds()
	rec.StartS = rec.StartWallS * p.TimeScale
	rec.EndWallS = rec.StartWallS
	body, err := stream.ChatRequest{Model: p.Model, Messages: sm, MaxTokens: s.Turns[k].MaxTokens, IgnoreEOS: p.IgnoreEOS}.Body()
	if err != nil {
		rec.Error = err.Error()
		return rec, ""
	}
	rctx, cancel := context.WithTimeout(ctx, p.RequestTimeout)
	defer cancel()
	idx, release, err := r.env.Picker.Pick(rctx, body)
	if err != nil {
		rec.Error = "pick target: " + err.Error()
		rec.EndWallS = time.Since(r.start).Seconds()
		return rec, ""
	}
	t := r.env.Targets[idx]
	rec.Target = t.ID
	res := r.env.Client.Chat(rctx, t.APIBase, body, r.keep)
	release()
	// The clock starts when the request is sent, after the pick: a
	// baseline's own picking time is not the server's latency.
	rec.StartWallS = res.Sent.Sub(r.start).Seconds()
	rec.StartS = rec.StartWallS * p.TimeScale
	rec.EndWallS = rec.StartWallS + res.E2E.Seconds()
	rec.Status, rec.Shed = res.Status, res.Shed
	rec.Error = strings.TrimSpace(res.Err)
	rec.PromptTokens, rec.CachedTokens, rec.CompletionTokens, rec.Chunks = res.PromptTokens, res.CachedTokens, res.CompletionToks, res.Chunks
	if res.SimTTFT >= 0 {
		rec.SimTTFTS = results.Num(res.SimTTFT)
	}
	if res.SimWorker >= 0 {
		rec.SimWorker = &res.SimWorker
	}
	rec.WallE2ES = results.Num(res.E2E.Seconds())
	rec.E2ES = rec.WallE2ES * results.Num(p.TimeScale)
	if res.Chunks > 0 {
		rec.WallTTFTS = results.Num(res.TTFT.Seconds())
		rec.TTFTS = rec.WallTTFTS * results.Num(p.TimeScale)
		rec.ProjectedTTFTS = results.Project(rec.WallTTFTS, rec.SimTTFTS, p.TimeScale)
	}
	if len(res.Gaps) > 0 {
		rec.Gaps = make([]float64, len(res.Gaps))
		sum := 0.0
		for i, g := range res.Gaps {
			rec.Gaps[i] = g.Seconds()
			sum += rec.Gaps[i]
		}
		rec.ITLMeanS = results.Num(sum / float64(len(res.Gaps)) * p.TimeScale)
	}
	return rec, res.Text
}
