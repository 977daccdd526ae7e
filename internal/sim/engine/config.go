package engine

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Config sizes the engine like `vllm serve` does. Zero values are not
// defaults: start from DefaultConfig.
type Config struct {
	// BlockSize is the number of tokens per KV block (vLLM --block-size).
	BlockSize int
	// NumGPUBlocks is the size of the block pool, including the null block
	// vLLM reserves (so NumGPUBlocks-1 blocks hold tokens), as vLLM reports
	// it in cache_config_info.
	NumGPUBlocks int
	// MaxNumSeqs caps running requests (vLLM --max-num-seqs).
	MaxNumSeqs int
	// MaxNumBatchedTokens is the per-step token budget shared by decodes
	// and prefill chunks (vLLM --max-num-batched-tokens).
	MaxNumBatchedTokens int
	// MaxModelLen caps prompt plus completion tokens (vLLM --max-model-len).
	MaxModelLen int
	// Perf prices a step.
	Perf Perf
	// Seed selects the generated text (vLLM --seed seeds sampling).
	Seed uint64
	// HashSeed seeds the block hash chain, like PYTHONHASHSEED does in
	// vLLM. Empty means a random seed per engine, which is vLLM's default:
	// engine block hashes then differ between workers and restarts, and
	// consumers must not rely on them.
	HashSeed string
}

// Perf is the cost model of one engine step:
//
//	step = StepBase + prefill_tokens×PrefillToken + decode_seqs×DecodeSeq
//	       + kv_tokens_read×KVReadToken
//
// where prefill_tokens are the tokens of prefill chunks scheduled in the step
// (uncached prompt tokens, or recomputed ones after preemption), decode_seqs
// the requests decoding one token, and kv_tokens_read the context tokens
// whose KV the step's attention reads (each scheduled request's tokens
// computed before the step).
type Perf struct {
	StepBase     time.Duration
	PrefillToken time.Duration
	DecodeSeq    time.Duration
	KVReadToken  time.Duration
}

// Hardware is what the default performance model and pool size are derived
// from. Every figure is an estimate; the derivation is in the comment of
// L40S27BFP8.
type Hardware struct {
	GPUMemoryBytes  float64 // device memory as the driver reports it
	WeightBytes     float64 // model weights resident on the GPU
	OverheadBytes   float64 // activation peak of a max-size step, CUDA graphs, non-torch memory
	KVBytesPerToken float64 // K and V of every layer for one token
	PeakFLOPS       float64 // dense tensor throughput at the weights' precision
	PrefillMFU      float64 // fraction of PeakFLOPS a large prefill achieves
	MemBandwidth    float64 // bytes/s
	FLOPsPerToken   float64 // forward pass of one token through the linear layers (≈ 2 × params)
}

// L40S27BFP8 models a 27B-parameter model with FP8 weights on one 48 GB
// L40S-class GPU, the reference benchmark's setup.
//
//   - Memory. The L40S reports 46,068 MiB (48.3 GB). FP8 weights take about
//     one byte per parameter: 27 GB. vLLM's profiling run at 8192 batched
//     tokens plus CUDA graphs and non-torch allocations take about 2 GB.
//     With gpu_memory_utilization 0.9 the KV cache gets
//     48.3×0.9 − 27 − 2 ≈ 14.5 GB.
//   - KV per token. A typical 27B GQA shape (Gemma-3-27B: 62 layers, 16 KV
//     heads of dimension 128) with a bf16 KV cache (vLLM's "auto" for an
//     FP8-weight checkpoint): 2 (K,V) × 62 × 16 × 128 × 2 B = 507,904 B
//     ≈ 0.5 MB. Gemma's sliding-window layers would need less, but vLLM
//     disables the hybrid KV cache manager when KV events are on, so every
//     layer stores full-length KV — the regime a KV-event router sees.
//   - Pool. 14.5 GB / (16 tokens × 507,904 B) = 1,781 blocks of 16 tokens,
//     about 28.5k tokens: a handful of long prompts. This scarcity is what
//     makes cache-aware routing matter.
//   - Prefill. 362 dense FP8 TFLOPs at ~40% MFU over 2 × 27e9 FLOPs per
//     token ≈ 2,700 tokens/s: PrefillToken ≈ 0.37 ms, so an 8k-token prompt
//     alone costs ≈ 3 s. A full 8192-token step takes ≈ 3.1 s.
//   - Decode. A decode step streams all weights once: 27 GB / 864 GB/s
//     ≈ 31 ms (StepBase). Each decoding sequence adds its GEMM work at peak
//     rate (54 GFLOPs / 362 TFLOPs ≈ 0.15 ms; at decode batch sizes the
//     GEMMs are memory-bound, so most of it hides under the weight stream)
//     and reads its context's KV: 507,904 B / 864 GB/s ≈ 0.59 µs per token
//     (KVReadToken), e.g. 4.8 ms per step for an 8k context.
//
// Resulting regime: a cold 8k prompt behind a few others queues for several
// seconds (the reference Service baseline's median TTFT was 6.9 s on long
// shared-prefix prompts at concurrency), while a prompt whose prefix is
// cached pays only its suffix plus the step it joins, a few hundred
// milliseconds (the reference router's 0.31 s).
var L40S27BFP8 = Hardware{
	GPUMemoryBytes:  46068 * (1 << 20),
	WeightBytes:     27e9,
	OverheadBytes:   2e9,
	KVBytesPerToken: 2 * 62 * 16 * 128 * 2,
	PeakFLOPS:       362e12,
	PrefillMFU:      0.4,
	MemBandwidth:    864e9,
	FLOPsPerToken:   2 * 27e9,
}

// Perf derives the step cost model.
func (h Hardware) Perf() Perf {
	sec := func(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }
	return Perf{
		StepBase:     sec(h.WeightBytes / h.MemBandwidth),
		PrefillToken: sec(h.FLOPsPerToken / (h.PeakFLOPS * h.PrefillMFU)),
		DecodeSeq:    sec(h.FLOPsPerToken / h.PeakFLOPS),
		KVReadToken:  sec(h.KVBytesPerToken / h.MemBandwidth),
	}
}

// NumGPUBlocks derives the pool size the way vLLM sizes it: the memory left
// under gpuMemoryUtilization after weights and the profiled overhead,
// divided by the bytes of one block.
func (h Hardware) NumGPUBlocks(gpuMemoryUtilization float64, blockSize int) int {
	free := h.GPUMemoryBytes*gpuMemoryUtilization - h.WeightBytes - h.OverheadBytes
	if free <= 0 || blockSize <= 0 {
		return 0
	}
	return int(free / (h.KVBytesPerToken * float64(blockSize)))
}

// Defaults that mirror vLLM's.
const (
	DefaultBlockSize            = 16
	DefaultGPUMemoryUtilization = 0.9
	// DefaultMaxNumSeqs and DefaultMaxNumBatchedTokens are vLLM v1's
	// defaults for `vllm serve` on a data-centre GPU.
	DefaultMaxNumSeqs          = 256
	DefaultMaxNumBatchedTokens = 8192
	// DefaultMaxModelLen is what a deployment of this model on this GPU
	// would set: vLLM refuses to start when max_model_len exceeds the KV
	// capacity (~28k tokens here), and 16k leaves room for two long
	// requests at once.
	DefaultMaxModelLen = 16384
)

// DefaultConfig is the L40S27BFP8 worker.
func DefaultConfig() Config {
	return Config{
		BlockSize:           DefaultBlockSize,
		NumGPUBlocks:        L40S27BFP8.NumGPUBlocks(DefaultGPUMemoryUtilization, DefaultBlockSize),
		MaxNumSeqs:          DefaultMaxNumSeqs,
		MaxNumBatchedTokens: DefaultMaxNumBatchedTokens,
		MaxModelLen:         DefaultMaxModelLen,
		Perf:                L40S27BFP8.Perf(),
	}
}

// Validate reports the first setting vLLM would refuse, with its reason.
func (c Config) Validate() error {
	switch {
	case c.BlockSize < 1:
		return fmt.Errorf("block size %d: must be at least 1", c.BlockSize)
	case c.NumGPUBlocks < 2:
		return fmt.Errorf("num gpu blocks %d: need at least 2 (one is vLLM's reserved null block)", c.NumGPUBlocks)
	case c.MaxNumSeqs < 1:
		return fmt.Errorf("max num seqs %d: must be at least 1", c.MaxNumSeqs)
	case c.MaxNumBatchedTokens < c.MaxNumSeqs:
		return fmt.Errorf("max num batched tokens %d must be at least max num seqs %d", c.MaxNumBatchedTokens, c.MaxNumSeqs)
	case c.MaxModelLen < 1:
		return fmt.Errorf("max model len %d: must be at least 1", c.MaxModelLen)
	case c.MaxModelLen > (c.NumGPUBlocks-1)*c.BlockSize:
		return fmt.Errorf("max model len %d is larger than the KV cache can hold (%d blocks × %d = %d tokens): lower it or add blocks",
			c.MaxModelLen, c.NumGPUBlocks-1, c.BlockSize, (c.NumGPUBlocks-1)*c.BlockSize)
	case c.Perf.StepBase < 0 || c.Perf.PrefillToken < 0 || c.Perf.DecodeSeq < 0 || c.Perf.KVReadToken < 0:
		return errors.New("performance model costs must not be negative")
	case c.Perf.StepBase+c.Perf.PrefillToken+c.Perf.DecodeSeq <= 0:
		return errors.New("performance model: a step must cost some time (set a step base or per-token cost)")
	}
	return nil
}
