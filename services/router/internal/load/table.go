// Package load keeps the router's view of every endpoint's load (scraped
// queue plus requests routed and not yet completed) and predicts each
// candidate's time to first token for a request, with a score to rank
// candidates by. It does not choose: Decide hands the scored candidates
// to a Picker (the router's policy program, whose default routing takes
// the lowest score) and records the one chosen.
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
// ahead = max(0, waiting + running - completed_since_scrape) + fresh
//
// # Prefill work ahead
//
// What delays a first token most is the prefill of requests scheduled
// before it. Every entry carries its uncached prompt tokens (predicted by
// the deciding replica) and is pending until it is believed to have
// started: its own predicted first-token time has passed, or a scrape
// shows fewer waiting requests than the table has pending entries older
// than the scrape (the oldest are then taken as started, first come first
// served). Started is not done: until its predicted first token, an
// entry's prefill still delays every request after it, by what is left of
// it at the worker's prefill rate (all of it until its predicted start,
// none at its predicted first token, which a scrape showing it started
// moves to at most one prefill after that scrape). Every predicted TTFT
// counts that work: without it, a worker whose scrape shows it just
// started an 8k-token prefill looks idle, and the next request is sent to
// wait the whole prefill behind it (a fleet at half its prefill capacity
// routed like least-queue, a prefill behind round-robin's TTFT on prompts
// that share nothing), and a cached request arriving during that prefill
// is predicted its own few milliseconds where it waits for the step to
// end, which also teaches the predictor a fixed cost several times too
// high. A request whose prefix is cached somewhere is ranked on the work
// not started yet, though (Estimate.UnderWay): prefill under way on its
// prefix's holder does not push it off to recompute the prefix elsewhere
// (prefillAhead says why). Waiting requests the table knows nothing about
// (routed before this replica started, or by someone else) are costed at
// the worker's typical uncached size. The predictor (package predict) turns queue and
// tokens into seconds and learns from each completion's TTFT.
//
// # Score
//
// Default routing minimises score = predicted TTFT − prefill under way (for
// a request cached somewhere; see above) + recompute + pressure, where
// recompute is RecomputeWeight × the time this candidate would spend
// prefilling tokens another candidate already caches. The TTFT alone is
// greedy for the one request: against an idle worker, the holder of a
// prefix that is busy prefilling it for the previous request of a burst
// looks no faster, and each worker would end up computing (and caching)
// every popular prefix, dividing the fleet's cache by its size. The
// recompute term charges that duplicated work, so requests stay with the
// worker holding their prefix until its queue costs more than recomputing
// the prefix elsewhere: then the router moves on.
//
// A third term, pressure, is PressureWeight × the time to recompute the
// cached context the request's new blocks are expected to push out of the
// candidate's KV cache: its uncached tokens × the share of the cache
// holding live context once they are in (scraped occupancy plus the
// uncached tokens routed there since the scrape). Without it, a new
// conversation's first request is predicted no faster on an idle worker
// than on one busy decoding for others (decode barely slows a prefill),
// conversations pile onto one worker beyond its cache, and every later
// turn there is prefilled from scratch as their histories evict each
// other. With it, new contexts go where there is room, and a request
// whose prefix is cached stays (its few new blocks weigh little).
//
// # Keeping the learned rates honest
//
// Each endpoint's predictor learns from its completions, and every
// completion also teaches the fleet's predictor for its model. The
// predictor rejects outliers and is blended with, and bounded by, the
// fleet's (package predict explains why). The table adds what only it
// knows:
//
//   - A completion of a request that was in flight while its endpoint
//     failed a scrape (frozen, restarting, unreachable) teaches nothing:
//     its TTFT measures the outage, not the worker's speed.
//   - A completion whose features cannot be trusted teaches nothing
//     either (unexplained): the table predicts in decision order, and
//     the worker serves in arrival order, first come first served, in
//     steps that end with every request's first token together.
//     Requests decided on one endpoint within ReorderWindow of each
//     other may reach it in either order (the first wave of a burst
//     of sessions does, its requests racing through the gateways), so
//     what was ahead of each is not known; and a request with no
//     prefill ahead whose TTFT is longer than predicted by about the
//     prefill of requests decided after it, before its first token,
//     shared its last prefill step with them (a 379-token request
//     admitted with a cold 8k prompt waits for the whole 8k-token step).
//     Learned, such samples taught a worker a fixed cost ten times too
//     high and a prefill rate half again too fast after one burst, and
//     every cached request there was predicted at twice its TTFT for the
//     next twenty seconds. They still count in the accuracy Explain
//     shows, and predict.RegimeRun of them in a row are learned: an
//     endpoint that learns nothing keeps a wrong estimate for ever.
//   - The blend weighs an endpoint's own history by its freshness: it
//     halves for every Config.FleetHalfLife without a learned completion,
//     so an endpoint nobody sends work to is predicted like its fleet
//     again within minutes.
//   - Probes. An endpoint that is healthy, idle (nothing waiting, nothing
//     in flight here) and has learned nothing for Config.ProbeInterval is
//     given the next request whose prompt is cached nowhere: such a
//     request costs the same prefill everywhere, so sending it to the idle
//     endpoint costs little, and its completion is a sample. The probe's
//     row is predicted with the fleet's coefficients and scored 0, so
//     default routing takes it (a policy's rules still filter); Explain
//     shows it as a probe. At most one probe per endpoint per interval.
//
// A consequence worth knowing: when completions never arrive (no NATS, or
// a gateway that does not publish them), an entry stops weighing on the
// queue at the next scrape and only lingers in the in_flight figure until
// its TTL ends; nothing is learned, and predictions stay at the prior.
//
// # Providers
//
// An external provider is not scraped: it is taken as healthy, predicted
// from its own completions alone, and left out while its circuit breaker
// is open (breaker.go) or while it is at its concurrency cap
// (endpoints.Spec.MaxInFlight). The cap needs no count of its own: the
// entries the table holds for a provider, this replica's decisions and
// its peers', are its requests in flight across the fleet, and the
// gateways' completions release them. Without completions (no NATS) a
// capped provider's slots free only as their entries expire.
package load

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/switchyard-dev/switchyard/services/router/internal/endpoints"
	"github.com/switchyard-dev/switchyard/services/router/internal/predict"
	"github.com/switchyard-dev/switchyard/services/router/internal/scrape"
)

// Load is one endpoint's load as a decision sees it.
type Load struct {
	InFlight int64 // every entry not yet completed or expired
	Fresh    int64 // entries decided since the last scrape was sent
	Waiting  int64 // last scrape
	Running  int64 // last scrape
	// CompletedSinceScrape counts completions of entries the last scrape
	// already included.
	CompletedSinceScrape int64
	// Pending counts entries whose prefill is believed not started, and
	// PendingTokens their uncached prompt tokens.
	Pending       int64
	PendingTokens int64
	// FreshPending counts the pending entries decided since the last
	// scrape was sent, which the scraped counts do not include.
	FreshPending int64
	// Untracked is the scraped waiting requests the table had no pending
	// entry for at that scrape. An entry the table has since taken as
	// started stays out of it: the scrape counted it as waiting, and
	// costing it again at the typical size, as a second request, until
	// the next scrape predicted cached requests at three times their TTFT
	// and taught the predictor a prefill rate 30 % too fast.
	Untracked int64
	// Claimed is the KV cache the in-flight entries claim at their peak,
	// in tokens: each its uncached prompt tokens plus the output tokens it
	// may generate. FreshClaimed is the part of it decided since the last
	// scrape was sent.
	Claimed      int64
	FreshClaimed int64
}

// Queue is the scraped queue corrected for completions since the scrape.
func (l Load) Queue() int64 {
	return max(0, l.Waiting+l.Running-l.CompletedSinceScrape)
}

// Ahead is the number of requests queued or running ahead of a new one.
func (l Load) Ahead() int64 { return l.Queue() + l.Fresh }

// WaitingNow is the requests believed waiting to be scheduled: the
// worker's own count at the last scrape (vllm:num_requests_waiting, which
// excludes what it is prefilling or decoding) plus the requests routed to
// it since that scrape was sent and not yet predicted to have their first
// token. Flow control's saturation test reads it: counting what vLLM has
// not scheduled leaves its batching alone (a worker prefilling several
// prompts in one step is not full, nor is one decoding many), and the
// fresh decisions keep the count moving between scrapes, on every
// replica.
func (l Load) WaitingNow() int64 { return l.Waiting + l.FreshPending }

// KVDemand is the KV cache, in tokens, a worker of capacity tokens is
// believed to need for what is in flight on it: the larger of the
// entries' peak claims and the scraped usage plus the claims routed since
// that scrape. The claims see a request's growth as it decodes before the
// worker does, and the routers' decisions before any scrape; the scraped
// usage sees what claims miss, the cached prompt tokens requests hold
// (a conversation's own history, pinned while it runs) and requests the
// table does not know of. Flow control's KV test reads it.
func (l Load) KVDemand(usage float64, capacity int64) int64 {
	scraped := int64(math.Round(usage*float64(capacity))) + l.FreshClaimed
	return max(l.Claimed, scraped)
}

// Estimate is a predicted TTFT on one endpoint and how it breaks down.
type Estimate struct {
	// TTFT = Wait + Prefill, seconds.
	TTFT float64
	// Wait is the time for what is ahead: the fixed cost, the requests
	// queued or running, and the prefill tokens ahead.
	Wait float64
	// Prefill is the time for the request's own uncached tokens.
	Prefill float64
	// TokensAhead is the prefill work ahead in tokens (tracked pending
	// entries plus untracked waiting requests at the typical size).
	TokensAhead float64
	// PrefillRate is the endpoint's learned rate, tokens per second.
	PrefillRate float64
	// Features are the predictor's inputs; kept with the entry to learn
	// from its completion.
	Features predict.Features
	// Recompute is the charge for prefilling tokens another candidate
	// caches, seconds.
	Recompute float64
	// Pressure is the charge for the cached context the request's new
	// blocks are expected to push out of this candidate's cache, seconds.
	Pressure float64
	// UnderWay is the part of TTFT, seconds, that is prefill already under
	// way on this candidate, which a request whose prompt some candidate
	// caches is not ranked on (see prefillAhead). It may be negative: the
	// pending work the TTFT expects partly done by now is ranked in full.
	UnderWay float64
	// Score = TTFT − UnderWay + Recompute + Pressure is what is minimised;
	// 0 for a probe.
	Score float64
	// Probe is set when the endpoint is probed: it has learned nothing for
	// a while, so it takes this request (whose prompt is cached nowhere) to
	// learn from, predicted with its fleet's coefficients.
	Probe bool
	// StepShift is the part of Wait that is the step under way ending
	// later (or sooner, negative) than on average, seconds, by a gateway's
	// clock of the endpoint's steps (Features.StepShift); StepClock says
	// the decision had one.
	StepShift float64
	StepClock bool
	step      stepShift // how StepShift was made, kept with the entry
}

// Request is what a decision needs to know about the request.
type Request struct {
	Model   string
	ID      string
	Exclude []string
	// PromptTokens is the prompt length (0 when unknown).
	PromptTokens int64
	// PromptExact says PromptTokens counts the worker's own ids (a chat or
	// a single prompt, tokenized), so that its completion's usage is
	// compared with it (OnPromptCount).
	PromptExact bool
	// OutputTokens is the most output tokens the request may generate (0
	// when unknown): with its uncached prompt tokens, its entry's claim on
	// the chosen worker's KV cache.
	OutputTokens int64
	// Cached reports the prompt tokens already cached on an endpoint; nil
	// means nothing is cached anywhere.
	Cached func(endpointID string) int64
	// Steps reports a gateway's clock of an endpoint's engine steps as of
	// the decision; nil, or false for an endpoint, when there is none.
	Steps func(endpointID string) (StepClock, bool)
}

func (r *Request) cached(id string) int64 {
	if r.Cached == nil {
		return 0
	}
	return min(max(0, r.Cached(id)), r.PromptTokens)
}

// Strategy names default routing in Decision.strategy: the lowest score.
const Strategy = "kv-ttft"

// Reason renders why chosen won by its score, for Decision.reason: its
// predicted TTFT broken down, the charges, the runner-up (nil when none)
// and how many backends were eligible. promptTokens is the request's
// prompt length, 0 when unknown.
func Reason(chosen, runnerUp *Backend, promptTokens int64, eligible int) string {
	e := chosen.Estimate
	b := make([]byte, 0, 256)
	if e.Probe {
		b = append(b, "probe: no completion learned lately, predicted with the fleet's rates; "...)
	}
	b = append(b, "predicted TTFT "...)
	b = appendSeconds(b, e.TTFT)
	b = append(b, " = wait "...)
	b = appendSeconds(b, e.Wait)
	b = append(b, " (ahead: "...)
	b = strconv.AppendInt(b, chosen.Load.Ahead(), 10)
	b = append(b, " requests, "...)
	b = strconv.AppendInt(b, int64(math.Round(e.TokensAhead)), 10)
	b = append(b, " prefill tokens) + prefill "...)
	b = appendSeconds(b, e.Prefill)
	if promptTokens > 0 {
		b = append(b, " ("...)
		b = strconv.AppendInt(b, promptTokens-chosen.CachedTokens, 10)
		b = append(b, " uncached of "...)
		b = strconv.AppendInt(b, promptTokens, 10)
		b = append(b, " prompt tokens, "...)
		b = strconv.AppendInt(b, chosen.CachedTokens, 10)
		b = append(b, " cached, at "...)
	} else {
		b = append(b, " (prompt unknown: typical uncached size, at "...)
	}
	b = strconv.AppendInt(b, int64(math.Round(e.PrefillRate)), 10)
	b = append(b, " tok/s)"...)
	if e.Recompute > 0 || e.Pressure > 0 || e.UnderWay != 0 {
		b = append(b, "; score "...)
		b = appendSeconds(b, e.Score)
		sep := " with"
		switch {
		case e.UnderWay > 0:
			b = append(b, " without "...)
			b = appendSeconds(b, e.UnderWay)
			b = append(b, " of prefill under way"...)
			sep = ","
		case e.UnderWay < 0:
			b = append(b, " with pending prefill in full (+"...)
			b = appendSeconds(b, -e.UnderWay)
			b = append(b, ')')
			sep = ","
		}
		if e.Recompute > 0 {
			b = append(b, sep...)
			b = append(b, " recompute "...)
			b = appendSeconds(b, e.Recompute)
			sep = " +"
		}
		if e.Pressure > 0 {
			b = append(b, sep...)
			b = append(b, " cache pressure "...)
			b = appendSeconds(b, e.Pressure)
		}
	}
	if r := runnerUp; r != nil {
		b = append(b, "; next best "...)
		b = append(b, r.EndpointID...)
		b = append(b, ' ')
		b = appendSeconds(b, r.Estimate.TTFT)
		b = append(b, " ("...)
		if r.Estimate.Score != r.Estimate.TTFT {
			b = append(b, "score "...)
			b = appendSeconds(b, r.Estimate.Score)
			b = append(b, ", "...)
		}
		b = strconv.AppendInt(b, r.CachedTokens, 10)
		b = append(b, " cached, "...)
		b = strconv.AppendInt(b, r.Load.Ahead(), 10)
		b = append(b, " ahead)"...)
	}
	b = append(b, "; "...)
	b = strconv.AppendInt(b, int64(eligible), 10)
	b = append(b, " eligible"...)
	return string(b)
}

func appendSeconds(b []byte, s float64) []byte {
	b = strconv.AppendFloat(b, s, 'f', 3, 64)
	return append(b, 's')
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
	// The predictor's current coefficients.
	PrefillRate float64
	PerQueued   float64
	Base        float64
	AvgUncached float64
	Learned     int
	// Rejected counts completions not learned from: outliers, and requests
	// in flight while the endpoint failed a scrape.
	Rejected int
	// The predictor's recent accuracy: the TTFT its decisions predicted
	// and what their completions reported (seconds, exponential averages
	// over about the last ten), their mean absolute percentage error, and
	// how many completions went into them (requests in flight while the
	// endpoint failed a scrape do not: they measure the outage).
	RecentPredictedTTFT float64
	RecentObservedTTFT  float64
	RecentTTFTError     float64
	AccuracySamples     int
}

// Candidate is an eligible endpoint, listed before the decision for the
// cache lookup.
type Candidate struct {
	ID string
	// BlockSize is the scraped vllm:cache_config_info block size, 0 when
	// unknown.
	BlockSize int
}

// Completion is the end of a routed request on an endpoint.
type Completion struct {
	RequestID string
	// EndpointID is empty when unknown: every endpoint's entry for the
	// request is released.
	EndpointID string
	At         time.Time
	Success    bool
	// UpstreamFailed: the upstream failed it (what a provider's breaker
	// counts); a request neither successful nor failed by the upstream
	// (the client went away) leaves the breaker as it is.
	UpstreamFailed bool
	// TTFTSeconds is zero when no first token arrived.
	TTFTSeconds  float64
	PromptTokens int64
	CachedTokens int64
}

// Config tunes the decision.
type Config struct {
	// Prior is where every endpoint's predictor starts.
	Prior predict.Prior
	// RecomputeWeight scales the charge for prefilling tokens another
	// candidate caches (see Score in the package comment); 0 ranks on
	// predicted TTFT alone.
	RecomputeWeight float64
	// PressureWeight scales the charge for filling a candidate's KV cache
	// (see Score in the package comment); 0 leaves cache occupancy out.
	PressureWeight float64
	// FleetHalfLife is how long without a learned completion halves the
	// weight of an endpoint's own history against its fleet's; 0 means
	// DefaultFleetHalfLife, negative never decays.
	FleetHalfLife time.Duration
	// ProbeInterval is how long an idle endpoint may go without a learned
	// completion before it is probed; 0 means DefaultProbeInterval,
	// negative never probes.
	ProbeInterval time.Duration
	// Breaker opens the circuit of a failing provider (breaker.go).
	Breaker Breaker
	// FirstRotation is where the near-tie rotation starts. Replicas must
	// not start together: two that have made as many decisions would
	// break every tie alike, and requests decided on both in the moment
	// before either hears of the other's pile onto one worker (36 % of
	// simultaneous pairs on an idle fleet of 16 did, BenchmarkReplicaSync).
	// The router gives each replica a random one.
	FirstRotation uint64
}

// Defaults of Config's durations.
const (
	DefaultFleetHalfLife = time.Minute
	DefaultProbeInterval = 30 * time.Second
)

// ProviderExtraBase is added to the prior's fixed TTFT for an external
// provider (seconds): a round trip out of the cluster and a shared queue
// nobody scrapes. Until its own completions teach otherwise, an idle
// provider is predicted slower than an idle local worker, so ties between
// them go to the cluster.
const ProviderExtraBase = 0.25

// fleetWeight is how many completions' worth the fleet's estimate counts
// in an endpoint's prediction (predict.Blend): an endpoint that has served
// a handful of requests is predicted mostly like its fleet.
const fleetWeight = 5

// Table is the live state of every endpoint. All methods are safe for
// concurrent use. The lock is held only for in-memory work, never across
// I/O.
type Table struct {
	cfg Config

	mu       sync.Mutex
	byID     map[string]*endpoint
	order    []*endpoint            // sorted by id: stable listings
	byModel  map[string][]*endpoint // sorted by id
	rotation uint64

	firstRound     chan struct{} // closed once every endpoint was scraped once
	firstRoundDone bool

	// tombstones remember completions that matched no entry. A peer's
	// decision and the gateway's completion travel on different subjects,
	// so the completion can overtake the decision; the late decision must
	// then not create an entry nobody will ever release.
	tombstones map[requestKey]time.Time

	// observer, when set, hears every learned completion (metrics).
	observer func(endpointID string, predicted, routed, observed float64)
	// promptCount hears the prompt counts of requests decided with an
	// exact one (Request.PromptExact), the router's and the worker's.
	promptCount func(model string, routed, worker int64)

	// fleet learns from every endpoint's completions, per requested
	// model, and stands in for endpoints with little history of their own.
	fleet map[string]*predict.Model
	// clock learns how much of the gateways' step clocks to believe
	// (stepclock.go).
	clock clockFit
}

type requestKey struct{ request, endpoint string }

type endpoint struct {
	spec       endpoints.Spec
	models     []string // configured, or last discovered
	attempted  bool     // at least one scrape finished
	healthy    bool
	lastErr    string
	brk        breaker // providers only
	brkCfg     Breaker // the router's default with the provider's own thresholds
	waiting    int64
	running    int64
	kvUsage    float64
	blockSize  int
	numBlocks  int       // one engine's KV cache in blocks; 0 when unknown
	engines    int       // engines behind the worker's URL (data parallel)
	lastScrape time.Time // end of last successful scrape
	scrapeSent time.Time // start of last successful scrape; splits fresh from old

	entries          map[string]*entry
	fresh            int64
	freshTokens      int64 // uncached prompt tokens of the fresh entries
	claimed          int64 // every entry's claim
	freshClaimed     int64 // the fresh entries' claims
	completedOld     int64
	modelsConfigured bool

	// queue holds entries in predicted first-token order; entries leave it
	// lazily once no longer pending.
	queue         []*entry
	pending       int64
	pendingTokens int64
	pendingOld    int64
	// trackedWaiting is how many of the last scrape's waiting requests
	// were pending entries here (Load.Untracked).
	trackedWaiting int64

	model predict.Model
	// lastLearned is when the endpoint last learned from a completion;
	// lastFailure, when a scrape last failed (local clock); probeAt, when
	// it was last probed or first considered for a probe.
	lastLearned time.Time
	lastFailure time.Time
	probeAt     time.Time
	disturbed   int // completions withheld from learning: in flight across a failed scrape, or unexplained
	// decided holds the last decisions made here, kept after their
	// completions: whether a completion can be learned depends on what
	// was decided around it (unexplained), done or not.
	decided  [decidedRing]decision
	decidedN uint64 // decisions ever recorded; the next one goes to decided[decidedN%decidedRing]
	// unexplainedRun counts the unexplained completions just withheld.
	unexplainedRun int
	probes         int
	accuracy       accuracy
	// stepLeft is the average remainder of the engine step under way at
	// the decisions here that had a gateway's clock of it, what a clock's
	// remainder is compared with (stepShiftFor); stepClocks counts those
	// decisions.
	stepLeft   float64
	stepClocks int
}

type entry struct {
	at      time.Time // decided (local clock)
	model   string    // requested model: keys the fleet predictor
	old     bool      // decided before the last scrape was sent
	pending bool      // prefill believed not started
	// prefilling: a scrape showed it started, and its first token is not
	// due yet: the rest of its prefill still delays the requests after it.
	prefilling bool
	tokens     int64     // uncached prompt tokens, as predicted
	prompt     int64     // the exact prompt count, for OnPromptCount; 0 when not exact
	claim      int64     // KV cache claimed at its peak: tokens plus its output limit
	doneAt     time.Time // predicted first token
	feat       predict.Features
	predict    float64
	step       stepShift // the step clock's part in predict
	seq        uint64    // its number among the endpoint's decisions (endpoint.decided)
}

// decision is what unexplained needs of a past decision.
type decision struct {
	at     time.Time
	first  time.Time // its first token, or when it ended without one; zero while in flight
	tokens int64
	seq    uint64
}

const (
	// ReorderWindow is how close two decisions on one endpoint may be
	// and still reach it in either order: a request's trip through a
	// gateway to the worker takes a millisecond or two and varies as
	// much.
	ReorderWindow = 5 * time.Millisecond
	// decidedRing is how many of an endpoint's decisions unexplained
	// looks back on: beyond that many within a TTFT, the samples are a
	// burst's anyway.
	decidedRing = 64
)

// NewTable returns an empty table.
func NewTable(cfg Config) *Table {
	cfg.RecomputeWeight = max(0, cfg.RecomputeWeight)
	cfg.PressureWeight = max(0, cfg.PressureWeight)
	if cfg.FleetHalfLife == 0 {
		cfg.FleetHalfLife = DefaultFleetHalfLife
	}
	if cfg.ProbeInterval == 0 {
		cfg.ProbeInterval = DefaultProbeInterval
	}
	return &Table{cfg: cfg, rotation: cfg.FirstRotation, byID: map[string]*endpoint{}, byModel: map[string][]*endpoint{}, firstRound: make(chan struct{}),
		tombstones: map[requestKey]time.Time{}, fleet: map[string]*predict.Model{}}
}

// fleetModel returns model's fleet-wide predictor, creating it.
func (t *Table) fleetModel(model string) *predict.Model {
	m := t.fleet[model]
	if m == nil {
		if len(t.fleet) >= maxFleetModels {
			// Model names come from clients; unknown ones never reach
			// here (no candidates), but bound the map regardless.
			clear(t.fleet)
		}
		nm := predict.New(t.cfg.Prior)
		m = &nm
		t.fleet[model] = m
	}
	return m
}

const maxFleetModels = 1024

// predictor is the model an endpoint is predicted with at now for a
// request of model: its own, blended with the fleet's by its freshness.
func (t *Table) predictor(ep *endpoint, model string, now time.Time) predict.Model {
	if ep.spec.Kind == endpoints.KindProvider {
		// A provider's speed says nothing about the local fleet's, nor the
		// fleet's about it: it is predicted from its own history alone.
		return ep.model
	}
	fresh := 1.0
	if t.cfg.FleetHalfLife > 0 && !ep.lastLearned.IsZero() {
		fresh = predict.Freshness(now.Sub(ep.lastLearned).Seconds(), t.cfg.FleetHalfLife.Seconds())
	}
	return predict.Blend(&ep.model, t.fleetModel(model), fleetWeight, fresh)
}

// fleetOnly is the fleet's predictor for model, bounded as a blend: what a
// probed endpoint is predicted with.
func (t *Table) fleetOnly(ep *endpoint, model string) predict.Model {
	return predict.Blend(&ep.model, t.fleetModel(model), fleetWeight, 0)
}

// probeDue reports whether ep should be probed at now: a healthy, idle
// local endpoint that has learned nothing for the probe interval.
func (t *Table) probeDue(ep *endpoint, now time.Time) bool {
	if t.cfg.ProbeInterval <= 0 || ep.spec.Kind == endpoints.KindProvider || !ep.healthy || len(ep.entries) > 0 || ep.waiting > 0 {
		return false
	}
	if ep.probeAt.IsZero() {
		ep.probeAt = now // first considered: give it the interval to learn normally
	}
	last := ep.probeAt
	if ep.lastLearned.After(last) {
		last = ep.lastLearned
	}
	return now.Sub(last) >= t.cfg.ProbeInterval
}

// OnLearn sets a hook called (under the table lock: keep it cheap) with
// the TTFTs of every completion the predictor learns from: predicted now
// with its actual cached tokens, predicted when it was routed, and
// observed.
func (t *Table) OnLearn(f func(endpointID string, predicted, routed, observed float64)) {
	t.mu.Lock()
	t.observer = f
	t.mu.Unlock()
}

// OnPromptCount registers f to hear, for every successful completion of a
// request decided here with an exact prompt count (Request.PromptExact),
// that count and the worker's (its usage). f is called under the table's
// lock: it must not block.
func (t *Table) OnPromptCount(f func(model string, routed, worker int64)) {
	t.mu.Lock()
	t.promptCount = f
	t.mu.Unlock()
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
// state, in-flight entries and learned rates; removed ones are dropped with
// theirs; an endpoint whose URL changed starts over as not yet scraped.
func (t *Table) SetEndpoints(specs []endpoints.Spec) {
	t.mu.Lock()
	defer t.mu.Unlock()
	next := make(map[string]*endpoint, len(specs))
	for _, s := range specs {
		ep, ok := t.byID[s.ID]
		if !ok || ep.spec.URL != s.URL || ep.spec.Kind != s.Kind {
			prior := t.cfg.Prior
			if s.Kind == endpoints.KindProvider {
				prior.Base += ProviderExtraBase
			}
			ep = &endpoint{entries: map[string]*entry{}, lastErr: "not scraped yet", model: predict.New(prior)}
		}
		ep.spec = s
		// A threshold changed keeps the circuit's state (Breaker).
		ep.brkCfg = t.cfg.Breaker.with(s.BreakerFailures, s.BreakerOpenFor)
		if s.Kind == endpoints.KindProvider {
			// Nothing to scrape: a provider is taken as healthy, and its
			// TTFT estimate comes from its observed completions.
			ep.attempted, ep.healthy, ep.lastErr = true, true, ""
		}
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
		ep.lastFailure = now
		ep.healthy = false
		ep.lastErr = res.Err.Error()
		return
	}
	ep.healthy = true
	ep.lastErr = ""
	ep.waiting, ep.running = res.Waiting, res.Running
	ep.kvUsage, ep.blockSize, ep.numBlocks, ep.engines = res.KVCacheUsage, res.BlockSize, res.NumGPUBlocks, res.Engines
	ep.lastScrape = now
	ep.scrapeSent = started
	ep.completedOld = 0
	ep.fresh, ep.freshTokens, ep.freshClaimed = 0, 0, 0
	for _, e := range ep.entries {
		if !e.at.Before(started) {
			ep.countFresh(e, 1)
			continue
		}
		if !e.old {
			e.old = true
			if e.pending {
				ep.pendingOld++
			}
		}
	}
	// The worker has fewer waiting requests than we have pending ones it
	// already knew of: the oldest of those have started. They are
	// prefilling (vLLM counts a request being prefilled as running) until
	// their first token, started by the time the scrape was sent at the
	// latest.
	if excess := ep.pendingOld - res.Waiting; excess > 0 {
		var rate float64
		for _, e := range ep.queue {
			if excess == 0 {
				break
			}
			if e.pending && e.old {
				if rate == 0 {
					m := t.predictor(ep, e.model, now)
					rate = m.PrefillRate()
				}
				ep.start(e, started.Add(time.Duration(float64(e.tokens)/rate*float64(time.Second))))
				excess--
			}
		}
	}
	ep.trackedWaiting = min(ep.pendingOld, res.Waiting)
	ep.queue = slices.DeleteFunc(ep.queue, func(e *entry) bool { return !e.pending && !e.prefilling })
	if res.Models != nil && !ep.modelsConfigured && !slices.Equal(res.Models, ep.models) {
		ep.models = slices.Clone(res.Models)
		t.rebuildModelsLocked()
	}
}

// Candidates appends to dst the eligible endpoints for model (healthy, not
// excluded), in id order: the caller looks up their cached tokens before
// Decide.
func (t *Table) Candidates(model string, exclude []string, dst []Candidate) []Candidate {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	for _, ep := range t.byModel[model] {
		if ep.usable(now) && !slices.Contains(exclude, ep.spec.ID) {
			dst = append(dst, Candidate{ID: ep.spec.ID, BlockSize: ep.blockSize})
		}
	}
	return dst
}

// uncachedWith is the prefill a request needs: its uncached tokens, or,
// when the prompt is unknown, the typical uncached size under m.
func uncachedWith(m *predict.Model, prompt, cached int64) int64 {
	if prompt <= 0 {
		return int64(math.Round(m.AvgUncached()))
	}
	return prompt - cached
}

// estimate predicts the TTFT on ep at now of a request for model with
// prompt tokens of which cached are cached there, and scores it with the
// recompute charge for recompute tokens cached on another candidate.
func (t *Table) estimate(ep *endpoint, model string, now time.Time, req *Request, prompt, cached, recompute int64) Estimate {
	m := t.predictor(ep, model, now)
	return t.estimateWith(ep, &m, now, req, prompt, cached, recompute)
}

// estimateWith is estimate with the predictor m.
func (t *Table) estimateWith(ep *endpoint, m *predict.Model, now time.Time, req *Request, prompt, cached, recompute int64) Estimate {
	uncached := uncachedWith(m, prompt, cached)
	e := ep.estimate(now, uncached, m, cached > 0 || recompute > 0, t.stepShiftFor(ep, req))
	if recompute > 0 && t.cfg.RecomputeWeight > 0 {
		e.Recompute = t.cfg.RecomputeWeight * float64(recompute) / e.PrefillRate
	}
	if t.cfg.PressureWeight > 0 {
		e.Pressure = t.cfg.PressureWeight * ep.displaced(uncached) / e.PrefillRate
	}
	e.Score = e.TTFT - e.UnderWay + e.Recompute + e.Pressure
	return e
}

// countFresh adds (sign 1) or removes (sign -1) a fresh entry, one
// decided since the last scrape was sent, from the fresh counts.
func (ep *endpoint) countFresh(e *entry, sign int64) {
	ep.fresh += sign
	ep.freshTokens += sign * e.tokens
	ep.freshClaimed += sign * e.claim
}

// kvCapacity is the worker's KV cache in tokens, every engine's
// (vllm:cache_config_info's blocks × block size, per engine), 0 when
// unknown.
func (ep *endpoint) kvCapacity() int64 {
	return int64(ep.numBlocks) * int64(ep.blockSize) * int64(max(1, ep.engines))
}

// displaced is how many tokens of cached context a request allocating
// uncached new tokens on ep is expected to push out: each new block
// displaces live context with the probability that a block of the cache
// holds live context once the request is in. Live is the scraped
// occupancy (vllm:kv_cache_usage_perc: blocks referenced by requests)
// plus the uncached tokens routed here since the scrape. 0 when the cache
// size is unknown.
func (ep *endpoint) displaced(uncached int64) float64 {
	capacity := float64(ep.numBlocks) * float64(ep.blockSize)
	if capacity <= 0 || uncached <= 0 {
		return 0
	}
	live := ep.kvUsage*capacity + float64(max(0, ep.freshTokens))
	u := float64(uncached)
	return u * min(1, (live+u)/capacity)
}

// estimate predicts with m the TTFT of a request with uncached tokens on ep
// at now, sl how the step under way there shifts it; warm says some
// candidate caches part of its prompt (see prefillAhead).
func (ep *endpoint) estimate(now time.Time, uncached int64, m *predict.Model, warm bool, sl stepShift) Estimate {
	ep.settle(now)
	l := ep.load()
	untracked := float64(l.Untracked) * m.AvgUncached()
	ahead := ep.prefillAhead(now, m.PrefillRate()) + untracked
	if ahead > 0 && sl.Clocked {
		// Prefill ahead is priced by its tokens, and the step under way
		// is likely its own: the clock's remainder, seconds long after a
		// step that prefilled a cold prompt, would count it twice.
		sl = stepShift{}
	}
	f := predict.Features{Queued: float64(l.Ahead()), Tokens: ahead + float64(uncached), StepShift: sl.shift()}
	wait, prefill := m.Split(f, float64(uncached))
	underWay := 0.0
	if warm {
		// Ranked on the work not started (prefillAhead says why).
		notStarted := f
		notStarted.Tokens = float64(ep.pendingTokens) + untracked + float64(uncached)
		underWay = wait + prefill - m.Predict(notStarted)
	}
	return Estimate{
		TTFT:        wait + prefill,
		Wait:        wait,
		Prefill:     prefill,
		TokensAhead: ahead,
		PrefillRate: m.PrefillRate(),
		Features:    f,
		UnderWay:    underWay,
		Score:       wait + prefill - underWay,
		StepShift:   f.StepShift,
		StepClock:   sl.Clocked,
		step:        sl,
	}
}

// prefillAhead is the prefill work, in tokens, the entries of the queue
// have left at now: all of a request's uncached tokens until its
// predicted start, then less at rate until its predicted first token.
// Counting a started request's tokens in full would predict a worker
// busy prefilling an 8k prompt as slow at its last second as at its
// first; dropping them once a scrape shows it started would predict it
// idle: the next request would be sent to wait behind it.
//
// Every prediction counts it, and a request cached nowhere (a cold
// prompt, which costs the same prefill everywhere: only where it starts
// soonest matters) is ranked on it. A request whose prompt some candidate
// caches is ranked on the work not started yet, in full (pendingTokens;
// the difference is Estimate.UnderWay): prefill under way on
// the worker holding its prefix, often that prefix's own first request,
// does not count against staying. Counted, it sends followers off to
// recompute their prefix elsewhere whenever the holder is busy: on the
// shared-prefix workload under overload that split groups across workers
// and halved the goodput (a TTFT-greedy oracle with the true state does
// the same), where not counting it keeps each group on one worker.
func (ep *endpoint) prefillAhead(now time.Time, rate float64) float64 {
	ahead := 0.0
	for _, e := range ep.queue {
		if !e.pending && !e.prefilling {
			continue
		}
		left := rate * e.doneAt.Sub(now).Seconds()
		ahead += max(0, min(float64(e.tokens), left))
	}
	return ahead
}

// settle ends the pending (or prefilling) state of entries whose predicted
// first token has passed. The queue is in predicted first-token order but
// for started entries (see start), whose lingering costs nothing:
// prefillAhead counts them at 0 once due.
func (ep *endpoint) settle(now time.Time) {
	i := 0
	for ; i < len(ep.queue); i++ {
		e := ep.queue[i]
		if (e.pending || e.prefilling) && e.doneAt.After(now) {
			break
		}
		ep.unpend(e)
	}
	if i > 0 {
		ep.queue = ep.queue[i:]
	}
}

// start takes e as started: no longer waiting, prefilling until its first
// token, due by firstBy at the latest (settle ends that).
func (ep *endpoint) start(e *entry, firstBy time.Time) {
	ep.unpend(e)
	if firstBy.Before(e.doneAt) {
		e.doneAt = firstBy
	}
	e.prefilling = true
}

func (ep *endpoint) unpend(e *entry) {
	e.prefilling = false
	if !e.pending {
		return
	}
	e.pending = false
	ep.pending--
	ep.pendingTokens -= e.tokens
	if e.old {
		ep.pendingOld--
	}
}

// record adds an in-flight entry for a request of model decided at `at`
// with est, unless one exists for id; output is the most tokens it may
// generate (0 when unknown).
func (ep *endpoint) record(id, model string, at time.Time, uncached, output int64, est Estimate) {
	if _, dup := ep.entries[id]; dup {
		return
	}
	e := &entry{at: at, model: model, pending: true, tokens: max(0, uncached), feat: est.Features, predict: est.TTFT, step: est.step, seq: ep.decidedN}
	ep.decided[ep.decidedN%decidedRing] = decision{at: at, tokens: e.tokens, seq: ep.decidedN}
	ep.decidedN++
	e.claim = e.tokens + max(0, output)
	ep.claimed += e.claim
	e.doneAt = at.Add(time.Duration(est.TTFT * float64(time.Second)))
	if n := len(ep.queue); n > 0 && e.doneAt.Before(ep.queue[n-1].doneAt) {
		// Prefill is first come first served: nobody starts before the
		// requests ahead of it.
		e.doneAt = ep.queue[n-1].doneAt
	}
	if at.Before(ep.scrapeSent) {
		e.old = true
		ep.pendingOld++
	} else {
		ep.countFresh(e, 1)
	}
	ep.entries[id] = e
	ep.queue = append(ep.queue, e)
	ep.pending++
	ep.pendingTokens += e.tokens
}

func (ep *endpoint) load() Load {
	return Load{
		InFlight:             int64(len(ep.entries)),
		Fresh:                ep.fresh,
		Waiting:              ep.waiting,
		Running:              ep.running,
		CompletedSinceScrape: ep.completedOld,
		Pending:              ep.pending,
		PendingTokens:        ep.pendingTokens,
		FreshPending:         ep.pending - ep.pendingOld,
		Untracked:            max(0, ep.waiting-ep.trackedWaiting),
		Claimed:              ep.claimed,
		FreshClaimed:         ep.freshClaimed,
	}
}

// AddInFlight records a decision made elsewhere (another replica) for a
// request of model with a prompt of promptTokens, cachedTokens of them
// predicted cached, that may generate outputTokens. It is idempotent per
// (request, endpoint). Unknown endpoints are ignored, and so are
// decisions whose completion already arrived.
func (t *Table) AddInFlight(requestID, endpointID, model string, at time.Time, promptTokens, cachedTokens, outputTokens int64) {
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
	cached := min(max(0, cachedTokens), max(0, promptTokens))
	est := t.estimate(ep, model, at, nil, max(0, promptTokens), cached, 0)
	m := t.predictor(ep, model, at)
	ep.record(requestID, model, at, uncachedWith(&m, max(0, promptTokens), cached), outputTokens, est)
}

// Complete releases a request's in-flight entry on c.EndpointID, or on
// every endpoint when it is empty, and learns from its TTFT. It reports
// whether anything was released; when nothing was, the completion is
// remembered (until the in-flight TTL) so that a decision arriving after it
// is ignored.
func (t *Table) Complete(c Completion) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	released := false
	if c.EndpointID != "" {
		ep := t.byID[c.EndpointID]
		if ep != nil && ep.spec.Kind == endpoints.KindProvider {
			ep.brk.observe(c.Success, c.UpstreamFailed, c.At, ep.brkCfg)
		}
		released = ep != nil && t.completeLocked(ep, &c)
	} else {
		for _, ep := range t.order {
			if t.completeLocked(ep, &c) {
				released = true
			}
		}
	}
	if !released {
		t.tombstones[requestKey{c.RequestID, c.EndpointID}] = c.At
	}
	return released
}

func (t *Table) completeLocked(ep *endpoint, c *Completion) bool {
	e, ok := ep.entries[c.RequestID]
	if !ok {
		return false
	}
	// A request in flight while its endpoint failed a scrape measured the
	// outage (a frozen or restarting worker), not the worker.
	disturbed := !ep.lastFailure.Before(e.at) && !ep.lastFailure.IsZero()
	if c.Success && e.prompt > 0 && c.PromptTokens > 0 && t.promptCount != nil {
		t.promptCount(e.model, e.prompt, c.PromptTokens)
	}
	uncached := e.tokens
	if c.PromptTokens > 0 {
		uncached = max(0, c.PromptTokens-max(0, c.CachedTokens))
	}
	// Learn from what the request really needed, not from what the
	// router guessed it would.
	f := e.feat
	f.Tokens = max(0, f.Tokens-float64(e.tokens)+float64(uncached))
	// A first token comes before the completion that reports it, however
	// the clocks that timed them disagree.
	first := c.At
	if c.TTFTSeconds > 0 {
		first = minTime(first, e.at.Add(time.Duration(c.TTFTSeconds*float64(time.Second))))
	}
	if d := &ep.decided[e.seq%decidedRing]; d.seq == e.seq {
		d.first = first
	}
	if c.Success && c.TTFTSeconds > 0 && !disturbed {
		// An unexplained completion still counts in the accuracy shown:
		// the prediction was as wrong as it looks.
		ep.accuracy.add(e.predict, c.TTFTSeconds)
		if t.observer != nil {
			m := t.predictor(ep, e.model, c.At)
			t.observer(ep.spec.ID, m.Predict(f), e.predict, c.TTFTSeconds)
		}
		// A run of them is learned all the same: whatever excuses them,
		// an endpoint that learns nothing keeps its estimate for ever.
		if ep.unexplained(e, f, uncached, first, c.TTFTSeconds) && ep.unexplainedRun < predict.RegimeRun {
			ep.unexplainedRun++
			disturbed = true
		} else {
			ep.unexplainedRun = 0
		}
	}
	if c.Success && c.TTFTSeconds > 0 && disturbed {
		ep.disturbed++
	}
	if c.Success && c.TTFTSeconds > 0 && !disturbed {
		if s := e.step; s.Clocked {
			without := e.predict - s.shift()
			t.clock.observe(s.Dev, c.TTFTSeconds-without, 2*math.Abs(s.Dev)+0.1*e.predict)
		}
		fm := t.fleetModel(e.model)
		ref := fm
		if ep.spec.Kind == endpoints.KindProvider {
			ref = nil // not like the fleet, nor meant to be
		}
		if ep.model.ObserveNear(f, c.TTFTSeconds, ref) == predict.Learned {
			ep.model.ObserveUncached(float64(uncached))
			if c.At.After(ep.lastLearned) {
				ep.lastLearned = c.At
			}
		}
		if fm.Observe(f, c.TTFTSeconds) == predict.Learned {
			fm.ObserveUncached(float64(uncached))
		}
	}
	ep.unpend(e)
	ep.claimed -= e.claim
	delete(ep.entries, c.RequestID)
	if e.at.Before(ep.scrapeSent) {
		ep.completedOld++
	} else {
		ep.countFresh(e, -1)
	}
	return true
}

// unexplained says whether the completion of e, with features f (of
// which uncached its own tokens), first token at first and ttft, depended
// on what its features could not see
// (see Keeping the learned rates honest in the package comment): another
// request here, decided within ReorderWindow of e and in flight with it,
// or, for a request with no prefill ahead, a TTFT longer than predicted,
// beyond the outlier slack, by no more than twice the prefill of the
// requests decided after e and before its first token, when those are at
// least twice its own.
func (ep *endpoint) unexplained(e *entry, f predict.Features, uncached int64, first time.Time, ttft float64) bool {
	var later int64
	for i := range min(ep.decidedN, decidedRing) {
		d := ep.decided[i]
		if d.seq == e.seq {
			continue
		}
		gap := d.at.Sub(e.at)
		overlapped := gap > 0 && d.at.Before(first) || gap <= 0 && (d.first.IsZero() || d.first.After(e.at))
		if !overlapped {
			continue
		}
		if gap.Abs() < ReorderWindow {
			return true
		}
		if gap > 0 {
			later += d.tokens
		}
	}
	// Only a request with no prefill ahead is excused, and only by later
	// prefill at least twice its own. Behind a queue, every TTFT overlaps
	// later decisions, and excusing a worker's slow samples by them is how
	// an overloaded worker would keep its fast estimate, and its traffic
	// (a multi-turn run's TTFT p95 went from 2 to 14 s that way). A cold
	// prompt whose last partial step the next cold prompt fills is the
	// common case of a busy fleet, not a surprise: excused, it was never
	// learned, and prompts that share nothing were placed worse (TTFT p95
	// 7 % above round-robin's).
	excess := ttft - ep.model.Predict(f) - predict.OutlierSlack
	ahead := f.Tokens - float64(uncached)
	return later >= 2*uncached && excess > 0 && ahead <= 0 && 2*float64(later)/ep.model.PrefillRate() >= excess
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
		for id, e := range ep.entries {
			if !e.at.Before(cutoff) {
				continue
			}
			ep.unpend(e)
			ep.claimed -= e.claim
			delete(ep.entries, id)
			if !e.at.Before(ep.scrapeSent) {
				ep.countFresh(e, -1)
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

// usable reports whether ep may be chosen at now: healthy, and for a
// provider, its circuit not open.
func (ep *endpoint) usable(now time.Time) bool { return ep.healthy && ep.brk.allows(now) }

// full reports whether ep is at its concurrency cap (Spec.MaxInFlight):
// it holds as many entries as it may have requests in flight. The
// entries are this replica's decisions and its peers' (AddInFlight), so
// the cap holds across the fleet of routers, up to the decisions peers
// make in the moment before each hears of the other's.
func (ep *endpoint) full() bool {
	return ep.spec.MaxInFlight > 0 && len(ep.entries) >= ep.spec.MaxInFlight
}

// unusable is why ep may not be chosen at now ("" when it may).
func (ep *endpoint) unusable(now time.Time) string {
	switch {
	case !ep.healthy:
		return ep.lastErr
	case !ep.brk.allows(now):
		return ep.brk.reason(now)
	}
	return ""
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
		PrefillRate:  ep.model.PrefillRate(),
		PerQueued:    ep.model.PerQueued(),
		Base:         ep.model.Base(),
		AvgUncached:  ep.model.AvgUncached(),
		Learned:      ep.model.Samples(),
		Rejected:     ep.model.Rejected() + ep.disturbed,

		RecentPredictedTTFT: ep.accuracy.predicted,
		RecentObservedTTFT:  ep.accuracy.observed,
		RecentTTFTError:     ep.accuracy.absPctErr,
		AccuracySamples:     ep.accuracy.samples,
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
	ID            string
	Healthy       bool
	InFlight      int64
	PendingTokens int64
	PrefillRate   float64
	PerQueued     float64
	// NotLearned counts completions the endpoint's predictor did not learn
	// from when they arrived (outliers, requests in flight across a failed
	// scrape); Probes, the requests it was given as probes.
	NotLearned int64
	Probes     int64
	// Circuit is a provider's breaker: closed, open or half-open; empty
	// for a worker.
	Circuit string
	// MaxInFlight is the endpoint's concurrency cap; 0: none.
	MaxInFlight int64
}

// AppendStats appends one Stats per endpoint to dst.
func (t *Table) AppendStats(dst []Stats) []Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	for _, ep := range t.order {
		circuit := ""
		if ep.spec.Kind == endpoints.KindProvider {
			circuit = ep.brk.state(now)
		}
		dst = append(dst, Stats{ID: ep.spec.ID, Healthy: ep.healthy, Circuit: circuit, InFlight: int64(len(ep.entries)),
			PendingTokens: ep.pendingTokens, PrefillRate: ep.model.PrefillRate(), PerQueued: ep.model.PerQueued(),
			NotLearned: int64(ep.model.Outliers() + ep.disturbed), Probes: int64(ep.probes), MaxInFlight: int64(ep.spec.MaxInFlight)})
	}
	return dst
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
