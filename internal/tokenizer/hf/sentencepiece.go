package hf

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// SentencePiece-style BPE (Gemma, Llama 2) works on characters, not bytes:
// the normalizer turns spaces into "▁" (and Llama 2's prepends one), the
// vocabulary's strings are the text's own characters, and a character
// missing from it falls back to its UTF-8 bytes as <0xXX> tokens
// (byte_fallback). The pre-tokenizer is none, or Gemma's split after each
// space — which the normalizer has already replaced, so either way a
// segment between added tokens is one word. The decoder maps "▁" back to a
// space and <0xXX> back to its byte.

// normStep is one normalizer of the declared sequence, applied in order to
// each segment between added tokens.
type normStep struct {
	form     *norm.Form // NFC, NFD, NFKC, NFKD
	stable   *stableSet // form's stable characters (normform.go)
	old, new string     // Replace with a string pattern
	prepend  string     // Prepend, to a non-empty segment
	lower    bool       // Lowercase (lowercase.go)
}

func (st normStep) apply(s string) string {
	switch {
	case st.form != nil:
		if isASCII(s) || st.stable.holds(s) || st.form.IsNormalString(s) {
			return s
		}
		return st.form.String(s)
	case st.lower:
		return lowercase(s)
	case st.prepend != "":
		if s == "" {
			return s
		}
		return st.prepend + s
	default:
		return strings.ReplaceAll(s, st.old, st.new)
	}
}

// normalize applies the normalizer to a segment, counting its work.
func (t *Tokenizer) normalize(w *work, s string) string {
	for _, st := range t.normSteps {
		w.steps += len(s)
		s = st.apply(s)
	}
	return s
}

// loadCharModel reads a vocabulary of characters with byte fallback.
// Unknown characters without byte fallback (unk_token, fuse_unk) are not
// implemented: every byte must have its <0xXX> token.
func (t *Tokenizer) loadCharModel(m *modelJSON, b *bpe) error {
	if !m.ByteFallback {
		return unsupported("model BPE without byte_fallback over a vocabulary of characters (unk_token)")
	}
	b.charLevel = true
	b.vocab = newStringIndex(m.Vocab)
	for c := 0; c < 256; c++ {
		id, ok := m.Vocab[fmt.Sprintf("<0x%02X>", c)]
		if !ok {
			return unsupported("model BPE byte_fallback without the token <0x%02X>", c)
		}
		b.fallback[c] = id
		b.byteID[c] = id
		if c < utf8.RuneSelf {
			if id, ok := m.Vocab[string(rune(c))]; ok {
				b.byteID[c] = id
			}
		}
	}
	b.charTokens = make([]uint32, 1<<16)
	for v, id := range m.Vocab {
		// One character of two bytes or more (a shorter decode is an
		// invalid byte) below U+10000.
		if r, n := utf8.DecodeRuneInString(v); n == len(v) && n > 1 && r < 1<<16 {
			b.charTokens[r] = id + 1
		}
	}
	return nil
}

// charSymbols sets up the initial symbols of w for a vocabulary of
// characters: each character's token, or its bytes' fallback tokens. An
// invalid UTF-8 byte (which a Rust string cannot hold) is its fallback
// token. A character below U+10000 is looked up in bpe.charTokens, which
// holds what the vocabulary does for it, rather than hashed and probed
// for: that was half of Llama 2's time on Japanese, a string per
// character.
func (m *bpe) charSymbols(syms []symbol, w string) []symbol {
	syms = syms[:0]
	add := func(id uint32) {
		n := int32(len(syms))
		syms = append(syms, symbol{id: id, prev: n - 1, next: n + 1})
	}
	for i := 0; i < len(w); {
		if c := w[i]; c < utf8.RuneSelf {
			add(m.byteID[c]) // ASCII's tokens, or their fallback
			i++
			continue
		}
		r, n := decodeRune(w, i)
		tok := uint32(0) // 1 + the token, as in charTokens
		switch {
		case r == utf8.RuneError && n == 1:
		case r < 1<<16:
			tok = m.charTokens[r]
		default:
			if id, ok := m.vocab.get(w[i : i+n]); ok {
				tok = id + 1
			}
		}
		if tok != 0 {
			add(tok - 1)
		} else {
			for k := i; k < i+n; k++ {
				add(m.fallback[w[k]])
			}
		}
		i += n
	}
	return syms
}

// loadCharDecoder checks the decoder of a character vocabulary — a
// Sequence of Metaspace (first), Replace (one character by a string),
// ByteFallback, Fuse and Strip (of leading spaces) — and turns every token
// into what it decodes to. Fuse only joins the tokens, which Decode does anyway.
func (t *Tokenizer) loadCharDecoder(c componentJSON, raw json.RawMessage) error {
	steps, raws := []componentJSON{c}, []json.RawMessage{raw}
	if c.Type == "Sequence" {
		steps, raws = nil, c.Decoders
		for _, raw := range c.Decoders {
			var d componentJSON
			if err := jsonUnmarshal(raw, &d); err != nil {
				return fmt.Errorf("parse decoder: %w", err)
			}
			steps = append(steps, d)
		}
	}
	var replace []normStep
	var meta *metaspace // a Metaspace step, first (metaspace.go)
	byteFallback := false
	for k, d := range steps {
		switch d.Type {
		case "Metaspace":
			if k != 0 {
				return unsupported("decoder.decoders[%d] Metaspace other than first", k)
			}
			ms, err := parseMetaspace(raws[k], "decoder")
			if err != nil {
				return err
			}
			meta = ms
			replace = append(replace, normStep{old: ms.repl, new: " "})
		case "Replace":
			if d.Pattern == nil || d.Pattern.String == nil || utf8.RuneCountInString(*d.Pattern.String) != 1 || d.Content == nil {
				return unsupported("decoder.decoders[%d] Replace of anything but one character", k)
			}
			if byteFallback {
				return unsupported("decoder.decoders[%d] Replace after ByteFallback", k)
			}
			replace = append(replace, normStep{old: *d.Pattern.String, new: *d.Content})
		case "ByteFallback":
			byteFallback = true
		case "Fuse":
		case "Strip":
			if k != len(steps)-1 || d.Content == nil || *d.Content != " " || d.Stop != 0 {
				return unsupported("decoder.decoders[%d] Strip other than of leading spaces at the end", k)
			}
			t.stripStart = d.Start
		default:
			return unsupported("decoder %q", d.Type)
		}
	}
	if meta != nil {
		t.metaspaceFirstPieces(meta, replace[1:], byteFallback)
	}
	for id, tok := range t.buildPieces {
		if !t.known[id] {
			continue
		}
		if byteFallback && len(tok) == 6 && strings.HasPrefix(tok, "<0x") && tok[5] == '>' {
			var v byte
			if _, err := fmt.Sscanf(tok[3:5], "%02X", &v); err == nil {
				t.buildPieces[id] = string([]byte{v})
				continue
			}
		}
		for _, r := range replace {
			tok = r.apply(tok)
		}
		t.buildPieces[id] = tok
	}
	return nil
}

// spaceChunks says whether BPE over a whole segment of a character
// vocabulary equals BPE over its pieces cut before each run of mark (the
// normalizer's replacement of a space) that follows other text, and so
// whether mark may cut words (splitter.spaceMark). With no pre-tokenizer,
// Gemma's and Llama 2's segments are one word each, thousands of
// characters long: no word cache helps, and a merge queue over the whole
// segment ran at 2–12 MB/s on English. The cut is exact when no merge can
// join text across it: a merge's result is a vocabulary string, so it is
// enough that no string has mark after a character other than mark (the
// SentencePiece vocabularies keep "▁" at the start of a piece, or in runs
// of "▁" alone). Merges then never involve symbols on both sides of a
// cut, each piece merges as it would inside the segment, and the order
// between pieces does not matter. The strings that break the rule are
// returned (Gemma 3 has one, ">▁</"): a token is a substring of the text,
// so a segment that holds none of them is cut all the same, and one that
// does is merged whole. More than maxSpaceExceptions of them: no cuts.
func spaceChunks(vocab map[string]uint32, mark string) (ok bool, except []string) {
	if mark == "" {
		return false, nil
	}
	for v := range vocab {
		rest := v
		for strings.HasPrefix(rest, mark) {
			rest = rest[len(mark):]
		}
		if strings.Contains(rest, mark) {
			if len(except) == maxSpaceExceptions {
				return false, nil
			}
			except = append(except, v)
		}
	}
	slices.Sort(except)
	return true, except
}

// maxSpaceExceptions bounds the strings every segment is searched for
// before it is cut (spaceChunks).
const maxSpaceExceptions = 8

// spaceCuts says whether segment s may be cut under splitter.spaceMark:
// it holds none of the strings a cut could break.
func (sp *splitter) spaceCuts(s string) bool {
	if sp.spaceMark == "" {
		return false
	}
	for _, e := range sp.spaceExcept {
		if strings.Contains(s, e) {
			return false
		}
	}
	return true
}

// nextSpaceChunk is where the word starting at s[0] ends under
// splitter.spaceMark: after its leading marks, at the next mark.
func nextSpaceChunk(s, mark string) int {
	i := 0
	for strings.HasPrefix(s[i:], mark) {
		i += len(mark)
	}
	if k := strings.Index(s[i:], mark); k >= 0 {
		return i + k
	}
	return len(s)
}
