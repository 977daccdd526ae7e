// Command derive writes the fixture tokenizers that no published package
// has — a Unigram model, the Metaspace pre-tokenizer and decoder, the
// Lowercase normalizer — from the real Llama 2 tokenizer, deterministically:
// the same input gives the same bytes, whose sha256 scripts/testdata.sh
// checks. It runs from scripts/testdata.sh:
//
//	go run ./internal/tokenizer/hf/testdata/gen/derive/main.go -cache testdata-cache
//
// Fixtures (testdata-cache/tokenizers/<name>/):
//
//	llama2_metaspace         Llama 2's BPE; Metaspace (prepend_scheme "first", split) instead of its normalizer
//	llama2_metaspace_legacy  Llama 2's BPE; Metaspace in the older form (add_prefix_space, no split)
//	llama2_unigram           a Unigram model over Llama 2's vocabulary (scores on a quarter grid, so that
//	                         paths tie), byte_fallback; Lowercase; Metaspace ("always", no split)
//	llama2_unigram_unk       the same vocabulary with scores -ln(id+1) to six decimals, no byte_fallback (unknown
//	                         characters fused into <unk>); Metaspace ("never", split)
//	llama2_digits            Llama 2's BPE; Metaspace ("first", split) then Digits (individual_digits false)
//	llama2_digits_only       Llama 2 as it is but for a Digits pre-tokenizer (individual_digits true)
//	llama3_digits            Llama 3.1's byte-level BPE; Digits (individual_digits true) then ByteLevel with its
//	                         regex, as StarCoder's tokenizer
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"
)

func main() {
	cache := flag.String("cache", "testdata-cache", "the fixture cache (scripts/testdata.sh's)")
	flag.Parse()
	src := filepath.Join(*cache, "tokenizers", "llama2")
	data, err := os.ReadFile(filepath.Join(src, "tokenizer.json"))
	if err != nil {
		log.Fatal(err)
	}
	config, err := os.ReadFile(filepath.Join(src, "tokenizer_config.json"))
	if err != nil {
		log.Fatal(err)
	}
	base := func() map[string]any {
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			log.Fatal(err)
		}
		return m
	}
	meta := func(fields ...any) map[string]any {
		m := map[string]any{"type": "Metaspace", "replacement": "▁"}
		for i := 0; i < len(fields); i += 2 {
			m[fields[i].(string)] = fields[i+1]
		}
		return m
	}
	decoder := func(ms map[string]any, byteFallback bool) any {
		if !byteFallback {
			return ms
		}
		return map[string]any{"type": "Sequence", "decoders": []any{ms,
			map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"}}}
	}

	// Llama 2's BPE with Metaspace in place of its Prepend/Replace normalizer.
	m := base()
	m["normalizer"] = nil
	m["pre_tokenizer"] = meta("prepend_scheme", "first", "split", true)
	m["decoder"] = decoder(meta("prepend_scheme", "first", "split", true), true)
	write(*cache, "llama2_metaspace", m, config)

	m = base()
	m["normalizer"] = nil
	m["pre_tokenizer"] = meta("add_prefix_space", true, "split", false)
	m["decoder"] = decoder(meta("add_prefix_space", true), true)
	write(*cache, "llama2_metaspace_legacy", m, config)

	m = base()
	m["normalizer"] = map[string]any{"type": "Lowercase"}
	m["pre_tokenizer"] = meta("prepend_scheme", "always", "split", false)
	m["decoder"] = decoder(meta("prepend_scheme", "always", "split", false), true)
	m["model"] = unigram(m["model"].(map[string]any), true, func(id int) float64 {
		return -math.Floor(4*math.Log2(float64(id)+1)) / 4
	})
	write(*cache, "llama2_unigram", m, config)

	m = base()
	m["normalizer"] = nil
	m["pre_tokenizer"] = meta("add_prefix_space", false, "prepend_scheme", "never", "split", true)
	m["decoder"] = decoder(meta("prepend_scheme", "never", "split", true), false)
	m["model"] = unigram(m["model"].(map[string]any), false, func(id int) float64 {
		// Six decimals, as SentencePiece writes its float32 scores: a
		// number any JSON parser reads to the same float64.
		return -math.Round(math.Log(float64(id)+1)*1e6) / 1e6
	})
	write(*cache, "llama2_unigram_unk", m, config)

	digits := func(individual bool) map[string]any {
		return map[string]any{"type": "Digits", "individual_digits": individual}
	}
	m = base()
	m["normalizer"] = nil
	m["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
		meta("prepend_scheme", "first", "split", true), digits(false)}}
	m["decoder"] = decoder(meta("prepend_scheme", "first", "split", true), true)
	write(*cache, "llama2_digits", m, config)

	m = base()
	m["pre_tokenizer"] = digits(true)
	write(*cache, "llama2_digits_only", m, config)

	src3 := filepath.Join(*cache, "tokenizers", "llama3_1")
	data3, err := os.ReadFile(filepath.Join(src3, "tokenizer.json"))
	if err != nil {
		log.Fatal(err)
	}
	config3, err := os.ReadFile(filepath.Join(src3, "tokenizer_config.json"))
	if err != nil {
		log.Fatal(err)
	}
	data = data3
	m = base()
	m["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{digits(true),
		map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}}}
	write(*cache, "llama3_digits", m, config3)
}

// unigram is a Unigram model over a BPE model's vocabulary, in id order:
// the specials score 0, every other piece score(id) (Llama 2's ids follow
// its merges, so longer and rarer pieces score lower).
func unigram(bpe map[string]any, byteFallback bool, score func(id int) float64) map[string]any {
	vocab := bpe["vocab"].(map[string]any)
	pieces := make([]any, len(vocab))
	for piece, v := range vocab {
		id, err := v.(json.Number).Int64()
		if err != nil || id < 0 || int(id) >= len(pieces) || pieces[id] != nil {
			log.Fatalf("vocab id %v of %q", v, piece)
		}
		s := 0.0
		if id >= 3 {
			s = score(int(id))
		}
		pieces[id] = []any{piece, s}
	}
	return map[string]any{"type": "Unigram", "unk_id": 0, "vocab": pieces, "byte_fallback": byteFallback}
}

func write(cache, name string, m map[string]any, config []byte) {
	dir := filepath.Join(cache, "tokenizers", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), b.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), config, 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("derive: wrote %s\n", dir)
}
