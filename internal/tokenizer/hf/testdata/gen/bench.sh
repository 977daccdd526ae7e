#!/usr/bin/env bash
# Tokenization throughput, Go vs the reference (Hugging Face's Rust
# tokenizers through its Node binding), on the same texts, in one run.
# MB/s is per core: the Go benchmark runs with GOMAXPROCS=1 and the
# reference with one libuv worker thread.
set -euo pipefail
cd "$(dirname "$0")/../../../../.."
scripts/testdata.sh --reference
echo "== Go (internal/tokenizer/hf, GOMAXPROCS=1)"
GOMAXPROCS=1 go test -run '^$' -bench 'BenchmarkEncode' -benchtime 2s ./internal/tokenizer/hf/ | grep '^Benchmark'
echo "== Reference (@anush008/tokenizers = HF tokenizers 0.22, one worker thread)"
UV_THREADPOOL_SIZE=1 node internal/tokenizer/hf/testdata/gen/bench.js
