// Package scrape reads a vLLM worker's live state: the Prometheus text on
// /metrics and the model list on /v1/models.
package scrape

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/switchyard-dev/switchyard/internal/vllm"
)

// Metrics is what the router reads from one /metrics page.
type Metrics struct {
	// Waiting and Running are summed across engines: a data-parallel worker
	// exposes one series per engine behind one URL.
	Waiting int64
	Running int64
	// KVCacheUsage is the mean over engines, 0..1: engines have caches of
	// the same size, so the mean is the fraction of the worker's total.
	KVCacheUsage float64
	// BlockSize and NumGPUBlocks (one engine's cache: engines of a worker
	// are alike) from vllm:cache_config_info; 0 when not exported.
	BlockSize    int
	NumGPUBlocks int
	// Engines is how many distinct engine label values were seen.
	Engines int
	// StartTime is the worker process's start (process_start_time_seconds,
	// Unix seconds); 0 when not exported. A new value is a restart.
	StartTime float64
}

// ParseMetrics parses Prometheus text exposition as vLLM serves it. The
// queue gauges are required: a page without them is not a vLLM worker (or
// not a ready one), which the caller treats as unhealthy.
func ParseMetrics(r io.Reader) (Metrics, error) {
	// UTF-8 validation is the lenient choice: vLLM's names (with ':') pass
	// either way, and an unrelated odd series elsewhere on the page should
	// not make the whole worker unhealthy.
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return Metrics{}, fmt.Errorf("parse metrics: %w", err)
	}
	var m Metrics
	engines := map[string]struct{}{}

	waiting, ok, err := sumGauge(families[vllm.MetricNumRequestsWaiting], engines)
	if err != nil {
		return Metrics{}, err
	}
	if !ok {
		return Metrics{}, fmt.Errorf("metrics page has no %s", vllm.MetricNumRequestsWaiting)
	}
	running, ok, err := sumGauge(families[vllm.MetricNumRequestsRunning], engines)
	if err != nil {
		return Metrics{}, err
	}
	if !ok {
		return Metrics{}, fmt.Errorf("metrics page has no %s", vllm.MetricNumRequestsRunning)
	}
	m.Waiting, m.Running = int64(waiting), int64(running)

	if fam := families[vllm.MetricKVCacheUsagePerc]; fam != nil {
		var sum float64
		var n int
		for _, s := range fam.GetMetric() {
			v, ok := sampleValue(s)
			if !ok || math.IsNaN(v) {
				continue
			}
			sum += clamp01(v)
			n++
		}
		if n > 0 {
			m.KVCacheUsage = sum / float64(n)
		}
	}
	if fam := families[vllm.MetricCacheConfigInfo]; fam != nil {
		for _, s := range fam.GetMetric() {
			if bs := labelValue(s, vllm.CacheConfigLabelBlockSize); bs != "" {
				n, err := strconv.Atoi(bs)
				if err == nil && n > 0 && n > m.BlockSize {
					m.BlockSize = n
				}
			}
			// vLLM renders an unset value as "None": read as unknown.
			if nb := labelValue(s, vllm.CacheConfigLabelNumGPUBlks); nb != "" {
				n, err := strconv.Atoi(nb)
				if err == nil && n > 0 && n > m.NumGPUBlocks {
					m.NumGPUBlocks = n
				}
			}
		}
	}
	if fam := families[vllm.MetricProcessStartTime]; fam != nil && len(fam.GetMetric()) > 0 {
		if v, ok := sampleValue(fam.GetMetric()[0]); ok && v > 0 && !math.IsInf(v, 0) {
			m.StartTime = v
		}
	}
	m.Engines = len(engines)
	return m, nil
}

// sumGauge adds up every series of a family, recording engine labels seen.
// ok is false when the family is absent or has no samples.
func sumGauge(fam *dto.MetricFamily, engines map[string]struct{}) (float64, bool, error) {
	if fam == nil || len(fam.GetMetric()) == 0 {
		return 0, false, nil
	}
	var sum float64
	for _, s := range fam.GetMetric() {
		v, ok := sampleValue(s)
		if !ok {
			continue
		}
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return 0, false, fmt.Errorf("%s: value %v out of range", fam.GetName(), v)
		}
		sum += v
		engines[labelValue(s, vllm.LabelEngine)] = struct{}{}
	}
	if sum > math.MaxInt32 {
		return 0, false, fmt.Errorf("%s: value %v out of range", fam.GetName(), sum)
	}
	return sum, true, nil
}

func sampleValue(s *dto.Metric) (float64, bool) {
	switch {
	case s.Gauge != nil:
		return s.Gauge.GetValue(), true
	case s.Untyped != nil:
		return s.Untyped.GetValue(), true
	case s.Counter != nil:
		return s.Counter.GetValue(), true
	}
	return 0, false
}

func labelValue(s *dto.Metric, name string) string {
	for _, l := range s.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func clamp01(v float64) float64 {
	switch {
	case v < 0:
		return 0
	case v > 1:
		return 1
	}
	return v
}

// ParseModels reads an OpenAI model list ({"object":"list","data":[{"id":..}]})
// and returns the model ids in the order given, without duplicates.
func ParseModels(r io.Reader) ([]string, error) {
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(r).Decode(&list); err != nil {
		return nil, fmt.Errorf("parse model list: %w", err)
	}
	if list.Data == nil {
		return nil, errors.New("parse model list: no data array")
	}
	models := make([]string, 0, len(list.Data))
	seen := make(map[string]struct{}, len(list.Data))
	for _, d := range list.Data {
		if d.ID == "" {
			continue
		}
		if _, dup := seen[d.ID]; dup {
			continue
		}
		seen[d.ID] = struct{}{}
		models = append(models, d.ID)
	}
	if len(models) == 0 {
		return nil, errors.New("model list is empty")
	}
	return models, nil
}
