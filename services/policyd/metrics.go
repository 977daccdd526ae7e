package policyd

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

type metrics struct {
	reg         *prometheus.Registry
	revision    prometheus.Gauge
	compiles    *prometheus.CounterVec
	diagnostics *prometheus.GaugeVec
	watchers    prometheus.Gauge
}

// newMetrics builds a registry per server, so several can live in one
// process (tests, `switchyard dev`).
func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		revision: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchyard_policyd_snapshot_revision",
			Help: "Revision of the snapshot being served (0 before the first valid set of resources).",
		}),
		compiles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_policyd_compiles_total",
			Help: "Compilations of the resources, by result: applied (new revision), unchanged, invalid (last good snapshot kept).",
		}, []string{"result"}),
		diagnostics: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchyard_policyd_diagnostics",
			Help: "Diagnostics of the resources as last read, by severity.",
		}, []string{"severity"}),
		watchers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchyard_policyd_watchers",
			Help: "Open Watch streams (routers subscribed).",
		}),
	}
	m.reg.MustRegister(m.revision, m.compiles, m.diagnostics, m.watchers,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
