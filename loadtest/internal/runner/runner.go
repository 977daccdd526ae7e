// Package runner drives a workload against targets under a load mode —
// fixed concurrency (closed loop) or an arrival rate, constant or Poisson
// (open loop) — bounded by a request count and/or a duration, and records
// every request.
//
// Open loop. Sessions arrive on the Schedule's clock whatever the server
// does: the scheduler never waits for a completion. Each arrival takes a
// slot of a bound on sessions in flight (Plan.Concurrency, default
// DefaultMaxInFlight) so that a collapsed server cannot make the generator
// open connections without end; an arrival that finds every slot taken is
// not sent and is counted (OpenLoop.OverBound), never waited for — waiting
// would turn the open loop back into a closed one at the bound. A session's
// later turns (multi-turn) follow its previous turn's answer at once, as a
// chat user's next message follows the reply (GuideLLM and llm-d's
// multi-turn benchmarks do the same): the session's arrival is what is
// scheduled, and the session holds its slot until its last turn ends. As a
// session has at most one request in flight, the bound is also one on
// requests in flight.
//
// A run can have several tenants (RunTenants): client populations with
// their own API key, workload and load that run side by side against the
// same targets, to measure how a gateway shares the fleet between them. They
// share the run's clock and budget, so every tenant sends over the same
// window: with per-tenant budgets a flooding tenant would finish first and
// leave the others alone on the fleet, hiding what fairness is about.
//
// A 429 is a refusal, recorded like any answer; the client moves on to its
// next session. With Plan.RetryAfter it waits out the Retry-After the server
// asked for and sends the request again instead, as the OpenAI SDKs do, and
// the record times the request from its first attempt.
package runner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
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
	// Constant starts sessions evenly spaced, Rate per model second,
	// whatever the server's pace (GuideLLM's constant).
	Constant Mode = "constant"
	// Poisson starts sessions at exponentially distributed intervals at
	// Rate per model second, whatever the server's pace.
	Poisson Mode = "poisson"
)

// ParseMode checks a mode name.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Concurrent, Constant, Poisson:
		return m, nil
	}
	return "", fmt.Errorf("unknown mode %q (want concurrent, constant or poisson)", s)
}

// Open reports an open-loop (rate-driven) mode.
func (m Mode) Open() bool { return m == Constant || m == Poisson }

// DefaultMaxInFlight caps sessions in flight in the open-loop modes when
// Concurrency is 0, so an overloaded server cannot make the generator open
// connections without bound.
const DefaultMaxInFlight = 1024

// Plan is one run.
type Plan struct {
	Workload string
	Strategy string
	Mode     Mode
	// Concurrency is the number of clients (Concurrent) or the bound on
	// sessions in flight (Constant, Poisson; 0 means DefaultMaxInFlight).
	Concurrency int
	// Rate is sessions per model second (Constant, Poisson): requests per
	// second for single-turn workloads, conversations per second for
	// multi-turn.
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
	// RetryAfter waits out a 429 that carries a Retry-After of at most
	// MaxRetryAfter and sends the request again (false: a 429 is
	// recorded and the client moves on).
	RetryAfter    bool
	MaxRetryAfter time.Duration
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
	if p.Mode.Open() && !(p.Rate > 0 && !math.IsInf(p.Rate, 0)) {
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
	if p.RetryAfter && p.MaxRetryAfter <= 0 {
		errs = append(errs, fmt.Errorf("max retry-after %v: must be positive when waiting out 429s", p.MaxRetryAfter))
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
	// Client sends the requests of a run without tenants.
	Client  *stream.Client
	Targets []Target
	Picker  pick.Picker
	// OnDone, when set, is called after each request (from many
	// goroutines).
	OnDone func(*results.Record)
}

// Tenant is one client population of a run: its own client (API key,
// headers), prompts and load. Concurrency and Rate mean what Plan's do and
// replace them.
type Tenant struct {
	Name        string
	Client      *stream.Client
	Gen         *workload.Generator
	Concurrency int
	Rate        float64
	// Seed seeds its Poisson arrivals.
	Seed uint64
	// Targets and Picker, when set, are where this tenant's requests go
	// instead of the run's (Env's): traffic that bypasses what the run
	// measures, such as requests sent straight to the workers behind a
	// router's back.
	Targets []Target
	Picker  pick.Picker
}

// OpenLoop is what one tenant's open-loop scheduler did.
type OpenLoop struct {
	Tenant string
	// Arrivals counts the arrivals whose time came while the budget was
	// open; Sent of them were sent and OverBound were not, because
	// MaxInFlight sessions were in flight when they came.
	Arrivals    int
	Sent        int
	OverBound   int
	MaxInFlight int
	// PeakInFlight is the most sessions in flight at once.
	PeakInFlight int
}

// Outcome is a run's records and, in the open-loop modes, each tenant's
// arrival counts (in tenant order).
type Outcome struct {
	Records []results.Record
	Open    []OpenLoop
}

// run is one Run's state, shared by its tenants.
type run struct {
	plan   Plan
	env    Env
	start  time.Time
	end    time.Time // zero: no duration bound
	issued atomic.Int64

	recMu sync.Mutex
	recs  []results.Record
}

// population is one tenant's clients.
type population struct {
	*run
	t       Tenant
	keep    bool
	targets []Target
	picker  pick.Picker

	genMu sync.Mutex
	stats OpenLoop
}

// Run sends the workload and returns every request's record. It returns
// early, with the records so far and ctx's error, when ctx ends.
func Run(ctx context.Context, plan Plan, gen *workload.Generator, env Env) ([]results.Record, error) {
	out, err := Execute(ctx, plan, []Tenant{{Client: env.Client, Gen: gen, Concurrency: plan.Concurrency, Rate: plan.Rate, Seed: plan.Seed}}, env)
	return out.Records, err
}

// RunTenants runs every tenant at once against env's targets, within
// plan's budget (requests and duration for all tenants together), and
// returns every request's record, each naming its tenant. Plan's
// Concurrency and Rate are replaced by each tenant's; env.Client is
// unused.
func RunTenants(ctx context.Context, plan Plan, tenants []Tenant, env Env) ([]results.Record, error) {
	out, err := Execute(ctx, plan, tenants, env)
	return out.Records, err
}

// Execute is RunTenants that also returns the open-loop arrival counts.
func Execute(ctx context.Context, plan Plan, tenants []Tenant, env Env) (Outcome, error) {
	if len(tenants) == 0 {
		return Outcome{}, errors.New("run: no tenant")
	}
	if len(env.Targets) == 0 || env.Picker == nil {
		return Outcome{}, errors.New("run: need targets and a picker")
	}
	var errs []error
	for _, t := range tenants {
		p := plan
		p.Concurrency, p.Rate = t.Concurrency, t.Rate
		if err := p.Validate(); err != nil {
			errs = append(errs, tenantErr(t.Name, err))
		}
		if t.Client == nil || t.Gen == nil {
			errs = append(errs, tenantErr(t.Name, errors.New("run: need a client and a generator")))
		}
		if (len(t.Targets) == 0) != (t.Picker == nil) {
			errs = append(errs, tenantErr(t.Name, errors.New("run: a tenant's own targets need its own picker, and the other way round")))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Outcome{}, err
	}
	r := &run{plan: plan, env: env, start: time.Now()}
	if plan.Duration > 0 {
		r.end = r.start.Add(time.Duration(float64(plan.Duration) / plan.TimeScale))
	}
	var wg sync.WaitGroup
	var pops []*population
	for _, t := range tenants {
		p := &population{run: r, t: t, keep: t.Gen.Spec().Kind == workload.MultiTurn, targets: env.Targets, picker: env.Picker}
		if t.Picker != nil {
			p.targets, p.picker = t.Targets, t.Picker
		}
		pops = append(pops, p)
		switch plan.Mode {
		case Concurrent:
			for range t.Concurrency {
				wg.Go(func() {
					for ctx.Err() == nil && p.session(ctx) {
					}
				})
			}
		case Constant, Poisson:
			wg.Go(func() { p.arrivals(ctx, &wg) })
		}
	}
	wg.Wait()
	out := Outcome{Records: r.recs}
	if plan.Mode.Open() {
		for _, p := range pops {
			o := p.stats
			o.Tenant = p.t.Name
			out.Open = append(out.Open, o)
		}
	}
	return out, ctx.Err()
}

func tenantErr(name string, err error) error {
	if name == "" {
		return err
	}
	return fmt.Errorf("tenant %s: %w", name, err)
}

// arrivals starts sessions at the Schedule's times until the budget runs
// out. It never waits for a session: an arrival that finds the bound full
// is counted and skipped, and the next one keeps its time.
func (p *population) arrivals(ctx context.Context, wg *sync.WaitGroup) {
	sched := NewSchedule(p.plan.Mode, p.t.Rate, p.t.Seed)
	bound := p.t.Concurrency
	if bound == 0 {
		bound = DefaultMaxInFlight
	}
	p.stats.MaxInFlight = bound
	var inFlight, peak atomic.Int64
	stop := make(chan struct{})
	var stopOnce sync.Once
	begin := time.Now()
	defer func() { p.stats.PeakInFlight = int(peak.Load()) }()
	for {
		// Each arrival's wall time comes from its model time since the
		// start, so timer lateness never accumulates into drift.
		at := begin.Add(time.Duration(sched.Next() / p.plan.TimeScale * float64(time.Second)))
		if d := time.Until(at); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-stop:
				t.Stop()
				return
			case <-t.C:
			}
		}
		if ctx.Err() != nil || !p.open() {
			return
		}
		select {
		case <-stop:
			return
		default:
		}
		p.stats.Arrivals++
		n := inFlight.Add(1)
		if n > int64(bound) {
			inFlight.Add(-1)
			p.stats.OverBound++
			continue
		}
		p.stats.Sent++
		for {
			m := peak.Load()
			if n <= m || peak.CompareAndSwap(m, n) {
				break
			}
		}
		wg.Go(func() {
			defer inFlight.Add(-1)
			if !p.session(ctx) {
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
func (p *population) session(ctx context.Context) bool {
	p.genMu.Lock()
	s := p.t.Gen.Next()
	p.genMu.Unlock()
	var answers []string
	for k := range s.Turns {
		if !p.take() {
			return false
		}
		rec, answer := p.request(ctx, &s, k, answers)
		p.recMu.Lock()
		p.recs = append(p.recs, rec)
		p.recMu.Unlock()
		if p.env.OnDone != nil {
			p.env.OnDone(&rec)
		}
		if !rec.OK() {
			// A conversation cannot go on without the answer it builds on.
			return ctx.Err() == nil
		}
		answers = append(answers, answer)
	}
	return true
}

func (p *population) request(ctx context.Context, s *workload.Session, k int, answers []string) (results.Record, string) {
	pl := p.plan
	rec := results.Record{
		Tenant: p.t.Name, Workload: string(p.t.Gen.Spec().Kind), Strategy: pl.Strategy, Concurrency: p.t.Concurrency,
		Session: s.ID, Turn: k, Group: s.Group,
		TTFTS: results.NaN, E2ES: results.NaN, ITLMeanS: results.NaN,
		WallTTFTS: results.NaN, WallE2ES: results.NaN, SimTTFTS: results.NaN, ProjectedTTFTS: results.NaN,
		PredictedTTFTS: results.NaN,
	}
	if p.t.Name == "" {
		// A run without tenants names its workload as the caller did.
		rec.Workload = pl.Workload
	}
	if pl.Mode.Open() {
		rec.Concurrency, rec.Rate = 0, p.t.Rate
	}
	msgs := s.Messages(k, answers)
	sm := make([]stream.Message, len(msgs))
	for i, m := range msgs {
		sm[i] = stream.Message{Role: m.Role, Content: m.Content}
	}
	now := time.Now()
	rec.StartWallS = now.Sub(p.start).Seconds()
	rec.StartS = rec.StartWallS * pl.TimeScale
	rec.EndWallS = rec.StartWallS
	body, err := stream.ChatRequest{Model: pl.Model, Messages: sm, MaxTokens: s.Turns[k].MaxTokens, IgnoreEOS: pl.IgnoreEOS}.Body()
	if err != nil {
		rec.Error = err.Error()
		return rec, ""
	}
	rctx, cancel := context.WithTimeout(ctx, pl.RequestTimeout)
	defer cancel()
	var first time.Time
	var res stream.Result
	for {
		idx, release, err := p.picker.Pick(rctx, body)
		if err != nil {
			rec.Error = "pick target: " + err.Error()
			rec.EndWallS = time.Since(p.start).Seconds()
			return rec, ""
		}
		t := p.targets[idx]
		rec.Target = t.ID
		res = p.t.Client.Chat(rctx, t.APIBase, body, p.keep)
		release()
		if first.IsZero() {
			first = res.Sent
		}
		wait, again := p.retry(rctx, &res)
		if !again {
			break
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-rctx.Done():
			timer.Stop()
		}
		if rctx.Err() != nil {
			break // the 429 stands: the wait outlived the request's time
		}
		rec.Retries++
	}
	// The clock starts when the request is first sent, after the pick: a
	// baseline's own picking time is not the server's latency, but a
	// Retry-After waited out is the user's.
	waited := res.Sent.Sub(first)
	rec.StartWallS = first.Sub(p.start).Seconds()
	rec.StartS = rec.StartWallS * pl.TimeScale
	rec.EndWallS = rec.StartWallS + (waited + res.E2E).Seconds()
	rec.Status, rec.Shed = res.Status, res.Shed
	rec.RefusalReason = res.Reason
	rec.Error = strings.TrimSpace(res.Err)
	rec.PromptTokens, rec.CachedTokens, rec.CompletionTokens, rec.Chunks = res.PromptTokens, res.CachedTokens, res.CompletionToks, res.Chunks
	if res.SimTTFT >= 0 {
		rec.SimTTFTS = results.Num(res.SimTTFT)
	}
	if res.SimWorker >= 0 {
		rec.SimWorker = &res.SimWorker
	}
	if res.PredictedTTFT > 0 {
		rec.PredictedTTFTS = results.Num(res.PredictedTTFT * pl.TimeScale)
	}
	rec.WallE2ES = results.Num((waited + res.E2E).Seconds())
	rec.E2ES = rec.WallE2ES * results.Num(pl.TimeScale)
	if res.Chunks > 0 {
		rec.WallTTFTS = results.Num((waited + res.TTFT).Seconds())
		rec.TTFTS = rec.WallTTFTS * results.Num(pl.TimeScale)
		rec.ProjectedTTFTS = results.Project(rec.WallTTFTS, rec.SimTTFTS, pl.TimeScale)
	}
	if len(res.Gaps) > 0 {
		rec.Gaps = make([]float64, len(res.Gaps))
		sum := 0.0
		for i, g := range res.Gaps {
			rec.Gaps[i] = g.Seconds()
			sum += rec.Gaps[i]
		}
		rec.ITLMeanS = results.Num(sum / float64(len(res.Gaps)) * pl.TimeScale)
	}
	return rec, res.Text
}

// retry says whether to wait out res and send the request again, and for
// how long: only a 429 with a Retry-After within the plan's bound, when
// the plan asks for it, and only while the run and the request have the
// time.
func (p *population) retry(ctx context.Context, res *stream.Result) (time.Duration, bool) {
	if !p.plan.RetryAfter || res.Status != http.StatusTooManyRequests || res.RetryAfter < 0 || res.RetryAfter > p.plan.MaxRetryAfter {
		return 0, false
	}
	at := time.Now().Add(res.RetryAfter)
	if !p.end.IsZero() && !at.Before(p.end) {
		return 0, false
	}
	if d, ok := ctx.Deadline(); ok && !at.Before(d) {
		return 0, false
	}
	return res.RetryAfter, true
}
