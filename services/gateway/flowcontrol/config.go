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
	// KVCacheThreshold is the share (0..1) of a worker's KV cache the
	// requests in flight on it may claim at their peak, each its uncached
	// prompt tokens plus its output limit: a request whose claim does not
	// fit finds the worker full too, whatever its queue (0: the queue
	// alone, unless Reserve is set, which measures claims against the
	// whole cache). Only meaningful with Threshold > 0.
	KVCacheThreshold float64
	// Reserve is the share (0..1) of every worker's KV cache a request must
	// leave unclaimed when its tenant already has more than its weighted
	// share of what is routed through this gateway (or the request is
	// Sheddable): the room kept lets a tenant within its share start at
	// once even while another floods (package comment, "The reserve").
	// 0 turns it off.
	Reserve float64
	// DefaultMaxTokens is the output limit counted in the KV claim of a
	// request that sets none (max_tokens, max_completion_tokens).
	DefaultMaxTokens int64
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
	return Config{Threshold: 0, Reserve: 0.1, DefaultMaxTokens: 1024, MaxQueued: 1024, MaxWait: 30 * time.Second, RetryInterval: 20 * time.Millisecond}
}

// RegisterFlags registers the --queue-* flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	fs.IntVar(&c.Threshold, "queue-threshold", d.Threshold, "requests waiting to be scheduled (vllm:num_requests_waiting, plus those routed since the last scrape) per worker at which it is full; when every worker that could serve a request is full, it waits in the gateway's queue, released fairly across tenants (0: off, requests queue in vLLM)")
	fs.Float64Var(&c.KVCacheThreshold, "queue-kv-cache-threshold", d.KVCacheThreshold, "share (0..1) of a worker's KV cache the requests in flight on it may claim at their peak (uncached prompt plus output limit); a worker a request's claim does not fit is full too (0: queue only, or the whole cache with --queue-reserve)")
	fs.Float64Var(&c.Reserve, "queue-reserve", d.Reserve, "share (0..1) of every worker's KV cache that a tenant past its weighted share of the requests in flight (and any sheddable request) must leave unclaimed, so a tenant within its share starts at once (0: off)")
	fs.Int64Var(&c.DefaultMaxTokens, "queue-default-max-tokens", d.DefaultMaxTokens, "output tokens counted in the KV claim of a request without max_tokens/max_completion_tokens")
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
	if c.Reserve < 0 || c.Reserve >= 1 {
		errs = append(errs, fmt.Errorf("queue-reserve %g: want 0 (off) to less than 1", c.Reserve))
	} else if c.KVCacheThreshold > 0 && c.Reserve >= c.KVCacheThreshold {
		errs = append(errs, fmt.Errorf("queue-reserve %g: must be below queue-kv-cache-threshold %g, or a tenant past its share could never start", c.Reserve, c.KVCacheThreshold))
	}
	if c.DefaultMaxTokens < 1 || c.DefaultMaxTokens > 10_000_000 {
		errs = append(errs, fmt.Errorf("queue-default-max-tokens %d: want 1 to 10000000", c.DefaultMaxTokens))
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
