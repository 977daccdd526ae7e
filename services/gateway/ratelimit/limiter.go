// Package ratelimit enforces tenants' request and token limits, exactly
// across gateway replicas, by keeping every count in Redis and changing
// it only inside one Lua script (EVALSHA), so that N replicas together
// admit what one would.
//
// # Algorithm
//
// Per-minute limits (requests, input tokens, output tokens) use GCRA, the
// generic cell rate algorithm, kept as a leaky-bucket meter: each key
// holds a level (requests or tokens, a float) and when it was last
// updated. The level drains at limit per minute; a request of cost c is
// admitted when level+c ≤ limit. GCRA rather than a sliding window
// because:
//   - it is exact with one small hash per key, where a sliding log keeps
//     every request (a sorted set growing with the limit: a million tokens
//     a minute would be a million members) and a sliding counter
//     approximates;
//   - it has no window edge: a fixed window lets twice the limit through
//     around the boundary, GCRA never more than the limit in any minute
//     plus the steady drain;
//   - a cost is a weight (a 4,000-token prompt is 4,000 units), and
//     correcting a reservation is adding a signed number to the level.
//
// The clock is Redis's (TIME inside the script, which needs Redis 6.2 or
// later, as SET ... PXAT does): replicas' clocks never enter the
// arithmetic, so their skew costs no accuracy. The burst a key
// allows is its whole per-minute limit.
//
// Budgets (tokens per UTC day and month) are counters, one key per
// calendar window, expiring an hour after the window ends (late
// corrections still find it). A budget is a quota, not a rate: it is
// meant to run out and reset on the calendar.
//
// A budget reads the meter's rollups too (package usage; what `yardctl
// usage` shows): what it holds against a tenant is the larger of its own
// counter (every token reserved and corrected here, exact at every
// instant) and the meter's count of the window plus the tokens reserved
// by requests still in flight (a second counter), which the meter cannot
// have counted yet. When all of a tenant's usage goes through the
// limiter, its own counter is the larger and the meter's lag changes
// nothing; usage that reached the meter without it (a replica that
// decided alone while Redis was down, a gateway whose admission chain
// lacks the step) counts all the same, as soon as the meter has counted
// it (its consumer's lag, normally under a second: requests finishing
// inside that lag can then overshoot the budget by their tokens). So a
// tenant is never shown more than its budget counts. The meter must write
// its rollups to this Redis, under the limiter's UsagePrefix.
//
// # Reservations
//
// Tokens are reserved when a request is admitted — the prompt's tokens and
// its max_tokens (or a default) — and corrected when it completes with the
// usage the upstream reported: the difference is refunded or charged.
// A request is admitted only when every limit it touches has room; the
// script checks all of them before it changes any, so a refused request
// costs nothing.
//
// # Redis unreachable
//
// A command that fails (or takes longer than the configured timeout)
// marks Redis down for a second, during which no command is tried, so an
// outage costs no latency. Meanwhile, by configuration (DownMode):
//   - open: each replica enforces its share of every limit in memory,
//     limit / expected replicas, so the fleet admits about what it would
//     with Redis — never an unbounded free-for-all;
//   - closed: requests are refused (503) until Redis answers.
//
// Both are counted (switchyard_gateway_ratelimit_redis_down_total) and
// logged at most every 30 seconds.
package ratelimit

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/rediskeys"
	"github.com/switchyard-dev/switchyard/internal/usage"
)

// Dim is one kind of limit.
type Dim uint8

// The limits a key can have.
const (
	Requests Dim = iota
	InputTokens
	OutputTokens
	TokensPerDay
	TokensPerMonth
	numDims
)

var dimNames = [numDims]string{"requests", "input_tokens", "output_tokens", "tokens_per_day", "tokens_per_month"}

func (d Dim) String() string {
	if d < numDims {
		return dimNames[d]
	}
	return "dim(" + strconv.Itoa(int(d)) + ")"
}

// Cost is what a request uses, or is expected to.
type Cost struct {
	Requests, Input, Output int64
}

// State is one limit as a request left it: for the rate-limit headers.
type State struct {
	Dim       Dim
	Limit     int64
	Remaining int64
	// Reset is how long until the limit is whole again (per-minute
	// limits) or the window ends (budgets).
	Reset time.Duration
}

// Decision is the answer to a reservation.
type Decision struct {
	Allowed bool
	// Denied is the limit that refused; RetryAfter when it will have
	// room (for a budget: when its window ends).
	Denied     Dim
	RetryAfter time.Duration
	// States are the key's limits, one per limited dimension.
	States []State
	// Local is set when Redis was unreachable and this replica decided
	// alone on its share of the limits (DownOpen).
	Local bool
	// Reservation corrects the reservation later; nil when refused.
	Reservation *Reservation
}

// Reservation is what an admitted request reserved, to be corrected.
type Reservation struct {
	items    []item
	reserved Cost
	local    bool
}

// ErrTooLarge is a request whose cost exceeds a per-minute limit by
// itself: no wait would ever admit it.
var ErrTooLarge = errors.New("request is larger than a per-minute limit")

// ErrUnavailable is the answer while Redis is unreachable and the limiter
// fails closed.
var ErrUnavailable = errors.New("the rate limiter's store is unreachable")

// DownMode is what the limiter does while Redis is unreachable.
type DownMode string

// DownMode values.
const (
	DownOpen   DownMode = "open"
	DownClosed DownMode = "closed"
)

// Options configure a Limiter.
type Options struct {
	// Prefix starts every key; empty is rediskeys' (tests use their own).
	Prefix string
	// UsagePrefix starts the meter's keys (its --key-prefix), whose
	// rollups budgets read; empty is rediskeys'.
	UsagePrefix string
	// Down is the choice while Redis is unreachable; Replicas the
	// expected number of gateway replicas, dividing the limits in
	// DownOpen.
	Down     DownMode
	Replicas int
	// Timeout bounds one Redis call.
	Timeout time.Duration
	// Registerer takes the limiter's metrics; nil registers none.
	Registerer prometheus.Registerer
	Log        zerolog.Logger
}

// Limiter reserves and corrects. Safe for concurrent use.
type Limiter struct {
	rdb       redis.Scripter
	opts      Options
	local     *local
	downUntil atomic.Int64 // unix nanoseconds; Redis is not tried before
	logMu     sync.Mutex
	lastLog   time.Time
	suppress  int

	decisions *prometheus.CounterVec // result
	down      *prometheus.CounterVec // mode
	lost      prometheus.Counter
}

// Results of a decision, as metric labels.
const (
	resultAllowed      = "allowed"
	resultDenied       = "denied"
	resultUnavailable  = "unavailable"
	downRetry          = time.Second
	downLogEvery       = 30 * time.Second
	budgetGrace        = time.Hour
	kindRate           = 1
	kindWindow         = 2
	minute             = int64(time.Minute / time.Millisecond)
	defaultCallTimeout = 250 * time.Millisecond
)

// NewLimiter returns a limiter on rdb.
func NewLimiter(rdb redis.Scripter, o Options) *Limiter {
	if o.Prefix == "" {
		o.Prefix = rediskeys.RateLimitPrefix
	}
	if o.UsagePrefix == "" {
		o.UsagePrefix = rediskeys.UsagePrefix
	}
	if o.Replicas < 1 {
		o.Replicas = 1
	}
	if o.Down == "" {
		o.Down = DownOpen
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultCallTimeout
	}
	l := &Limiter{
		rdb: rdb, opts: o, local: newLocal(),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_gateway_ratelimit_decisions_total",
			Help: "Rate-limit decisions by result (allowed, denied, unavailable: Redis unreachable and --ratelimit-redis-down=closed) and store (redis, local: this replica's share while Redis is unreachable).",
		}, []string{"result", "store"}),
		down: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_gateway_ratelimit_redis_down_total",
			Help: "Rate-limit decisions taken while Redis was unreachable, by mode (open: local share of the limits; closed: refused).",
		}, []string{"mode"}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchyard_gateway_ratelimit_corrections_lost_total",
			Help: "Reservations whose correction with the real usage could not reach Redis.",
		}),
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(l.decisions, l.down, l.lost)
	}
	return l
}

// item is one limit a reservation touches.
type item struct {
	key   string
	dim   Dim
	kind  int
	limit int64
	// p is the period in milliseconds (kindRate) or the window's end in
	// unix milliseconds (kindWindow).
	p    int64
	cost int64
	// A window's counter of tokens reserved in flight and its change
	// (rcost), and the meter's rollup of the window with its field of
	// the scope's tokens.
	reservedKey, rollupKey, field string
	rcost                         int64
}

// Scope is a set of limits a request counts against: its tenant's
// (Model empty) or its tenant's on its model.
type Scope struct {
	Model  string
	Limits Limits
}

// items lists the limits the scopes set, with c's cost on each.
func (l *Limiter) items(tenant string, scopes []Scope, c Cost, now time.Time, replicas int) []item {
	var its []item
	for _, s := range scopes {
		lim := s.Limits
		if replicas > 1 {
			lim = share(lim, replicas)
		}
		n := len(its)
		its = l.scopeItems(its, rediskeys.RateLimit(l.opts.Prefix, tenant, s.Model, ""), lim, c, now)
		for i := n; i < len(its); i++ {
			it := &its[i]
			if it.kind != kindWindow {
				continue
			}
			it.reservedKey, it.rcost, it.field = it.key+":reserved", it.cost, usage.BudgetField(s.Model)
			res, start := usage.Day.Name, usage.Day.Start(now)
			if it.dim == TokensPerMonth {
				res, start = usage.Month, usage.MonthStart(now)
			}
			it.rollupKey = rediskeys.UsageRollup(l.opts.UsagePrefix, tenant, res, start)
		}
	}
	return its
}

func (l *Limiter) scopeItems(its []item, key string, lim Limits, c Cost, now time.Time) []item {
	rate := func(d Dim, limit, cost int64) {
		if limit > 0 {
			its = append(its, item{key: key + d.String(), dim: d, kind: kindRate, limit: limit, p: minute, cost: cost})
		}
	}
	rate(Requests, lim.RequestsPerMinute, c.Requests)
	rate(InputTokens, lim.InputTokensPerMinute, c.Input)
	rate(OutputTokens, lim.OutputTokensPerMinute, c.Output)
	now = now.UTC()
	if lim.TokensPerDay > 0 {
		end := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
		its = append(its, item{key: key + "day:" + now.Format("20060102"), dim: TokensPerDay, kind: kindWindow, limit: lim.TokensPerDay, p: end.UnixMilli(), cost: c.Input + c.Output})
	}
	if lim.TokensPerMonth > 0 {
		end := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		its = append(its, item{key: key + "month:" + now.Format("200601"), dim: TokensPerMonth, kind: kindWindow, limit: lim.TokensPerMonth, p: end.UnixMilli(), cost: c.Input + c.Output})
	}
	return its
}

// Reserve admits c against the tenant's scopes, or refuses without
// changing anything. err is ErrTooLarge (the request can never fit) or,
// failing closed, ErrUnavailable.
func (l *Limiter) Reserve(ctx context.Context, tenant string, scopes []Scope, c Cost) (Decision, error) {
	its := l.items(tenant, scopes, c, time.Now(), 1)
	for _, it := range its {
		if it.kind == kindRate && it.cost > it.limit {
			return Decision{Denied: it.dim, States: []State{{Dim: it.dim, Limit: it.limit}}}, fmt.Errorf("%w: %d %s over a limit of %d a minute", ErrTooLarge, it.cost, it.dim, it.limit)
		}
	}
	if len(its) == 0 {
		return Decision{Allowed: true}, nil
	}
	if l.redisUp() {
		res, err := l.run(ctx, false, its)
		if err == nil {
			d := decide(its, res)
			if d.Allowed {
				d.Reservation = &Reservation{items: its, reserved: c}
			}
			l.count(d, "redis")
			return d, nil
		}
		if ctx.Err() != nil {
			return Decision{}, ctx.Err()
		}
		l.markDown(err)
	}
	l.down.WithLabelValues(string(l.opts.Down)).Inc()
	if l.opts.Down == DownClosed {
		l.decisions.WithLabelValues(resultUnavailable, "local").Inc()
		return Decision{Denied: Requests, RetryAfter: downRetry}, ErrUnavailable
	}
	its = l.items(tenant, scopes, c, time.Now(), l.opts.Replicas)
	d := decide(its, l.local.run(false, its, time.Now()))
	d.Local = true
	if d.Allowed {
		d.Reservation = &Reservation{items: its, reserved: c, local: true}
	}
	l.count(d, "local")
	return d, nil
}

func (l *Limiter) count(d Decision, store string) {
	r := resultDenied
	if d.Allowed {
		r = resultAllowed
	}
	l.decisions.WithLabelValues(r, store).Inc()
}

// Correct replaces r's reserved cost by the real one: the difference is
// refunded or charged, never refused. A nil r is nothing to correct.
func (l *Limiter) Correct(ctx context.Context, r *Reservation, actual Cost) {
	if r == nil {
		return
	}
	its := make([]item, 0, len(r.items))
	for _, it := range r.items {
		var d int64
		switch it.dim {
		case Requests:
			d = actual.Requests - r.reserved.Requests
		case InputTokens:
			d = actual.Input - r.reserved.Input
		case OutputTokens:
			d = actual.Output - r.reserved.Output
		default:
			d = actual.Input + actual.Output - r.reserved.Input - r.reserved.Output
			// No longer in flight: the meter counts it from now on.
			it.rcost = -(r.reserved.Input + r.reserved.Output)
		}
		if d != 0 || it.rcost != 0 {
			it.cost = d
			its = append(its, it)
		}
	}
	if len(its) == 0 {
		return
	}
	if r.local {
		l.local.run(true, its, time.Now())
		return
	}
	if l.redisUp() {
		ctx = context.WithoutCancel(ctx) // the client leaving must not lose the usage
		if _, err := l.run(ctx, true, its); err == nil {
			return
		} else {
			l.markDown(err)
		}
	}
	l.lost.Inc()
}

// decide reads the script's answer: denied index (0: none), retry after
// ms, then remaining and reset ms per item.
func decide(its []item, res []int64) Decision {
	d := Decision{Allowed: res[0] == 0, RetryAfter: time.Duration(res[1]) * time.Millisecond, States: make([]State, len(its))}
	if !d.Allowed {
		d.Denied = its[res[0]-1].dim
	}
	for i, it := range its {
		d.States[i] = State{Dim: it.dim, Limit: it.limit, Remaining: max(0, res[2+2*i]), Reset: time.Duration(max(0, res[3+2*i])) * time.Millisecond}
	}
	return d
}

func (l *Limiter) redisUp() bool { return time.Now().UnixNano() >= l.downUntil.Load() }

// markDown stops trying Redis for downRetry and logs, at most every
// downLogEvery, how many decisions went without it.
func (l *Limiter) markDown(err error) {
	l.downUntil.Store(time.Now().Add(downRetry).UnixNano())
	l.logMu.Lock()
	defer l.logMu.Unlock()
	if time.Since(l.lastLog) < downLogEvery {
		l.suppress++
		return
	}
	l.opts.Log.Warn().Err(err).Str("mode", string(l.opts.Down)).Int("failures_since_last_log", l.suppress).
		Msg("rate limiter: Redis unreachable; deciding without it (open: this replica's share of each limit; closed: refusing)")
	l.lastLog, l.suppress = time.Now(), 0
}

//go:embed reserve.lua
var reserveLua string

var script = redis.NewScript(reserveLua)

// run executes the script: mode r (reserve) or c (correct).
func (l *Limiter) run(ctx context.Context, correct bool, its []item) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	keys := make([]string, 0, 3*len(its))
	args := make([]any, 0, 1+6*len(its))
	mode := "r"
	if correct {
		mode = "c"
	}
	args = append(args, mode)
	for _, it := range its {
		keys = append(keys, it.key)
		args = append(args, it.kind, it.limit, it.p, it.cost)
		if it.kind == kindWindow {
			keys = append(keys, it.reservedKey, it.rollupKey)
			args = append(args, it.rcost, it.field)
		}
	}
	v, err := script.Run(ctx, l.rdb, keys, args...).Int64Slice()
	if err != nil {
		return nil, err
	}
	if len(v) != 2+2*len(its) {
		return nil, fmt.Errorf("rate-limit script answered %d values for %d limits", len(v), len(its))
	}
	return v, nil
}

// local is the same arithmetic as the script, in memory: one replica's
// share of the limits while Redis is unreachable.
type local struct {
	mu sync.Mutex
	m  map[string]*bucket
}

type bucket struct {
	level  float64 // kindRate: units in the bucket; kindWindow: used
	t      int64   // kindRate: last update, unix ms
	expire int64   // kindWindow: unix ms after which the entry goes
}

func newLocal() *local { return &local{m: map[string]*bucket{}} }

func (s *local) run(correct bool, its []item, at time.Time) []int64 {
	now := at.UnixMilli()
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, next := make([]float64, len(its)), make([]float64, len(its))
	var denied int
	var retry float64
	for i, it := range its {
		lim := float64(it.limit)
		var lvl float64
		if b := s.m[it.key]; b != nil {
			lvl = b.level
			if it.kind == kindRate {
				lvl = max(0, lvl-float64(now-b.t)*lim/float64(it.p))
			}
		}
		cur[i], next[i] = lvl, lvl+float64(it.cost)
		switch {
		case correct:
			next[i] = max(0, next[i])
		case next[i] > lim:
			if denied == 0 {
				denied = i + 1
			}
			if it.kind == kindRate {
				retry = max(retry, (next[i]-lim)*float64(it.p)/lim)
			} else {
				retry = max(retry, float64(it.p-now))
			}
		}
	}
	level := next
	if denied != 0 && !correct {
		level = cur
	}
	out := make([]int64, 2, 2+2*len(its))
	out[0], out[1] = int64(denied), int64(math.Ceil(retry))
	for i, it := range its {
		lim := float64(it.limit)
		out = append(out, int64(math.Floor(lim-level[i])))
		if it.kind == kindRate {
			out = append(out, int64(math.Ceil(level[i]*float64(it.p)/lim)))
		} else {
			out = append(out, it.p-now)
		}
	}
	if denied != 0 && !correct {
		return out
	}
	for i, it := range its {
		b := s.m[it.key]
		if b == nil {
			b = &bucket{}
			if it.kind == kindWindow {
				s.expire(now)
				b.expire = it.p + budgetGrace.Milliseconds()
			}
			s.m[it.key] = b
		}
		b.level, b.t = level[i], now
	}
	return out
}

// expire drops ended budget windows; called when a window key is made,
// so at most once per key per window.
func (s *local) expire(now int64) {
	for k, b := range s.m {
		if b.expire != 0 && b.expire < now {
			delete(s.m, k)
		}
	}
}
