// The tokenizer test corpus. Deterministic: the random strings come from a
// fixed-seed generator, so regenerating the goldens gives the same texts.
"use strict";

const fs = require("fs");
const path = require("path");

const bench = (f) => fs.readFileSync(path.join(__dirname, "..", "bench", f), "utf8");

// mulberry32: a tiny seeded PRNG.
function rng(seed) {
  return () => {
    seed |= 0;
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Pieces random strings are built from: every character class the
// pre-tokenizer distinguishes, plus special tokens and normalization traps.
const pieces = [
  "a", "Z", "hello", " world", "I'm", "'S", "'ll", "'ſ", "DON'T", "'", " ", "  ", "   ", "\t", "\n", "\r\n", "\r",
  "\n\n", " \n ", "1", "23", "456", "7890", "３", "٣", "²", "½", "Ⅻ", ".", ",", "!?", "...", "(", ")", "{}", "=>",
  "//", "#", "$", "€", "日本", "語", "한국어", "Русский", "العربية", "हिन्दी", "ไทย", "😀", "👍🏽", "👨‍👩‍👧",
  "🇯🇵", "e\u0301", "\u212b", "\u1100\u1161", "\u00a0", "\u3000", "\u2028", "\u200b", "\ufeff", "\u0000",
  "\u007f", "\u0085", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<|begin_of_text|>",
  "<|eot_id|>", "<|start_header_id|>", "<|im_start|", "<", "|>", "<<|im_end|>>", "_", "-", "ﬁ", "ß", "İ",
];

function randomString(next, n) {
  let s = "";
  for (let i = 0; i < n; i++) s += pieces[Math.floor(next() * pieces.length)];
  return s;
}

function cases() {
  const out = [];
  const add = (name, text) => out.push({ name, text });

  add("empty", "");
  add("space", " ");
  add("newline", "\n");
  add("english", "The quick brown fox jumps over the lazy dog. It's 5 o'clock, isn't it? We'll see; they'd said they've \"done it\".");
  add("contractions", "I'm you're he'll she'd we've it's DON'T WE'LL 'S 'T 'Re 'VE 'M 'LL 'D 'ſ 'ſt 'x ''s");
  add("code_go", "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfor i := 0; i < 10; i++ {\n\t\tfmt.Println(i*i, \"squared\") // comment\n\t}\n}\n");
  add("code_python", "def fib(n: int) -> int:\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n\n\nif __name__ == '__main__':\n    print([fib(i) for i in range(20)])\n");
  add("code_json", '{"name": "switchyard", "version": [1, 2, 3], "nested": {"ok": true, "pi": 3.14159, "none": null}}');
  add("japanese", "日本語のテキストです。東京は晴れ、気温は２３度。「こんにちは」と彼は言った。カタカナとひらがな、そして漢字。");
  add("korean", "안녕하세요. 오늘 날씨가 정말 좋네요! 한국어 토큰화 테스트입니다.");
  add("russian", "Съешь же ещё этих мягких французских булок, да выпей чаю. Москва — столица России.");
  add("chinese", "我们今天去公园散步，天气非常好。机器学习模型需要大量的数据。");
  add("arabic_hindi_thai", "مرحبا بالعالم. नमस्ते दुनिया। สวัสดีชาวโลก");
  add("emoji", "I love it 😍😍😍! Family: 👨‍👩‍👧‍👦, flags: 🇯🇵🇺🇸, skin tones: 👍🏻👍🏿, keycap: 1️⃣, ZWJ: 🏳️‍🌈.");
  add("whitespace_runs", "a" + " ".repeat(100) + "b\t\t\t\tc\n\n\n\n\nd \n \n e   \r\n\r\n  f" + " ".repeat(17) + "\n" + "\t".repeat(9));
  add("trailing_spaces", "end with spaces     ");
  add("leading_spaces", "     start with spaces");
  add("numbers", "1234567890 3.14159 1,000,000 -42 +7 0x1F 1e-9 ２０２４年 ٣٤٥ ²³ ½ Ⅻ 00001 123456789012345678901234567890");
  add("special_tokens_in_text", "<|im_start|>user\nIgnore <|im_end|> and <|endoftext|>, say <think>hi</think><|im_end|>\n<|begin_of_text|><|start_header_id|>x<|end_header_id|>\n\n<|eot_id|>");
  add("special_token_fragments", "<|im_start| <|im_end <|endoftext|| <<|im_end|>> <|<|im_start|>|> <think </think>>");
  add("normalization", "e\u0301 \u212b \u1100\u1161\u11a8 café cafe\u0301 ﬁ ß İ \u0041\u030a Å");
  add("controls", "\u0000\u0001\u001f\u007f\u0085\u00a0\u1680\u2000\u2028\u2029\u202f\u205f\u3000\u200b\ufeff");
  add("markdown", "# Title\n\n- item **bold** and _italic_\n- `code` [link](https://example.com/a?b=c&d=e)\n\n| a | b |\n|---|---|\n| 1 | 2 |\n");
  add("url_email", "Visit https://huggingface.co/Qwen/Qwen3-8B or mail someone@example.org; path C:\\Users\\me\\file.txt");
  add("english_prose", bench("english.txt"));
  add("japanese_prose", bench("japanese.txt"));
  add("long_english", bench("english.txt").repeat(12));
  add("long_japanese_run", "あ".repeat(3000) + "漢字".repeat(1500));
  add("long_spaces", " ".repeat(5000) + "x" + "\n".repeat(2000) + "y" + " \t".repeat(1000));
  add("long_digits", "9".repeat(3001));
  add("long_punct", "!".repeat(2000) + "-=".repeat(1000));

  const next = rng(20261125);
  for (let i = 0; i < 300; i++) add(`random_${i}`, randomString(next, 1 + Math.floor(next() * 40)));

  // Case shapes and classes the o200k (gpt-oss) and DeepSeek V3 splits
  // tell apart: upper/title/modifier letters, marks, kana punctuation,
  // digits against letters, format characters. Appended after the random
  // cases so those stay as they were.
  add("case_shapes", "HTTPServer XMLHttpRequest McDonald's iPhone ǅemal ǈubljana ʰello ʰ ABCdef'S DON'Tx o'NEILL Ⅻth");
  add("marks", "\u0301a a\u0301\u0302 \u0301 \u0301A x\u0301Y\u0308 नमस्ते क्षि ก่า \u0300\u0300\u0300");
  add("kana_punct", "カタカナ・ひらがなー゛゜ゝゞ゠ヽヾ々〆日本語。、「」『』");
  add("digits_letters", "abc123def 12a3b45 x1 1x 1234567 ٣٤٥٦ １２３４ 3.14e10 v2.0.1-rc3");
  add("slashes", "a/b/c //x\n/ !/\n/ ./path/to/file a//b http://x.y/z/");
  add("ascii_punct_words", "#include <stdio.h> $HOME @user _private -flag .dotfile 'quoted' \"dq\" (paren) [x] {y} ~tilde `tick` ^caret |pipe");
  add("format_chars", "a\u200db \u200d\u200d x\u2060y \ufeffz \u00ad soft\u00adhyphen \ue000 \u0000\u0000a");
  const extra = pieces.concat(["HTTP", "Server", "ǅ", "ʰ", "\u0301", "・", "ー", "゛", "/", "\u200d", "Ab", "aB", "'re", "々", "ｶ", "A\u0301"]);
  const next2 = rng(20261203);
  for (let i = 0; i < 100; i++) {
    let s = "";
    const n = 1 + Math.floor(next2() * 40);
    for (let k = 0; k < n; k++) s += extra[Math.floor(next2() * extra.length)];
    add(`random2_${i}`, s);
  }

  // Characters whose classes the reference takes from newer Unicode than
  // Go's tables (15): Unicode 16's letters, marks, digits, punctuation and
  // symbols (its regex engine), 17's numbers (Digits), and characters
  // assigned after Unicode 9, which its normalizers leave as they are.
  add("unicode16", "\uA7CB\uA7CC\uA7CDa \u1C89\u1C8A x\u0897y \u{10D50}\u{10D65}\u{10D69}\u{10D6E} \u{10D40}\u{10D49}7 " +
    "\u{16D70}\u{16D79} \u{116D0}\u{116E3} \u1B4E\u1B7F \u2427\u2FFC \u{1CC00}\u{1CCF0}\u{1CCF9} \u{11380}\u{113C5}\u{113D4} " +
    "\u{16EA0}\u{16EB8}\u{16EBB}");
  add("unicode17", "\u{11DE0}\u{11DE9}x \u{16FF4}\u{16FF6} 1\u{11DE3}2 \u0295");
  add("normalization_newer", "\uA7F2\uA7F3 \u{1FBF0}\u{1FBF9} \u32FF \uAB69 \u{10781} \u{11935}\u{11930} a\u0334\u{16FF0} " +
    "a\u{16FF0}\u0301 e\u1DFA\u0301 \u{105C9}\u{105D2}\u0307 \u{11383} \u{11382}\u{113C9} \u{1E030}\u{1E06D}");
  const newer = ["\uA7CB", "\u{10D40}", "\u{10D69}", "\u{11DE3}", "\u{16FF4}", "\uA7F2", "\u{1FBF5}", "\u32FF",
    "\u{16FF0}", "\u1DFA", "\u{11935}\u{11930}", "\u0301", "a", "A", "1", " ", "日本", ".", "e\u0301", "\u0334"];
  const next3 = rng(20261204);
  for (let i = 0; i < 60; i++) {
    let s = "";
    const n = 1 + Math.floor(next3() * 24);
    for (let k = 0; k < n; k++) s += newer[Math.floor(next3() * newer.length)];
    add(`newer_${i}`, s);
  }
  return out;
}

module.exports = { cases };
