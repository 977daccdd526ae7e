package load

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/services/router/internal/endpoints"
)

// TestProviderBreaker: a provider whose completions fail 3 times in a row
// (Failures 3) is not chosen — the local worker serves, and its row says
// why — until OpenFor has passed; then one decision probes it and the
// next do not, until the probe's completion: a failure opens it again, a
// success closes it. A success between failures resets the count.
func TestProviderBreaker(t *testing.T) {
	tb := NewTable(Config{Breaker: Breaker{Failures: 3, OpenFor: 10 * time.Second}})
	tb.SetEndpoints([]endpoints.Spec{spec("w", "m"), {ID: "p", URL: "http://p", Kind: endpoints.KindProvider, Group: "prov", Models: []string{"m"}}})
	tb.Observe("w", t0, ok(0, 0))
	n := 0
	pick := func(at time.Time) (string, string) {
		n++
		rows, i := tb.Decide(Request{Model: "m", ID: "r" + strconv.Itoa(n)}, []string{"m"}, at, nil, pickID("p"), true)
		for _, r := range rows {
			if r.EndpointID == "p" && !r.Available() {
				return "", r.Unavailable()
			}
		}
		if i < 0 {
			return "", ""
		}
		return rows[i].EndpointID, ""
	}
	done := func(success bool, at time.Time) {
		tb.Complete(Completion{RequestID: "r" + strconv.Itoa(n), EndpointID: "p", At: at, Success: success, UpstreamFailed: !success})
	}
	// The metrics read the state at the wall clock; the test's clock is
	// its own.
	state := func(at time.Time) string { return tb.byID["p"].brk.state(at) }

	at := t0.Add(time.Second)
	for i := range 2 {
		if got, why := pick(at); got != "p" {
			t.Fatalf("failure %d: not chosen (%s)", i, why)
		}
		done(false, at)
	}
	pick(at)
	done(true, at) // resets the count
	for i := range 3 {
		if got, why := pick(at); got != "p" {
			t.Fatalf("failure %d after the reset: not chosen (%s)", i, why)
		}
		done(false, at)
	}
	if got, why := pick(at.Add(9 * time.Second)); got != "" || !strings.Contains(why, "circuit open after 3 failures in a row") {
		t.Fatalf("open: chose %q (%q), want it unavailable with the breaker's reason", got, why)
	}
	if s := state(at); s != "open" {
		t.Errorf("state %q, want open", s)
	}

	probeAt := at.Add(11 * time.Second)
	if got, why := pick(probeAt); got != "p" {
		t.Fatalf("half-open: the probe was not sent (%s)", why)
	}
	if got, why := pick(probeAt); got != "" || !strings.Contains(why, "probe is in flight") {
		t.Fatalf("while probing: chose %q (%q), want one probe at a time", got, why)
	}
	done(false, probeAt) // the probe fails: open again
	if got, _ := pick(probeAt.Add(5 * time.Second)); got != "" {
		t.Fatalf("reopened: chose %q", got)
	}
	probeAt = probeAt.Add(11 * time.Second)
	if got, why := pick(probeAt); got != "p" {
		t.Fatalf("second probe not sent (%s)", why)
	}
	done(true, probeAt)
	if s := state(probeAt); s != "closed" {
		t.Errorf("after a good probe: %q, want closed", s)
	}
	if got, why := pick(probeAt); got != "p" {
		t.Fatalf("closed: not chosen (%s)", why)
	}
}

// TestProbeWithoutCompletion: a probe whose completion never arrives (its
// gateway died) does not keep the circuit open for good: after OpenFor
// another probe goes.
func TestProbeWithoutCompletion(t *testing.T) {
	var b breaker
	cfg := Breaker{Failures: 1, OpenFor: time.Second}
	b.observe(false, true, t0, cfg)
	if b.allows(t0) {
		t.Fatal("open after one failure with Failures 1")
	}
	b.picked(t0.Add(2*time.Second), cfg)
	if b.allows(t0.Add(2*time.Second)) || !b.allows(t0.Add(3*time.Second+time.Millisecond)) {
		t.Fatalf("probe in flight: %+v", b)
	}
	var off breaker
	for range 10 {
		off.observe(false, true, t0, Breaker{})
	}
	if !off.allows(t0) {
		t.Fatal("Failures 0 broke the circuit")
	}
	var calm breaker
	for range 10 {
		calm.observe(false, false, t0, cfg) // the client went away
	}
	if !calm.allows(t0) {
		t.Fatal("completions the upstream did not fail broke the circuit")
	}
}
