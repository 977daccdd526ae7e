package hf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// UnsupportedError names a tokenizer.json feature this package does not
// implement. Loading refuses such a tokenizer rather than mis-tokenizing.
type UnsupportedError struct {
	Feature string // e.g. `pre_tokenizer "Metaspace"`
}

func (e *UnsupportedError) Error() string { return "unsupported tokenizer feature: " + e.Feature }

func unsupported(format string, args ...any) error {
	return &UnsupportedError{Feature: fmt.Sprintf(format, args...)}
}

// The parts of tokenizer.json this package reads.
type fileJSON struct {
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    json.RawMessage  `json:"normalizer"`
	PreTokenizer  json.RawMessage  `json:"pre_tokenizer"`
	PostProcessor json.RawMessage  `json:"post_processor"`
	Decoder       json.RawMessage  `json:"decoder"`
	Model         modelJSON        `json:"model"`
	// truncation and padding are ignored on purpose: transformers resets
	// both on every call, so vLLM never sees them.
}

type addedTokenJSON struct {
	ID         uint32 `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type modelJSON struct {
	Type                    string            `json:"type"`
	Dropout                 *float64          `json:"dropout"`
	UnkToken                *string           `json:"unk_token"`
	ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
	ByteFallback            bool              `json:"byte_fallback"`
	FuseUnk                 bool              `json:"fuse_unk"`
	IgnoreMerges            bool              `json:"ignore_merges"`
	MaxInputCharsPerWord    *int              `json:"max_input_chars_per_word"` // WordPiece
	Vocab                   map[string]uint32 `json:"vocab"`
	Merges                  json.RawMessage   `json:"merges"`
	unigram                 *unigramJSON      // a Unigram model's fields (readUnigram)
}

type componentJSON struct {
	Type string `json:"type"`
	// Sequence
	Normalizers   []json.RawMessage `json:"normalizers"`
	Pretokenizers []json.RawMessage `json:"pretokenizers"`
	Processors    []json.RawMessage `json:"processors"`
	Decoders      []json.RawMessage `json:"decoders"`
	// Split
	Pattern  *struct{ Regex, String *string } `json:"pattern"`
	Behavior string                           `json:"behavior"`
	Invert   bool                             `json:"invert"`
	// Replace (normalizer, decoder), Prepend, Strip
	Content *string `json:"content"`
	Prepend *string `json:"prepend"`
	Start   int     `json:"start"`
	Stop    int     `json:"stop"`
	// ByteLevel
	AddPrefixSpace bool  `json:"add_prefix_space"`
	UseRegex       *bool `json:"use_regex"` // absent: true, as Hugging Face's serde default
	// Digits
	IndividualDigits *bool `json:"individual_digits"`
	// BertProcessing
	Sep json.RawMessage `json:"sep"`
	Cls json.RawMessage `json:"cls"`
	// TemplateProcessing
	Single        []templatePieceJSON `json:"single"`
	SpecialTokens map[string]struct {
		IDs []uint32 `json:"ids"`
	} `json:"special_tokens"`
}

type templatePieceJSON struct {
	SpecialToken *struct{ ID string } `json:"SpecialToken"`
	Sequence     *struct{ ID string } `json:"Sequence"`
}

var jsonUnmarshal = json.Unmarshal

func isNull(raw json.RawMessage) bool {
	return len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// parse builds a Tokenizer from tokenizer.json contents.
func parse(data []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		if err = readUnigram(data, &f, err); err != nil {
			return nil, fmt.Errorf("parse tokenizer.json: %w", err)
		}
	}
	t := &Tokenizer{segments: newIDCache(segCacheBytes)}
	if err := t.loadNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	if err := t.loadPreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	if err := t.loadModel(&f.Model); err != nil {
		return nil, err
	}
	if err := t.loadAddedTokens(f.AddedTokens); err != nil {
		return nil, err
	}
	if err := t.loadPostProcessor(f.PostProcessor); err != nil {
		return nil, err
	}
	if err := t.loadDecoder(f.Decoder); err != nil {
		return nil, err
	}
	t.pieces, t.buildPieces = newStringList(t.buildPieces), nil
	return t, nil
}

func (t *Tokenizer) loadNormalizer(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var forms []norm.Form
	var walk func(json.RawMessage) error
	walk = func(raw json.RawMessage) error {
		var c componentJSON
		if err := json.Unmarshal(raw, &c); err != nil {
			return fmt.Errorf("parse normalizer: %w", err)
		}
		switch c.Type {
		case "Sequence":
			for _, n := range c.Normalizers {
				if err := walk(n); err != nil {
					return err
				}
			}
		case "NFC", "NFD", "NFKC", "NFKD":
			f := map[string]norm.Form{"NFC": norm.NFC, "NFD": norm.NFD, "NFKC": norm.NFKC, "NFKD": norm.NFKD}[c.Type]
			forms = append(forms, f)
			t.normSteps = append(t.normSteps, normStep{form: &f, stable: newStableSet(f)})
		case "Replace":
			if c.Pattern == nil || c.Pattern.String == nil || *c.Pattern.String == "" || c.Content == nil {
				return unsupported("normalizer Replace without a non-empty string pattern")
			}
			t.normSteps = append(t.normSteps, normStep{old: *c.Pattern.String, new: *c.Content})
		case "Lowercase":
			t.normSteps = append(t.normSteps, normStep{lower: true})
		case "BertNormalizer":
			n, err := parseBertNormalizer(raw)
			if err != nil {
				return err
			}
			t.normSteps = append(t.normSteps, normStep{bert: n})
		case "Prepend":
			if c.Prepend == nil {
				return errors.New("tokenizer.json: normalizer Prepend without prepend")
			}
			t.normSteps = append(t.normSteps, normStep{prepend: *c.Prepend})
		default:
			return unsupported("normalizer %q", c.Type)
		}
		return nil
	}
	if err := walk(raw); err != nil {
		return err
	}
	for _, st := range t.normSteps {
		if st.bert != nil && len(t.normSteps) > 1 {
			return unsupported("normalizer BertNormalizer in a Sequence with other normalizers")
		}
	}
	t.normForms = forms
	return nil
}

func (t *Tokenizer) loadPreTokenizer(raw json.RawMessage) error {
	if isNull(raw) {
		// SentencePiece-style: the whole normalized segment is one word.
		t.split, t.charLevel = splitter{whole: true}, true
		return nil
	}
	if bertPreTokenizerOf(raw) {
		// Whitespace and punctuation, for WordPiece (bert.go).
		bertTables()
		t.bertPre = true
		return nil
	}
	if ms, d, ok, err := metaspaceDigitsOf(raw); err != nil {
		return err
	} else if ok {
		// Metaspace, then Digits cutting each of its words.
		t.meta, t.split, t.charLevel, t.digits = ms, splitter{whole: true}, true, d
		return nil
	}
	if ms, ok, err := metaspaceOf(raw); err != nil {
		return err
	} else if ok {
		// Over a vocabulary of characters; each section is one word or,
		// with split, cut before each "▁" (metaspace.go).
		t.meta, t.split, t.charLevel = ms, splitter{whole: true}, true
		return nil
	}
	var steps []componentJSON
	var walk func(json.RawMessage) error
	walk = func(raw json.RawMessage) error {
		var c componentJSON
		if err := json.Unmarshal(raw, &c); err != nil {
			return fmt.Errorf("parse pre_tokenizer: %w", err)
		}
		if c.Type == "Sequence" {
			for _, p := range c.Pretokenizers {
				if err := walk(p); err != nil {
					return err
				}
			}
			return nil
		}
		steps = append(steps, c)
		return nil
	}
	if err := walk(raw); err != nil {
		return err
	}
	if len(steps) == 0 {
		return unsupported("pre_tokenizer empty Sequence")
	}
	if steps[0].Type == "Digits" {
		d, err := digitsModeOf(steps[0])
		if err != nil {
			return err
		}
		if len(steps) == 1 {
			// Digits alone, over a vocabulary of characters.
			t.split, t.charLevel, t.digits = splitter{whole: true}, true, d
			return nil
		}
		if steps[1].Type != "Split" && steps[1].Type != "ByteLevel" {
			return unsupported("pre_tokenizer sequence %s (Digits is implemented before byte-level steps, or after Metaspace)", stepTypes(steps))
		}
		// Digits first: the byte-level steps run in each of its pieces.
		t.digits, steps = d, steps[1:]
	}
	if len(steps) == 1 && steps[0].Type == "Split" && steps[0].Pattern != nil && steps[0].Pattern.String != nil {
		// Gemma's Split(" ", MergedWithPrevious) over a vocabulary of
		// characters: words end after each occurrence of the string.
		sp := steps[0]
		if sp.Behavior != "MergedWithPrevious" || sp.Invert || *sp.Pattern.String == "" {
			return unsupported("pre_tokenizer Split string %q behavior %q invert %v", *sp.Pattern.String, sp.Behavior, sp.Invert)
		}
		if t.digits != digitsNone {
			return unsupported("pre_tokenizer sequence [Digits, Split string %q]", *sp.Pattern.String)
		}
		t.split, t.charLevel = splitter{literal: *sp.Pattern.String}, true
		return nil
	}
	for _, s := range steps {
		if s.Type != "Split" && s.Type != "ByteLevel" {
			return unsupported("pre_tokenizer %q", s.Type)
		}
	}
	last := steps[len(steps)-1]
	if last.Type != "ByteLevel" {
		return unsupported("pre_tokenizer without a final ByteLevel step (only byte-level BPE is implemented)")
	}
	if last.AddPrefixSpace {
		return unsupported("pre_tokenizer ByteLevel add_prefix_space: true")
	}
	switch {
	case len(steps) == 1 && last.useRegex():
		t.split, _ = splitterFor(patternGPT2)
	case len(steps) >= 2 && !last.useRegex():
		patterns := make([]string, 0, len(steps)-1)
		for k, sp := range steps[:len(steps)-1] {
			if sp.Type != "Split" {
				return unsupported("pre_tokenizer sequence %s", stepTypes(steps))
			}
			if sp.Pattern == nil || sp.Pattern.Regex == nil {
				return unsupported("pre_tokenizer.pretokenizers[%d] Split with a string pattern", k)
			}
			if sp.Behavior != "Isolated" || sp.Invert {
				return unsupported("pre_tokenizer.pretokenizers[%d] Split behavior %q invert %v", k, sp.Behavior, sp.Invert)
			}
			patterns = append(patterns, *sp.Pattern.Regex)
		}
		s, ok := splitterForSteps(patterns)
		if !ok {
			if len(patterns) == 1 {
				return unsupported("pre_tokenizer Split regex %q", patterns[0])
			}
			return unsupported("pre_tokenizer Split regexes %q", patterns)
		}
		t.split = s
	default:
		return unsupported("pre_tokenizer sequence %s", stepTypes(steps))
	}
	return nil
}

// digitsModeOf reads a Digits step: individual_digits has no default
// (Hugging Face requires it).
func digitsModeOf(c componentJSON) (digitsMode, error) {
	switch {
	case c.IndividualDigits == nil:
		return digitsNone, errors.New("tokenizer.json: pre_tokenizer Digits without individual_digits")
	case *c.IndividualDigits:
		return digitsEach, nil
	}
	return digitsRuns, nil
}

// metaspaceDigitsOf returns the pre-tokenizer raw declares when it is a
// Sequence of Metaspace then Digits. ok is false for any other.
func metaspaceDigitsOf(raw json.RawMessage) (m *metaspace, d digitsMode, ok bool, err error) {
	var c componentJSON
	if json.Unmarshal(raw, &c) != nil || c.Type != "Sequence" || len(c.Pretokenizers) != 2 {
		return nil, digitsNone, false, nil
	}
	var dc componentJSON
	if json.Unmarshal(c.Pretokenizers[1], &dc) != nil || dc.Type != "Digits" {
		return nil, digitsNone, false, nil
	}
	m, ok, err = metaspaceOf(c.Pretokenizers[0])
	if err != nil || !ok {
		return nil, digitsNone, false, err
	}
	if d, err = digitsModeOf(dc); err != nil {
		return nil, digitsNone, false, err
	}
	return m, d, true, nil
}

// useRegex is a ByteLevel step's use_regex, which defaults to true when
// the field is absent (Hugging Face's ByteLevel: serde default_true).
func (c *componentJSON) useRegex() bool { return c.UseRegex == nil || *c.UseRegex }

func stepTypes(steps []componentJSON) string {
	names := make([]string, len(steps))
	for i, s := range steps {
		names[i] = s.Type
		if s.Type == "ByteLevel" {
			names[i] += fmt.Sprintf("(use_regex=%v)", s.useRegex())
		}
	}
	return "[" + strings.Join(names, ", ") + "]"
}

func (t *Tokenizer) loadModel(m *modelJSON) error {
	bertNorm := len(t.normSteps) == 1 && t.normSteps[0].bert != nil
	switch {
	case m.Type == "WordPiece" && !t.bertPre:
		return unsupported("model WordPiece without BertPreTokenizer")
	case m.Type == "WordPiece":
		if len(t.normSteps) > 0 && !bertNorm {
			return unsupported("model WordPiece with a normalizer other than BertNormalizer")
		}
		return t.loadWordPiece(m)
	case t.bertPre:
		return unsupported("pre_tokenizer BertPreTokenizer with model %q (only WordPiece is implemented with it)", m.Type)
	case bertNorm:
		return unsupported("normalizer BertNormalizer with model %q (only WordPiece is implemented with it)", m.Type)
	}
	if m.Type == "Unigram" {
		return t.loadUnigram(m)
	}
	if m.Type != "" && m.Type != "BPE" {
		return unsupported("model %q (only BPE, Unigram and WordPiece are implemented)", m.Type)
	}
	if m.Dropout != nil && *m.Dropout != 0 {
		return unsupported("model BPE dropout %v", *m.Dropout)
	}
	if m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "" {
		return unsupported("model BPE continuing_subword_prefix %q", *m.ContinuingSubwordPrefix)
	}
	if m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "" {
		return unsupported("model BPE end_of_word_suffix %q", *m.EndOfWordSuffix)
	}
	if len(m.Vocab) == 0 {
		return errors.New("tokenizer.json: model has no vocab")
	}
	b := &bpe{
		ignoreMerges: m.IgnoreMerges,
		cache:        newIDCache(wordCacheBytes),
	}
	if t.charLevel {
		if err := t.loadCharModel(m, b); err != nil {
			return err
		}
		for _, st := range t.normSteps {
			if st.old != " " {
				continue
			}
			t.split.useSpaceMark(b, m.Vocab, st.new, m.UnkToken)
		}
		if t.meta != nil && !t.meta.split {
			t.split.useSpaceMark(b, m.Vocab, t.meta.repl, m.UnkToken)
		}
	} else if err := loadByteModel(m, b); err != nil {
		return err
	}
	pairs, err := parseMerges(m.Merges)
	if err != nil {
		return err
	}
	maxID := uint32(0)
	for _, id := range m.Vocab {
		maxID = max(maxID, id)
	}
	b.merges = make(map[uint64]merge, len(pairs))
	b.sides = make([]uint8, maxID+1)
	for rank, p := range pairs {
		a, ok1 := m.Vocab[p[0]]
		c, ok2 := m.Vocab[p[1]]
		id, ok3 := m.Vocab[p[0]+p[1]]
		if !ok1 || !ok2 || !ok3 {
			return fmt.Errorf("tokenizer.json: model.merges[%d] (%q %q) names a token outside the vocabulary", rank, p[0], p[1])
		}
		b.merges[pairKey(a, c)] = merge{rank: uint32(rank), id: id}
		b.sides[a] |= mergesLeft
		b.sides[c] |= mergesRight
	}
	t.model = b
	t.buildPieces = make([]string, maxID+1)
	t.known = make([]bool, maxID+1)
	for tok, id := range m.Vocab {
		if t.charLevel {
			t.buildPieces[id] = tok // the decoder maps it (loadDecoder)
		} else {
			t.buildPieces[id] = decodePiece(tok)
		}
		t.known[id] = true
	}
	return nil
}

// loadByteModel reads a byte-level vocabulary: strings in GPT-2's byte
// alphabet, every byte a token.
func loadByteModel(m *modelJSON, b *bpe) error {
	vocab := make(map[string]uint32, len(m.Vocab))
	for tok, id := range m.Vocab {
		if raw, ok := unByteLevel(tok); ok {
			vocab[raw] = id
		}
	}
	b.vocab = newStringIndex(vocab)
	// Every byte must be a token: byte-level BPE never needs an unknown token.
	for c := 0; c < 256; c++ {
		id, ok := m.Vocab[string(byteLevelRunes[c])]
		if !ok {
			return unsupported("model BPE vocabulary without the byte-level token for byte 0x%02x", c)
		}
		b.byteID[c] = id
	}
	// byte_fallback needs no code: it only applies to characters missing
	// from the vocabulary, and with every byte a token none is.
	return nil
}

// decodePiece is what the ByteLevel decoder makes of one token string: its
// bytes when every character is in the byte-level alphabet, else the string
// as it is.
func decodePiece(tok string) string {
	if raw, ok := unByteLevel(tok); ok {
		return raw
	}
	return tok
}

// parseMerges reads merges in either layout tokenizers writes: "a b"
// strings (older) or ["a", "b"] pairs (newer).
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	var asStrings []string
	if err := json.Unmarshal(raw, &asStrings); err == nil {
		out := make([][2]string, len(asStrings))
		for i, s := range asStrings {
			a, b, ok := strings.Cut(s, " ")
			if !ok || strings.Contains(b, " ") {
				return nil, fmt.Errorf("tokenizer.json: merge %d %q is not two tokens", i, s)
			}
			out[i] = [2]string{a, b}
		}
		return out, nil
	}
	var asPairs [][2]string
	if err := json.Unmarshal(raw, &asPairs); err != nil {
		return nil, fmt.Errorf("tokenizer.json: parse merges: %w", err)
	}
	return asPairs, nil
}

func (t *Tokenizer) loadAddedTokens(tokens []addedTokenJSON) error {
	var plain, normalized []addedToken
	for _, a := range tokens {
		if a.Content == "" {
			return fmt.Errorf("tokenizer.json: added token %d is empty", a.ID)
		}
		if a.SingleWord || a.LStrip || a.RStrip {
			return unsupported("added token %q with single_word/lstrip/rstrip", a.Content)
		}
		if !utf8.ValidString(a.Content) {
			return fmt.Errorf("tokenizer.json: added token %d is not UTF-8", a.ID)
		}
		tok := addedToken{content: a.Content, id: a.ID, special: a.Special}
		if a.Normalized && len(t.normSteps) > 0 {
			if w := (work{}); t.normalize(&w, a.Content) != a.Content {
				return unsupported("added_tokens %q: normalized, and the normalizer changes it", a.Content)
			}
			normalized = append(normalized, tok)
		} else {
			plain = append(plain, tok)
		}
		if int(a.ID) >= len(t.buildPieces) {
			t.buildPieces = append(t.buildPieces, make([]string, int(a.ID)+1-len(t.buildPieces))...)
			t.known = append(t.known, make([]bool, int(a.ID)+1-len(t.known))...)
		}
		if t.charLevel {
			t.buildPieces[a.ID] = a.Content
		} else {
			t.buildPieces[a.ID] = decodePiece(a.Content)
		}
		t.known[a.ID] = true
		if a.Special {
			if t.special == nil {
				t.special = make(map[uint32]bool)
			}
			t.special[a.ID] = true
		}
		if t.addedByContent == nil {
			t.addedByContent = make(map[string]uint32)
		}
		t.addedByContent[a.Content] = a.ID
	}
	t.added = newMatcher(plain)
	t.addedNormalized = newMatcher(normalized)
	return nil
}

func (t *Tokenizer) loadPostProcessor(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var walk func(json.RawMessage) error
	walk = func(raw json.RawMessage) error {
		var c componentJSON
		if err := json.Unmarshal(raw, &c); err != nil {
			return fmt.Errorf("parse post_processor: %w", err)
		}
		switch c.Type {
		case "Sequence":
			for _, p := range c.Processors {
				if err := walk(p); err != nil {
					return err
				}
			}
		case "ByteLevel":
			// Only adjusts offsets; ids are unchanged.
		case "BertProcessing":
			return t.loadBertProcessing(c)
		case "TemplateProcessing":
			if t.prefix != nil || t.suffix != nil {
				return unsupported("post_processor with two TemplateProcessing steps")
			}
			seen := false
			for _, p := range c.Single {
				switch {
				case p.Sequence != nil:
					if seen || p.Sequence.ID != "A" {
						return unsupported("post_processor TemplateProcessing single template with sequence %q", p.Sequence.ID)
					}
					seen = true
				case p.SpecialToken != nil:
					st, ok := c.SpecialTokens[p.SpecialToken.ID]
					if !ok {
						return fmt.Errorf("tokenizer.json: post_processor names unknown special token %q", p.SpecialToken.ID)
					}
					if seen {
						t.suffix = append(t.suffix, st.IDs...)
					} else {
						t.prefix = append(t.prefix, st.IDs...)
					}
				}
			}
			if !seen {
				return unsupported("post_processor TemplateProcessing single template without the sequence")
			}
		default:
			return unsupported("post_processor %q", c.Type)
		}
		return nil
	}
	return walk(raw)
}

func (t *Tokenizer) loadDecoder(raw json.RawMessage) error {
	if t.model.wp != nil {
		return t.loadWordPieceDecoder(raw)
	}
	if isNull(raw) {
		return unsupported("decoder null (only ByteLevel is implemented)")
	}
	var c componentJSON
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("parse decoder: %w", err)
	}
	if t.charLevel {
		return t.loadCharDecoder(c, raw)
	}
	if c.Type != "ByteLevel" {
		return unsupported("decoder %q", c.Type)
	}
	return nil
}

// addedToken is a token matched verbatim in the input before any other
// processing.
type addedToken struct {
	content string
	id      uint32
	special bool
}
