// Writes the token-id goldens for internal/tokenizer/hf with the reference
// implementation: Hugging Face's Rust tokenizers (@anush008/tokenizers, a
// native Node binding of tokenizers 0.22).
//
//   scripts/testdata.sh --reference
//   node internal/tokenizer/hf/testdata/gen/gen_tokens.js
//
// For each fixture tokenizer it writes testdata/golden/<name>.json: every
// corpus text with its ids without special tokens (how vLLM encodes a
// rendered chat prompt) and with them (a completions prompt).
"use strict";

const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");

const repo = path.resolve(__dirname, "../../../../..");
const cache = process.env.TESTDATA_CACHE || path.join(repo, "testdata-cache");
const { Tokenizer } = createRequire(path.join(cache, "node", "package.json"))("@anush008/tokenizers");
const corpus = require("./corpus.js");

async function main() {
  const outDir = path.resolve(__dirname, "../golden");
  fs.mkdirSync(outDir, { recursive: true });
  for (const name of ["qwen3", "llama3_1", "deepseek_v3", "gptoss", "gemma3", "llama2", "mistral_nemo", "gemma2", "gemma", "yi", "internlm2", "claude"]) {
    const tok = Tokenizer.fromFile(path.join(cache, "tokenizers", name, "tokenizer.json"));
    const cases = [];
    for (const c of corpus.cases()) {
      const plain = await tok.encode(c.text, null, { addSpecialTokens: false });
      const special = await tok.encode(c.text, null, { addSpecialTokens: true });
      const cs = { name: c.name, text: c.text, ids: plain.getIds(), ids_special: special.getIds() };
      // SentencePiece-style decoders do not give the text back as it was
      // (the normalizer's "▁", Llama 2's stripped space), nor does NFKC
      // (claude): keep theirs.
      if (["gemma3", "llama2", "gemma2", "gemma", "yi", "internlm2", "claude"].includes(name)) cs.decoded = await tok.decode(cs.ids, false);
      cases.push(cs);
    }
    const file = path.join(outDir, name + ".json");
    fs.writeFileSync(file, JSON.stringify({ reference: "@anush008/tokenizers 0.6.0 (tokenizers 0.22)", cases }) + "\n");
    console.log(`wrote ${file}: ${cases.length} cases`);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
