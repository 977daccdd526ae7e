package hf

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The Metaspace pre-tokenizer (SentencePiece's space handling as a
// pre-tokenizer): in each section of the text between added tokens, every
// space becomes the replacement character ("▁"), one is prepended unless
// the section starts with it — always, never, or only for the section at
// the very start of the input (prepend_scheme "first": not after an added
// token) — and with split, every replacement character starts a new word
// (a run of them is a word each: "a▁▁b" is "a", "▁", "▁b"). The Metaspace
// decoder turns the replacement back into spaces, but drops it from the
// first token unless the prepend scheme is never.

type prependScheme uint8

const (
	prependAlways prependScheme = iota
	prependFirst
	prependNever
)

// metaspace is a loaded Metaspace pre-tokenizer or decoder.
type metaspace struct {
	repl   string // the replacement character
	scheme prependScheme
	split  bool
}

type metaspaceJSON struct {
	Type           string  `json:"type"`
	Replacement    *string `json:"replacement"`
	PrependScheme  *string `json:"prepend_scheme"`
	Split          *bool   `json:"split"`
	AddPrefixSpace *bool   `json:"add_prefix_space"` // before prepend_scheme
}

// parseMetaspace reads a Metaspace component as Hugging Face does: the
// replacement one character, prepend_scheme "always" and split true by
// default, and the older add_prefix_space: false only with
// prepend_scheme "never" (true changes nothing).
func parseMetaspace(raw json.RawMessage, where string) (*metaspace, error) {
	var c metaspaceJSON
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("parse %s: %w", where, err)
	}
	if c.Replacement == nil {
		return nil, fmt.Errorf("tokenizer.json: %s Metaspace without replacement", where)
	}
	if utf8.RuneCountInString(*c.Replacement) != 1 || !utf8.ValidString(*c.Replacement) {
		return nil, fmt.Errorf("tokenizer.json: %s Metaspace replacement %q is not one character", where, *c.Replacement)
	}
	m := &metaspace{repl: *c.Replacement, split: c.Split == nil || *c.Split}
	if c.PrependScheme != nil {
		switch *c.PrependScheme {
		case "always":
		case "first":
			m.scheme = prependFirst
		case "never":
			m.scheme = prependNever
		default:
			return nil, fmt.Errorf("tokenizer.json: %s Metaspace prepend_scheme %q", where, *c.PrependScheme)
		}
	}
	if c.AddPrefixSpace != nil && !*c.AddPrefixSpace && m.scheme != prependNever {
		return nil, fmt.Errorf("tokenizer.json: %s Metaspace add_prefix_space false does not match prepend_scheme", where)
	}
	return m, nil
}

// metaspaceOf returns the Metaspace pre-tokenizer raw declares: a bare
// Metaspace, or a Sequence of it alone. ok is false for any other
// pre-tokenizer.
func metaspaceOf(raw json.RawMessage) (m *metaspace, ok bool, err error) {
	var c componentJSON
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, false, nil // loadPreTokenizer reports it
	}
	if c.Type == "Sequence" && len(c.Pretokenizers) == 1 {
		return metaspaceOf(c.Pretokenizers[0])
	}
	if c.Type != "Metaspace" {
		return nil, false, nil
	}
	m, err = parseMetaspace(raw, "pre_tokenizer")
	return m, err == nil, err
}

// appendMetaspaceWords is appendWords under the Metaspace pre-tokenizer:
// s is one section, at the start of the input unless w.later.
func (t *Tokenizer) appendMetaspaceWords(w *work, dst []uint32, s string, front *wordFront) ([]uint32, error) {
	ms := t.meta
	w.steps += len(s)
	if strings.IndexByte(s, ' ') >= 0 {
		w.steps += len(s)
		s = strings.ReplaceAll(s, " ", ms.repl)
	}
	if (ms.scheme == prependAlways || ms.scheme == prependFirst && !w.later) && !strings.HasPrefix(s, ms.repl) {
		s = ms.repl + s
	}
	// Without split, a segment is one word, which a BPE vocabulary may
	// still cut before runs of the replacement (spaceChunks).
	cut := !ms.split && t.split.spaceCuts(s)
	if cut {
		w.steps += len(s) * len(t.split.spaceExcept)
	}
	for len(s) > 0 {
		end := len(s)
		switch {
		case ms.split:
			from := 0
			if strings.HasPrefix(s, ms.repl) {
				from = len(ms.repl)
			}
			if k := strings.Index(s[from:], ms.repl); k >= 0 {
				end = from + k
			}
		case cut:
			end = t.split.nextChunk(t.model, s)
		}
		w.steps += end
		dst = t.encodeWord(dst, s[:end], front, &w.steps)
		if err := w.check(end); err != nil {
			return dst, err
		}
		s = s[end:]
	}
	return dst, nil
}

// metaspaceCacheable says whether a segment's ids may come from, and go
// to, the segment cache: not for the section at the input's start under
// prepend_scheme "first", whose ids differ from the same text's elsewhere.
func (t *Tokenizer) metaspaceCacheable(w *work) bool {
	return t.meta == nil || t.meta.scheme != prependFirst || w.later
}

// metaspaceFirstPieces turns each token into what the Metaspace decoder
// makes of it as the first token — its replacement characters dropped,
// then the later Replace steps — when the scheme drops them.
func (t *Tokenizer) metaspaceFirstPieces(dec *metaspace, replace []normStep, byteFallback bool) {
	if dec.scheme == prependNever {
		return
	}
	first := make([]string, len(t.buildPieces))
	for id, tok := range t.buildPieces {
		if !t.known[id] {
			continue
		}
		if v, ok := byteFallbackPiece(tok); ok && byteFallback {
			first[id] = v
			continue
		}
		tok = strings.ReplaceAll(tok, dec.repl, "")
		for _, r := range replace {
			tok = r.apply(tok)
		}
		first[id] = tok
	}
	t.firstPieces = newStringList(first)
}

// byteFallbackPiece is the byte a <0xXX> token stands for.
func byteFallbackPiece(tok string) (string, bool) {
	if len(tok) != 6 || !strings.HasPrefix(tok, "<0x") || tok[5] != '>' {
		return "", false
	}
	var v byte
	if _, err := fmt.Sscanf(tok[3:5], "%02X", &v); err != nil {
		return "", false
	}
	return string([]byte{v}), true
}
