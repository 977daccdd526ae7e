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

// A tenant borrows (must leave the reserve) once it claims more than its
// weight's share of what is claimed through the gateway, among the tenants
// with requests routed or waiting; a tenant alone never does. Critical
// requests never borrow, sheddable ones always; a claim is released once.
func TestBorrowing(t *testing.T) {
	q := roomy()
	if q.Borrowing("a", 1, Standard) {
		t.Error("nothing claimed: a borrows")
	}
	releaseA := []func(){q.Claim("a", 1, 3000), q.Claim("a", 1, 3000), q.Claim("a", 1, 3000)}
	if q.Borrowing("a", 1, Standard) {
		t.Error("a alone: borrows")
	}
	releaseB := q.Claim("b", 1, 3000)
	// a claims 9,000 of 12,000; its share is half.
	if !q.Borrowing("a", 1, Standard) || q.Borrowing("b", 1, Standard) {
		t.Errorf("a 9k, b 3k at equal weights: a borrows %v (want true), b %v (want false)",
			q.Borrowing("a", 1, Standard), q.Borrowing("b", 1, Standard))
	}
	if q.Borrowing("a", 1, Critical) || !q.Borrowing("b", 1, Sheddable) {
		t.Error("a critical request borrowed, or a sheddable one did not")
	}
	// At weight 4 to b's 1, a's share is 80%: 9k of 12k is within it.
	if q.Borrowing("a", 4, Standard) {
		t.Error("a at weight 4 borrows")
	}
	// c waits in the queue with nothing routed: it has a share too. With
	// a 9k of 12k at weights 3, 1, 1, a's share is 60%.
	join(t, q, Item{Tenant: "c", Weight: 1, Class: Sheddable, Cost: 10}, 1)
	join(t, q, Item{Tenant: "c", Weight: 1, Class: Standard, Cost: 10}, 1)
	if !q.Borrowing("a", 3, Standard) {
		t.Error("a at weight 3 beside b and a waiting c: does not borrow")
	}
	releaseB()
	releaseB() // a second release changes nothing
	for _, r := range releaseA[:2] {
		r()
	}
	q.mu.Lock()
	claimed, tenants := q.claimed, len(q.claims)
	q.mu.Unlock()
	if claimed != 3000 || tenants != 1 {
		t.Errorf("after releases: %d claimed by %d tenants, want 3000 by 1", claimed, tenants)
	}
	releaseA[2]()
	if q.Borrowing("a", 1, Standard) {
		t.Error("everything released: a borrows")
	}
}

// A new request asks the router at once unless a waiting one would go
// before it: a higher band's, its own tenant's, or one in its band whose
// start tag is no later than its own would be.
func TestAhead(t *testing.T) {
	q := roomy()
	if q.Ahead(Item{Tenant: "a", Weight: 1, Class: Standard, Cost: 100}) {
		t.Error("empty queue: something ahead")
	}
	join(t, q, Item{Tenant: "flood", Weight: 1, Class: Standard, Cost: 1000}, 3)
	serve(t, q, 2) // the band's virtual time moves to the flood's second start tag
	for _, c := range []struct {
		it   Item
		want bool
	}{
		{Item{Tenant: "flood", Weight: 1, Class: Standard, Cost: 1}, true},   // its own request waits
		{Item{Tenant: "steady", Weight: 1, Class: Standard, Cost: 1}, false}, // starts at the virtual time, before the flood's third
		{Item{Tenant: "steady", Weight: 1, Class: Critical, Cost: 1}, false}, // a higher band
		{Item{Tenant: "steady", Weight: 1, Class: Sheddable, Cost: 1}, true}, // a lower band waits behind the standard one
	} {
		if got := q.Ahead(c.it); got != c.want {
			t.Errorf("Ahead(%+v) = %v, want %v", c.it, got, c.want)
		}
	}
	// The newcomer that went first is no longer a newcomer: once it has
	// joined, the same tenant's next request is behind it.
	join(t, q, Item{Tenant: "steady", Weight: 1, Class: Standard, Cost: 1}, 1)
	if !q.Ahead(Item{Tenant: "steady", Weight: 1, Class: Standard, Cost: 1}) {
		t.Error("steady's second request: nothing ahead")
	}
}
