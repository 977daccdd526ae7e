package meter

import (
	"context"
	_ "embed"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchyard-dev/switchyard/internal/rediskeys"
	"github.com/switchyard-dev/switchyard/internal/usage"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
)

//go:embed count.lua
var countLua string

var countScript = redis.NewScript(countLua)

// counterNames are the numeric counters every event adds to, in the order
// of values(); outcomes are counted apart (count.lua).
var counterNames = []string{
	usage.FieldRequests, usage.FieldCachedInput, usage.FieldUncachedInput, usage.FieldOutput,
	usage.FieldReasoning, usage.FieldTTFTMillis, usage.FieldTTFTCount, usage.FieldE2EMillis,
}

// tokenIndexes are the 1-based positions in counterNames of
// usage.TokenCounters, whose sum count.lua keeps for budgets.
var tokenIndexes = func() []any {
	var out []any
	for _, t := range usage.TokenCounters {
		i := slices.Index(counterNames, t)
		if i < 0 {
			panic("meter: token counter " + t + " is not counted")
		}
		out = append(out, i+1)
	}
	return out
}()

// event is one decoded usage event with its label values.
type event struct {
	ev       *eventsv1.UsageEvent
	tenant   string // label value
	model    string // label value
	outcome  string // label value
	finished time.Time
	vals     [8]int64 // counter values, in counterNames order
	// counted is set when the script counted it now (not before).
	counted bool
}

func newEvent(ev *eventsv1.UsageEvent, l *labels, now time.Time) *event {
	e := &event{ev: ev, tenant: l.tenant(ev.GetTenant()), model: l.model(ev.GetModel()), outcome: outcome(ev.GetOutcome())}
	switch {
	case ev.GetFinishedAt().IsValid():
		e.finished = ev.GetFinishedAt().AsTime()
	case ev.GetStartedAt().IsValid():
		e.finished = ev.GetStartedAt().AsTime()
	default:
		e.finished = now
	}
	e.vals = e.values()
	return e
}

// values are the event's counter values, in counterNames order.
func (e *event) values() [8]int64 {
	ev := e.ev
	prompt, cached := max(0, ev.GetPromptTokens()), max(0, ev.GetCachedPromptTokens())
	cached = min(cached, prompt)
	var ttftMS, ttftN int64
	if t := ev.GetTtftSeconds(); t > 0 {
		ttftMS, ttftN = millis(t), 1
	}
	return [8]int64{1, cached, prompt - cached, max(0, ev.GetCompletionTokens()), max(0, ev.GetReasoningTokens()), ttftMS, ttftN, millis(ev.GetE2ESeconds())}
}

func millis(s float64) int64 {
	if s <= 0 || math.IsNaN(s) || math.IsInf(s, 0) {
		return 0
	}
	return int64(math.Round(min(s, 1e9) * 1000))
}

// counter counts events in Redis, each exactly once.
type counter struct {
	rdb    redis.Scripter
	prefix string
	// TTLs in seconds.
	seen, minute, hour, day int64
}

func newCounter(rdb redis.Scripter, cfg *Config) *counter {
	sec := func(d time.Duration) int64 { return max(1, int64(d/time.Second)) }
	return &counter{rdb: rdb, prefix: cfg.KeyPrefix, seen: sec(cfg.DedupWindow + time.Hour),
		minute: sec(cfg.RetainMinutes), hour: sec(cfg.RetainHours), day: sec(cfg.RetainDays)}
}

// group is the events of one model, outcome and minute in a batch.
type group struct {
	model, outcome string
	index          string // its 1-based index, as the script reads it
	minute         int64
	n              int
	sums           [8]int64
}

type groupKey struct {
	model, outcome string
	minute         int64
}

// count counts evs, all of one tenant (label value), in one script call,
// and sets each one's counted flag.
func (c *counter) count(ctx context.Context, tenant string, evs []*event) error {
	var keys []string
	var ttls []int64
	index := map[string]int{}
	key := func(k string, ttl int64) int {
		i, ok := index[k]
		if !ok {
			keys, ttls = append(keys, k), append(ttls, ttl)
			i = len(keys)
			index[k] = i
		}
		return i
	}
	var groups []*group
	gidx := map[groupKey]int{}
	outcomes, outcomeIdx := []string{}, map[string]int{}
	perEvent := make([]any, 0, 3*len(evs))
	var buf []byte
	for _, e := range evs {
		gk := groupKey{e.model, e.outcome, usage.Minute.Start(e.finished)}
		gi, ok := gidx[gk]
		if !ok {
			gi = len(groups) + 1
			groups = append(groups, &group{model: gk.model, outcome: gk.outcome, minute: gk.minute, index: strconv.Itoa(gi)})
			gidx[gk] = gi
		}
		g := groups[gi-1]
		g.n++
		buf = buf[:0]
		for i, v := range e.vals {
			g.sums[i] += v
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = strconv.AppendInt(buf, v, 10)
		}
		perEvent = append(perEvent, e.ev.GetRequestId(), g.index, string(buf))
	}
	perGroup := make([]any, 0, len(groups)*(8+len(counterNames)))
	for _, g := range groups {
		oi, ok := outcomeIdx[g.outcome]
		if !ok {
			outcomes = append(outcomes, g.outcome)
			oi = len(outcomes)
			outcomeIdx[g.outcome] = oi
		}
		at := time.Unix(g.minute, 0)
		perGroup = append(perGroup, g.model, oi,
			key(rediskeys.UsageSeen(c.prefix, tenant, usage.Hour.Start(at)), c.seen),
			key(rediskeys.UsageRollup(c.prefix, tenant, usage.Minute.Name, g.minute), c.minute),
			key(rediskeys.UsageRollup(c.prefix, tenant, usage.Hour.Name, usage.Hour.Start(at)), c.hour),
			key(rediskeys.UsageRollup(c.prefix, tenant, usage.Day.Name, usage.Day.Start(at)), c.day),
			key(rediskeys.UsageRollup(c.prefix, tenant, usage.Month, usage.MonthStart(at)), c.day),
			g.n)
		for _, v := range g.sums {
			perGroup = append(perGroup, v)
		}
	}
	args := make([]any, 0, 6+len(ttls)+len(counterNames)+len(tokenIndexes)+len(outcomes)+len(perGroup)+len(perEvent))
	args = append(args, len(evs), len(groups), len(ttls))
	for _, t := range ttls {
		args = append(args, t)
	}
	args = append(args, len(counterNames))
	for _, n := range counterNames {
		args = append(args, n)
	}
	args = append(args, len(tokenIndexes))
	args = append(args, tokenIndexes...)
	args = append(args, len(outcomes))
	for _, o := range outcomes {
		args = append(args, o)
	}
	args = append(args, perGroup...)
	args = append(args, perEvent...)
	flags, err := countScript.Run(ctx, c.rdb, keys, args...).Int64Slice()
	if err != nil {
		return fmt.Errorf("count %d events of tenant %s: %w", len(evs), tenant, err)
	}
	if len(flags) != len(evs) {
		return fmt.Errorf("count script answered %d flags for %d events", len(flags), len(evs))
	}
	for i, e := range evs {
		e.counted = flags[i] == 1
	}
	return nil
}

// feedTenant reports whether a tenant label value has a feed: a named
// tenant, not everyone else's "other" nor the unauthenticated.
func feedTenant(t string) bool { return t != Other && t != Unauthenticated }
