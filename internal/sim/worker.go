package sim

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/sim/engine"
	"github.com/switchyard-dev/switchyard/internal/tokenizer"
	"github.com/switchyard-dev/switchyard/internal/vllm/kvevents"
	"github.com/switchyard-dev/switchyard/internal/vllm/kvzmq"
)

// worker is one simulated vLLM server: an engine, its HTTP API, its
// metrics and its KV event publisher.
type worker struct {
	id      int
	cfg     *Config
	models  []string
	eng     *engine.Engine
	tok     tokenizer.Tokenizer
	metrics *metrics
	pub     *kvzmq.Publisher // nil without KV events
	ln      net.Listener
	srv     *http.Server
	ready   atomic.Bool
	created int64
	log     zerolog.Logger
	freezer freezer
}

// newWorker builds worker id and binds its listener; nothing runs yet.
func newWorker(id int, cfg *Config, tok tokenizer.Tokenizer, log zerolog.Logger) (_ *worker, err error) {
	log = log.With().Int("worker", id).Logger()
	ec := cfg.Engine()
	w := &worker{
		id:      id,
		cfg:     cfg,
		models:  cfg.Models(),
		tok:     tok,
		created: time.Now().Unix(),
		log:     log,
	}
	w.metrics = newMetrics(w.models[0], cacheInfo{
		blockSize:            ec.BlockSize,
		numGPUBlocks:         ec.NumGPUBlocks,
		numGPUBlocksOverride: cfg.NumGPUBlocksOverride,
		gpuMemoryUtilization: cfg.GPUMemoryUtilization,
	}, func() engine.Stats { return w.eng.Stats() })

	opts := engine.Options{
		Clock:            frozenClock{engine.NewScaledClock(cfg.TimeScale), &w.freezer},
		Observer:         w.metrics,
		Log:              log,
		GenerationTokens: w.tok.Encode(tokenizer.SampleText),
	}
	kc, enabled, err := cfg.kvEvents()
	if err != nil {
		return nil, err
	}
	if enabled {
		if kc.Endpoint, err = offsetEndpoint(kc.Endpoint, id); err != nil {
			return nil, err
		}
		if kc.ReplayEndpoint, err = offsetEndpoint(kc.ReplayEndpoint, id); err != nil {
			return nil, err
		}
		// KV events carry prompts' token ids: a simulator on a laptop binds
		// vLLM's wildcard endpoints on its --host, as it does its HTTP port.
		kc.BindHost = cfg.Host
		kc.ReplayFormat = cfg.KVReplayFormat
		var enc kvevents.Encoding
		if enc, err = cfg.encoding(); err != nil {
			return nil, err
		}
		if w.pub, err = kvzmq.NewPublisher(kc, enc, log); err != nil {
			return nil, fmt.Errorf("worker %d kv events: %w", id, err)
		}
		defer func() {
			if err != nil {
				_ = w.pub.Close()
			}
		}()
		opts.Sink = w.pub
	}
	if w.eng, err = engine.New(ec, opts); err != nil {
		return nil, err
	}

	port := 0
	if cfg.Port != 0 {
		port = cfg.Port + id
	}
	if w.ln, err = net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(port))); err != nil {
		return nil, fmt.Errorf("worker %d listen: %w", id, err)
	}
	w.srv = &http.Server{Handler: w.routes(), ReadHeaderTimeout: 10 * time.Second}
	return w, nil
}

// offsetEndpoint gives worker id its own port, as vLLM's data-parallel
// ranks get theirs. A "*" port already binds a fresh port per worker.
func offsetEndpoint(ep string, id int) (string, error) {
	if ep == "" || strings.HasSuffix(ep, ":*") {
		return ep, nil
	}
	return kvzmq.OffsetEndpointPort(ep, id)
}

func (w *worker) url() string { return "http://" + w.ln.Addr().String() }

func (w *worker) info() WorkerInfo {
	wi := WorkerInfo{ID: w.id, URL: w.url(), Model: w.models[0]}
	if w.pub != nil {
		wi.KVEndpoint, wi.ReplayEndpoint = w.pub.Endpoint(), w.pub.ReplayEndpoint()
	}
	return wi
}

func (w *worker) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /sim/v1/fault", w.handleFault)
	api := http.NewServeMux()
	mux.Handle("/", w.frozen(api))
	w.apiRoutes(api)
	return mux
}

func (w *worker) apiRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/chat/completions", w.handleChat)
	mux.HandleFunc("POST /v1/completions", w.handleCompletions)
	mux.HandleFunc("POST /tokenize", w.handleTokenize)
	mux.HandleFunc("GET /v1/models", w.handleModels)
	mux.HandleFunc("GET /health", w.handleHealth)
	mux.HandleFunc("POST /reset_prefix_cache", w.handleResetPrefixCache)
	mux.Handle("GET /metrics", promhttp.HandlerFor(w.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("POST /sim/v1/estimate", w.handleEstimate)
}

// serves reports whether model names this worker's model; an empty name
// means the default model, as vLLM allows.
func (w *worker) serves(model string) bool {
	if model == "" {
		return true
	}
	for _, m := range w.models {
		if m == model {
			return true
		}
	}
	return false
}
