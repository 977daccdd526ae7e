package router

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

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
}

// newMetrics builds a registry per server, so several routers (tests,
// `switchyard dev`) can live in one process.
func newMetrics(table *load.Table) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		routeDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "switchyard_router_route_duration_seconds",
			Help:    "Time to answer Route, from request decoded to response built.",
			Buckets: []float64{5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 1e-2},
		}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_router_decisions_total",
			Help: "Route decisions by requested model, chosen endpoint and outcome (routed, model_not_found, no_healthy_endpoint).",
		}, []string{"model", "endpoint", "outcome"}),
		scrapeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_router_scrape_errors_total",
			Help: "Failed scrapes of a worker's /metrics or /v1/models.",
		}, []string{"endpoint"}),
		syncEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_router_sync_events_total",
			Help: "Replica sync traffic: peer decisions applied, completions (released or unmatched), decisions dropped before publishing, malformed payloads.",
		}, []string{"event"}),
	}
	m.reg.MustRegister(m.routeDuration, m.decisions, m.scrapeErrors, m.syncEvents,
		&tableCollector{table: table},
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
)

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
}

func (c *tableCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = c.table.AppendStats(c.buf[:0])
	for _, s := range c.buf {
		h := 0.0
		if s.Healthy {
			h = 1
		}
		ch <- prometheus.MustNewConstMetric(healthyDesc, prometheus.GaugeValue, h, s.ID)
		ch <- prometheus.MustNewConstMetric(inflightDesc, prometheus.GaugeValue, float64(s.InFlight), s.ID)
	}
}
