// Package flowcontrol is the gateway's queue for a saturated fleet: who
// goes first when every worker that could serve a request already has
// its fill of requests waiting, or no room in its KV cache for one more.
//
// # Why a queue here
//
// vLLM serves its waiting requests first come, first served. A tenant
// that sends ten times its share fills every worker's queue, and every
// other tenant's request waits behind the whole flood: its time to first
// token is the flood's prefill, not its own. Holding the excess at the
// gateway instead (the router holds a request whose every eligible worker
// has the queue threshold of requests waiting, RouteRequest.
// queue_threshold) keeps the workers' queues short, and the order in
// which held requests are let go is ours to choose.
//
// A short queue is not enough. A request vLLM admits needs KV blocks for
// its prompt, and every running request takes a block more every block
// size of tokens it decodes; a worker whose cache is full schedules a
// newcomer only when a running request finishes (seconds, for long
// answers), or preempts the newest to make room. So the router also
// counts each request's claim on its worker's cache at its peak, the
// uncached prompt plus the output limit (max_tokens, or
// Config.DefaultMaxTokens), from the moment it is routed on any replica
// to its completion, and a worker without room for the next claim is full
// for it (RouteRequest.kv_cache_threshold; load.Load.KVDemand). Counting
// the peak is deliberately pessimistic: what is claimed is there when the
// request needs it, so a request let through starts in the next step.
//
// # The reserve
//
// Fair ordering decides who goes first among the waiting; it cannot help
// a tenant whose request arrives when a flood has just taken the last
// room, and then waits for the next request to finish. So a tenant past
// its share may not take the last room: a request whose tenant claims,
// through this gateway, more than its weight's share of everything
// claimed here (among the tenants with requests routed or waiting; Queue.
// Borrowing) must leave Config.Reserve of every worker's cache unclaimed
// (RouteRequest.kv_reserve). A tenant within its share may use the
// reserve and starts at once; the flooder gets the rest of the fleet, less
// the reserve. A tenant alone is never past its share, so the reserve
// costs nothing without competition. Critical requests never leave it,
// Sheddable ones always do. Each gateway replica counts its own claims:
// with requests spread evenly across replicas, the shares hold across
// them.
//
// # The order: priority bands, then fair shares of prefill
//
// A request has a class (Critical, Standard, Sheddable: the tenant's
// default, or what the request asks for within the tenant's maximum).
// Classes are strict bands: a waiting Critical request goes before any
// Standard one. Within a band, tenants share by weight, in prefill
// tokens rather than requests — a tenant sending 8k-token prompts costs
// the fleet sixteen times what one sending 500-token prompts does, and
// is let through sixteen times less often. This is start-time fair
// queuing (Goyal, Vin and Cheng, 1996): a request's start tag is the
// later of the band's virtual time and its tenant's previous finish tag,
// its finish tag start + cost/weight; the request with the smallest start
// tag goes next, and the band's virtual time becomes its start tag. A
// tenant that has been idle starts at the band's virtual time, so it
// cannot bank credit while away; a tenant that floods runs its tags far
// ahead, so a newcomer's request goes before the flood's backlog. Within
// a tenant, requests keep their order. The cost is the request's
// uncached prompt tokens at the worker the router would have picked.
// The same structure as llm-d's flow control (priority bands, a fairness
// policy across flows within a band).
//
// # Bounds and shedding
//
// The queue holds at most MaxQueued requests, each for at most MaxWait.
// When it is full, a new request takes the place of the newest request
// of the longest tenant queue in the lowest band (the one that uses the
// queue most gives way), provided that band is below the newcomer's or,
// in the newcomer's own band, that tenant queues more than the
// newcomer's: so a flood cannot fill the queue and lock a steady tenant
// out. Otherwise the newcomer is refused. A refused or evicted request is
// answered 429 with the reason in the X-Switchyard-Shed-Reason header;
// Sheddable requests are the first to go.
//
// # Release
//
// A new request asks the router at once unless a waiting request would go
// before it (Queue.Ahead); then it joins the queue behind them. One
// waiting request at a time asks the router again (a turn): the head
// of the queue. When it is routed, the next head goes at once, since the
// capacity that let one through may let more. When it is held again, it
// keeps its place and the next turn waits for a kick: a request finishing
// at this gateway, or the retry interval (capacity also frees when other
// gateways' requests finish and as prefills progress, which only the
// router sees). Each gateway replica has its own queue; with requests
// spread evenly across replicas, the shares hold across them.
package flowcontrol

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Class is a request's priority band. Its values are
// v1alpha1.Priority's ranks, so a tenant's configured priority converts
// with Class(p.Rank()).
type Class int8

// The classes, lowest first.
const (
	Sheddable Class = iota
	Standard
	Critical
	numClasses
)

func (c Class) String() string {
	switch c {
	case Sheddable:
		return "sheddable"
	case Standard:
		return "standard"
	case Critical:
		return "critical"
	}
	return fmt.Sprintf("class(%d)", int8(c))
}

// ParseClass reads a class name, case-insensitively.
func ParseClass(s string) (Class, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "sheddable":
		return Sheddable, nil
	case "standard":
		return Standard, nil
	case "critical":
		return Critical, nil
	}
	return 0, fmt.Errorf("priority %q: want critical, standard or sheddable", truncate(s, 32))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Shed reasons (the X-Switchyard-Shed-Reason header, the metric's label).
const (
	ReasonQueueFull    = "queue-full"
	ReasonQueueTimeout = "queue-timeout"
)

// ShedError is a request the queue gave up on.
type ShedError struct {
	Reason string
	Waited time.Duration
}

func (e *ShedError) Error() string {
	switch e.Reason {
	case ReasonQueueTimeout:
		return fmt.Sprintf("the fleet is saturated and the request waited %s in the gateway's queue without a turn", e.Waited.Round(time.Millisecond))
	}
	return "the fleet is saturated and the gateway's queue is full"
}

// Item is a request joining the queue.
type Item struct {
	Tenant string
	// Weight is the tenant's share within its band (> 0).
	Weight float64
	Class  Class
	// Cost is the request's prefill tokens (at least 1 is charged).
	Cost int64
}

// Limits bound the queue.
type Limits struct {
	MaxQueued int
	MaxWait   time.Duration
}

// Queue is the gateway's flow-control queue. Safe for concurrent use.
type Queue struct {
	lim Limits

	mu     sync.Mutex
	bands  [numClasses]band
	n      int
	seq    uint64
	trying *Ticket // the request whose turn it is, nil when none
	kicked bool    // capacity may have freed since the last held turn

	// What each tenant's routed requests claim of the fleet's KV cache
	// through this gateway, until they finish (Claim), and their sum.
	claims  map[string]*claim
	claimed int64
}

type claim struct {
	tokens int64
	weight float64
}

type band struct {
	vtime float64
	flows map[string]*flow
}

type flow struct {
	tickets    []*Ticket // FIFO
	lastFinish float64
}

// ticket states.
const (
	waiting = iota
	granted
	gone
)

// Ticket is a request's place in the queue.
type Ticket struct {
	q      *Queue
	item   Item
	start  float64 // start tag
	finish float64
	seq    uint64
	joined time.Time
	state  int
	turn   chan struct{} // a value: it is this ticket's turn
	shed   chan string   // a reason: the ticket was evicted
}

// New returns an empty queue.
func New(lim Limits) *Queue {
	q := &Queue{lim: lim, claims: map[string]*claim{}}
	for i := range q.bands {
		q.bands[i].flows = map[string]*flow{}
	}
	return q
}

// Len is the number of waiting requests.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// LenByClass is the number of waiting requests per class.
func (q *Queue) LenByClass() [numClasses]int {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out [numClasses]int
	for c := range q.bands {
		for _, f := range q.bands[c].flows {
			out[c] += len(f.tickets)
		}
	}
	return out
}

// Busy reports whether requests are waiting.
func (q *Queue) Busy() bool { return q.Len() > 0 }

// Ahead reports whether a waiting request would go before a new request
// of it: a higher band has requests waiting, its tenant has, or its own
// band has one whose start tag is at or before the one it would get. Such
// a request joins the queue behind them instead of asking the router
// first; one that would go first asks at once.
func (q *Queue) Ahead(it Item) bool {
	it = normalize(it)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == 0 {
		return false
	}
	for c := it.Class + 1; c < numClasses; c++ {
		for _, f := range q.bands[c].flows {
			if len(f.tickets) > 0 {
				return true
			}
		}
	}
	b := &q.bands[it.Class]
	start := b.vtime
	if f := b.flows[it.Tenant]; f != nil {
		if len(f.tickets) > 0 {
			return true
		}
		start = max(start, f.lastFinish)
	}
	for _, f := range b.flows {
		if len(f.tickets) > 0 && f.tickets[0].start <= start {
			return true
		}
	}
	return false
}

// Claim records that a routed request of tenant claims tokens of the
// fleet's KV cache (its uncached prompt plus its output limit) until the
// returned release is called, once, when it finishes.
func (q *Queue) Claim(tenant string, weight float64, tokens int64) (release func()) {
	tokens = max(1, tokens)
	q.mu.Lock()
	c := q.claims[tenant]
	if c == nil {
		c = &claim{}
		q.claims[tenant] = c
	}
	c.tokens += tokens
	c.weight = weight
	q.claimed += tokens
	q.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			q.mu.Lock()
			defer q.mu.Unlock()
			c.tokens -= tokens
			q.claimed -= tokens
			if c.tokens <= 0 && q.claims[tenant] == c {
				delete(q.claims, tenant)
			}
		})
	}
}

// Borrowing reports whether a request of class from tenant (of weight)
// must leave the reserve: its tenant already claims more of the fleet
// through this gateway than its share, its weight over the weights of
// every tenant with requests routed or waiting here (see The reserve in
// the package comment). A Critical request never borrows; a
// Sheddable one always does.
func (q *Queue) Borrowing(tenant string, weight float64, class Class) bool {
	switch class {
	case Critical:
		return false
	case Sheddable:
		return true
	}
	if weight <= 0 {
		weight = 1
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	mine := q.claims[tenant]
	if mine == nil || q.claimed <= 0 {
		return false
	}
	total := weight
	for name, c := range q.claims {
		if name != tenant {
			total += c.weight
		}
	}
	var seen map[string]bool // tenants waiting in more than one band count once
	for i := range q.bands {
		for name, f := range q.bands[i].flows {
			if len(f.tickets) == 0 || name == tenant || q.claims[name] != nil || seen[name] {
				continue
			}
			if seen == nil {
				seen = map[string]bool{}
			}
			seen[name] = true
			total += f.tickets[0].item.Weight
		}
	}
	return float64(mine.tokens) > weight/total*float64(q.claimed)
}

// normalize applies Join's defaults to it.
func normalize(it Item) Item {
	if it.Weight <= 0 {
		it.Weight = 1
	}
	it.Cost = max(1, it.Cost)
	if it.Class < 0 || it.Class >= numClasses {
		it.Class = Standard
	}
	return it
}

// Join puts the request in the queue. It returns the ticket, and the
// ticket it evicted to make room (nil when none): the caller answers
// neither; the evicted request's own Turn returns its ShedError. A full
// queue with nothing to evict refuses it with a ShedError.
func (q *Queue) Join(it Item, now time.Time) (*Ticket, error) {
	it = normalize(it)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == 0 {
		// The request was just held: a kick from before it came says
		// nothing about capacity now.
		q.kicked = false
	}
	if q.n >= q.lim.MaxQueued {
		victim := q.victimLocked(it)
		if victim == nil {
			return nil, &ShedError{Reason: ReasonQueueFull}
		}
		q.removeLocked(victim)
		victim.shed <- ReasonQueueFull
	}
	b := &q.bands[it.Class]
	f := b.flows[it.Tenant]
	if f == nil {
		f = &flow{lastFinish: b.vtime}
		b.flows[it.Tenant] = f
	}
	q.seq++
	t := &Ticket{q: q, item: it, seq: q.seq, joined: now, turn: make(chan struct{}, 1), shed: make(chan string, 1)}
	t.start = max(b.vtime, f.lastFinish)
	t.finish = t.start + float64(it.Cost)/it.Weight
	f.lastFinish = t.finish
	f.tickets = append(f.tickets, t)
	q.n++
	q.dispatchLocked()
	return t, nil
}

// victimLocked picks the request a full queue gives up for a newcomer
// (see Bounds and shedding in the package comment), nil for none.
func (q *Queue) victimLocked(it Item) *Ticket {
	for c := Sheddable; c <= it.Class; c++ {
		var longest *flow
		for _, f := range q.bands[c].flows {
			if longest == nil || len(f.tickets) > len(longest.tickets) {
				longest = f
			}
		}
		if longest == nil || len(longest.tickets) == 0 {
			continue
		}
		if c == it.Class {
			own := 0
			if f := q.bands[c].flows[it.Tenant]; f != nil {
				own = len(f.tickets)
			}
			if len(longest.tickets) <= own+1 {
				return nil
			}
		}
		for i := len(longest.tickets) - 1; i >= 0; i-- {
			if t := longest.tickets[i]; t != q.trying {
				return t
			}
		}
		return nil
	}
	return nil
}

// headLocked is the request that goes next: the highest band's smallest
// start tag (the lowest sequence number on a tie).
func (q *Queue) headLocked() *Ticket {
	for c := numClasses - 1; c >= 0; c-- {
		var head *Ticket
		for _, f := range q.bands[c].flows {
			if len(f.tickets) == 0 {
				continue
			}
			t := f.tickets[0]
			if head == nil || t.start < head.start || (t.start == head.start && t.seq < head.seq) {
				head = t
			}
		}
		if head != nil {
			return head
		}
	}
	return nil
}

// dispatchLocked gives the head its turn when nobody has one and capacity
// may have freed.
func (q *Queue) dispatchLocked() {
	if q.trying != nil || !q.kicked {
		return
	}
	t := q.headLocked()
	if t == nil {
		return
	}
	q.kicked = false
	q.trying = t
	t.state = granted
	t.turn <- struct{}{}
}

// Kick says capacity may have freed: the head gets a turn.
func (q *Queue) Kick() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.kicked = true
	q.dispatchLocked()
}

// removeLocked takes t out of the queue. A tenant's finish tag is given
// back when its last request leaves unserved, so a shed or abandoned
// request costs its tenant nothing.
func (q *Queue) removeLocked(t *Ticket) {
	if t.state == gone {
		return
	}
	b := &q.bands[t.item.Class]
	f := b.flows[t.item.Tenant]
	for i, x := range f.tickets {
		if x == t {
			f.tickets = append(f.tickets[:i], f.tickets[i+1:]...)
			break
		}
	}
	if q.trying == t {
		q.trying = nil
	}
	t.state = gone
	q.n--
}

// served takes t out as served: the band's virtual time advances to its
// start tag, and tenants idle behind it are forgotten.
func (q *Queue) servedLocked(t *Ticket) {
	b := &q.bands[t.item.Class]
	b.vtime = max(b.vtime, t.start)
	q.removeLocked(t)
	for name, f := range b.flows {
		if len(f.tickets) == 0 && f.lastFinish <= b.vtime {
			delete(b.flows, name)
		}
	}
}

// abandonLocked takes t out unserved.
func (q *Queue) abandonLocked(t *Ticket) {
	if t.state == gone {
		return
	}
	b := &q.bands[t.item.Class]
	f := b.flows[t.item.Tenant]
	q.removeLocked(t)
	if n := len(f.tickets); n == 0 || f.tickets[n-1].seq < t.seq {
		// It was the tenant's newest: its finish tag goes back.
		f.lastFinish = t.start
	}
	if len(f.tickets) == 0 && f.lastFinish <= b.vtime {
		delete(b.flows, t.item.Tenant)
	}
}

// Turn waits for the ticket's turn to ask the router. It returns a
// ShedError when the queue gave the ticket up (evicted, or MaxWait
// passed) and ctx's error when the caller went away; the ticket has then
// left the queue.
func (t *Ticket) Turn(ctx context.Context) error {
	q := t.q
	left := q.lim.MaxWait - time.Since(t.joined)
	if left <= 0 {
		return t.giveUp(ReasonQueueTimeout)
	}
	timer := time.NewTimer(left)
	defer timer.Stop()
	select {
	case <-t.turn:
		return nil
	case r := <-t.shed:
		return &ShedError{Reason: r, Waited: time.Since(t.joined)}
	case <-timer.C:
		return t.giveUp(ReasonQueueTimeout)
	case <-ctx.Done():
		q.mu.Lock()
		q.abandonLocked(t)
		q.dispatchLocked()
		q.mu.Unlock()
		return ctx.Err()
	}
}

func (t *Ticket) giveUp(reason string) error {
	q := t.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if t.state == granted {
		// The turn came as the time ran out: take it.
		<-t.turn
		return nil
	}
	if t.state == gone {
		return &ShedError{Reason: <-t.shed, Waited: time.Since(t.joined)}
	}
	q.abandonLocked(t)
	return &ShedError{Reason: reason, Waited: time.Since(t.joined)}
}

// Routed ends the ticket's turn with the request routed: it leaves the
// queue, and the next head gets its turn at once.
func (t *Ticket) Routed() {
	q := t.q
	q.mu.Lock()
	defer q.mu.Unlock()
	q.servedLocked(t)
	q.kicked = true
	q.dispatchLocked()
}

// Held ends the ticket's turn with the request held again: it keeps its
// place, and the next turn waits for a kick.
func (t *Ticket) Held() {
	q := t.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.trying == t {
		q.trying = nil
		t.state = waiting
	}
	q.dispatchLocked()
}

// Leave takes the ticket out unserved (the router refused the request,
// the client went away during its turn).
func (t *Ticket) Leave() {
	q := t.q
	q.mu.Lock()
	defer q.mu.Unlock()
	q.abandonLocked(t)
	q.dispatchLocked()
}

// Run kicks the queue every interval while requests wait, until ctx ends:
// capacity also frees where this gateway cannot see it (other gateways'
// requests finishing, prefills progressing), which only asking the router
// finds out.
func (q *Queue) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if q.Busy() {
				q.Kick()
			}
		}
	}
}
