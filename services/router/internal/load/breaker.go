package load

import (
	"fmt"
	"time"
)

// Breaker tunes the circuit breakers of provider endpoints.
//
// An external provider is not scraped, so the router learns its health
// from the gateways' route completions, which every replica receives: a
// provider whose last Failures completions all failed (no connection, a
// timeout before the first byte, a 429 or 5xx) is open — not a candidate
// — for OpenFor; then half-open: the next decision may pick it, as a
// probe, and nothing else goes there until the probe's completion
// arrives (or the in-flight TTL drops it); a success closes it, a
// failure opens it again. While it is open the policy's next choice (a
// local worker, another provider) serves, and Explain and the metrics
// say why.
//
// Workers are not broken this way: their scrapes mark them unhealthy
// within a scrape interval, and a worker that answers 5xx now and then
// would be ejected by a breaker for what a retry elsewhere absorbs.
//
// Config.Breaker is the router's default (its --breaker-failures and
// --breaker-open-for); a provider's own thresholds
// (InferenceProvider.spec.circuitBreaker, in endpoints.Spec) replace the
// ones it sets. A snapshot that changes only the thresholds keeps the
// circuit's state: the count of failures goes on against the new
// Failures (at or past it, the next failure opens the circuit), and an
// open circuit keeps the probe time it was opened with, the new OpenFor
// applying from the next opening.
type Breaker struct {
	// Failures is the consecutive failed completions that open it; 0
	// turns breaking off.
	Failures int
	// OpenFor is how long it stays open before a probe.
	OpenFor time.Duration
}

// DefaultBreaker is the router's default.
var DefaultBreaker = Breaker{Failures: 5, OpenFor: 30 * time.Second}

// with is b with a provider's own thresholds: each non-zero one replaces
// b's. A provider that sets Failures is broken even when the router's
// default turns breaking off.
func (b Breaker) with(failures int, openFor time.Duration) Breaker {
	if failures > 0 {
		b.Failures = failures
	}
	if openFor > 0 {
		b.OpenFor = openFor
	}
	return b
}

// breaker is one provider endpoint's circuit.
type breaker struct {
	failures  int       // consecutive failed completions
	openUntil time.Time // zero: closed
	probing   bool      // half-open and its probe is in flight
	// probeUntil ends a probe whose completion never came (its gateway
	// died): half-open again.
	probeUntil time.Time
}

// state names the circuit's state at now, for metrics and Explain.
func (b *breaker) state(now time.Time) string {
	switch {
	case b.openUntil.IsZero():
		return "closed"
	case b.probing && now.Before(b.probeUntil), !b.probing && now.Before(b.openUntil):
		return "open"
	}
	return "half-open"
}

// allows reports whether the endpoint may be chosen at now.
func (b *breaker) allows(now time.Time) bool { return b.state(now) != "open" }

// reason is why a broken endpoint is not a candidate.
func (b *breaker) reason(now time.Time) string {
	if b.probing {
		return "circuit open: a probe is in flight"
	}
	return fmt.Sprintf("circuit open after %d failures in a row; probe in %s", b.failures, b.openUntil.Sub(now).Round(time.Second))
}

// picked notes a decision for the endpoint: half-open, it is the probe.
func (b *breaker) picked(now time.Time, cfg Breaker) {
	if b.state(now) == "half-open" {
		b.probing, b.probeUntil = true, now.Add(cfg.OpenFor)
	}
}

// observe counts a completion: a success closes the circuit, an
// upstream failure counts toward opening it, anything else (the client
// went away, or sent a bad request) says nothing of the upstream.
func (b *breaker) observe(success, failed bool, at time.Time, cfg Breaker) {
	if cfg.Failures <= 0 {
		return
	}
	if success {
		*b = breaker{}
		return
	}
	if !failed {
		return
	}
	b.failures++
	if b.probing || b.failures >= cfg.Failures {
		b.openUntil, b.probing = at.Add(cfg.OpenFor), false
	}
}
