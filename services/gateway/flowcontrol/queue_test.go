package flowcontrol

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
)

// serve lets n requests through, one turn each, and returns their
// tenants in the order they went.
func serve(t *testing.T, q *Queue, n int) []string {
	t.Helper()
	var order []string
	for range n {
		q.Kick()
		q.mu.Lock()
		tk := q.trying
		q.mu.Unlock()
		if tk == nil {
			t.Fatalf("no turn given with %d waiting", q.Len())
		}
		if err := tk.Turn(context.Background()); err != nil {
			t.Fatalf("turn: %v", err)
		}
		order = append(order, tk.item.Tenant)
		tk.Routed()
	}
	return order
}

func join(t *testing.T, q *Queue, it Item, n int) []*Ticket {
	t.Helper()
	var out []*Ticket
	for range n {
		tk, err := q.Join(it, time.Now())
		if err != nil {
			t.Fatalf("join %+v: %v", it, err)
		}
		out = append(out, tk)
	}
	return out
}

func count(order []string, tenant string) int {
	n := 0
	for _, o := range order {
		if o == tenant {
			n++
		}
	}
	return n
}

func roomy() *Queue { return New(Limits{MaxQueued: 1000, MaxWait: time.Minute}) }

// A tenant arriving behind a flood's backlog goes next, not last.
func TestNewcomerOvertakesFlood(t *testing.T) {
	q := roomy()
	join(t, q, Item{Tenant: "flood", Class: Standard, Cost: 1000}, 50)
	serve(t, q, 10)
	join(t, q, Item{Tenant: "steady", Class: Standard, Cost: 1000}, 1)
	if got := serve(t, q, 2); count(got, "steady") != 1 {
		t.Errorf("the two requests after the steady one joined: %v, want the steady one among them", got)
	}
}

// Backlogged tenants share prefill tokens by weight: a weight-3 tenant
// gets three times the tokens, and a tenant with prompts eight times
// shorter gets eight times the requests.
func TestSharesByWeightAndTokens(t *testing.T) {
	q := roomy()
	join(t, q, Item{Tenant: "a", Weight: 3, Class: Standard, Cost: 1000}, 200)
	join(t, q, Item{Tenant: "b", Weight: 1, Class: Standard, Cost: 1000}, 200)
	if got := serve(t, q, 80); count(got, "a") < 58 || count(got, "a") > 62 {
		t.Errorf("weights 3:1: a got %d of 80, want 60±2", count(got, "a"))
	}

	q = roomy()
	join(t, q, Item{Tenant: "long", Class: Standard, Cost: 4000}, 100)
	join(t, q, Item{Tenant: "short", Class: Standard, Cost: 500}, 200)
	got := serve(t, q, 90)
	if l, s := count(got, "long"), count(got, "short"); s < 7*l || s > 9*l {
		t.Errorf("4000- vs 500-token prompts: long %d, short %d, want short ≈ 8× long", l, s)
	}
}

// Classes are strict bands; a tenant's requests keep their order.
func TestBands(t *testing.T) {
	q := roomy()
	std := join(t, q, Item{Tenant: "a", Class: Standard, Cost: 10}, 3)
	join(t, q, Item{Tenant: "b", Class: Sheddable, Cost: 1}, 3)
	join(t, q, Item{Tenant: "c", Class: Critical, Cost: 100000}, 2)
	got := serve(t, q, 8)
	want := []string{"c", "c", "a", "a", "a", "b", "b", "b"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
	if std[0].seq > std[1].seq || std[1].seq > std[2].seq {
		t.Error("tickets out of order")
	}
}

// A full queue makes room by shedding the newest request of the tenant
// queueing most in the lowest band; a newcomer that would be that request
// is refused.
func TestFullQueueSheds(t *testing.T) {
	q := New(Limits{MaxQueued: 4, MaxWait: time.Minute})
	flood := join(t, q, Item{Tenant: "flood", Class: Standard, Cost: 100}, 4)
	var shed *ShedError
	if _, err := q.Join(Item{Tenant: "flood", Class: Standard, Cost: 100}, time.Now()); !errors.As(err, &shed) || shed.Reason != ReasonQueueFull {
		t.Fatalf("flood's fifth: %v, want refused queue-full", err)
	}
	if _, err := q.Join(Item{Tenant: "steady", Class: Standard, Cost: 100}, time.Now()); err != nil {
		t.Fatalf("steady's first in a queue the flood filled: %v", err)
	}
	if err := flood[3].Turn(context.Background()); !errors.As(err, &shed) || shed.Reason != ReasonQueueFull {
		t.Fatalf("flood's newest: %v, want shed queue-full", err)
	}
	// A sheddable newcomer finds nothing lower to displace.
	if _, err := q.Join(Item{Tenant: "steady", Class: Sheddable, Cost: 1}, time.Now()); !errors.As(err, &shed) {
		t.Fatalf("sheddable into a full queue: %v, want refused", err)
	}
	// A critical one displaces the lowest band's longest queue.
	if _, err := q.Join(Item{Tenant: "steady", Class: Critical, Cost: 1}, time.Now()); err != nil {
		t.Fatalf("critical: %v", err)
	}
	if err := flood[2].Turn(context.Background()); !errors.As(err, &shed) {
		t.Fatalf("flood's newest after a critical joined: %v, want shed", err)
	}
	if q.Len() != 4 {
		t.Errorf("len %d, want 4", q.Len())
	}
	if got := serve(t, q, 4); got[0] != "steady" || count(got, "flood") != 2 {
		t.Errorf("served %v: want the critical one first, then the rest", got)
	}
}

// A request waits at most MaxWait; one whose client left leaves, and its
// tenant is not charged for it.
func TestTimeoutAndCancel(t *testing.T) {
	q := New(Limits{MaxQueued: 10, MaxWait: 30 * time.Millisecond})
	tk := join(t, q, Item{Tenant: "a", Class: Standard, Cost: 100}, 1)[0]
	var shed *ShedError
	if err := tk.Turn(context.Background()); !errors.As(err, &shed) || shed.Reason != ReasonQueueTimeout {
		t.Fatalf("no kick for longer than MaxWait: %v, want queue-timeout", err)
	}
	if q.Len() != 0 {
		t.Fatalf("len %d after a timeout", q.Len())
	}

	q = roomy()
	first := join(t, q, Item{Tenant: "a", Class: Standard, Cost: 100}, 1)[0]
	second := join(t, q, Item{Tenant: "a", Class: Standard, Cost: 100}, 1)[0]
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := second.Turn(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
	f := q.bands[Standard].flows["a"]
	if f.lastFinish != first.finish {
		t.Errorf("tenant's finish tag %v after its newest left, want %v (the one before)", f.lastFinish, first.finish)
	}
	if q.Len() != 1 {
		t.Errorf("len %d, want 1", q.Len())
	}
}

// Held keeps the request at the head; its next turn waits for a kick.
func TestHeldKeepsPlace(t *testing.T) {
	q := roomy()
	a := join(t, q, Item{Tenant: "a", Class: Standard, Cost: 100}, 1)[0]
	join(t, q, Item{Tenant: "b", Class: Standard, Cost: 100}, 1)
	q.Kick()
	if err := a.Turn(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.Held()
	q.mu.Lock()
	trying := q.trying
	q.mu.Unlock()
	if trying != nil {
		t.Fatal("a turn was given without a kick after a held one")
	}
	if got := serve(t, q, 2); got[0] != "a" {
		t.Errorf("after a held turn: %v, want a first", got)
	}
}

// Many waiters, real goroutines: every request gets exactly one outcome
// and the queue ends empty.
func TestConcurrentWaiters(t *testing.T) {
	q := New(Limits{MaxQueued: 64, MaxWait: 5 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go q.Run(ctx, time.Millisecond)
	results := make(chan error, 200)
	for i := range 200 {
		go func() {
			tk, err := q.Join(Item{Tenant: []string{"a", "b", "c"}[i%3], Class: Class(i % 3), Cost: int64(i)}, time.Now())
			if err != nil {
				results <- err
				return
			}
			for {
				if err := tk.Turn(ctx); err != nil {
					results <- err
					return
				}
				if i%5 == 0 {
					tk.Held() // held once, then routed
					i++
					continue
				}
				tk.Routed()
				results <- nil
				return
			}
		}()
	}
	ok, shed := 0, 0
	for range 200 {
		var s *ShedError
		switch err := <-results; {
		case err == nil:
			ok++
		case errors.As(err, &s):
			shed++
		default:
			t.Fatalf("unexpected %v", err)
		}
	}
	if ok+shed != 200 || ok == 0 {
		t.Errorf("ok %d shed %d", ok, shed)
	}
	if q.Len() != 0 {
		t.Errorf("len %d after every request finished", q.Len())
	}
}

// Classes are v1alpha1.Priority's ranks, which the gateway converts with.
func TestClassesMatchPriorityRanks(t *testing.T) {
	for _, c := range []struct {
		p    v1alpha1.Priority
		want Class
	}{{v1alpha1.PrioritySheddable, Sheddable}, {v1alpha1.PriorityStandard, Standard}, {v1alpha1.PriorityCritical, Critical}} {
		if got := Class(c.p.Rank()); got != c.want {
			t.Errorf("%s: class %v, want %v", c.p, got, c.want)
		}
		if got, err := ParseClass(string(c.p)); err != nil || got != c.want {
			t.Errorf("ParseClass(%s) = %v, %v", c.p, got, err)
		}
	}
}
