package meter

import (
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

	events *prometheus.CounterVec // result: counted, duplicate, undecodable
	batch  prometheus.Histogram
	retry  *prometheus.CounterVec // what: redis, ack
	lag    prometheus.Gauge
	feed   *prometheus.CounterVec // kind (usage, summary), result (ok, error)
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
	reg.MustRegister(m.tokenUsage, m.ttft, m.tpot, m.duration, m.requests, m.input, m.output, m.reason, m.queue,
		m.events, m.batch, m.retry, m.lag, m.feed)
	return m
}

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
	v := e.values()
	m.requests.WithLabelValues(e.tenant, e.model, kind, e.outcome).Inc()
	m.input.WithLabelValues(e.tenant, e.model, kind, "hit").Add(float64(v[1]))
	m.input.WithLabelValues(e.tenant, e.model, kind, "miss").Add(float64(v[2]))
	m.output.WithLabelValues(e.tenant, e.model, kind).Add(float64(v[3]))
	if v[4] > 0 {
		m.reason.WithLabelValues(e.tenant, e.model, kind).Add(float64(v[4]))
	}
	if v[1]+v[2] > 0 {
		m.tokenUsage.WithLabelValues("input", e.model, op, e.tenant, kind).Observe(float64(v[1] + v[2]))
	}
	if v[3] > 0 {
		m.tokenUsage.WithLabelValues("output", e.model, op, e.tenant, kind).Observe(float64(v[3]))
	}
	if t := ev.GetTtftSeconds(); t > 0 {
		m.ttft.WithLabelValues(e.model, e.tenant, kind).Observe(t)
	}
	if t := ev.GetItlMeanSeconds(); t > 0 {
		m.tpot.WithLabelValues(e.model, e.tenant, kind).Observe(t)
	}
	if t := ev.GetE2ESeconds(); t > 0 {
		m.duration.WithLabelValues(e.model, e.tenant, kind).Observe(t)
	}
	m.queue.WithLabelValues(e.tenant, e.model).Observe(max(0, ev.GetQueueSeconds()))
}
