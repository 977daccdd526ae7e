package hf

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The WordPiece model (BERT's), as Hugging Face's tokenizers runs it: a
// word is cut greedily from the left into the longest vocabulary piece at
// each point — the first piece as it is, every later one as
// continuing_subword_prefix ("##") and the piece — and a word with a point
// no piece covers, or of more than max_input_chars_per_word characters, is
// the unknown token alone. The reference tries ends from the word's end
// down, one character at a time; a byte trie of the pieces finds the same
// longest piece in one walk, at most the longest piece long.

// wordPiece is a loaded WordPiece model.
type wordPiece struct {
	first    pieceDA // the pieces
	cont     pieceDA // the pieces with the prefix, without it
	unk      uint32
	maxChars int
	prefix   string
}

// loadWordPiece reads a WordPiece model; the pre-tokenizer must be
// BertPreTokenizer (checked in parse).
func (t *Tokenizer) loadWordPiece(m *modelJSON) error {
	if len(m.Vocab) == 0 {
		return errors.New("tokenizer.json: model WordPiece has no vocab")
	}
	if m.EndOfWordSuffix != nil || m.Merges != nil || m.Dropout != nil {
		return unsupported("model WordPiece with BPE fields")
	}
	wp := &wordPiece{prefix: "##", maxChars: 100}
	if m.ContinuingSubwordPrefix != nil {
		wp.prefix = *m.ContinuingSubwordPrefix
	}
	if m.MaxInputCharsPerWord != nil {
		if *m.MaxInputCharsPerWord < 0 {
			return fmt.Errorf("tokenizer.json: model WordPiece max_input_chars_per_word %d", *m.MaxInputCharsPerWord)
		}
		wp.maxChars = *m.MaxInputCharsPerWord
	}
	unk := "[UNK]"
	if m.UnkToken != nil {
		unk = *m.UnkToken
	}
	id, ok := m.Vocab[unk]
	if !ok {
		// Hugging Face fails an encoding that needs it.
		return unsupported("model WordPiece unk_token %q not in the vocabulary", unk)
	}
	wp.unk = id
	cont := make(map[string]uint32)
	maxID := uint32(0)
	for p, id := range m.Vocab {
		if !utf8.ValidString(p) {
			return fmt.Errorf("tokenizer.json: model WordPiece piece %d is not UTF-8", id)
		}
		if rest, ok := strings.CutPrefix(p, wp.prefix); ok {
			cont[rest] = id
		}
		maxID = max(maxID, id)
	}
	ft := newPieceTrie(m.Vocab)
	wp.first = newPieceDA(&ft, nil)
	ct := newPieceTrie(cont)
	wp.cont = newPieceDA(&ct, nil)
	b := &bpe{wp: wp, cache: newIDCache(wordCacheBytes)}
	for c := 0; c < 256; c++ {
		b.byteID[c] = noToken
		if c < utf8.RuneSelf {
			ops := 0
			if out := wp.encode(nil, string([]byte{byte(c)}), &ops); len(out) == 1 {
				b.byteID[c] = out[0]
			}
		}
	}
	t.model = b
	t.buildPieces = make([]string, maxID+1)
	t.known = make([]bool, maxID+1)
	for p, id := range m.Vocab {
		t.buildPieces[id] = p // the decoder maps it (loadWordPieceDecoder)
		t.known[id] = true
	}
	return nil
}

// encode appends the ids of word w (non-empty) and adds its work to *ops:
// the trie steps and one per byte.
func (wp *wordPiece) encode(dst []uint32, w string, ops *int) []uint32 {
	*ops += len(w)
	if len(w) > wp.maxChars && utf8.RuneCountInString(w) > wp.maxChars {
		return append(dst, wp.unk)
	}
	n0 := len(dst)
	for start := 0; start < len(w); {
		d := &wp.first
		if start > 0 {
			d = &wp.cont
		}
		slots := d.slots
		best, bestEnd := int32(-1), 0
		node := int32(0)
		for j := start; j < len(w); j++ {
			next := slots[node].base + int32(w[j])
			if int(next) >= len(slots) || slots[next].check != node {
				break
			}
			node = next
			*ops++
			if id := slots[node].id; id >= 0 {
				best, bestEnd = id, j+1
			}
		}
		if best < 0 {
			return append(dst[:n0], wp.unk)
		}
		dst = append(dst, uint32(best))
		start = bestEnd
	}
	return dst
}

// loadWordPieceDecoder reads the WordPiece decoder: each token but the
// first loses the prefix where it starts with it and gains a leading space
// where it does not; with cleanup, each token then loses the spaces of
// " .", " ?", " !", " ,", " ' ", " n't", " 'm", " 's", " 've", " 're" and
// " do not" becomes " don't" — token by token, as Hugging Face applies it.
func (t *Tokenizer) loadWordPieceDecoder(raw json.RawMessage) error {
	if isNull(raw) {
		return unsupported("decoder null with a WordPiece model")
	}
	var d struct {
		Type    string  `json:"type"`
		Prefix  *string `json:"prefix"`
		Cleanup *bool   `json:"cleanup"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return fmt.Errorf("parse decoder: %w", err)
	}
	if d.Type != "WordPiece" {
		return unsupported("decoder %q with a WordPiece model", d.Type)
	}
	prefix, cleanup := "##", true
	if d.Prefix != nil {
		prefix = *d.Prefix
	}
	if d.Cleanup != nil {
		cleanup = *d.Cleanup
	}
	for content, id := range t.addedByContent {
		t.buildPieces[id] = content
	}
	first := make([]string, len(t.buildPieces))
	for id, tok := range t.buildPieces {
		if !t.known[id] {
			continue
		}
		later := " " + tok
		if rest, ok := strings.CutPrefix(tok, prefix); ok {
			later = rest
		}
		if cleanup {
			tok, later = wordPieceCleanup(tok), wordPieceCleanup(later)
		}
		first[id], t.buildPieces[id] = tok, later
	}
	t.firstPieces = newStringList(first)
	return nil
}

var wordPieceCleanups = [][2]string{
	{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"}, {" 'm", "'m"},
	{" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
}

func wordPieceCleanup(s string) string {
	for _, r := range wordPieceCleanups {
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	return s
}

// bertProcessing reads BertProcessing's cls and sep: [token, id] each.
func (t *Tokenizer) loadBertProcessing(c componentJSON) error {
	if t.prefix != nil || t.suffix != nil {
		return unsupported("post_processor with two template steps")
	}
	read := func(raw json.RawMessage, name string) (uint32, error) {
		var pair []json.RawMessage
		var id uint32
		var tok string
		if json.Unmarshal(raw, &pair) != nil || len(pair) != 2 || json.Unmarshal(pair[0], &tok) != nil || json.Unmarshal(pair[1], &id) != nil {
			return 0, fmt.Errorf("tokenizer.json: post_processor BertProcessing %s is not a [token, id] pair", name)
		}
		return id, nil
	}
	cls, err := read(c.Cls, "cls")
	if err != nil {
		return err
	}
	sep, err := read(c.Sep, "sep")
	if err != nil {
		return err
	}
	t.prefix, t.suffix = []uint32{cls}, []uint32{sep}
	return nil
}
