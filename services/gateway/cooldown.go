package gateway

import (
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// maxCooldown caps how long an upstream's Retry-After keeps it out: a
// provider asking for an hour is tried again sooner, by a request that
// has nowhere else to go.
const maxCooldown = time.Minute

// cooldowns remembers the upstreams that answered 429 or 503 with a
// Retry-After: until it has passed, every Route call excludes them, so
// neither this request's next attempt nor the next requests go there
// while the upstream said it would refuse them. Upstreams without a
// Retry-After are only excluded from the failed request's own retries.
type cooldowns struct {
	mu    sync.Mutex
	until map[string]time.Time
}

// note records f's Retry-After for its endpoint, if it carries one.
func (c *cooldowns) note(f *failure, now time.Time) {
	if f.status != http.StatusTooManyRequests && f.status != http.StatusServiceUnavailable {
		return
	}
	d, ok := retryAfter(f.header.Get("Retry-After"), now)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.until == nil {
		c.until = map[string]time.Time{}
	}
	c.until[f.endpoint] = now.Add(min(d, maxCooldown))
}

// active appends the endpoints still cooling down to exclude, forgetting
// those whose time has passed.
func (c *cooldowns) active(exclude []string, now time.Time) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for ep, until := range c.until {
		if !now.Before(until) {
			delete(c.until, ep)
			continue
		}
		if !slices.Contains(exclude, ep) {
			exclude = append(exclude, ep)
		}
	}
	return exclude
}

// retryAfter reads a Retry-After header: delay-seconds or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(s) * time.Second, s > 0
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now), true
	}
	return 0, false
}
