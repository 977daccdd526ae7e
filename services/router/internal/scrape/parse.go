// Package scrape reads a vLLM worker's live state: the Prometheus text on
// /metrics and the model list on /v1/models.
package scrape

import (
	"bytes"
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
//
// A router reads every worker's page every scrape interval, so the page is
// first scanned for the five series it needs (scan.go) and everything else
// is skipped unread; only a page that scan cannot read exactly goes through
// the full parser. Both feed the same aggregation, so they cannot disagree
// on what a series means.
func ParseMetrics(r io.Reader) (Metrics, error) {
	buf := pagePool.Get().(*bytes.Buffer)
	defer pagePool.Put(buf)
	buf.Reset()
	_, err := buf.ReadFrom(r)
	b := buf.Bytes()
	if err != nil {
		return Metrics{}, fmt.Errorf("parse metrics: %w", err)
	}
	var p page
	// A page without the queue gauges is an error either way; the full
	// parser says whether it is also malformed.
	if scanPage(b, &p) && len(p.series[famWaiting]) > 0 && len(p.series[famRunning]) > 0 {
		return p.metrics()
	}
	return parseFull(b)
}

// maxLabels bounds the labels of one line the full parser is given: it
// checks each new label against all before it, so a line of n labels
// costs n² (20,000 of them took 36 s), and a vLLM series has a handful.
const maxLabels = 256

// parseFull parses the whole page with the Prometheus text parser.
func parseFull(b []byte) (Metrics, error) {
	if line, ok := labelsBounded(b, maxLabels); !ok {
		return Metrics{}, fmt.Errorf("parse metrics: line %d has more than %d labels", line, maxLabels)
	}
	r := bytes.NewReader(b)
	// UTF-8 validation is the lenient choice: vLLM's names (with ':') pass
	// either way, and an unrelated odd series elsewhere on the page should
	// not make the whole worker unhealthy.
	tp := expfmt.NewTextParser(model.UTF8Validation)
	families, err := tp.TextToMetricFamilies(r)
	if err != nil {
		return Metrics{}, fmt.Errorf("parse metrics: %w", err)
	}
	var p page
	for i, name := range wantedFamilies {
		fam := families[name]
		if fam == nil {
			continue
		}
		for _, s := range fam.GetMetric() {
			v, ok := sampleValue(s)
			p.series[i] = append(p.series[i], sample{
				value: v, isValue: ok,
				engine:    labelValue(s, vllm.LabelEngine),
				blockSize: labelValue(s, vllm.CacheConfigLabelBlockSize),
				gpuBlocks: labelValue(s, vllm.CacheConfigLabelNumGPUBlks),
			})
		}
	}
	return p.metrics()
}

// The series ParseMetrics reads, in page.series order.
const (
	famWaiting = iota
	famRunning
	famKVUsage
	famCacheConfig
	famStartTime
	numFamilies
)

var wantedFamilies = [numFamilies]string{
	famWaiting:     vllm.MetricNumRequestsWaiting,
	famRunning:     vllm.MetricNumRequestsRunning,
	famKVUsage:     vllm.MetricKVCacheUsagePerc,
	famCacheConfig: vllm.MetricCacheConfigInfo,
	famStartTime:   vllm.MetricProcessStartTime,
}

// page is the samples of the wanted series, in page order.
type page struct {
	series [numFamilies][]sample
}

// sample is one series of a wanted family: its value (isValue is false for
// a histogram's or summary's series, which carry none) and the labels read.
type sample struct {
	value                        float64
	isValue                      bool
	engine, blockSize, gpuBlocks string
}

func (p *page) metrics() (Metrics, error) {
	var m Metrics
	engines := map[string]struct{}{}

	waiting, ok, err := sumGauge(vllm.MetricNumRequestsWaiting, p.series[famWaiting], engines)
	if err != nil {
		return Metrics{}, err
	}
	if !ok {
		return Metrics{}, fmt.Errorf("metrics page has no %s", vllm.MetricNumRequestsWaiting)
	}
	running, ok, err := sumGauge(vllm.MetricNumRequestsRunning, p.series[famRunning], engines)
	if err != nil {
		return Metrics{}, err
	}
	if !ok {
		return Metrics{}, fmt.Errorf("metrics page has no %s", vllm.MetricNumRequestsRunning)
	}
	m.Waiting, m.Running = int64(waiting), int64(running)

	var sum float64
	var n int
	for _, s := range p.series[famKVUsage] {
		if !s.isValue || math.IsNaN(s.value) {
			continue
		}
		sum += clamp01(s.value)
		n++
	}
	if n > 0 {
		m.KVCacheUsage = sum / float64(n)
	}
	for _, s := range p.series[famCacheConfig] {
		if s.blockSize != "" {
			n, err := strconv.Atoi(s.blockSize)
			if err == nil && n > 0 && n > m.BlockSize {
				m.BlockSize = n
			}
		}
		// vLLM renders an unset value as "None": read as unknown.
		if s.gpuBlocks != "" {
			n, err := strconv.Atoi(s.gpuBlocks)
			if err == nil && n > 0 && n > m.NumGPUBlocks {
				m.NumGPUBlocks = n
			}
		}
	}
	if st := p.series[famStartTime]; len(st) > 0 {
		if s := st[0]; s.isValue && s.value > 0 && !math.IsInf(s.value, 0) {
			m.StartTime = s.value
		}
	}
	m.Engines = len(engines)
	return m, nil
}

// sumGauge adds up every series of a family, recording engine labels seen.
// ok is false when the family is absent or has no samples.
func sumGauge(name string, series []sample, engines map[string]struct{}) (float64, bool, error) {
	if len(series) == 0 {
		return 0, false, nil
	}
	var sum float64
	for _, s := range series {
		if !s.isValue {
			continue
		}
		v := s.value
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return 0, false, fmt.Errorf("%s: value %v out of range", name, v)
		}
		sum += v
		engines[s.engine] = struct{}{}
	}
	if sum > math.MaxInt32 {
		return 0, false, fmt.Errorf("%s: value %v out of range", name, sum)
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
