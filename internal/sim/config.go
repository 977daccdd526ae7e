package sim

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/internal/sim/engine"
	"github.com/switchyard-dev/switchyard/internal/tokenizer"
	"github.com/switchyard-dev/switchyard/internal/tokenizer/hf"
	"github.com/switchyard-dev/switchyard/internal/vllm/kvevents"
	"github.com/switchyard-dev/switchyard/internal/vllm/kvzmq"
)

// Config is `switchyard sim`. Flags mirror `vllm serve` where vLLM has the
// knob; simulator-only flags are named for what they do (time-scale,
// workers) or carry a sim- prefix (the performance model).
type Config struct {
	Host string
	// Port of the first worker; worker i listens on Port+i. 0 picks free
	// ports (tests).
	Port int
	// ServedModelName is a comma-separated list of names the workers
	// answer to; the first is the one metrics and responses carry.
	ServedModelName      string
	BlockSize            int
	MaxNumSeqs           int
	MaxNumBatchedTokens  int
	MaxModelLen          int
	NumGPUBlocksOverride int
	GPUMemoryUtilization float64
	// KVEventsConfig is vLLM's --kv-events-config JSON; empty disables
	// events.
	KVEventsConfig string
	// EnablePromptTokensDetails reports usage.prompt_tokens_details
	// (cached_tokens). vLLM's default is off; the simulator's is on,
	// because cached tokens are what it exists to show.
	EnablePromptTokensDetails bool
	// Seed selects generated text (vLLM --seed seeds sampling).
	Seed int64
	// Tokenizer is a Hugging Face model directory (tokenizer.json,
	// tokenizer_config.json) to tokenize and render chats with, as vLLM's
	// --tokenizer; empty uses the simulator's simple tokenizer.
	Tokenizer string

	// Simulator only.

	// KVEventsEncoding is "map" (newest vLLM) or "array" (older vLLM),
	// optionally with kvevents modifiers for older layouts
	// ("array+no-medium+signed-hashes"); see kvevents.ParseEncoding.
	KVEventsEncoding string
	// KVReplayFormat is how the replay socket frames its replies:
	// kvzmq.ReplayTopic (vLLM since #45177, and llm-d-inference-sim:
	// [topic, seq, payload] after the identity and delimiter) or
	// kvzmq.ReplayLegacy (older vLLM: [seq, payload]).
	KVReplayFormat string
	// Workers is how many simulated vLLM servers to start, on consecutive
	// HTTP ports and consecutive KV event and replay ports.
	Workers int
	// TimeScale runs model time this many times faster than the wall.
	TimeScale float64
	// HashSeed seeds engine block hashes, like PYTHONHASHSEED for vLLM;
	// empty is a random seed per worker, as in vLLM.
	HashSeed string
	// DefaultMaxTokens is the completion length when a request sets none
	// (the simulator has no EOS; vLLM would run to max_model_len).
	DefaultMaxTokens int
	// Performance model; see engine.Perf and engine.L40S27BFP8.
	StepBase, PrefillTokenTime, DecodeSeqTime, KVReadTokenTime time.Duration
	// ShutdownTimeout bounds the drain of in-flight requests.
	ShutdownTimeout time.Duration
}

// Defaults.
const (
	DefaultHost             = "127.0.0.1"
	DefaultPort             = 8000
	DefaultServedModelName  = "qwen-3.6-27b"
	DefaultMaxTokens        = 256
	DefaultShutdownTimeout  = 10 * time.Second
	DefaultKVEventsEncoding = "map"
	DefaultKVReplayFormat   = kvzmq.ReplayTopic
)

// DefaultConfig is the configuration RegisterFlags starts from.
func DefaultConfig() Config {
	ec := engine.DefaultConfig()
	return Config{
		Host:                      DefaultHost,
		Port:                      DefaultPort,
		ServedModelName:           DefaultServedModelName,
		BlockSize:                 ec.BlockSize,
		MaxNumSeqs:                ec.MaxNumSeqs,
		MaxNumBatchedTokens:       ec.MaxNumBatchedTokens,
		MaxModelLen:               ec.MaxModelLen,
		GPUMemoryUtilization:      engine.DefaultGPUMemoryUtilization,
		EnablePromptTokensDetails: true,
		KVEventsEncoding:          DefaultKVEventsEncoding,
		KVReplayFormat:            DefaultKVReplayFormat,
		Workers:                   1,
		TimeScale:                 1,
		DefaultMaxTokens:          DefaultMaxTokens,
		StepBase:                  ec.Perf.StepBase,
		PrefillTokenTime:          ec.Perf.PrefillToken,
		DecodeSeqTime:             ec.Perf.DecodeSeq,
		KVReadTokenTime:           ec.Perf.KVReadToken,
		ShutdownTimeout:           DefaultShutdownTimeout,
	}
}

// RegisterFlags registers the flags with DefaultConfig's values.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	fs.StringVar(&c.Host, "host", d.Host, "address to listen on")
	fs.IntVar(&c.Port, "port", d.Port, "HTTP port of the first worker (worker i uses port+i; 0 picks free ports)")
	fs.StringVar(&c.ServedModelName, "served-model-name", d.ServedModelName, "model names served, comma-separated; the first is reported in responses and metrics")
	fs.IntVar(&c.BlockSize, "block-size", d.BlockSize, "tokens per KV cache block")
	fs.IntVar(&c.MaxNumSeqs, "max-num-seqs", d.MaxNumSeqs, "maximum running requests per step")
	fs.IntVar(&c.MaxNumBatchedTokens, "max-num-batched-tokens", d.MaxNumBatchedTokens, "token budget of one step (decodes and prefill chunks)")
	fs.IntVar(&c.MaxModelLen, "max-model-len", d.MaxModelLen, "maximum prompt plus completion tokens")
	fs.IntVar(&c.NumGPUBlocksOverride, "num-gpu-blocks-override", 0, "KV cache blocks, overriding the size derived from GPU memory (0: derive)")
	fs.Float64Var(&c.GPUMemoryUtilization, "gpu-memory-utilization", d.GPUMemoryUtilization, "fraction of the simulated 48 GB GPU vLLM may use (sizes the KV cache)")
	fs.StringVar(&c.KVEventsConfig, "kv-events-config", "", `vLLM KV events config JSON, e.g. {"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557","replay_endpoint":"tcp://*:5567"}`)
	fs.BoolVar(&c.EnablePromptTokensDetails, "enable-prompt-tokens-details", d.EnablePromptTokensDetails, "report usage.prompt_tokens_details.cached_tokens (vLLM does only when given this flag)")
	fs.Int64Var(&c.Seed, "seed", 0, "seed of the generated text")
	fs.StringVar(&c.Tokenizer, "tokenizer", "", "Hugging Face tokenizer directory (tokenizer.json + tokenizer_config.json); empty: the simulator's simple tokenizer")
	fs.StringVar(&c.KVEventsEncoding, "kv-events-encoding", d.KVEventsEncoding, "sim: KV event payload encoding: map (newest vLLM: map events in the array batch) or array (older vLLM), with optional +signed-hashes, +byte-hashes, +no-medium, +no-lora-name")
	fs.StringVar(&c.KVReplayFormat, "kv-replay-format", d.KVReplayFormat, "sim: KV event replay reply frames: topic (newest vLLM, since #45177: [topic, seq, payload]) or legacy (older vLLM: [seq, payload])")
	fs.IntVar(&c.Workers, "workers", d.Workers, "sim: number of simulated vLLM workers")
	fs.Float64Var(&c.TimeScale, "time-scale", d.TimeScale, "sim: run model time this many times faster than real time")
	fs.StringVar(&c.HashSeed, "sim-hash-seed", "", "sim: seed of engine block hashes, like PYTHONHASHSEED (empty: random per worker, as vLLM)")
	fs.IntVar(&c.DefaultMaxTokens, "default-max-tokens", d.DefaultMaxTokens, "sim: completion tokens when a request sets no limit")
	fs.DurationVar(&c.StepBase, "sim-step-base", d.StepBase, "sim: fixed cost of an engine step (weights read once)")
	fs.DurationVar(&c.PrefillTokenTime, "sim-prefill-token-time", d.PrefillTokenTime, "sim: cost per prefill token in a step")
	fs.DurationVar(&c.DecodeSeqTime, "sim-decode-seq-time", d.DecodeSeqTime, "sim: cost per decoding sequence in a step")
	fs.DurationVar(&c.KVReadTokenTime, "sim-kv-read-token-time", d.KVReadTokenTime, "sim: cost per context token whose KV a step reads")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", d.ShutdownTimeout, "how long shutdown waits for in-flight requests")
}

// Models is the served model names.
func (c Config) Models() []string {
	var out []string
	for _, n := range strings.Split(c.ServedModelName, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// Engine is the engine configuration the flags describe.
func (c Config) Engine() engine.Config {
	blocks := c.NumGPUBlocksOverride
	if blocks <= 0 {
		blocks = engine.L40S27BFP8.NumGPUBlocks(c.GPUMemoryUtilization, c.BlockSize)
	}
	return engine.Config{
		BlockSize:           c.BlockSize,
		NumGPUBlocks:        blocks,
		MaxNumSeqs:          c.MaxNumSeqs,
		MaxNumBatchedTokens: c.MaxNumBatchedTokens,
		MaxModelLen:         c.MaxModelLen,
		Perf: engine.Perf{
			StepBase:     c.StepBase,
			PrefillToken: c.PrefillTokenTime,
			DecodeSeq:    c.DecodeSeqTime,
			KVReadToken:  c.KVReadTokenTime,
		},
		Seed:     uint64(c.Seed),
		HashSeed: c.HashSeed,
	}
}

func (c Config) encoding() (kvevents.Encoding, error) {
	return kvevents.ParseEncoding(c.KVEventsEncoding)
}

// kvEvents parses the KV events config; ok is false when events are off.
func (c Config) kvEvents() (kvzmq.Config, bool, error) {
	if strings.TrimSpace(c.KVEventsConfig) == "" {
		return kvzmq.Config{}, false, nil
	}
	kc, err := kvzmq.ParseConfig(c.KVEventsConfig)
	if err != nil {
		return kvzmq.Config{}, false, err
	}
	return kc, kc.Enabled(), nil
}

// Validate checks the configuration and says what to change.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Host == "" {
		bad("--host: must not be empty")
	}
	if c.Workers < 1 {
		bad("--workers %d: need at least 1", c.Workers)
	}
	if c.Port < 0 || c.Port > 65535 || (c.Port > 0 && c.Port+max(c.Workers, 1)-1 > 65535) {
		bad("--port %d: worker ports must fit in 1-65535 (or 0 for free ports)", c.Port)
	}
	if len(c.Models()) == 0 {
		bad("--served-model-name: need at least one name")
	}
	if c.GPUMemoryUtilization <= 0 || c.GPUMemoryUtilization > 1 {
		bad("--gpu-memory-utilization %v: want a fraction in (0, 1]", c.GPUMemoryUtilization)
	}
	if c.NumGPUBlocksOverride < 0 {
		bad("--num-gpu-blocks-override %d: must not be negative", c.NumGPUBlocksOverride)
	}
	if c.TimeScale <= 0 {
		bad("--time-scale %v: must be positive", c.TimeScale)
	}
	if c.DefaultMaxTokens < 1 {
		bad("--default-max-tokens %d: need at least 1", c.DefaultMaxTokens)
	}
	if c.ShutdownTimeout <= 0 {
		bad("--shutdown-timeout %v: must be positive", c.ShutdownTimeout)
	}
	if _, err := c.encoding(); err != nil {
		bad("--kv-events-encoding: %w", err)
	}
	switch c.KVReplayFormat {
	case kvzmq.ReplayTopic, kvzmq.ReplayLegacy:
	default:
		bad("--kv-replay-format %q: want %s (vLLM since #45177, replies [topic, seq, payload]) or %s (older vLLM, [seq, payload])",
			c.KVReplayFormat, kvzmq.ReplayTopic, kvzmq.ReplayLegacy)
	}
	if _, _, err := c.kvEvents(); err != nil {
		bad("--kv-events-config: %w", err)
	}
	if err := c.Engine().Validate(); err != nil {
		bad("engine: %w", err)
	}
	return errors.Join(errs...)
}

// loadTokenizer loads --tokenizer once for every worker of the fleet.
func (c Config) loadTokenizer() (tokenizer.Tokenizer, error) {
	if c.Tokenizer == "" {
		return tokenizer.NewSimple(), nil
	}
	t, err := hf.LoadDir(c.Tokenizer)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return t, nil
}
