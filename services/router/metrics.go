package router

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/switchyard-dev/switchyard/internal/kvblock"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify/external"
	"github.com/switchyard-dev/switchyard/services/router/internal/kvsync"
	"github.com/switchyard-dev/switchyard/services/router/internal/load"
)

// unknownModel labels decisions for models no endpoint serves: the model
// name comes from the client, and a label per typo would grow the series
// without bound.
const unknownModel = "_unknown"

type metrics struct {
	reg           *prometheus.Registry
	routeDuration prometheus.Histogram
	decisions     *prometheus.CounterVec
	scrapeErrors  *prometheus.CounterVec
	syncEvents    *prometheus.CounterVec
	promptReads   *prometheus.CounterVec
	// Tokenizer checks (tokcheck.go).
	tokenizerMismatch   *prometheus.GaugeVec
	tokenizerChecks     *prometheus.CounterVec
	promptCountMismatch *prometheus.CounterVec
	promptTokens        *prometheus.CounterVec
	cachedTokens        *prometheus.CounterVec
	predictionError     prometheus.Histogram
	routedError         prometheus.Histogram
}

// newMetrics builds a registry per server, so several routers (tests,
// `switchyard dev`) can live in one process.
func newMetrics(table *load.Table, kv *kvblock.Index, kvStats func() (kvsync.Stats, bool)) *metrics {
	if kvStats == nil {
		kvStats = func() (kvsync.Stats, bool) { return kvsync.Stats{}, false }
	}
	m := &metrics{
		reg: prometheus.NewRegistry(),
		routeDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "switchyard_router_route_duration_seconds",
			Help: "Time to answer Route, from request decoded to response built.",
			// Sub-millisecond for routing on load and text; up to tens of
			// milliseconds for long prompts through a real tokenizer, with
			// a bucket at 2 ms, the 8k-token target (README).
			Buckets: []float64{5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 1.5e-3, 2e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1, 2.5},
		}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_router_decisions_total",
			Help: "Route decisions by requested model, chosen endpoint and outcome (routed, model_not_found, no_healthy_endpoint, policy_rejected, held: flow control kept it at the gateway).",
		}, []string{"model", "endpoint", "outcome"}),
		scrapeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_router_scrape_errors_total",
			Help: "Failed scrapes of a worker's /metrics or /v1/models.",
		}, []string{"endpoint"}),
		syncEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_router_sync_events_total",
			Help: "Replica sync traffic: peer decisions applied, completions (released or unmatched), decisions dropped before publishing, malformed payloads.",
		}, []string{"event"}),
		tokenizerMismatch: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchyard_router_tokenizer_mismatch",
			Help: "1 when a worker's tokenizer for the model (its POST /tokenize of the probe) differs from the router's: the model is routed in approximate mode; 0 otherwise (matching or unchecked).",
		}, []string{"model"}),
		tokenizerChecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_router_tokenizer_checks_total",
			Help: "Probes of a worker's tokenizer by model and result: match, mismatch, unchecked (no /tokenize, unreachable, an error).",
		}, []string{"model", "result"}),
		promptCountMismatch: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_router_prompt_token_count_mismatch_total",
			Help: "Completions of requests this router routed with token ids whose worker-counted prompt tokens (usage.prompt_tokens) differ from the router's count by more than the chat template's generation prompt.",
		}, []string{"model"}),
		promptReads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_router_prompt_reads_total",
			Help: "Prompts read from Route bodies by result: tokens (exact), text (approximate index), none (no body), error (unreadable: routed on load alone), refused (over --max-messages, --max-prompt-bytes or --max-template-bytes), canceled (the caller gave up while it was read).",
		}, []string{"result"}),
		promptTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_router_prompt_tokens_total",
			Help: "Prompt tokens of routed requests (estimated for models without a tokenizer).",
		}, []string{"model"}),
		cachedTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_router_predicted_cached_tokens_total",
			Help: "Prompt tokens predicted cached on the chosen endpoint; divided by prompt tokens, the predicted hit rate.",
		}, []string{"model"}),
		predictionError: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "switchyard_router_ttft_prediction_error_seconds",
			Help:    "Absolute difference between observed and predicted TTFT of completed requests (prediction made with the request's actual cached tokens).",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}),
		routedError: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "switchyard_router_ttft_prediction_relative_error",
			Help:    "Absolute error of the TTFT each completed request was routed on, relative to its observed TTFT (|predicted - observed| / observed: 0.1 is 10 %).",
			Buckets: []float64{0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1, 2, 5},
		}),
	}
	m.reg.MustRegister(m.routeDuration, m.decisions, m.scrapeErrors, m.syncEvents,
		m.promptReads, m.tokenizerMismatch, m.tokenizerChecks, m.promptCountMismatch, m.promptTokens, m.cachedTokens, m.predictionError, m.routedError,
		&tableCollector{table: table},
		&kvCollector{index: kv, stats: kvStats},
		external.Failures,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

var (
	healthyDesc = prometheus.NewDesc("switchyard_router_endpoint_healthy",
		"1 when the endpoint's last scrape succeeded.", []string{"endpoint"}, nil)
	inflightDesc = prometheus.NewDesc("switchyard_router_endpoint_inflight_requests",
		"Requests routed to the endpoint (by any replica) and not yet completed or expired.", []string{"endpoint"}, nil)
	pendingDesc = prometheus.NewDesc("switchyard_router_endpoint_pending_prefill_tokens",
		"Uncached prompt tokens of requests routed to the endpoint whose prefill is believed not started.", []string{"endpoint"}, nil)
	rateDesc = prometheus.NewDesc("switchyard_router_endpoint_prefill_rate_tokens_per_second",
		"Prefill rate learned from the endpoint's observed TTFTs (the prior until completions arrive).", []string{"endpoint"}, nil)
	queueCostDesc = prometheus.NewDesc("switchyard_router_endpoint_queue_cost_seconds",
		"TTFT cost of each request queued or running ahead, learned from observed TTFTs.", []string{"endpoint"}, nil)
	notLearnedDesc = prometheus.NewDesc("switchyard_router_endpoint_ttft_not_learned_total",
		"Completions whose TTFT the endpoint's predictor did not learn from when they arrived: outliers (a stalled or catching-up worker), requests in flight while a scrape failed.", []string{"endpoint"}, nil)
	probesDesc = prometheus.NewDesc("switchyard_router_endpoint_probes_total",
		"Requests this replica gave the endpoint as probes: it was idle and had learned nothing for a while.", []string{"endpoint"}, nil)
	circuitDesc = prometheus.NewDesc("switchyard_router_provider_circuit",
		"1 for the state an external provider's circuit breaker is in on this replica (closed, open, half-open): open, it is not chosen.", []string{"endpoint", "state"}, nil)
	stepClockDesc = prometheus.NewDesc("switchyard_router_step_clock_weight",
		"How much of the gateways' step clocks this replica believes, 0..1: the share of a clock's word on what is left of a worker's engine step that it adds to the predicted TTFT, learned from completions (the jitter between gateway, router and worker decides it).", nil, nil)
	maxInflightDesc = prometheus.NewDesc("switchyard_router_provider_max_concurrency",
		"An external provider's concurrency cap (InferenceProvider spec.maxConcurrency), for providers that have one: while switchyard_router_endpoint_inflight_requests is at it, the provider is not chosen.", []string{"endpoint"}, nil)
)

var circuitStates = []string{"closed", "open", "half-open"}

// tableCollector reads gauges from the table at scrape time, so Route does
// not update gauges and removed endpoints disappear from /metrics by
// themselves.
type tableCollector struct {
	table *load.Table
	mu    sync.Mutex
	buf   []load.Stats
}

func (c *tableCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- healthyDesc
	ch <- inflightDesc
	ch <- pendingDesc
	ch <- rateDesc
	ch <- queueCostDesc
	ch <- notLearnedDesc
	ch <- probesDesc
	ch <- circuitDesc
	ch <- maxInflightDesc
	ch <- stepClockDesc
}

func (c *tableCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = c.table.AppendStats(c.buf[:0])
	ch <- prometheus.MustNewConstMetric(stepClockDesc, prometheus.GaugeValue, c.table.StepClockWeight())
	for _, s := range c.buf {
		h := 0.0
		if s.Healthy {
			h = 1
		}
		ch <- prometheus.MustNewConstMetric(healthyDesc, prometheus.GaugeValue, h, s.ID)
		ch <- prometheus.MustNewConstMetric(inflightDesc, prometheus.GaugeValue, float64(s.InFlight), s.ID)
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(s.PendingTokens), s.ID)
		ch <- prometheus.MustNewConstMetric(rateDesc, prometheus.GaugeValue, s.PrefillRate, s.ID)
		ch <- prometheus.MustNewConstMetric(queueCostDesc, prometheus.GaugeValue, s.PerQueued, s.ID)
		ch <- prometheus.MustNewConstMetric(notLearnedDesc, prometheus.CounterValue, float64(s.NotLearned), s.ID)
		ch <- prometheus.MustNewConstMetric(probesDesc, prometheus.CounterValue, float64(s.Probes), s.ID)
		if s.Circuit != "" {
			for _, st := range circuitStates {
				v := 0.0
				if st == s.Circuit {
					v = 1
				}
				ch <- prometheus.MustNewConstMetric(circuitDesc, prometheus.GaugeValue, v, s.ID, st)
			}
		}
		if s.MaxInFlight > 0 {
			ch <- prometheus.MustNewConstMetric(maxInflightDesc, prometheus.GaugeValue, float64(s.MaxInFlight), s.ID)
		}
	}
}

var (
	kvBlocksDesc = prometheus.NewDesc("switchyard_router_kv_index_blocks",
		"Distinct KV blocks (Switchyard hashes) the router's index holds from kvtracker events.", nil, nil)
	kvWorkersDesc = prometheus.NewDesc("switchyard_router_kv_workers",
		"Workers the KV replica has seen deltas or snapshots for.", nil, nil)
	kvResyncingDesc = prometheus.NewDesc("switchyard_router_kv_resyncing_workers",
		"Workers with missing KV deltas waiting for a snapshot that covers them.", nil, nil)
	kvDeltasDesc = prometheus.NewDesc("switchyard_router_kv_deltas_total",
		"KV deltas from the kvtracker stream by result: applied, skipped (duplicate or covered by a snapshot), malformed.", []string{"result"}, nil)
	kvEventsDesc = prometheus.NewDesc("switchyard_router_kv_sync_events_total",
		"KV replica events: epoch_change (worker state restarted), hole (deltas missing), resync (repaired from a snapshot), stream_reset (KV stream recreated), snapshot_loaded.", []string{"event"}, nil)
)

// kvCollector reads the KV index and replica at scrape time.
type kvCollector struct {
	index *kvblock.Index
	stats func() (kvsync.Stats, bool)
}

func (c *kvCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{kvBlocksDesc, kvWorkersDesc, kvResyncingDesc, kvDeltasDesc, kvEventsDesc} {
		ch <- d
	}
}

func (c *kvCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(kvBlocksDesc, prometheus.GaugeValue, float64(c.index.Len()))
	st, ok := c.stats()
	if !ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(kvWorkersDesc, prometheus.GaugeValue, float64(st.Workers))
	ch <- prometheus.MustNewConstMetric(kvResyncingDesc, prometheus.GaugeValue, float64(st.Resyncing))
	for _, v := range []struct {
		label string
		n     uint64
	}{{"applied", st.Deltas}, {"skipped", st.Skipped}, {"malformed", st.Malformed}} {
		ch <- prometheus.MustNewConstMetric(kvDeltasDesc, prometheus.CounterValue, float64(v.n), v.label)
	}
	for _, v := range []struct {
		label string
		n     uint64
	}{{"epoch_change", st.EpochChanges}, {"hole", st.Holes}, {"resync", st.Resyncs}, {"stream_reset", st.StreamResets}, {"snapshot_loaded", st.SnapshotsLoaded}} {
		ch <- prometheus.MustNewConstMetric(kvEventsDesc, prometheus.CounterValue, float64(v.n), v.label)
	}
}
