// Package load keeps the router's view of every endpoint's load (scraped
// queue plus requests routed and not yet completed) and picks the least
// loaded endpoint for a request.
//
// # Counting without double counting
//
// A worker's scraped waiting+running already includes the requests this
// fleet of routers sent it before the scrape, so adding every in-flight
// request on top would count them twice. The table therefore splits each
// endpoint's in-flight entries at the start time of its last successful
// scrape:
//
//   - fresh entries (decided at or after the scrape was sent) cannot be in
//     the scraped numbers, so they are added;
//   - older entries are assumed to be inside waiting+running; when one of
//     them completes before the next scrape, the scraped queue is reduced
//     by one, so a finished request stops counting at once.
//
// load = max(0, waiting + running - completed_since_scrape) + fresh
//
// A consequence worth knowing: when completions never arrive (no NATS, or
// a gateway that does not publish them), an entry stops weighing on the
// score at the next scrape and only lingers in the in_flight figure until
// its TTL ends; routing quality degrades to scrape-only, not to nonsense.
package load

import (
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/switchyard-dev/switchyard/services/router/internal/endpoints"
	"github.com/switchyard-dev/switchyard/services/router/internal/scrape"
)

// Outcome of a decision.
type Outcome int

const (
	// Routed: Choice.Endpoint is set.
	Routed Outcome = iota
	// ModelNotFound: no endpoint serves the model.
	ModelNotFound
	// NoHealthyEndpoint: endpoints serve the model but all are unhealthy or
	// excluded.
	NoHealthyEndpoint
)

func (o Outcome) String() string {
	switch o {
	case Routed:
		return "routed"
	case ModelNotFound:
		return "model_not_found"
	case NoHealthyEndpoint:
		return "no_healthy_endpoint"
	}
	return "unknown"
}

// Load is one endpoint's load as a decision sees it.
type Load struct {
	InFlight int64 // every entry not yet completed or expired
	Fresh    int64 // entries decided since the last scrape was sent
	Waiting  int64 // last scrape
	Running  int64 // last scrape
	// CompletedSinceScrape counts completions of entries the last scrape
	// already included.
	CompletedSinceScrape int64
}

// Queue is the scraped queue corrected for completions since the scrape.
func (l Load) Queue() int64 {
	return max(0, l.Waiting+l.Running-l.CompletedSinceScrape)
}

// Score is the number the decision minimises.
func (l Load) Score() int64 { return l.Queue() + l.Fresh }

// Choice is a successful decision. It is a plain value (strings share the
// table's backing memory) so Route allocates nothing for it.
type Choice struct {
	EndpointID string
	URL        string
	Kind       string
	Load       Load
	// Candidates is how many eligible endpoints competed.
	Candidates int
}

// Reason renders why the choice won, for Decision.reason.
func (c Choice) Reason() string {
	b := make([]byte, 0, 128)
	b = append(b, "least load "...)
	b = strconv.AppendInt(b, c.Load.Score(), 10)
	b = append(b, " = queue "...)
	b = strconv.AppendInt(b, c.Load.Queue(), 10)
	b = append(b, " (waiting "...)
	b = strconv.AppendInt(b, c.Load.Waiting, 10)
	b = append(b, ", running "...)
	b = strconv.AppendInt(b, c.Load.Running, 10)
	if c.Load.CompletedSinceScrape > 0 {
		b = append(b, ", completed since scrape "...)
		b = strconv.AppendInt(b, c.Load.CompletedSinceScrape, 10)
	}
	b = append(b, ") + "...)
	b = strconv.AppendInt(b, c.Load.Fresh, 10)
	b = append(b, " routed since scrape, among "...)
	b = strconv.AppendInt(b, int64(c.Candidates), 10)
	b = append(b, " eligible"...)
	return string(b)
}

// Row is one line of an Explain table.
type Row struct {
	Endpoint       EndpointView
	Eligible       bool
	ExcludedReason string
	Score          int64
	Chosen         bool
}

// EndpointView is a copy of an endpoint's state for listings.
type EndpointView struct {
	ID           string
	URL          string
	Kind         string
	Models       []string
	Healthy      bool
	LastError    string
	Load         Load
	KVCacheUsage float64
	BlockSize    int
	// LastScrape is the end of the last successful scrape; zero if none.
	LastScrape time.Time
}

// Table is the live state of every endpoint. All methods are safe for
// concurrent use. The lock is held only for in-memory work, never across
// I/O.
type Table struct {
	mu       sync.Mutex
	byID     map[string]*endpoint
	order    []*endpoint            // sorted by id: stable Explain and listings
	byModel  map[string][]*endpoint // sorted by id
	rotation uint64

	firstRound     chan struct{} // closed once every endpoint was scraped once
	firstRoundDone bool

	// tombstones remember completions that matched no entry. A peer's
	// decision and the gateway's completion travel on different subjects,
	// so the completion can overtake the decision; the late decision must
	// then not create an entry nobody will ever release.
	tombstones map[requestKey]time.Time
}

type requestKey struct{ request, endpoint string }

type endpoint struct {
	spec       endpoints.Spec
	models     []string // configured, or last discovered
	attempted  bool     // at least one scrape finished
	healthy    bool
	lastErr    string
	waiting    int64
	running    int64
	kvUsage    float64
	blockSize  int
	lastScrape time.Time // end of last successful scrape
	scrapeSent time.Time // start of last successful scrape; splits fresh from old

	entries          map[string]time.Time // request id -> decided at (local clock)
	fresh            int64
	completedOld     int64
	modelsConfigured bool
}

// NewTable returns an empty table.
func NewTable() *Table {
	return &Table{byID: map[string]*endpoint{}, byModel: map[string][]*endpoint{}, firstRound: make(chan struct{}),
		tombstones: map[requestKey]time.Time{}}
}

// FirstRound is closed once every endpoint of a non-empty set has been
// scraped at least once (successfully or not).
func (t *Table) FirstRound() <-chan struct{} { return t.firstRound }

func (t *Table) checkFirstRoundLocked() {
	if t.firstRoundDone || len(t.order) == 0 {
		return
	}
	for _, ep := range t.order {
		if !ep.attempted {
			return
		}
	}
	t.firstRoundDone = true
	close(t.firstRound)
}

// SetEndpoints replaces the endpoint set. Endpoints that stay keep their
// state and in-flight entries; removed ones are dropped with theirs; an
// endpoint whose URL changed starts over as not yet scraped.
func (t *Table) SetEndpoints(specs []endpoints.Spec) {
	t.mu.Lock()
	defer t.mu.Unlock()
	next := make(map[string]*endpoint, len(specs))
	for _, s := range specs {
		ep, ok := t.byID[s.ID]
		if !ok || ep.spec.URL != s.URL {
			ep = &endpoint{entries: map[string]time.Time{}, lastErr: "not scraped yet"}
		}
		ep.spec = s
		if len(s.Models) > 0 {
			ep.models = slices.Clone(s.Models)
			ep.modelsConfigured = true
		} else if ep.modelsConfigured {
			ep.models, ep.modelsConfigured = nil, false
		}
		next[s.ID] = ep
	}
	t.byID = next
	t.order = t.order[:0]
	for _, ep := range next {
		t.order = append(t.order, ep)
	}
	sort.Slice(t.order, func(i, j int) bool { return t.order[i].spec.ID < t.order[j].spec.ID })
	t.rebuildModelsLocked()
	t.checkFirstRoundLocked()
}

func (t *Table) rebuildModelsLocked() {
	byModel := make(map[string][]*endpoint, len(t.byModel))
	for _, ep := range t.order {
		for _, m := range ep.models {
			byModel[m] = append(byModel[m], ep)
		}
	}
	t.byModel = byModel
}

// Observe applies a scrape result; it implements scrape.Sink.
func (t *Table) Observe(id string, started time.Time, res scrape.Result) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	ep := t.byID[id]
	if ep == nil {
		return // removed while the scrape ran
	}
	ep.attempted = true
	t.checkFirstRoundLocked()
	if res.Err != nil {
		ep.healthy = false
		ep.lastErr = res.Err.Error()
		return
	}
	ep.healthy = true
	ep.lastErr = ""
	ep.waiting, ep.running = res.Waiting, res.Running
	ep.kvUsage, ep.blockSize = res.KVCacheUsage, res.BlockSize
	ep.lastScrape = now
	ep.scrapeSent = started
	ep.completedOld = 0
	ep.fresh = 0
	for _, at := range ep.entries {
		if !at.Before(started) {
			ep.fresh++
		}
	}
	if res.Models != nil && !ep.modelsConfigured && !slices.Equal(res.Models, ep.models) {
		ep.models = slices.Clone(res.Models)
		t.rebuildModelsLocked()
	}
}

// Route picks the least-loaded eligible endpoint for model and, when one is
// found, records requestID as in flight on it at now. Ties go to the first
// endpoint at or after a start index that advances with every decision, so
// a burst against equally idle endpoints spreads instead of piling onto the
// first one; given the same state the choice is deterministic.
func (t *Table) Route(model string, exclude []string, requestID string, now time.Time) (Choice, Outcome) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, out, best := t.pickLocked(model, exclude)
	if out != Routed {
		return c, out
	}
	t.rotation++
	if _, dup := best.entries[requestID]; !dup {
		best.entries[requestID] = now
		if !now.Before(best.scrapeSent) {
			best.fresh++
		}
	}
	// The choice reports the load the decision was made on.
	return c, out
}

// Pick is Route without side effects: the endpoint the next Route would
// choose in the current state.
func (t *Table) Pick(model string, exclude []string) (Choice, Outcome) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, out, _ := t.pickLocked(model, exclude)
	return c, out
}

func (t *Table) pickLocked(model string, exclude []string) (Choice, Outcome, *endpoint) {
	cands := t.byModel[model]
	n := len(cands)
	if n == 0 {
		return Choice{}, ModelNotFound, nil
	}
	start := int(t.rotation % uint64(n))
	var best *endpoint
	var bestScore int64
	eligible := 0
	for i := 0; i < n; i++ {
		ep := cands[(start+i)%n]
		if !ep.healthy || slices.Contains(exclude, ep.spec.ID) {
			continue
		}
		eligible++
		s := ep.load().Score()
		if best == nil || s < bestScore {
			best, bestScore = ep, s
		}
	}
	if best == nil {
		return Choice{}, NoHealthyEndpoint, nil
	}
	return Choice{
		EndpointID: best.spec.ID,
		URL:        best.spec.URL,
		Kind:       best.spec.Kind,
		Load:       best.load(),
		Candidates: eligible,
	}, Routed, best
}

func (ep *endpoint) load() Load {
	return Load{
		InFlight:             int64(len(ep.entries)),
		Fresh:                ep.fresh,
		Waiting:              ep.waiting,
		Running:              ep.running,
		CompletedSinceScrape: ep.completedOld,
	}
}

// Explain returns every known endpoint as a row, in id order, with the
// reason an ineligible one was left out, and the outcome Pick would return.
func (t *Table) Explain(model string, exclude []string) ([]Row, Choice, Outcome) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, out, best := t.pickLocked(model, exclude)
	rows := make([]Row, 0, len(t.order))
	for _, ep := range t.order {
		r := Row{Endpoint: ep.viewLocked(), Score: ep.load().Score(), Chosen: ep == best}
		switch {
		case !slices.Contains(ep.models, model):
			if len(ep.models) == 0 {
				r.ExcludedReason = "models not known yet (not scraped successfully)"
			} else {
				r.ExcludedReason = "does not serve model " + strconv.Quote(model)
			}
		case slices.Contains(exclude, ep.spec.ID):
			r.ExcludedReason = "excluded by request"
		case !ep.healthy:
			r.ExcludedReason = "unhealthy: " + ep.lastErr
		default:
			r.Eligible = true
		}
		rows = append(rows, r)
	}
	return rows, c, out
}

// AddInFlight records a decision made elsewhere (another replica). It is
// idempotent per (request, endpoint). Unknown endpoints are ignored, and so
// are decisions whose completion already arrived.
func (t *Table) AddInFlight(requestID, endpointID string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ep := t.byID[endpointID]
	if ep == nil {
		return
	}
	if _, dup := ep.entries[requestID]; dup {
		return
	}
	if len(t.tombstones) > 0 {
		k := requestKey{requestID, endpointID}
		if _, done := t.tombstones[k]; done {
			delete(t.tombstones, k)
			return
		}
		if _, done := t.tombstones[requestKey{requestID, ""}]; done {
			return // an any-endpoint completion may cover several attempts; it expires with the TTL
		}
	}
	ep.entries[requestID] = at
	if !at.Before(ep.scrapeSent) {
		ep.fresh++
	}
}

// Complete releases a request's in-flight entry on endpointID, or on every
// endpoint when endpointID is empty. It reports whether anything was
// released; when nothing was, the completion is remembered (until the
// in-flight TTL) so that a decision arriving after it is ignored.
func (t *Table) Complete(requestID, endpointID string, at time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	released := false
	if endpointID != "" {
		ep := t.byID[endpointID]
		released = ep != nil && ep.completeLocked(requestID)
	} else {
		for _, ep := range t.order {
			if ep.completeLocked(requestID) {
				released = true
			}
		}
	}
	if !released {
		t.tombstones[requestKey{requestID, endpointID}] = at
	}
	return released
}

func (ep *endpoint) completeLocked(requestID string) bool {
	at, ok := ep.entries[requestID]
	if !ok {
		return false
	}
	delete(ep.entries, requestID)
	if at.Before(ep.scrapeSent) {
		ep.completedOld++
	} else {
		ep.fresh--
	}
	return true
}

// Expire drops entries decided before cutoff (their completion never
// arrived), and completion tombstones older than cutoff, and returns how
// many entries were dropped. An expired old entry does not
// reduce the scraped queue: nothing says the worker finished it.
func (t *Table) Expire(cutoff time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, at := range t.tombstones {
		if at.Before(cutoff) {
			delete(t.tombstones, k)
		}
	}
	n := 0
	for _, ep := range t.order {
		for id, at := range ep.entries {
			if !at.Before(cutoff) {
				continue
			}
			delete(ep.entries, id)
			if !at.Before(ep.scrapeSent) {
				ep.fresh--
			}
			n++
		}
	}
	return n
}

// Endpoints lists endpoints in id order, optionally only those serving
// model.
func (t *Table) Endpoints(model string) []EndpointView {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]EndpointView, 0, len(t.order))
	for _, ep := range t.order {
		if model != "" && !slices.Contains(ep.models, model) {
			continue
		}
		out = append(out, ep.viewLocked())
	}
	return out
}

func (ep *endpoint) viewLocked() EndpointView {
	return EndpointView{
		ID:           ep.spec.ID,
		URL:          ep.spec.URL,
		Kind:         ep.spec.Kind,
		Models:       slices.Clone(ep.models),
		Healthy:      ep.healthy,
		LastError:    ep.lastErr,
		Load:         ep.load(),
		KVCacheUsage: ep.kvUsage,
		BlockSize:    ep.blockSize,
		LastScrape:   ep.lastScrape,
	}
}

// Attempted reports whether every endpoint has been scraped at least once
// (successfully or not): before that, decisions would be made blind.
func (t *Table) Attempted() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ep := range t.order {
		if !ep.attempted {
			return false
		}
	}
	return true
}

// Stats is a cheap per-endpoint snapshot for metrics collection.
type Stats struct {
	ID       string
	Healthy  bool
	InFlight int64
}

// AppendStats appends one Stats per endpoint to dst.
func (t *Table) AppendStats(dst []Stats) []Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ep := range t.order {
		dst = append(dst, Stats{ID: ep.spec.ID, Healthy: ep.healthy, InFlight: int64(len(ep.entries))})
	}
	return dst
}
