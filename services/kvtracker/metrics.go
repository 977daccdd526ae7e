package kvtracker

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/switchyard-dev/switchyard/services/kvtracker/internal/ingest"
)

type metrics struct {
	reg          *prometheus.Registry
	ingest       *ingest.Metrics
	leasesHeld   prometheus.Gauge
	workers      prometheus.Gauge
	leaseEvents  *prometheus.CounterVec
	snapshots    *prometheus.CounterVec
	summaries    *prometheus.CounterVec
	cached       *prometheus.GaugeVec
	boundDropped *prometheus.CounterVec
	runErrors    prometheus.Counter
	connected    *prometheus.GaugeVec
	lastEvent    *prometheus.GaugeVec
	startTime    *prometheus.GaugeVec
}

// newMetrics builds a registry per tracker, so several trackers (tests,
// `switchyard dev`) can live in one process.
func newMetrics() *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		reg:    reg,
		ingest: ingest.NewMetrics(reg),
		leasesHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchyard_kvtracker_leases_held",
			Help: "Workers this replica holds the lease of and ingests.",
		}),
		workers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchyard_kvtracker_workers_configured",
			Help: "Workers in the configuration, shared by every replica.",
		}),
		leaseEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_kvtracker_lease_events_total",
			Help: "Worker lease changes: acquired, lost (renewal failed or too late), shed (given to a replica with fewer), released (shutdown or worker removed).",
		}, []string{"event"}),
		snapshots: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_kvtracker_snapshots_total",
			Help: "Worker snapshots written to Redis (written), unchanged ones whose TTL was refreshed (refreshed), and failures (error).",
		}, []string{"result"}),
		summaries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_kvtracker_summaries_total",
			Help: "Worker summaries published (published) and failed NATS or Redis writes (error).",
		}, []string{"result"}),
		cached: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchyard_kvtracker_cached_blocks",
			Help: "Distinct blocks cached on each worker ingested by this replica.",
		}, []string{"pool", "worker"}),
		boundDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_kvtracker_bound_dropped_total",
			Help: "Messages on the bound socket dropped: unknown_topic, not_leased (another replica ingests the worker), overflow (its pipeline fell behind; replayed as a gap).",
		}, []string{"reason"}),
		runErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchyard_kvtracker_worker_errors_total",
			Help: "Worker pipelines that stopped with an error (they are restarted in a new epoch).",
		}),
		connected: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchyard_kvtracker_worker_connected",
			Help: "1 once the tracker's connection to a worker's KV event endpoint is up, 0 while it is refused (workers this replica ingests; none for workers that connect to --bind).",
		}, []string{"pool", "worker"}),
		lastEvent: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchyard_kvtracker_worker_last_event_timestamp_seconds",
			Help: "Unix time of the last KV event message from each worker this replica ingests; 0 when none arrived yet. time() minus it is the stream's silence.",
		}, []string{"pool", "worker"}),
		startTime: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchyard_kvtracker_worker_start_time_seconds",
			Help: "Process start time each worker ingested here reports on its metrics (process_start_time_seconds); a change is a restart, whose blocks are dropped at once. Absent for workers without an API URL.",
		}, []string{"pool", "worker"}),
	}
	reg.MustRegister(m.leasesHeld, m.workers, m.leaseEvents, m.snapshots, m.summaries, m.cached, m.boundDropped, m.runErrors, m.connected, m.lastEvent, m.startTime,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}
