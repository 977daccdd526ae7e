// Package vllm holds what Switchyard knows about vLLM's outside surface: the
// Prometheus metric names the router scrapes (and the simulator exports), and,
// in subpackages, the KV event wire format (kvevents) and its ZMQ transport.
// Facts here are taken from vLLM's documentation and source; when vLLM
// changes a name, this is the one place to follow it.
package vllm

// Metric names vLLM exports on /metrics. Every series carries the labels
// LabelModelName and LabelEngine.
const (
	MetricNumRequestsRunning = "vllm:num_requests_running"
	MetricNumRequestsWaiting = "vllm:num_requests_waiting"
	MetricKVCacheUsagePerc   = "vllm:kv_cache_usage_perc"  // 0..1
	MetricPrefixCacheQueries = "vllm:prefix_cache_queries" // counter (tokens), exported with _total
	MetricPrefixCacheHits    = "vllm:prefix_cache_hits"    // counter (tokens), exported with _total
	MetricTimeToFirstToken   = "vllm:time_to_first_token_seconds"
	MetricE2ERequestLatency  = "vllm:e2e_request_latency_seconds"
	MetricCacheConfigInfo    = "vllm:cache_config_info" // gauge = 1, config in labels
	MetricPromptTokens       = "vllm:prompt_tokens"     // counter, exported with _total
	MetricGenerationTokens   = "vllm:generation_tokens" // counter, exported with _total
	MetricRequestSuccess     = "vllm:request_success"   // counter, exported with _total
	MetricInterTokenLatency  = "vllm:inter_token_latency_seconds"
	MetricRequestQueueTime   = "vllm:request_queue_time_seconds"
	MetricRequestPrefillTime = "vllm:request_prefill_time_seconds"
	MetricNumPreemptions     = "vllm:num_preemptions" // counter, exported with _total
	// MetricProcessStartTime is the Python client's process collector
	// series: the worker process's start, in Unix seconds, without labels.
	// A new value is a restarted worker, whose prefix cache is empty.
	MetricProcessStartTime     = "process_start_time_seconds"
	LabelModelName             = "model_name"
	LabelEngine                = "engine"
	LabelFinishedReason        = "finished_reason"
	CacheConfigLabelBlockSize  = "block_size"
	CacheConfigLabelNumGPUBlks = "num_gpu_blocks"
)
