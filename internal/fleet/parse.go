package fleet

import (
	"fmt"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// Defaults fill what a flag entry leaves out: the kvtracker's --pool,
// --model, --topic and --block-size (the router sets none).
type Defaults struct {
	Pool      string
	Model     string
	Topic     string
	BlockSize int
}

// Apply fills what w leaves out from d (for workers given in code, as
// the parsers do for theirs).
func (d Defaults) Apply(w *Worker) {
	if w.Pool == "" {
		w.Pool = d.Pool
	}
	if len(w.Models) == 0 && d.Model != "" {
		w.Models = []string{d.Model}
	}
	if w.Topic == "" {
		w.Topic = d.Topic
	}
	if w.BlockSize == 0 {
		w.BlockSize = d.BlockSize
	}
}

// ShorthandSyntax documents ParseShorthand for flag usages.
const ShorthandSyntax = `id=target[|target...][,...], a target being the worker's API (http:// or https://), or its KV event endpoint then its replay endpoint (tcp://, ipc:// or inproc://)`

// ParseShorthand reads the one-line form of a worker list, which the
// router's --endpoints and the kvtracker's --workers share:
//
//	id=target[|target...][,id=target...]
//
// Each target is told by its scheme: http:// or https:// is the worker's
// API (URL); the first tcp://, ipc:// or inproc:// is its KV event
// endpoint, the second its replay endpoint. So the router's
// "sim-0=http://10.0.0.5:8000", the kvtracker's
// "sim-0=tcp://10.0.0.5:5557|tcp://10.0.0.5:5567", and
// "sim-0=http://10.0.0.5:8000|tcp://10.0.0.5:5557|tcp://10.0.0.5:5567" for
// both are all one syntax. An entry without a KV endpoint ("id=" or
// "id=http://...") has its id as topic: a kvtracker with --bind tells it
// apart by it. Blank entries and targets are ignored, so a trailing comma
// is harmless. Pool, model, topic (of dialled workers) and block size come
// from d.
func ParseShorthand(s string, d Defaults) ([]Worker, error) {
	var ws []Worker
	x := newIndex()
	n := 0
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		n++
		label := "entry " + strconv.Itoa(n)
		id, targets, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("%s %q: want %s", label, part, ShorthandSyntax)
		}
		w := Worker{ID: strings.TrimSpace(id)}
		zmq := 0
		for t := range strings.SplitSeq(targets, "|") {
			t = strings.TrimSpace(t)
			switch scheme, _, _ := strings.Cut(t, "://"); {
			case t == "":
			case scheme == "http" || scheme == "https":
				if w.URL != "" {
					return nil, fmt.Errorf("%s %q: two urls (%s and %s)", label, part, w.URL, t)
				}
				w.URL = t
			case scheme == "tcp" || scheme == "ipc" || scheme == "inproc":
				zmq++
				switch zmq {
				case 1:
					w.KVEndpoint = t
				case 2:
					w.ReplayEndpoint = t
				default:
					return nil, fmt.Errorf("%s %q: more than two zmq endpoints (the KV event endpoint, then the replay endpoint)", label, part)
				}
			default:
				return nil, fmt.Errorf("%s %q: target %q: want http:// or https:// (the worker's API), or tcp://, ipc:// or inproc:// (its KV events, then its replay socket)", label, part, t)
			}
		}
		if w.KVEndpoint == "" {
			w.Topic = w.ID
		}
		d.Apply(&w)
		norm, err := normalize(w)
		if err != nil {
			return nil, at(label, err)
		}
		if err := x.addWorker(&norm, label); err != nil {
			return nil, err
		}
		ws = append(ws, norm)
	}
	return ws, nil
}

// YAMLKeys documents ParseYAML's entry keys for flag usages.
const YAMLKeys = "[{id, pool, url, models (or model), metricsPath, kvEndpoint, replayEndpoint, topic, blockSize, gpuBlocks}]"

// entry is one worker in YAML. Unknown keys are errors, so a misspelt one
// is not silently ignored.
type entry struct {
	ID    string `json:"id"`
	Pool  string `json:"pool,omitempty"`
	URL   string `json:"url,omitempty"`
	Model string `json:"model,omitempty"`
	// Models lists several served names; model is the one-name form.
	Models         []string `json:"models,omitempty"`
	MetricsPath    string   `json:"metricsPath,omitempty"`
	KVEndpoint     string   `json:"kvEndpoint,omitempty"`
	ReplayEndpoint string   `json:"replayEndpoint,omitempty"`
	Topic          string   `json:"topic,omitempty"`
	BlockSize      int      `json:"blockSize,omitempty"`
	GPUBlocks      int      `json:"gpuBlocks,omitempty"`
	// Kind is accepted for endpoint files written for the router, whose
	// only kind was "local".
	Kind string `json:"kind,omitempty"`
}

// ParseYAML reads a YAML (or JSON) list of workers, the format of both
// --endpoints-file and --workers-file:
//
//	# every key but id is optional
//	- id: sim-0
//	  pool: gpu-a            # default: d.Pool, else "default"
//	  url: http://10.0.0.5:8000
//	  models: [qwen3-8b]     # or model: qwen3-8b; none: the router asks /v1/models
//	  metricsPath: /metrics
//	  kvEndpoint: tcp://10.0.0.5:5557
//	  replayEndpoint: tcp://10.0.0.5:5567
//	  topic: kv
//	  blockSize: 16
//	  gpuBlocks: 4096
//
// Errors name the entry and key ("[1].kvEndpoint: ...").
func ParseYAML(data []byte, d Defaults) ([]Worker, error) {
	var raw []entry
	if err := yaml.UnmarshalStrict(data, &raw); err != nil {
		return nil, fmt.Errorf("parse workers yaml: %w", err)
	}
	ws := make([]Worker, 0, len(raw))
	x := newIndex()
	for i, e := range raw {
		label := "[" + strconv.Itoa(i) + "]"
		w, err := e.worker()
		if err == nil {
			d.Apply(&w)
			w, err = normalize(w)
		}
		if err != nil {
			return nil, at(label, err)
		}
		if err := x.addWorker(&w, label); err != nil {
			return nil, err
		}
		ws = append(ws, w)
	}
	return ws, nil
}

func (e *entry) worker() (Worker, error) {
	if e.Kind != "" && e.Kind != "local" {
		return Worker{}, fieldErr("kind", fmt.Errorf("%q: only local workers are listed here (providers come from policyd)", e.Kind))
	}
	models := e.Models
	if e.Model != "" {
		if len(models) > 0 {
			return Worker{}, fieldErr("model", fmt.Errorf("set model or models, not both"))
		}
		models = []string{e.Model}
	}
	return Worker{
		ID: e.ID, Pool: e.Pool, URL: e.URL, Models: models, MetricsPath: e.MetricsPath,
		KVEndpoint: e.KVEndpoint, ReplayEndpoint: e.ReplayEndpoint, Topic: e.Topic,
		BlockSize: e.BlockSize, GPUBlocks: e.GPUBlocks,
	}, nil
}
