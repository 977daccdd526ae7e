package meter

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchyard-dev/switchyard/internal/configcheck"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/internal/rediskeys"
	"github.com/switchyard-dev/switchyard/internal/usage"
)

// The usage API: GET /v1/usage?tenant=T&since=24h[&to=RFC3339][&by=model|minute|hour|day]
// (or from=RFC3339 instead of since) answers usage.Answer as JSON: the
// tenant's usage over the range, one row per group, and the total. It is
// for operators and billing systems, so it needs --operator-token-file's
// bearer token; without one it is served only on a loopback address.

// maxUsageRange bounds a query's range (the days kept by default).
const maxUsageRange = 400 * 24 * time.Hour

// maxRows bounds an answer's rows (a month by minute is 43,200).
const maxRows = 50_000

func (m *Meter) usageHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, err := parseQuery(r, time.Now())
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		rdb := m.rdb.Load()
		if rdb == nil {
			writeError(w, http.StatusServiceUnavailable, "not started")
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		ans, err := answer(ctx, rdb, m.cfg.KeyPrefix, q, time.Now().Add(-m.cfg.RetainMinutes))
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, "usage unreadable: "+err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ans)
	})
}

// query is a parsed usage request.
type query struct {
	tenant   string
	from, to time.Time
	by       string
}

func parseQuery(r *http.Request, now time.Time) (query, error) {
	v := r.URL.Query()
	q := query{tenant: v.Get("tenant"), to: now}
	var errs []string
	if q.tenant == "" {
		errs = append(errs, "tenant: required")
	} else if len(q.tenant) > 253 {
		errs = append(errs, "tenant: longer than 253 bytes")
	}
	var err error
	if q.by, err = usage.ParseBy(v.Get("by")); err != nil {
		errs = append(errs, err.Error())
	}
	if s := v.Get("to"); s != "" {
		if q.to, err = time.Parse(time.RFC3339, s); err != nil {
			errs = append(errs, fmt.Sprintf("to %q: want RFC 3339 (2026-12-01T10:00:00Z)", s))
		}
	}
	since, from := v.Get("since"), v.Get("from")
	switch {
	case since != "" && from != "":
		errs = append(errs, "give since or from, not both")
	case from != "":
		if q.from, err = time.Parse(time.RFC3339, from); err != nil {
			errs = append(errs, fmt.Sprintf("from %q: want RFC 3339 (2026-12-01T10:00:00Z)", from))
		}
	default:
		if since == "" {
			since = "24h"
		}
		d, err := parseSince(since)
		if err != nil {
			errs = append(errs, err.Error())
		}
		q.from = q.to.Add(-d)
	}
	if len(errs) == 0 {
		switch {
		case !q.from.Before(q.to):
			errs = append(errs, "the range is empty: from must be before to")
		case q.to.Sub(q.from) > maxUsageRange:
			errs = append(errs, fmt.Sprintf("the range is longer than %d days", int(maxUsageRange/(24*time.Hour))))
		case usage.Window(q.by) > 0 && q.to.Sub(q.from)/usage.Window(q.by) > maxRows:
			errs = append(errs, fmt.Sprintf("more than %d rows: a coarser by, or a shorter range", maxRows))
		}
	}
	if len(errs) > 0 {
		return q, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return q, nil
}

// parseSince reads a duration, with d for days ("30d", "24h", "90m").
func parseSince(s string) (time.Duration, error) {
	bad := fmt.Errorf("since %q: want a duration such as 90m, 24h or 30d", s)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		if _, err := fmt.Sscanf(days, "%d", &n); err != nil || n <= 0 || fmt.Sprint(n) != days {
			return 0, bad
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, bad
	}
	return d, nil
}

// answer reads the rollups covering q and groups them. minutesSince is the
// oldest minute bucket still kept.
func answer(ctx context.Context, rdb redis.Cmdable, prefix string, q query, minutesSince time.Time) (usage.Answer, error) {
	// Each group's range is covered on its own (a row by hour covers its
	// hour), and the buckets read once.
	type group struct {
		start, end time.Time
		buckets    []usage.Bucket
	}
	var groups []group
	_, lo, hi := usage.Cover(q.from, q.to, minutesSince)
	if w := usage.Window(q.by); w > 0 {
		for s := lo.Truncate(w); s.Before(hi); s = s.Add(w) {
			a, b := maxTime(s, lo), minTime(s.Add(w), hi)
			bs, ga, gb := usage.Cover(a, b, minutesSince)
			groups = append(groups, group{ga, gb, bs})
		}
	} else {
		bs, _, _ := usage.Cover(q.from, q.to, minutesSince)
		groups = append(groups, group{lo, hi, bs})
	}
	read := map[usage.Bucket]*redis.MapStringStringCmd{}
	pipe := rdb.Pipeline()
	for _, g := range groups {
		for _, b := range g.buckets {
			if read[b] == nil {
				read[b] = pipe.HGetAll(ctx, rediskeys.UsageRollup(prefix, q.tenant, b.Res.Name, b.Start))
			}
		}
	}
	if len(read) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
			return usage.Answer{}, err
		}
	}
	ans := usage.Answer{Tenant: q.tenant, From: lo, To: hi, By: q.by, Rows: []usage.Row{}}
	ans.Total = usage.Row{Start: lo, End: hi}
	for _, g := range groups {
		per := map[string]*usage.Counters{}
		for _, b := range g.buckets {
			usage.ParseHash(per, read[b].Val())
		}
		if q.by == usage.ByModel {
			for model, c := range per {
				ans.Rows = append(ans.Rows, usage.Row{Model: model, Start: g.start, End: g.end, Counters: *c})
			}
		} else {
			row := usage.Row{Start: g.start, End: g.end}
			for _, c := range per {
				row.Add(c)
			}
			if q.by != usage.ByTotal {
				ans.Rows = append(ans.Rows, row)
			}
		}
		for _, c := range per {
			ans.Total.Add(c)
		}
	}
	if q.by == usage.ByTotal {
		ans.Rows = append(ans.Rows, ans.Total)
	}
	for i := range ans.Rows {
		ans.Rows[i].Finish()
	}
	ans.Total.Finish()
	usage.SortRows(ans.Rows)
	return ans, nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"message": msg}})
}

// operatorAuth guards the usage API: the bearer token of
// --operator-token-file (compared in constant time), or, without one,
// nothing but a loopback listen address.
type operatorAuth struct {
	token    *[sha256.Size]byte
	loopback bool
}

func newOperatorAuth(tokenFile, addr string) (*operatorAuth, error) {
	a := &operatorAuth{loopback: configcheck.Loopback(addr)}
	if tokenFile != "" {
		tok, err := lifecycle.ReadToken(tokenFile)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256([]byte(tok))
		a.token = &sum
	}
	return a, nil
}

func (a *operatorAuth) configured() bool { return a.token != nil }

func (a *operatorAuth) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.token == nil {
			if !a.loopback {
				writeError(w, http.StatusForbidden, "the usage API needs the meter's --operator-token-file when it listens beyond loopback")
				return
			}
			h.ServeHTTP(w, r)
			return
		}
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(tok))
		if !ok || subtle.ConstantTimeCompare(sum[:], a.token[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="switchyard-meter"`)
			writeError(w, http.StatusUnauthorized, "the usage API needs the operator's bearer token")
			return
		}
		h.ServeHTTP(w, r)
	})
}
