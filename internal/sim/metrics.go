package sim

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-dev/switchyard/internal/sim/engine"
	"github.com/switchyard-dev/switchyard/internal/vllm"
)

// Histogram buckets vLLM v1 uses (vllm/v1/metrics/loggers.py).
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
		0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	requestLatencyBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0,
		30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
	interTokenBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
		0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
)

// vLLM's FinishReason values, all pre-created on request_success like vLLM.
var finishReasons = []string{"stop", "length", "abort"}

// metrics is one worker's vLLM-named Prometheus series. Values are model
// time. Python's client appends _total to counters; Go's does not, so the
// names carry it here.
type metrics struct {
	reg                                           *prometheus.Registry
	prefixQueries, prefixHits, preemptions        prometheus.Counter
	promptTokens, generationTokens                prometheus.Counter
	ttft, e2e, queueTime, prefillTime, interToken prometheus.Observer
	success                                       map[string]prometheus.Counter
}

// cacheInfo is the CacheConfig vLLM exports as cache_config_info labels.
type cacheInfo struct {
	blockSize, numGPUBlocks, numGPUBlocksOverride int
	gpuMemoryUtilization                          float64
}

// newMetrics registers the series. The scheduler gauges are read from stats
// at scrape time, so they are current even when the engine is idle (after a
// cancelled request, say) instead of frozen at the last step.
func newMetrics(model string, ci cacheInfo, stats func() engine.Stats) *metrics {
	reg := prometheus.NewRegistry()
	labels := prometheus.Labels{vllm.LabelModelName: model, vllm.LabelEngine: "0"}
	gauge := func(name, help string, value func(engine.Stats) float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return value(stats()) }))
	}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name + "_total", Help: help, ConstLabels: labels})
		reg.MustRegister(c)
		return c
	}
	hist := func(name, help string, buckets []float64) prometheus.Observer {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets, ConstLabels: labels})
		reg.MustRegister(h)
		return h
	}
	m := &metrics{
		reg:              reg,
		prefixQueries:    counter(vllm.MetricPrefixCacheQueries, "Prefix cache queries, in terms of number of queried tokens."),
		prefixHits:       counter(vllm.MetricPrefixCacheHits, "Prefix cache hits, in terms of number of cached tokens."),
		preemptions:      counter(vllm.MetricNumPreemptions, "Cumulative number of preemption from the engine."),
		promptTokens:     counter(vllm.MetricPromptTokens, "Number of prefill tokens processed."),
		generationTokens: counter(vllm.MetricGenerationTokens, "Number of generation tokens processed."),
		ttft:             hist(vllm.MetricTimeToFirstToken, "Histogram of time to first token in seconds.", ttftBuckets),
		e2e:              hist(vllm.MetricE2ERequestLatency, "Histogram of e2e request latency in seconds.", requestLatencyBuckets),
		queueTime:        hist(vllm.MetricRequestQueueTime, "Histogram of time spent in WAITING phase for request.", requestLatencyBuckets),
		prefillTime:      hist(vllm.MetricRequestPrefillTime, "Histogram of time spent in PREFILL phase for request.", requestLatencyBuckets),
		interToken:       hist(vllm.MetricInterTokenLatency, "Histogram of inter-token latency in seconds.", interTokenBuckets),
		success:          map[string]prometheus.Counter{},
	}
	gauge(vllm.MetricNumRequestsRunning, "Number of requests in model execution batches.",
		func(s engine.Stats) float64 { return float64(s.Running) })
	gauge(vllm.MetricNumRequestsWaiting, "Number of requests waiting to be processed.",
		func(s engine.Stats) float64 { return float64(s.Waiting) })
	gauge(vllm.MetricKVCacheUsagePerc, "KV-cache usage. 1 means 100 percent usage.",
		func(s engine.Stats) float64 { return s.KVUsage })
	sv := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: vllm.MetricRequestSuccess + "_total", Help: "Count of successfully processed requests.", ConstLabels: labels,
	}, []string{vllm.LabelFinishedReason})
	reg.MustRegister(sv)
	for _, r := range finishReasons {
		m.success[r] = sv.WithLabelValues(r)
	}

	// vLLM exports CacheConfig as an info gauge with an engine label but,
	// unlike every other series, no model_name.
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: vllm.MetricCacheConfigInfo,
		Help: "Information of the LLMEngine CacheConfig",
		ConstLabels: prometheus.Labels{
			vllm.CacheConfigLabelBlockSize:  strconv.Itoa(ci.blockSize),
			vllm.CacheConfigLabelNumGPUBlks: strconv.Itoa(ci.numGPUBlocks),
			"num_gpu_blocks_override":       pyOptionalInt(ci.numGPUBlocksOverride),
			"gpu_memory_utilization":        strconv.FormatFloat(ci.gpuMemoryUtilization, 'g', -1, 64),
			"cache_dtype":                   "auto",
			"enable_prefix_caching":         "True",
			"prefix_caching_hash_algo":      "sha256",
			"num_cpu_blocks":                "None",
			vllm.LabelEngine:                "0",
		},
	})
	info.Set(1)
	reg.MustRegister(info)
	// Each simulated worker is a process of its own to its clients (several
	// share this one): its start is when the worker was made, so a worker
	// restarted in place shows a new start like a restarted vLLM.
	start := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: vllm.MetricProcessStartTime,
		Help: "Start time of the process since unix epoch in seconds.",
	})
	start.Set(float64(time.Now().UnixNano()) / 1e9)
	reg.MustRegister(start)
	return m
}

// pyOptionalInt renders an optional int the way Python's str() does.
func pyOptionalInt(v int) string {
	if v <= 0 {
		return "None"
	}
	return strconv.Itoa(v)
}

// StepDone implements engine.Observer.
func (m *metrics) StepDone(s engine.StepStats) {
	m.prefixQueries.Add(float64(s.PrefixQueries))
	m.prefixHits.Add(float64(s.PrefixHits))
	m.preemptions.Add(float64(s.Preemptions))
	m.promptTokens.Add(float64(s.PromptTokens))
	m.generationTokens.Add(float64(s.GenerationTokens))
	for _, v := range s.TTFTs {
		m.ttft.Observe(v)
	}
	for _, v := range s.InterTokenLatencies {
		m.interToken.Observe(v)
	}
}

// RequestFinished implements engine.Observer.
func (m *metrics) RequestFinished(r engine.RequestStats) {
	if c, ok := m.success[r.FinishReason]; ok {
		c.Inc()
	}
	m.e2e.Observe(r.E2E)
	m.queueTime.Observe(r.QueueTime)
	m.prefillTime.Observe(r.PrefillTime)
}
