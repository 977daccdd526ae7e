package meter

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the meter's /metrics: per tenant × model × target kind, in
// OpenTelemetry's GenAI semantic conventions rendered the Prometheus way
// (dots become underscores, the unit a suffix) where a convention exists,
// and switchyard_meter_* for what they lack (cached input tokens,
// outcomes) and the meter's own work. Each replica counts the events it
// counted in Redis (a duplicate is never counted), so summing over
// replicas gives every request once; a restarted replica's counters start
// at zero, which Prometheus' rate() expects of a counter.
type metrics struct {
	reg *prometheus.Registry

	tokenUsage *prometheus.HistogramVec // gen_ai_token_type, gen_ai_request_model, gen_ai_operation_name, tenant, target_kind
	ttft       *prometheus.HistogramVec // gen_ai_request_model, tenant, target_kind
	tpot       *prometheus.HistogramVec
	duration   *prometheus.HistogramVec

	requests *prometheus.CounterVec // tenant, model, target_kind, outcome
	input    *prometheus.CounterVec // tenant, model, target_kind, cache (hit, miss)
	output   *prometheus.CounterVec // tenant, model, target_kind
	reason   *prometheus.CounterVec // tenant, model, target_kind
	queue    *prometheus.HistogramVec

	events              *prometheus.CounterVec // result: counted, duplicate, undecodable
	counted, duplicates prometheus.Counter
	feeds               map[[2]string]prometheus.Counter // kind, result
	batch               prometheus.Histogram
	retry               *prometheus.CounterVec // what: redis, ack
	lag                 prometheus.Gauge
	feed                *prometheus.CounterVec // kind (usage, summary), result (ok, error)

	// series caches each label combination's metrics: resolving labels
	// hashes them, per metric, per event. Bounded as the labels are.
	mu     sync.Mutex
	series map[seriesKey]*seriesSet
}

type seriesKey struct{ tenant, model, kind, op, outcome string }

// seriesSet is one label combination's metrics.
type seriesSet struct {
	requests                 prometheus.Counter
	hit, miss, output, think prometheus.Counter
	inTokens, outTokens      prometheus.Observer
	ttft, tpot, duration     prometheus.Observer
	queue                    prometheus.Observer
}

// Buckets from the GenAI semantic conventions' explicit bucket advice.
var (
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	ttftBuckets     = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0}
	tpotBuckets     = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5}
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
)

func newMetrics() *metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	series := []string{"gen_ai_request_model", "tenant", "target_kind"}
	m := &metrics{
		reg: reg,
		tokenUsage: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gen_ai_client_token_usage",
			Help:    "Tokens used per request (OpenTelemetry gen_ai.client.token.usage), by gen_ai_token_type input or output.",
			Buckets: tokenBuckets,
		}, []string{"gen_ai_token_type", "gen_ai_request_model", "gen_ai_operation_name", "tenant", "target_kind"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gen_ai_server_time_to_first_token_seconds",
			Help:    "Time to first token of requests that had one (OpenTelemetry gen_ai.server.time_to_first_token), as the gateway measured it.",
			Buckets: ttftBuckets,
		}, series),
		tpot: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gen_ai_server_time_per_output_token_seconds",
			Help:    "Mean time between output tokens of streamed requests (OpenTelemetry gen_ai.server.time_per_output_token).",
			Buckets: tpotBuckets,
		}, series),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gen_ai_server_request_duration_seconds",
			Help:    "Request duration, arrival to last byte (OpenTelemetry gen_ai.server.request.duration).",
			Buckets: durationBuckets,
		}, series),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_meter_requests_total",
			Help: "Requests metered, by how they ended (outcome: ok, error, client_closed, upstream_*, shed, rejected_*).",
		}, []string{"tenant", "model", "target_kind", "outcome"}),
		input: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_meter_input_tokens_total",
			Help: "Prompt tokens metered, by cache: hit (served from the prefix cache) or miss (prefilled).",
		}, []string{"tenant", "model", "target_kind", "cache"}),
		output: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_meter_output_tokens_total",
			Help: "Output tokens metered.",
		}, []string{"tenant", "model", "target_kind"}),
		reason: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_meter_reasoning_tokens_total",
			Help: "Of the output tokens, those reasoning models spent thinking, where the upstream reports them.",
		}, []string{"tenant", "model", "target_kind"}),
		queue: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchyard_meter_queue_wait_seconds",
			Help:    "Time requests waited in the gateways' flow-control queue (0 when they did not).",
			Buckets: []float64{0, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"tenant", "model"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_meter_events_total",
			Help: "Usage events consumed, by result: counted, duplicate (counted before: redelivered or published twice), undecodable (dropped).",
		}, []string{"result"}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "switchyard_meter_batch_seconds",
			Help:    "Time to count one batch of events in Redis and ack it.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		retry: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_meter_retries_total",
			Help: "Batches retried, by what failed (redis, ack); their events are acked only once counted.",
		}, []string{"what"}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchyard_meter_pending_events",
			Help: "Usage events in the stream not yet delivered to the meter consumer (its lag).",
		}),
		feed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_meter_feed_messages_total",
			Help: "Messages published on the tenant feeds, by kind (usage, summary) and result (ok, error).",
		}, []string{"kind", "result"}),
	}
	m.series = map[seriesKey]*seriesSet{}
	m.counted, m.duplicates = m.events.WithLabelValues("counted"), m.events.WithLabelValues("duplicate")
	m.feeds = map[[2]string]prometheus.Counter{}
	for _, kind := range []string{"usage", "summary"} {
		for _, result := range []string{"ok", "error"} {
			m.feeds[[2]string{kind, result}] = m.feed.WithLabelValues(kind, result)
		}
	}
	reg.MustRegister(m.tokenUsage, m.ttft, m.tpot, m.duration, m.requests, m.input, m.output, m.reason, m.queue,
		m.events, m.batch, m.retry, m.lag, m.feed)
	return m
}

// feedResult is the feed counter of kind ("usage", "summary") for err.
func (m *metrics) feedResult(kind string, err error) prometheus.Counter {
	result := "ok"
	if err != nil {
		result = "error"
	}
	return m.feeds[[2]string{kind, result}]
}

// set returns the metrics of one label combination.
func (m *metrics) set(k seriesKey) *seriesSet {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ss := m.series[k]; ss != nil {
		return ss
	}
	if len(m.series) >= maxSeriesSets {
		clear(m.series) // label values changed a lot (new snapshots): start over
	}
	ss := &seriesSet{
		requests:  m.requests.WithLabelValues(k.tenant, k.model, k.kind, k.outcome),
		hit:       m.input.WithLabelValues(k.tenant, k.model, k.kind, "hit"),
		miss:      m.input.WithLabelValues(k.tenant, k.model, k.kind, "miss"),
		output:    m.output.WithLabelValues(k.tenant, k.model, k.kind),
		think:     m.reason.WithLabelValues(k.tenant, k.model, k.kind),
		inTokens:  m.tokenUsage.WithLabelValues("input", k.model, k.op, k.tenant, k.kind),
		outTokens: m.tokenUsage.WithLabelValues("output", k.model, k.op, k.tenant, k.kind),
		ttft:      m.ttft.WithLabelValues(k.model, k.tenant, k.kind),
		tpot:      m.tpot.WithLabelValues(k.model, k.tenant, k.kind),
		duration:  m.duration.WithLabelValues(k.model, k.tenant, k.kind),
		queue:     m.queue.WithLabelValues(k.tenant, k.model),
	}
	m.series[k] = ss
	return ss
}

// maxSeriesSets bounds the cache.
const maxSeriesSets = 100_000

// observe records an event counted now.
func (m *metrics) observe(e *event) {
	ev := e.ev
	kind := ev.GetTargetKind()
	if kind == "" {
		kind = "-"
	}
	op := "chat"
	if ev.GetApi() == "completions" {
		op = "text_completion"
	}
	ss := m.set(seriesKey{e.tenant, e.model, kind, op, e.outcome})
	v := e.vals
	ss.requests.Inc()
	ss.hit.Add(float64(v[1]))
	ss.miss.Add(float64(v[2]))
	ss.output.Add(float64(v[3]))
	if v[4] > 0 {
		ss.think.Add(float64(v[4]))
	}
	if v[1]+v[2] > 0 {
		ss.inTokens.Observe(float64(v[1] + v[2]))
	}
	if v[3] > 0 {
		ss.outTokens.Observe(float64(v[3]))
	}
	if t := ev.GetTtftSeconds(); t > 0 {
		ss.ttft.Observe(t)
	}
	if t := ev.GetItlMeanSeconds(); t > 0 {
		ss.tpot.Observe(t)
	}
	if t := ev.GetE2ESeconds(); t > 0 {
		ss.duration.Observe(t)
	}
	ss.queue.Observe(max(0, ev.GetQueueSeconds()))
}
