// Writes the token-id goldens for internal/tokenizer/hf with the reference
// implementation: Hugging Face's Rust tokenizers (@anush008/tokenizers, a
// native Node binding of tokenizers 0.22).
//
//   scripts/testdata.sh --reference
//   node internal/tokenizer/hf/testdata/gen/gen_tokens.js
//
// For each fixture tokenizer it writes testdata/golden/<name>.json: every
// corpus text with its ids without special tokens (how vLLM encodes a
// rendered chat prompt) and with them (a completions prompt). The llama2_*
// fixtures are derived from Llama 2's, the bert_* ones from bert-base-uncased's
// vocabulary (testdata/gen/derive, run by scripts/testdata.sh). It also
// writes testdata/golden/lowercase.txt: the Lowercase normalizer's output
// for every code point it changes; bert_chars.txt: what BertNormalizer and
// BertPreTokenizer make of every code point; classes.txt: the character
// classes of the reference's split patterns and Digits step, for every
// code point; and normalize.json: its Unicode normalization forms of the
// texts where they differ from Node's own.
"use strict";

const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");

const repo = path.resolve(__dirname, "../../../../..");
const cache = process.env.TESTDATA_CACHE || path.join(repo, "testdata-cache");
const { Tokenizer, digitsPreTokenizer, nfcNormalizer, nfkcNormalizer, nfdNormalizer, nfkdNormalizer } = createRequire(path.join(cache, "node", "package.json"))("@anush008/tokenizers");
const corpus = require("./corpus.js");

async function main() {
  const outDir = path.resolve(__dirname, "../golden");
  fs.mkdirSync(outDir, { recursive: true });
  const names = ["qwen3", "llama3_1", "deepseek_v3", "gptoss", "gemma3", "llama2",
    "mistral_nemo", "gemma2", "gemma", "yi", "internlm2", "claude",
    "llama2_metaspace", "llama2_metaspace_legacy", "llama2_unigram", "llama2_unigram_unk",
    "llama2_digits", "llama2_digits_only", "llama3_digits", "bert_base_uncased", "bert_options", "bert_raw"];
  const only = process.argv.slice(2);
  for (const name of only.length ? only : names) {
    const tok = Tokenizer.fromFile(path.join(cache, "tokenizers", name, "tokenizer.json"));
    const cases = [];
    const derived = name.startsWith("llama2_") || name === "llama3_digits";
    let texts = derived ? corpus.cases().concat(extraCases()) : corpus.cases();
    if (name.includes("digits")) texts = texts.concat(digitCases());
    const bert = name.startsWith("bert_");
    if (bert) texts = texts.concat(bertCases());
    for (const c of texts) {
      const plain = await tok.encode(c.text, null, { addSpecialTokens: false });
      const special = await tok.encode(c.text, null, { addSpecialTokens: true });
      const cs = { name: c.name, text: c.text, ids: plain.getIds(), ids_special: special.getIds() };
      // SentencePiece-style decoders do not give the text back as it was
      // (the normalizer's "▁", Llama 2's stripped space), nor does NFKC
      // (claude): keep theirs.
      if (["gemma3", "gemma2", "gemma", "yi", "internlm2", "claude"].includes(name) || name.startsWith("llama2") || bert) cs.decoded = await tok.decode(cs.ids, false);
      // The Metaspace decoder treats the first token apart: decode after
      // the post-processor's <s> too, keeping and skipping it.
      if (derived || bert) {
        cs.decoded_special = await tok.decode(cs.ids_special, false);
        cs.decoded_skip = await tok.decode(cs.ids_special, true);
      }
      cases.push(cs);
    }
    const file = path.join(outDir, name + ".json");
    fs.writeFileSync(file, JSON.stringify({ reference: "@anush008/tokenizers 0.6.0 (tokenizers 0.22)", cases }) + "\n");
    console.log(`wrote ${file}: ${cases.length} cases`);
  }
  if (!only.length) {
    writeLowercase(path.join(outDir, "lowercase.txt"));
    writeClasses(path.join(outDir, "classes.txt"));
    writeNormalize(path.join(outDir, "normalize.json"));
  }
  if (!only.length || only.some((n) => n.startsWith("bert_"))) writeBertChars(path.join(outDir, "bert_chars.txt"));
}

// extraCases are texts for the Unigram, Metaspace and Lowercase paths of
// the derived fixtures: sections after added tokens, runs of "▁", literal
// pieces, unknown characters, case mappings Go's Unicode tables lack.
function extraCases() {
  const texts = [
    "<s>a", "a<s> b", "<s> <s>  x", "  two leading", "trailing  ", "▁▁x▁", "▁", " ", "  ", "x\u3000y",
    "İSTANBUL ΟΔΟΣ Σ ΣΑΣ", "\u1C89\uA7CB\uA7CC\uA7DA\uA7DC \u{10D50}\u{10D65}\u{16EA0}\u{16EB8}",
    "\u212A \u2126 \u1E9E \u01C5ungla \u0130i", "<0x41><0x0A> <0x", "a<unk>b", "<unk>", "</s>x<s>",
    "日本😀\u0001x", "\u0001\u0002\u0003 \u{E0001}\u{10FFFD}", "x".repeat(3000), "ab ".repeat(500),
    "\n\n\t", "The QUICK Brown Fox. ÀÉÎÕÜ ÆØÅ", "ﬃ ﬁ", "𝐀𝐁𝐂", "Ⅻ ⓐⒶ",
  ];
  // And random strings of the pieces these paths treat apart, from a
  // fixed seed (a 32-bit LCG), so that the goldens are the same each run.
  const atoms = ["a", "b", "the", "The", "THE", " ", "  ", "▁", "▁▁", "<s>", "</s>", "<unk>", "İ", "Σ", "ß",
    "日本", "語", "😀", "\n", "\t", "\u3000", "x", "<0x41>", "<0x", "é", "E\u0301", "Ⅻ", "\u0001", "ǅ", "ﬁ",
    "\uA7CB", "\u{10D50}", "ab", "ba", "aaaa", " the", "Hello", "world", ".", ",", "'s", "123"];
  texts.push(...randomTexts(atoms, 12345, 300));
  return texts.map((text, i) => ({ name: `extra/${i}`, text }));
}

// digitCases are texts for the Digits pre-tokenizer: the numeric
// characters (Nd, Nl, No) of several scripts and Unicode versions, runs,
// digits next to spaces, "▁" and added tokens; and random strings of them.
function digitCases() {
  const texts = [
    "1234567890", "a1b22c333", " 42 ", "3.14159 x2", "٠١٢٣ ۴۵ ०१२ ๑๒", "¹²³ ½¾ ⅓ ① ⑳ ⅰⅱⅲ Ⅻ 〇〡",
    "𝟎𝟏𝟐 𐒠𐒡 \u{1D7CE}\u{1D7FF}", "\u{10D40}\u{10D41} \u{16D70} \u{11BF0} \u{1CCF0} \u{16130}",
    "7".repeat(3000), "12 ".repeat(500), "x1".repeat(700), "▁1▁▁2", "<s>1", "1<s>2", "1 2  3\n4",
    "a\u00B2b\u2155c\u3007d", "\u0660x\u06F0\u07C0\u0966\u09E6\uFF10\uFF19",
    "\u{11DE0}\u{11DE9} \u{16FF4}\u{16FF6}x\u{10D40}", // Unicode 17's digits and numbers, 16's
  ];
  const atoms = ["0", "1", "42", "999", "٣", "½", "²", "Ⅻ", "①", "a", "ab", " ", "  ", "▁", "<s>", ".", ",",
    "\n", "日本", "😀", "x", "The", " the", "'s", "é", "\u{1CCF0}", "\u{10D40}", "\u{11DE3}", "\u{16FF4}"];
  texts.push(...randomTexts(atoms, 777, 200));
  return texts.map((text, i) => ({ name: `digits/${i}`, text }));
}

// bertCases are texts for the WordPiece fixtures: punctuation of every
// kind, controls and the whitespace BertNormalizer cleans, CJK ideographs
// next to other scripts, accents, words around max_input_chars_per_word,
// pieces missing from the vocabulary, the special tokens; and random
// strings of them.
function bertCases() {
  const texts = [
    "Hello, world! I like strawberries.", "don't you're I'm we'll they've do not it's", "a.b,c!d?e'f\"g(h)i[j]k{l}m",
    "$5 +3 =8 <x> ^y ~z `q` |p| \\ / @ # % & * _ -", "¡¿«»„“”‘’–—…·•‥※〈〉【】、。・", "\u00a7\u00b6\u2016\u2e3a\u2e52\u2e5d\ufe10\uff01\uff1f",
    "x\u0000y\u0001z\u007f\u0085w\ufffdv\u200bu\u200dt\ufeffs\u00adr\ue000q\u{F0000}p",
    "tab\there\nnew\r\nline\u000b\u000c\u00a0\u1680\u2000\u2028\u2029\u202f\u205f\u3000end",
    "北京大学 東京 ㄅ 가나다 テスト 𠀀𠀁 \u{2A700} \u{2B740} \u{2B820} \u{2CEB0} \u{30000} \uF900 \u{2F800} \u3400",
    "Café naïve résumé Ångström Zoë façade ﬁ ß İstanbul ΟΔΟΣ Ἀθῆναι ﬀ ǅ", "e\u0301 a\u0308\u0323 \u1100\u1161\u11a8 한국어",
    "Ünïcödé ÀÉÎÕÜ àéîõü Ææ Øø Łł Đđ Ħħ", "x".repeat(99), "x".repeat(100), "x".repeat(101), "é".repeat(100), "é".repeat(101),
    "strawberries".repeat(9), "ab".repeat(6), "abcdefghijkl", "abcdefghijklm", "日本語".repeat(40),
    "[CLS] [SEP] [MASK] [PAD] [UNK] [cls] [unused0] [unused993]", "a[SEP]b", "[SEP][SEP]", "##s ##ing ## # ###",
    "qwxzqwxz zzzzzz qqqqq", "😀 👍🏽 👨‍👩‍👧 🇯🇵 🥰 🫠", "١٢٣ ۴۵ ० ½ ² Ⅻ ①", "a\u0300\u0300\u0300b", "  leading", "trailing  ", "\u0301",
  ];
  const atoms = ["a", "the", "The", "THE", "hello", "world", "straw", "berries", "##s", " ", "  ", "\t", "\n", "\r", ".", ",",
    "!", "?", "'", "\"", "-", "(", ")", "$", "€", "¿", "…", "、", "。", "北", "京", "日本", "テ", "한", "é", "e\u0301", "Å",
    "ß", "İ", "ﬁ", "Σ", "😀", "\u0000", "\u0001", "\u007f", "\u200b", "\u00ad", "\ufeff", "\ue000", "\u00a0", "\u3000",
    "\u2028", "[SEP]", "[CLS]", "[UNK]", "[MASK]", "##", "#", "x".repeat(30), "1", "23", "٣", "½", "qxz", "don't"];
  texts.push(...randomTexts(atoms, 4242, 300));
  return texts.map((text, i) => ({ name: `bert/${i}`, text }));
}

// writeBertChars records what the reference's BertNormalizer and
// BertPreTokenizer make of each code point, where anything: lines
// "LO HI FLAGS" (hex, inclusive) for runs of code points with the same
// flags — x removed by clean_text, s turned into a space by it, w split on
// by the pre-tokenizer as whitespace, p isolated by it as punctuation —
// and lines "CODEPOINT = MAPPED[,MAPPED]" (hex; empty when removed) for
// every code point strip_accents changes.
function writeBertChars(file) {
  const mk = (normalizer, preTokenizer) => Tokenizer.fromString(JSON.stringify({
    version: "1.0", truncation: null, padding: null, added_tokens: [],
    normalizer, pre_tokenizer: preTokenizer, post_processor: null, decoder: null,
    model: { type: "WordPiece", unk_token: "[UNK]", continuing_subword_prefix: "##", max_input_chars_per_word: 100, vocab: { "[UNK]": 0 } },
  }));
  const bertNorm = (clean, strip) => ({ type: "BertNormalizer", clean_text: clean, handle_chinese_chars: false, strip_accents: strip, lowercase: false });
  const clean = mk(bertNorm(true, false), null).getNormalizer();
  const strip = mk(bertNorm(false, true), null).getNormalizer();
  const pre = mk(null, { type: "BertPreTokenizer" }).getPreTokenizer();
  const runs = [];
  const strips = [];
  for (let cp = 0; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    const s = String.fromCodePoint(cp);
    let flags = "";
    const c = clean.normalizeString(s);
    if (c === "") flags += "x";
    else if (c === " " && s !== " ") flags += "s";
    const parts = pre.preTokenizeString("a" + s + "a").length;
    if (parts === 2) flags += "w";
    else if (parts === 3) flags += "p";
    else if (parts !== 1) throw new Error(`U+${cp.toString(16)}: ${parts} pre-tokens`);
    const last = runs[runs.length - 1];
    if (flags && last && last.flags === flags && last.hi === cp - 1) last.hi = cp;
    else if (flags) runs.push({ lo: cp, hi: cp, flags });
    const a = strip.normalizeString(s);
    if (a !== s) strips.push(cp.toString(16) + " = " + [...a].map((ch) => ch.codePointAt(0).toString(16)).join(","));
  }
  const lines = runs.map((r) => `${r.lo.toString(16)} ${r.hi.toString(16)} ${r.flags}`).concat(strips);
  fs.writeFileSync(file, lines.join("\n") + "\n");
  console.log(`wrote ${file}: ${runs.length} runs, ${strips.length} stripped`);
}

// writeLowercase records what the reference's Lowercase normalizer makes of
// each code point it changes: "CODEPOINT MAPPED[,MAPPED]" in hex.
function writeLowercase(file) {
  const tok = Tokenizer.fromString(JSON.stringify({
    version: "1.0", truncation: null, padding: null, added_tokens: [],
    normalizer: { type: "Lowercase" }, pre_tokenizer: null, post_processor: null, decoder: null,
    model: { type: "Unigram", unk_id: 0, vocab: [["<unk>", 0]], byte_fallback: false },
  }));
  const norm = tok.getNormalizer();
  const lines = [];
  for (let cp = 0; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    const s = String.fromCodePoint(cp);
    const l = norm.normalizeString(s);
    if (l !== s) lines.push(cp.toString(16) + " " + [...l].map((c) => c.codePointAt(0).toString(16)).join(","));
  }
  fs.writeFileSync(file, lines.join("\n") + "\n");
  console.log(`wrote ${file}: ${lines.length} code points`);
}

// writeClasses records, for every code point, the classes the reference
// gives it: \p{Lu}, \p{Ll}, \p{Lt}, \p{Lm}, \p{Lo}, \p{M}, \p{N}, \p{P},
// \p{S} and \s in its regex engine (a Split step isolating the class), and
// numeric in its Digits step. One line per class: its name and the ranges
// of code points in it, "lo-hi" in hex, comma-separated.
function writeClasses(file) {
  const split = (re) => Tokenizer.fromString(JSON.stringify({
    version: "1.0", truncation: null, padding: null, added_tokens: [], normalizer: null,
    pre_tokenizer: { type: "Split", pattern: { Regex: re }, behavior: "Isolated", invert: false },
    post_processor: null, decoder: null,
    model: { type: "WordLevel", vocab: { "[UNK]": 0 }, unk_token: "[UNK]" },
  })).getPreTokenizer();
  const classes = [["Lu", split("\\p{Lu}")], ["Ll", split("\\p{Ll}")], ["Lt", split("\\p{Lt}")],
    ["Lm", split("\\p{Lm}")], ["Lo", split("\\p{Lo}")], ["M", split("\\p{M}")], ["N", split("\\p{N}")],
    ["P", split("\\p{P}")], ["S", split("\\p{S}")], ["s", split("\\s")], ["numeric", digitsPreTokenizer(true)]];
  const lines = [];
  for (const [name, pre] of classes) {
    // Code points in chunks, each between two U+0001 (in no class): a
    // piece without one is a match.
    const members = [];
    for (let lo = 0; lo <= 0x10ffff; lo += 0x4000) {
      const cps = [];
      for (let cp = lo; cp < lo + 0x4000; cp++) if (cp > 1 && !(cp >= 0xd800 && cp <= 0xdfff)) cps.push(cp);
      const text = "\u0001" + cps.map((cp) => String.fromCodePoint(cp)).join("\u0001") + "\u0001";
      for (const [piece] of pre.preTokenizeString(text)) {
        if (!piece.includes("\u0001")) members.push(piece.codePointAt(0));
      }
    }
    const ranges = [];
    for (const cp of members) {
      const last = ranges[ranges.length - 1];
      if (last && last[1] === cp - 1) last[1] = cp;
      else ranges.push([cp, cp]);
    }
    lines.push(name + " " + ranges.map(([a, b]) => a.toString(16) + "-" + b.toString(16)).join(","));
  }
  fs.writeFileSync(file, lines.join("\n") + "\n");
  console.log(`wrote ${file}: ${lines.length} classes`);
}

// writeNormalize records the reference's NFC, NFKC, NFD and NFKD of the
// texts where one of them differs from Node's String.prototype.normalize
// (ICU: a newer Unicode than the reference's), and of every 40th of the
// rest. The texts: every code point that either decomposes, each such
// code point's decomposition spelled out (to compose), and every mark
// after a base, before and after marks of the combining classes 1, 202,
// 220 and 230 (to reorder).
function writeNormalize(file) {
  const forms = { nfc: nfcNormalizer(), nfkc: nfkcNormalizer(), nfd: nfdNormalizer(), nfkd: nfkdNormalizer() };
  const texts = [];
  for (let cp = 0; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    const c = String.fromCodePoint(cp);
    if (/\p{M}/u.test(c)) {
      for (const m of ["\u0334", "\u0327", "\u0316", "\u0301"]) texts.push("a" + c + m, "a" + m + c);
      continue;
    }
    if (c.normalize("NFKD") !== c || forms.nfkd.normalizeString(c) !== c) {
      texts.push(c);
      const d = c.normalize("NFD");
      if (d !== c) texts.push(d);
    }
  }
  const cases = [];
  let n = 0;
  for (const text of texts) {
    const c = { text };
    let differs = false;
    for (const [name, f] of Object.entries(forms)) {
      c[name] = f.normalizeString(text);
      if (c[name] !== text.normalize(name.toUpperCase())) differs = true;
    }
    if (differs || n++ % 40 === 0) cases.push(c);
  }
  fs.writeFileSync(file, JSON.stringify({ reference: "@anush008/tokenizers 0.6.0 (tokenizers 0.22)", cases }) + "\n");
  console.log(`wrote ${file}: ${cases.length} of ${texts.length} texts`);
}

// randomTexts is count strings of 1 to 24 atoms each, drawn with a 32-bit
// LCG from seed, so that the goldens are the same each run.
function randomTexts(atoms, seed, count) {
  const rand = (n) => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return (seed >>> 8) % n;
  };
  const texts = [];
  for (let i = 0; i < count; i++) {
    let text = "";
    for (let k = 1 + rand(24); k > 0; k--) text += atoms[rand(atoms.length)];
    texts.push(text);
  }
  return texts;
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
