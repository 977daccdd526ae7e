// Package usage is the meter's data model: the counters a tenant's usage
// is kept in, the buckets they are rolled up into (a minute, an hour, a
// UTC day), and the usage API's query and answer. The meter writes the
// rollups and serves the API; yardctl and billing systems read the API;
// the gateway's budgets read the same rollups, so what a tenant is shown
// is what its budget counts.
//
// # Rollups
//
// Every counted event adds to four buckets of its tenant: the minute,
// the hour, the UTC day and the UTC month in which it finished. A bucket is a Redis hash
// (rediskeys.UsageRollup) whose fields are "<counter>|<model>". Minute
// buckets are kept briefly (two days by default), hours for weeks, days
// for over a year. A range is answered from the fewest buckets that
// cover it exactly (Cover): whole days in its middle, whole hours next to
// them, minutes at its edges — so a 30-day query reads about 30 + 2×23 +
// 2×59 hashes, not 43,200. Where minute buckets have expired, the edges
// are whole hours instead, and the answer says so (its From and To are
// the range counted).
package usage

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The counters, as hash field prefixes ("<counter>|<model>").
const (
	FieldRequests = "requests"
	// FieldOutcome + outcome counts requests by how they ended
	// (bus.UsageOutcome*).
	FieldOutcome       = "outcome."
	FieldCachedInput   = "input_cached"
	FieldUncachedInput = "input_uncached"
	FieldOutput        = "output"
	FieldReasoning     = "reasoning"
	// FieldTTFTMillis and FieldTTFTCount sum the time to first token of the
	// requests that had one; FieldE2EMillis sums every request's duration.
	FieldTTFTMillis = "ttft_ms"
	FieldTTFTCount  = "ttft_n"
	FieldE2EMillis  = "e2e_ms"
)

// Counters are usage summed over requests.
type Counters struct {
	Requests      int64            `json:"requests"`
	Outcomes      map[string]int64 `json:"outcomes,omitempty"`
	CachedInput   int64            `json:"cached_input_tokens"`
	UncachedInput int64            `json:"uncached_input_tokens"`
	Output        int64            `json:"output_tokens"`
	Reasoning     int64            `json:"reasoning_tokens"`
	TTFTMillis    int64            `json:"-"`
	TTFTCount     int64            `json:"-"`
	E2EMillis     int64            `json:"-"`
}

// Tokens is every input and output token.
func (c *Counters) Tokens() int64 { return c.CachedInput + c.UncachedInput + c.Output }

// Add adds o to c.
func (c *Counters) Add(o *Counters) {
	c.Requests += o.Requests
	c.CachedInput += o.CachedInput
	c.UncachedInput += o.UncachedInput
	c.Output += o.Output
	c.Reasoning += o.Reasoning
	c.TTFTMillis += o.TTFTMillis
	c.TTFTCount += o.TTFTCount
	c.E2EMillis += o.E2EMillis
	for k, v := range o.Outcomes {
		if c.Outcomes == nil {
			c.Outcomes = map[string]int64{}
		}
		c.Outcomes[k] += v
	}
}

// set assigns one counter by its field name; false for a name it does not
// know (written by a newer meter).
func (c *Counters) set(name string, v int64) bool {
	switch name {
	case FieldRequests:
		c.Requests += v
	case FieldCachedInput:
		c.CachedInput += v
	case FieldUncachedInput:
		c.UncachedInput += v
	case FieldOutput:
		c.Output += v
	case FieldReasoning:
		c.Reasoning += v
	case FieldTTFTMillis:
		c.TTFTMillis += v
	case FieldTTFTCount:
		c.TTFTCount += v
	case FieldE2EMillis:
		c.E2EMillis += v
	default:
		o, ok := strings.CutPrefix(name, FieldOutcome)
		if !ok || o == "" {
			return false
		}
		if c.Outcomes == nil {
			c.Outcomes = map[string]int64{}
		}
		c.Outcomes[o] += v
	}
	return true
}

// Field is the hash field of counter for model.
func Field(counter, model string) string { return counter + "|" + model }

// ParseHash adds a rollup hash (HGETALL) to per-model counters in dst,
// creating them. Fields it cannot read are skipped.
func ParseHash(dst map[string]*Counters, h map[string]string) {
	for f, raw := range h {
		counter, model, ok := strings.Cut(f, "|")
		if !ok {
			continue
		}
		v, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			continue
		}
		c := dst[model]
		if c == nil {
			c = &Counters{}
			dst[model] = c
		}
		c.set(counter, v)
	}
}

// Resolution is a bucket size.
type Resolution struct {
	// Name is the key's resolution part: "m", "h" or "d".
	Name string
	Step time.Duration
}

// The resolutions, finest first. Unix time starts at a UTC midnight, so
// truncating Unix seconds to a day is a UTC day.
var (
	Minute      = Resolution{"m", time.Minute}
	Hour        = Resolution{"h", time.Hour}
	Day         = Resolution{"d", 24 * time.Hour}
	Resolutions = []Resolution{Minute, Hour, Day}
)

// Month is the fourth resolution, the UTC calendar month, which no fixed
// step makes: Cover does not use it (days tile months); the gateway's
// monthly budgets read it, one hash a month.
const Month = "M"

// MonthStart is the start of t's UTC month, in Unix seconds.
func MonthStart(t time.Time) int64 {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC).Unix()
}

// TokenCounters are the counters a token budget counts: every input and
// output token.
var TokenCounters = []string{FieldCachedInput, FieldUncachedInput, FieldOutput}

// FieldBudgetTokens is the sum of TokenCounters, kept by the meter in the
// day and month rollups only, for the gateway's budgets: one field read
// per budget check, however many models and outcomes the hash holds.
// ParseHash skips it (the counters it sums are there too).
const FieldBudgetTokens = "tokens"

// BudgetField is the day or month rollup's field of model's tokens, or of
// every model's for "".
func BudgetField(model string) string {
	if model == "" {
		return FieldBudgetTokens
	}
	return Field(FieldBudgetTokens, model)
}

// Start is the start of t's bucket, in Unix seconds.
func (r Resolution) Start(t time.Time) int64 { return floor(t.Unix(), int64(r.Step/time.Second)) }

// Bucket is one rollup bucket.
type Bucket struct {
	Res   Resolution
	Start int64 // Unix seconds
}

// Cover returns the buckets that together cover [from, to) exactly, the
// fewest of them (whole days, then whole hours, then minutes), and the
// range they cover: from rounded down and to rounded up to the minute, or
// to the hour where from or to lie before minutesSince (minute buckets
// older than that have expired).
func Cover(from, to, minutesSince time.Time) ([]Bucket, time.Time, time.Time) {
	lo := time.Unix(Minute.Start(from), 0).UTC()
	if lo.Before(minutesSince) {
		lo = time.Unix(Hour.Start(from), 0).UTC()
	}
	hi := time.Unix(Minute.Start(to.Add(time.Minute-time.Nanosecond)), 0).UTC()
	if hi.Before(minutesSince) {
		hi = time.Unix(Hour.Start(to.Add(time.Hour-time.Nanosecond)), 0).UTC()
	}
	if !lo.Before(hi) {
		return nil, lo, lo
	}
	var out []Bucket
	cover(&out, lo.Unix(), hi.Unix(), len(Resolutions)-1)
	return out, lo, hi
}

// cover appends the buckets of [lo, hi) (Unix seconds, minute-aligned)
// using resolutions up to level: the whole buckets of that level in the
// middle, the rest from the finer ones.
func cover(out *[]Bucket, lo, hi int64, level int) {
	if lo >= hi {
		return
	}
	res := Resolutions[level]
	step := int64(res.Step / time.Second)
	if level == 0 {
		for s := lo; s < hi; s += step {
			*out = append(*out, Bucket{res, s})
		}
		return
	}
	first, last := floor(lo+step-1, step), floor(hi, step)
	if first >= last {
		cover(out, lo, hi, level-1)
		return
	}
	cover(out, lo, first, level-1)
	for s := first; s < last; s += step {
		*out = append(*out, Bucket{res, s})
	}
	cover(out, last, hi, level-1)
}

// floor rounds x down to a multiple of step.
func floor(x, step int64) int64 { return x - ((x%step)+step)%step }

// Groupings of the usage API's rows.
const (
	ByTotal  = ""       // one row: the whole range, every model
	ByModel  = "model"  // one row per model
	ByMinute = "minute" // one row per minute (every model)
	ByHour   = "hour"
	ByDay    = "day"
)

// ParseBy checks a grouping.
func ParseBy(s string) (string, error) {
	switch s {
	case ByTotal, ByModel, ByMinute, ByHour, ByDay:
		return s, nil
	}
	return "", fmt.Errorf("by %q: want model, minute, hour or day (or nothing for one total)", s)
}

// Window is the step of a time grouping, 0 for the others.
func Window(by string) time.Duration {
	switch by {
	case ByMinute:
		return time.Minute
	case ByHour:
		return time.Hour
	case ByDay:
		return 24 * time.Hour
	}
	return 0
}

// Row is one row of a usage answer.
type Row struct {
	Model string    `json:"model,omitempty"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	Counters
	TTFTMean float64 `json:"ttft_mean_seconds,omitempty"`
	E2EMean  float64 `json:"e2e_mean_seconds,omitempty"`
}

// Finish fills the row's means from its sums.
func (r *Row) Finish() {
	if r.TTFTCount > 0 {
		r.TTFTMean = float64(r.TTFTMillis) / float64(r.TTFTCount) / 1000
	}
	if r.Requests > 0 {
		r.E2EMean = float64(r.E2EMillis) / float64(r.Requests) / 1000
	}
}

// Answer is the usage API's answer (GET /v1/usage).
type Answer struct {
	Tenant string `json:"tenant"`
	// From and To are the range counted, which may be wider than asked
	// (Cover).
	From  time.Time `json:"from"`
	To    time.Time `json:"to"`
	By    string    `json:"by,omitempty"`
	Rows  []Row     `json:"rows"`
	Total Row       `json:"total"`
}

// SortRows orders rows by start, then model.
func SortRows(rows []Row) {
	sort.Slice(rows, func(i, j int) bool {
		if !rows[i].Start.Equal(rows[j].Start) {
			return rows[i].Start.Before(rows[j].Start)
		}
		return rows[i].Model < rows[j].Model
	})
}
