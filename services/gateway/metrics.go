package gateway

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// unknownModel labels requests whose model the router did not recognise
// (or never saw), so clients cannot mint label values.
const unknownModel = "_unknown"

type metrics struct {
	requests     *prometheus.CounterVec   // model, code
	ttft         *prometheus.HistogramVec // model
	e2e          *prometheus.HistogramVec // model
	itl          *prometheus.HistogramVec // model
	attempts     *prometheus.CounterVec   // endpoint, outcome
	retries      *prometheus.CounterVec   // model
	routeSeconds prometheus.Histogram
	published    *prometheus.CounterVec // event
	pubFailures  *prometheus.CounterVec // event, reason
	// clientLimited counts requests refused by --max-streams-per-client.
	clientLimited prometheus.Counter
}

// Attempt outcome label values.
const (
	outcomeOK            = "ok"        // response relayed (any status < 500)
	outcomeConnectError  = "error"     // transport error before a response
	outcomeHeaderTimeout = "timeout"   // no headers in time
	outcomeStatus5xx     = "5xx"       // upstream answered 5xx
	outcomeStatus429     = "429"       // upstream answered 429 (its own limit)
	outcomeBroken        = "broken"    // failed after the response started
	outcomeStalled       = "stalled"   // silent for the stream idle timeout
	outcomeUnhealthy     = "unhealthy" // silent on an endpoint the router marked unhealthy
	outcomeCanceled      = "canceled"  // client went away
)

func newMetrics(reg prometheus.Registerer, inflight func() float64, spooled func() (events, bytes int64)) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_gateway_requests_total",
			Help: "Completion requests by model and HTTP status returned to the client (499: client went away).",
		}, []string{"model", "code"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchyard_gateway_ttft_seconds",
			Help:    "Time from request arrival to the first streamed data event, for successful streams.",
			Buckets: []float64{.025, .05, .1, .2, .3, .5, .75, 1, 1.5, 2, 3, 5, 7.5, 10, 15, 20, 30, 60},
		}, []string{"model"}),
		e2e: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchyard_gateway_e2e_seconds",
			Help:    "Time from request arrival to the end of the response, for successful requests.",
			Buckets: []float64{.1, .25, .5, 1, 2, 3, 5, 10, 20, 30, 60, 120, 300, 600},
		}, []string{"model"}),
		itl: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchyard_gateway_itl_seconds",
			Help:    "Gaps between successive reads that delivered streamed data events (one engine step's tokens arrive together).",
			Buckets: []float64{.005, .01, .015, .02, .025, .03, .04, .05, .075, .1, .15, .2, .3, .5, 1, 2.5},
		}, []string{"model"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_gateway_upstream_attempts_total",
			Help: "Upstream attempts by endpoint and outcome (ok, error, timeout, 5xx, broken, stalled, unhealthy, canceled).",
		}, []string{"endpoint", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_gateway_upstream_retries_total",
			Help: "Requests retried on another endpoint after a failure before the first byte.",
		}, []string{"model"}),
		routeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "switchyard_gateway_route_call_seconds",
			Help:    "Latency of Route calls to the router, as the gateway sees it.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_gateway_events_published_total",
			Help: "Events accepted by NATS (usage: acked by JetStream).",
		}, []string{"event"}),
		pubFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_gateway_event_publish_failures_total",
			Help: "Events lost, by event (usage, route_completion) and reason (queue_full, spool_full, spool, nats, shutdown, marshal).",
		}, []string{"event", "reason"}),
		clientLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchyard_gateway_client_limited_total",
			Help: "Requests answered 429 because their client had --max-streams-per-client requests in flight.",
		}),
	}
	reg.MustRegister(m.clientLimited, m.requests, m.ttft, m.e2e, m.itl, m.attempts, m.retries, m.routeSeconds, m.published, m.pubFailures,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "switchyard_gateway_inflight_requests",
			Help: "Completion requests being served.",
		}, inflight),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "switchyard_gateway_usage_spool_events",
			Help: "Usage events in the spool (--usage-spool-dir) not yet acked by JetStream.",
		}, func() float64 { n, _ := spooled(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "switchyard_gateway_usage_spool_bytes",
			Help: "Bytes the usage spool takes on disk (bounded by --usage-spool-max-bytes).",
		}, func() float64 { _, b := spooled(); return float64(b) }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}
