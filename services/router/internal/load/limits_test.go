package load

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/services/router/internal/endpoints"
)

// pickFirst is a Picker that takes the first available row of the
// endpoints in its order: a policy's provider order.
type pickFirst []string

func (p pickFirst) Pick(rows []Backend, _ uint64) int {
	for _, id := range p {
		for i := range rows {
			if rows[i].EndpointID == id && rows[i].Available() {
				return i
			}
		}
	}
	return -1
}

func provider(id string, maxInFlight, failures int, openFor time.Duration) endpoints.Spec {
	return endpoints.Spec{ID: id, URL: "http://" + id, Kind: endpoints.KindProvider, Group: id, Models: []string{"m"},
		MaxInFlight: maxInFlight, BreakerFailures: failures, BreakerOpenFor: openFor}
}

// TestProviderConcurrencyCap: a provider with MaxInFlight 2 takes two
// requests; the third goes to the next provider of the order, and its
// row says why the first is out. A peer replica's decision counts as
// this replica's own do (the cap is the fleet's), a completion frees a
// slot, and a snapshot that lifts the cap makes it a candidate at once.
func TestProviderConcurrencyCap(t *testing.T) {
	tb := NewTable(Config{Breaker: DefaultBreaker})
	tb.SetEndpoints([]endpoints.Spec{provider("capped", 2, 0, 0), provider("next", 0, 0, 0)})
	order := pickFirst{"capped", "next"}
	n := 0
	route := func() (string, string) {
		t.Helper()
		n++
		rows, i := tb.Decide(Request{Model: "m", ID: "r" + strconv.Itoa(n)}, []string{"m"}, t0, nil, order, true)
		why := ""
		for _, r := range rows {
			if r.EndpointID == "capped" && !r.Available() {
				why = r.Unavailable()
				if p := r.Policy(); p.Unavailable == "" {
					t.Errorf("the program sees the capped provider as available: %+v", p)
				}
			}
		}
		if i < 0 {
			return "", why
		}
		return rows[i].EndpointID, why
	}
	for i := range 2 {
		if got, why := route(); got != "capped" {
			t.Fatalf("request %d: %q (%s), want the capped provider below its cap", i+1, got, why)
		}
	}
	got, why := route()
	if got != "next" {
		t.Fatalf("third request: %q, want the next provider", got)
	}
	if want := "at its concurrency cap: 2 in flight across the routers, maxConcurrency 2"; why != want {
		t.Errorf("reason %q, want %q", why, want)
	}
	if !tb.Complete(Completion{RequestID: "r1", EndpointID: "capped", At: t0, Success: true}) {
		t.Fatal("completion released nothing")
	}
	tb.AddInFlight("peer-1", "capped", "m", t0, 0, 0, 0) // another replica's decision takes the slot
	if got, _ := route(); got != "next" {
		t.Fatalf("after a peer's decision: %q, want next (the cap counts every replica's requests)", got)
	}
	tb.Complete(Completion{RequestID: "peer-1", EndpointID: "capped", At: t0, Success: true})
	if got, why := route(); got != "capped" {
		t.Fatalf("after completions: %q (%s), want the capped provider again", got, why)
	}
	var stats []Stats
	for _, s := range tb.AppendStats(nil) {
		if s.ID == "capped" {
			stats = append(stats, s)
		}
	}
	if len(stats) != 1 || stats[0].MaxInFlight != 2 || stats[0].InFlight != 2 {
		t.Errorf("stats %+v, want in flight 2 of max 2", stats)
	}
	tb.SetEndpoints([]endpoints.Spec{provider("capped", 0, 0, 0), provider("next", 0, 0, 0)})
	if got, why := route(); got != "capped" {
		t.Fatalf("cap lifted by a new snapshot: %q (%s)", got, why)
	}
}

// TestProviderBreakerThresholds: each provider's circuit opens after its
// own Failures (2) or the router's default (5); a snapshot changing only
// the thresholds keeps the circuit's state, the new OpenFor applying
// from the next opening; a provider's own Failures breaks it even when
// the router's default turns breaking off.
func TestProviderBreakerThresholds(t *testing.T) {
	tb := NewTable(Config{Breaker: Breaker{Failures: 5, OpenFor: 10 * time.Second}})
	tb.SetEndpoints([]endpoints.Spec{provider("strict", 0, 2, 5*time.Second), provider("lenient", 0, 0, 0)})
	n := 0
	fail := func(id string, at time.Time) {
		t.Helper()
		n++
		rid := "r" + strconv.Itoa(n)
		rows, i := tb.Decide(Request{Model: "m", ID: rid}, []string{"m"}, at, nil, pickID(id), true)
		if i < 0 {
			for _, r := range rows {
				if r.EndpointID == id {
					t.Fatalf("failure %d: %s not chosen: %s", n, id, r.Unavailable())
				}
			}
		}
		tb.Complete(Completion{RequestID: rid, EndpointID: id, At: at, UpstreamFailed: true})
	}
	state := func(id string, at time.Time) string { return tb.byID[id].brk.state(at) }
	why := func(id string, at time.Time) string {
		rows, _ := tb.Decide(Request{Model: "m", ID: "look"}, []string{"m"}, at, nil, pickID(""), false)
		for _, r := range rows {
			if r.EndpointID == id {
				return r.Unavailable()
			}
		}
		return ""
	}

	fail("strict", t0)
	if s := state("strict", t0); s != "closed" {
		t.Fatalf("strict after 1 failure: %s", s)
	}
	fail("strict", t0)
	if s := state("strict", t0); s != "open" {
		t.Fatalf("strict after 2 failures: %s, want open (its own failures: 2)", s)
	}
	if w := why("strict", t0); !strings.Contains(w, "circuit open after 2 failures in a row") {
		t.Errorf("strict's reason %q", w)
	}
	for i := range 4 {
		fail("lenient", t0)
		if s := state("lenient", t0); s != "closed" {
			t.Fatalf("lenient after %d failures: %s, want closed (the router's 5)", i+1, s)
		}
	}
	fail("lenient", t0)
	if s := state("lenient", t0); s != "open" {
		t.Fatalf("lenient after 5 failures: %s", s)
	}
	// strict's own OpenFor (5s), not the router's 10s.
	if s := state("strict", t0.Add(5*time.Second+time.Millisecond)); s != "half-open" {
		t.Errorf("strict after its openFor: %s, want half-open", s)
	}
	if s := state("lenient", t0.Add(9*time.Second)); s != "open" {
		t.Errorf("lenient before the router's openFor: %s", s)
	}

	// New thresholds, same circuit: still open until the time it was
	// opened with; the failed probe reopens it for the new 20s.
	tb.SetEndpoints([]endpoints.Spec{provider("strict", 0, 4, 20*time.Second), provider("lenient", 0, 0, 0)})
	if s := state("strict", t0.Add(time.Second)); s != "open" {
		t.Fatalf("after a threshold change: %s, want the circuit kept open", s)
	}
	probe := t0.Add(6 * time.Second)
	fail("strict", probe)
	if s := state("strict", probe.Add(15*time.Second)); s != "open" {
		t.Errorf("15s after the failed probe: %s, want open (the new openFor, 20s)", s)
	}
	if s := state("strict", probe.Add(20*time.Second+time.Millisecond)); s != "half-open" {
		t.Errorf("20s after the failed probe: %s, want half-open", s)
	}

	off := NewTable(Config{Breaker: Breaker{Failures: 0, OpenFor: 10 * time.Second}})
	off.SetEndpoints([]endpoints.Spec{provider("own", 0, 1, 0), provider("default", 0, 0, 0)})
	for _, id := range []string{"own", "default"} {
		off.Decide(Request{Model: "m", ID: id}, []string{"m"}, t0, nil, pickID(id), true)
		off.Complete(Completion{RequestID: id, EndpointID: id, At: t0, UpstreamFailed: true})
	}
	if s := off.byID["own"].brk.state(t0); s != "open" {
		t.Errorf("a provider's own failures with the router's breaking off: %s, want open", s)
	}
	if s := off.byID["default"].brk.state(t0); s != "closed" {
		t.Errorf("a provider without thresholds, the router's breaking off: %s, want closed", s)
	}
}
