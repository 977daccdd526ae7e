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
	form     *norm.Form      // NFC, NFD, NFKC, NFKD
	stable   *stableSet      // form's stable characters (normform.go)
	old, new string          // Replace with a string pattern
	prepend  string          // Prepend, to a non-empty segment
	lower    bool            // Lowercase (lowercase.go)
	bert     *bertNormalizer // BertNormalizer (bert.go)
}

func (st normStep) apply(s string) string {
	switch {
	case st.bert != nil:
		return st.bert.apply(s)
	case st.form != nil:
		if isASCII(s) || st.stable.holds(s) || st.form.IsNormalString(s) {
			return s
		}
		return referenceForm(*st.form, s)
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
// Unknown characters without byte fallback are not implemented.
func (t *Tokenizer) loadCharModel(m *modelJSON, b *bpe) error {
	if !m.ByteFallback {
		return unsupported("model BPE without byte_fallback over a vocabulary of characters (unk_token)")
	}
	b.charLevel = true
	b.vocab = newStringIndex(m.Vocab)
	b.unk, b.fuseUnk = noToken, m.FuseUnk
	missing := 0
	for c := 0; c < 256; c++ {
		id, ok := m.Vocab[fmt.Sprintf("<0x%02X>", c)]
		if !ok {
			// Gemma has no <0x09>: a character whose bytes are not all
			// tokens is the unknown token (charSymbols).
			id = noToken
			missing++
		}
		b.fallback[c] = id
		b.byteID[c] = id
		if c < utf8.RuneSelf {
			if id, ok := m.Vocab[string(rune(c))]; ok {
				b.byteID[c] = id
			}
		}
	}
	if m.UnkToken != nil {
		id, ok := m.Vocab[*m.UnkToken]
		if !ok && missing > 0 {
			// Hugging Face fails the encoding that needs it.
			return unsupported("model BPE unk_token %q outside the vocabulary", *m.UnkToken)
		}
		if ok {
			b.unk = id
		}
	}
	b.charTokens = make([]uint32, 1<<16)
	for v, id := range m.Vocab {
		// One character below U+10000 (a one-byte string beyond ASCII
		// is an invalid byte, not a character).
		if r, n := utf8.DecodeRuneInString(v); n == len(v) && (n > 1 || v[0] < utf8.RuneSelf) && r < 1<<16 {
			b.charTokens[r] = id + 1
		}
	}
	return nil
}

// noToken stands for no token: a byte without its <0xXX> token, no
// unknown token.
const noToken = ^uint32(0)

// charSymbols sets up the initial symbols of w for a vocabulary of
// characters, as Hugging Face's BPE does (merge_word): each character's
// token; else, when each of its bytes has a <0xXX> token, those; else the
// unknown token (one for a run of them with fuse_unk), or nothing without
// one. An unknown token waits until the next character found in the
// vocabulary, or the end, to be added, so that it comes after the byte
// tokens of characters between (Hugging Face's order). An invalid UTF-8
// byte (which a Rust string cannot hold) is a character missing from the
// vocabulary. A character below U+10000 is looked up in bpe.charTokens,
// which holds what the vocabulary does for it, rather than hashed and
// probed for: that was half of Llama 2's time on Japanese, a string per
// character.
func (m *bpe) charSymbols(syms []symbol, w string) []symbol {
	syms = syms[:0]
	add := func(id uint32) {
		n := int32(len(syms))
		syms = append(syms, symbol{id: id, prev: n - 1, next: n + 1})
	}
	unk := noToken // the unknown token waiting to be added
	for i := 0; i < len(w); {
		c := w[i]
		if c < utf8.RuneSelf && unk == noToken {
			if id := m.byteID[c]; id != noToken {
				add(id) // ASCII's tokens, or their fallback
				i++
				continue
			}
		}
		r, n := rune(c), 1
		if c >= utf8.RuneSelf {
			r, n = decodeRune(w, i)
		}
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
		switch {
		case tok != 0:
			if unk != noToken {
				add(unk)
				unk = noToken
			}
			add(tok - 1)
		case m.hasFallback(w[i : i+n]):
			for k := i; k < i+n; k++ {
				add(m.fallback[w[k]])
			}
		case m.unk != noToken:
			if unk != noToken && !m.fuseUnk {
				add(unk)
			}
			unk = m.unk
		}
		i += n
	}
	if unk != noToken {
		add(unk)
	}
	return syms
}

// hasFallback says whether every byte of s has its <0xXX> token.
func (m *bpe) hasFallback(s string) bool {
	for k := 0; k < len(s); k++ {
		if m.fallback[s[k]] == noToken {
			return false
		}
	}
	return true
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
	// The mark must be a token, too: a pending unknown token (charSymbols)
	// is added before it, so that none waits across a cut.
	if _, known := vocab[mark]; mark == "" || !known {
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

// exceptionsExact says whether spaceChunks's exceptions are enough for
// this model. They assume that a merged token is a substring of the text,
// which holds while the symbols are the text's own characters: a
// byte-fallback or unknown token is not, so an exception holding "<0x" or
// the unknown token's string could join across a cut without appearing in
// the text, and a character with neither (dropped) brings the characters
// around it together. No exceptions, no such concern.
func (m *bpe) exceptionsExact(except []string, unkToken *string) bool {
	if len(except) == 0 {
		return true
	}
	if m.unk == noToken && slices.Contains(m.fallback[:], noToken) {
		return false
	}
	for _, e := range except {
		if strings.Contains(e, "<0x") || unkToken != nil && *unkToken != "" && strings.Contains(e, *unkToken) {
			return false
		}
	}
	return true
}

// spaceKeepers is spaceChunks's rule for a vocabulary with too many
// strings that have mark after other text (InternLM2 has 80, "\t▁▁▁",
// "\n▁▁▁▁\n", …) but few characters before those marks (InternLM2: tab and
// newline). A merge across a cut before a run of mark joins the symbol
// before the cut with one starting with mark, and its result is a
// vocabulary string holding the last character of the left symbol's
// string followed by mark. So a cut is exact after a character that no
// vocabulary string has before mark, provided the character is a token of
// its own (its symbol's string is then the character, or a merged token
// ending in it; a byte-fallback or unknown token's string ends in '>'
// instead, and a character without any token leaves an earlier one last).
// It returns those characters, or false when there are more than
// maxSpaceExceptions of them or mark is not a token.
func spaceKeepers(vocab map[string]uint32, mark string) (keep []rune, ok bool) {
	if _, known := vocab[mark]; mark == "" || !known {
		return nil, false
	}
	keep = []rune{}
	for v := range vocab {
		for i := strings.Index(v, mark); i >= 0; {
			if r, _ := utf8.DecodeLastRuneInString(v[:i]); i > 0 && !strings.HasSuffix(v[:i], mark) && !slices.Contains(keep, r) {
				if len(keep) == maxSpaceExceptions {
					return nil, false
				}
				keep = append(keep, r)
			}
			k := strings.Index(v[i+len(mark):], mark)
			if k < 0 {
				break
			}
			i += len(mark) + k
		}
	}
	slices.Sort(keep)
	return keep, true
}

// useSpaceMark makes the splitter cut segments at runs of mark, a
// normalizer's or Metaspace's replacement for the space, where that is
// exact for the vocabulary: under spaceChunks's exceptions when they are
// exact (exceptionsExact), else under spaceKeepers's rule, else not at all.
func (sp *splitter) useSpaceMark(m *bpe, vocab map[string]uint32, mark string, unk *string) {
	if ok, except := spaceChunks(vocab, mark); ok && m.exceptionsExact(except, unk) {
		sp.spaceMark, sp.spaceExcept, sp.spaceKeep = mark, except, nil
	} else if keep, ok := spaceKeepers(vocab, mark); ok {
		sp.spaceMark, sp.spaceExcept, sp.spaceKeep = mark, nil, keep
	}
}

// nextChunk is where the word starting at s[0] ends under spaceMark.
func (sp *splitter) nextChunk(m *bpe, s string) int {
	if sp.spaceKeep != nil {
		return m.nextSpaceChunkKeep(s, sp.spaceMark, sp.spaceKeep)
	}
	return nextSpaceChunk(s, sp.spaceMark)
}

// nextSpaceChunkKeep is nextSpaceChunk under spaceKeepers's rule: the
// word starting at s[0] ends, after its leading marks, at the next run of
// mark whose preceding character is a token of its own and not in keep.
func (m *bpe) nextSpaceChunkKeep(s, mark string, keep []rune) int {
	i := 0
	for strings.HasPrefix(s[i:], mark) {
		i += len(mark)
	}
	for {
		k := strings.Index(s[i:], mark)
		if k < 0 {
			return len(s)
		}
		at := i + k
		if r, n := utf8.DecodeLastRuneInString(s[:at]); !slices.Contains(keep, r) && m.isCharToken(s[at-n:at]) {
			return at
		}
		for i = at; strings.HasPrefix(s[i:], mark); {
			i += len(mark)
		}
	}
}

// isCharToken says whether the character c is a token of its own.
func (m *bpe) isCharToken(c string) bool {
	r, n := utf8.DecodeRuneInString(c)
	switch {
	case r == utf8.RuneError && n == 1:
		return false
	case r < 1<<16:
		return m.charTokens[r] != 0
	}
	_, ok := m.vocab.get(c)
	return ok
}
