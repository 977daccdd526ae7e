package flowcontrol

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Config is the gateway's flow control (its --queue-* flags).
type Config struct {
	// Threshold is the requests waiting to be scheduled a worker
	// may have before it counts as full: when every worker that could
	// serve a request is full, the request waits in the gateway's queue.
	// 0, the default, turns flow control off (requests queue in vLLM,
	// first come first served). Lower keeps the workers' queues, and so a newcomer's wait,
	// shorter; too low leaves a worker idle between a prefill finishing
	// and the next request arriving.
	Threshold int
	// KVCacheThreshold is the KV cache usage (0..1) at which a worker is
	// full too, whatever its queue (0: queue only). Keeping some of the
	// cache free lets a newcomer start at once rather than wait for a
	// running request to finish; only meaningful with Threshold > 0.
	KVCacheThreshold float64
	// MaxQueued bounds the requests waiting in the gateway's queue; a full
	// queue sheds (package comment).
	MaxQueued int
	// MaxWait bounds one request's wait in the queue; past it the request
	// is answered 429 (reason queue-timeout) with Retry-After.
	MaxWait time.Duration
	// RetryInterval is how often the head of the queue asks the router
	// again when nothing at this gateway finished in between.
	RetryInterval time.Duration
}

// DefaultConfig is what the flags default to.
func DefaultConfig() Config {
	return Config{Threshold: 0, MaxQueued: 1024, MaxWait: 30 * time.Second, RetryInterval: 20 * time.Millisecond}
}

// RegisterFlags registers the --queue-* flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	fs.IntVar(&c.Threshold, "queue-threshold", d.Threshold, "requests waiting to be scheduled (vllm:num_requests_waiting, plus those routed since the last scrape) per worker at which it is full; when every worker that could serve a request is full, it waits in the gateway's queue, released fairly across tenants (0: off, requests queue in vLLM)")
	fs.Float64Var(&c.KVCacheThreshold, "queue-kv-cache-threshold", d.KVCacheThreshold, "KV cache usage (0..1, vllm:kv_cache_usage_perc) at which a worker is full too, whatever its queue (0: queue only); the cache left free lets a newcomer start at once")
	fs.IntVar(&c.MaxQueued, "queue-max-length", d.MaxQueued, "most requests waiting in the gateway's queue; when full, the tenant queueing most in the lowest class gives way (429, X-Switchyard-Shed-Reason: queue-full)")
	fs.DurationVar(&c.MaxWait, "queue-max-wait", d.MaxWait, "longest wait in the gateway's queue; then 429 with Retry-After (X-Switchyard-Shed-Reason: queue-timeout)")
	fs.DurationVar(&c.RetryInterval, "queue-retry-interval", d.RetryInterval, "how often the head of the gateway's queue asks the router again while nothing finishes here")
}

// Enabled reports whether flow control is on.
func (c *Config) Enabled() bool { return c.Threshold > 0 }

// Validate reports every invalid field, by flag.
func (c *Config) Validate() error {
	var errs []error
	if c.Threshold < 0 || c.Threshold > 10_000 {
		errs = append(errs, fmt.Errorf("queue-threshold %d: want 0 (off) to 10000", c.Threshold))
	}
	if c.KVCacheThreshold < 0 || c.KVCacheThreshold > 1 {
		errs = append(errs, fmt.Errorf("queue-kv-cache-threshold %g: want 0 (off) to 1", c.KVCacheThreshold))
	}
	if !c.Enabled() {
		return errors.Join(errs...)
	}
	if c.MaxQueued < 1 || c.MaxQueued > 1_000_000 {
		errs = append(errs, fmt.Errorf("queue-max-length %d: want 1 to 1000000", c.MaxQueued))
	}
	if c.MaxWait <= 0 || c.MaxWait > time.Hour {
		errs = append(errs, fmt.Errorf("queue-max-wait %s: want more than 0, at most 1h", c.MaxWait))
	}
	if c.RetryInterval < time.Millisecond || c.RetryInterval > 10*time.Second {
		errs = append(errs, fmt.Errorf("queue-retry-interval %s: want 1ms to 10s", c.RetryInterval))
	}
	return errors.Join(errs...)
}

// Metrics are the queue's figures on the gateway's /metrics.
type Metrics struct {
	wait *prometheus.HistogramVec // class
	shed *prometheus.CounterVec   // reason, class
}

// NewMetrics registers q's metrics on reg.
func NewMetrics(reg prometheus.Registerer, q *Queue) (*Metrics, error) {
	m := &Metrics{
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchyard_gateway_queue_wait_seconds",
			Help:    "Time requests spent in the gateway's flow-control queue, by class, whether they were then routed or shed.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2, 5, 10, 20, 30, 60},
		}, []string{"class"}),
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_gateway_queue_shed_total",
			Help: "Requests the gateway's flow-control queue refused or gave up (429), by reason (queue-full, queue-timeout) and class.",
		}, []string{"reason", "class"}),
	}
	cs := []prometheus.Collector{m.wait, m.shed}
	for c := Sheddable; c < numClasses; c++ {
		cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "switchyard_gateway_queue_length",
			Help:        "Requests waiting in the gateway's flow-control queue, by class.",
			ConstLabels: prometheus.Labels{"class": c.String()},
		}, func() float64 { return float64(q.LenByClass()[c]) }))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Waited records a request's wait in the queue.
func (m *Metrics) Waited(c Class, d time.Duration) {
	if m != nil {
		m.wait.WithLabelValues(c.String()).Observe(d.Seconds())
	}
}

// Shed counts a request the queue refused or gave up.
func (m *Metrics) Shed(c Class, reason string) {
	if m != nil {
		m.shed.WithLabelValues(reason, c.String()).Inc()
	}
}
