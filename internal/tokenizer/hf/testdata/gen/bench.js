// Reference throughput: Hugging Face's Rust tokenizers (via its Node binding)
// on the same texts BenchmarkEncode uses, one encode at a time on one worker
// thread (run with UV_THREADPOOL_SIZE=1; bench.sh does).
"use strict";

const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");

const repo = path.resolve(__dirname, "../../../../..");
const cache = process.env.TESTDATA_CACHE || path.join(repo, "testdata-cache");
const { Tokenizer } = createRequire(path.join(cache, "node", "package.json"))("@anush008/tokenizers");

function benchText(name) {
  const data = fs.readFileSync(path.join(__dirname, "..", "bench", name + ".txt"), "utf8");
  const n = Buffer.byteLength(data);
  return data.repeat(Math.floor((256 << 10) / n) + 1);
}

// chunks cuts text into pieces of about n UTF-8 bytes, at the same byte
// offsets as the Go benchmark's chunks().
function chunks(text, n) {
  const buf = Buffer.from(text, "utf8");
  const out = [];
  let start = 0;
  while (buf.length - start > n) {
    let cut = start + n;
    while (cut > start && (buf[cut] & 0xc0) === 0x80) cut--;
    out.push(buf.subarray(start, cut).toString("utf8"));
    start = cut;
  }
  out.push(buf.subarray(start).toString("utf8"));
  return out;
}

async function main() {
  for (const model of ["qwen3", "llama3_1", "deepseek_v3", "gptoss", "gemma3", "llama2",
    "mistral_nemo", "gemma2", "gemma", "yi", "internlm2", "claude",
    "llama2_metaspace", "llama2_metaspace_legacy", "llama2_unigram", "llama2_unigram_unk",
    "bert_base_uncased", "bert_options", "bert_raw"]) {
    // BENCH_MODELS=a,b runs only those (to pair with go test -bench 'BenchmarkEncode/(a|b)/').
    if (process.env.BENCH_MODELS && !process.env.BENCH_MODELS.split(",").includes(model)) continue;
    const tok = Tokenizer.fromFile(path.join(cache, "tokenizers", model, "tokenizer.json"));
    for (const variant of ["english", "japanese", "english/4k", "japanese/4k"]) {
      const [name, chunked] = variant.split("/");
      const text = benchText(name);
      const bytes = Buffer.byteLength(text);
      const pieces = chunked ? chunks(text, 4096) : [text];
      await tok.encode(text, null, { addSpecialTokens: false }); // warm its cache too
      let n = 0;
      const start = process.hrtime.bigint();
      let elapsed = 0;
      while (elapsed < 2e9) {
        for (const p of pieces) await tok.encode(p, null, { addSpecialTokens: false });
        n++;
        elapsed = Number(process.hrtime.bigint() - start);
      }
      const nsPerOp = elapsed / n;
      console.log(`Reference/${model}/${variant}\t${n}\t${nsPerOp.toFixed(0)} ns/op\t${((bytes / nsPerOp) * 1e3).toFixed(2)} MB/s`);
    }
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
