// Package hf is a Hugging Face tokenizer: it loads a model directory
// (tokenizer.json, tokenizer_config.json) and produces exactly the token ids
// of Hugging Face's Rust tokenizers library, for the BPE tokenizers that
// current chat models use: byte-level (Qwen2/Qwen3, Llama 3, DeepSeek V3,
// gpt-oss, Mistral Nemo, GPT-2 style) and SentencePiece-style over
// characters with byte fallback (Gemma 1/2/3, Llama 2, Yi, InternLM2); and
// for SentencePiece Unigram models and the Metaspace pre-tokenizer
// (unigram.go, metaspace.go); and for BERT's WordPiece pipeline (bert.go,
// wordpiece.go). Added and special tokens are matched before
// the model, the declared normalizer is applied, and the pre-tokenizer
// split regexes are matched by hand-written scanners. Whatever else a
// tokenizer.json may declare is refused at load with an UnsupportedError
// naming it: a tokenizer that loads tokenizes exactly.
//
// Chat templates are rendered by the sibling package chattemplate; a
// Tokenizer loaded with LoadDir carries the directory's template, which
// WithChatRenderer replaces for models the worker does not prompt with it
// (gpt-oss: package harmony).
package hf

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/text/unicode/norm"

	"github.com/switchyard-dev/switchyard/internal/tokenizer"
	"github.com/switchyard-dev/switchyard/internal/tokenizer/chattemplate"
)

// Tokenizer is a loaded Hugging Face tokenizer. It is safe for concurrent
// use.
type Tokenizer struct {
	normForms       []norm.Form // the Unicode forms among normSteps
	normSteps       []normStep  // the normalizer (sentencepiece.go)
	charLevel       bool        // a vocabulary of characters, not bytes (sentencepiece.go)
	stripStart      int         // leading spaces the decoder strips
	meta            *metaspace  // the Metaspace pre-tokenizer (metaspace.go)
	firstPieces     stringList  // id → decoded bytes as the first token, for a Metaspace decoder
	split           splitter
	model           *bpe
	added           *matcher // added tokens matched on the raw text
	addedNormalized *matcher // added tokens matched after normalization
	addedByContent  map[string]uint32
	special         map[uint32]bool
	prefix, suffix  []uint32   // post-processor tokens around a sequence
	pieces          stringList // id → decoded bytes
	buildPieces     []string   // pieces while loading
	known           []bool     // id → has a piece
	chat            *chattemplate.Chat
	renderer        tokenizer.ChatRenderer // replaces chat when set
	segments        *idCache               // see segcache.go
	digits          digitsMode             // a Digits pre-tokenizer step (digits.go)
	bertPre         bool                   // BertPreTokenizer (bert.go)
}

var _ tokenizer.Tokenizer = (*Tokenizer)(nil)

// Load builds a Tokenizer from the contents of a tokenizer.json file. It has
// no chat template; LoadDir adds one.
func Load(tokenizerJSON []byte) (*Tokenizer, error) {
	return parse(tokenizerJSON)
}

// LoadDir loads a Hugging Face model directory: tokenizer.json, and the
// chat template and special tokens from tokenizer_config.json (or
// chat_template.jinja) when present.
func LoadDir(dir string) (*Tokenizer, error) {
	data, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("load tokenizer %s: %w", dir, err)
	}
	t, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer %s: %w", dir, err)
	}
	chat, err := chattemplate.LoadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, chattemplate.ErrNoTemplate):
	case err != nil:
		return nil, fmt.Errorf("load tokenizer %s: %w", dir, err)
	default:
		t.chat = chat
	}
	return t, nil
}

// Chat returns the directory's chat template, or nil when it has none.
func (t *Tokenizer) Chat() *chattemplate.Chat { return t.chat }

// WithChatRenderer returns a Tokenizer that renders chats with r instead of
// the directory's chat template, for models the worker prompts otherwise
// (gpt-oss: harmony). It shares t's vocabulary and caches.
func (t *Tokenizer) WithChatRenderer(r tokenizer.ChatRenderer) *Tokenizer {
	c := *t
	c.renderer = r
	return &c
}

// ChatRenderer returns the renderer WithChatRenderer set, or nil when chats
// are rendered with the directory's chat template.
func (t *Tokenizer) ChatRenderer() tokenizer.ChatRenderer { return t.renderer }

// HasAddedToken reports whether Encode would read an added token's text in
// s as that token. A renderer that tokenizes message text as ordinary text
// (harmony does) cannot hand such text over as a string to encode.
func (t *Tokenizer) HasAddedToken(s string) bool {
	if at, _, _ := t.added.find(s); at >= 0 {
		return true
	}
	if t.addedNormalized == nil {
		return false
	}
	at, _, _ := t.addedNormalized.find(t.normalize(&work{ctx: context.Background()}, s))
	return at >= 0
}

// Encode tokenizes text without adding the post-processor's special tokens —
// what vLLM does for a rendered chat prompt, whose template already wrote
// them. Added and special tokens written in text become their ids.
func (t *Tokenizer) Encode(text string) []uint32 {
	return t.AppendEncode(make([]uint32, 0, len(text)/3+8), text)
}

// EncodeWithSpecialTokens tokenizes text and adds the post-processor's
// special tokens (add_special_tokens=True), e.g. Llama 3's
// <|begin_of_text|> — what vLLM does for a completions prompt.
func (t *Tokenizer) EncodeWithSpecialTokens(text string) []uint32 {
	dst := make([]uint32, 0, len(text)/3+8+len(t.prefix)+len(t.suffix))
	dst, _ = t.AppendEncodeWithSpecialTokensContext(context.Background(), dst, text)
	return dst
}

// AppendEncodeWithSpecialTokensContext is EncodeWithSpecialTokens
// appending to dst under ctx, as AppendEncodeContext.
func (t *Tokenizer) AppendEncodeWithSpecialTokensContext(ctx context.Context, dst []uint32, text string) ([]uint32, error) {
	dst = append(dst, t.prefix...)
	dst, err := t.AppendEncodeContext(ctx, dst, text)
	if err != nil {
		return dst, err
	}
	return append(dst, t.suffix...), nil
}

// AppendEncode appends the ids of text to dst, like Encode.
func (t *Tokenizer) AppendEncode(dst []uint32, text string) []uint32 {
	dst, _ = t.AppendEncodeContext(context.Background(), dst, text)
	return dst
}

// AppendEncodeContext is AppendEncode under ctx, which it checks every
// tokenizer.CheckEvery bytes of text or so (a single pre-token, which BPE
// merges in one go, may run longer).
func (t *Tokenizer) AppendEncodeContext(ctx context.Context, dst []uint32, text string) ([]uint32, error) {
	w := work{ctx: ctx}
	return t.appendEncode(&w, dst, text)
}

func (t *Tokenizer) appendEncode(w *work, dst []uint32, text string) ([]uint32, error) {
	for len(text) > 0 {
		at, tok, read := t.added.find(text)
		w.steps += read
		if at < 0 {
			return t.appendSegment(w, dst, text)
		}
		var err error
		if dst, err = t.appendSegment(w, dst, text[:at]); err != nil {
			return dst, err
		}
		dst = append(dst, tok.id)
		text = text[at+len(tok.content):]
		w.later = true
	}
	return dst, w.check(0)
}

// work is one encoding's look at its context: check reports ctx's error
// once n more bytes bring the bytes since the last look to
// tokenizer.CheckEvery. steps counts the encoding's work in a unit that
// does not depend on the machine — bytes read by each scan, hashed, or
// normalized, and BPE queue operations — so that tests can hold it to a
// constant times the text's length.
type work struct {
	ctx   context.Context
	done  int
	steps int
	later bool // past the input's first section (Metaspace's prepend_scheme "first")
}

func (w *work) check(n int) error {
	if w.done += n; w.done < tokenizer.CheckEvery && n > 0 {
		return nil
	}
	w.done = 0
	return w.ctx.Err()
}

// appendSegment encodes text that holds no raw-matched added token, through
// the segment cache for long segments.
func (t *Tokenizer) appendSegment(w *work, dst []uint32, s string) ([]uint32, error) {
	if len(s) < segCacheMin || t.segments == nil || !t.metaspaceCacheable(w) {
		return t.encodeSegment(w, dst, s)
	}
	w.steps += len(s) // hashed, compared
	if out, ok := t.segments.appendGet(dst, s); ok {
		return out, w.check(len(s) / 16) // a copy, not a tokenization
	}
	n := len(dst)
	dst, err := t.encodeSegment(w, dst, s)
	if err != nil {
		return dst, err
	}
	t.segments.put(s, dst[n:])
	return dst, nil
}

// encodeSegment tokenizes one segment: normalize, split on normalized added
// tokens, pre-tokenize, BPE.
func (t *Tokenizer) encodeSegment(w *work, dst []uint32, s string) ([]uint32, error) {
	if s == "" {
		return dst, nil
	}
	s = t.normalize(w, s)
	for len(s) > 0 {
		at, tok, read := t.addedNormalized.find(s)
		w.steps += read
		if at < 0 {
			return t.appendWords(w, dst, s)
		}
		var err error
		if dst, err = t.appendWords(w, dst, s[:at]); err != nil {
			return dst, err
		}
		dst = append(dst, tok.id)
		s = s[at+len(tok.content):]
		w.later = true
	}
	return dst, nil
}

func (t *Tokenizer) appendWords(w *work, dst []uint32, s string) ([]uint32, error) {
	front := t.model.front()
	defer t.model.release(front)
	if t.bertPre {
		return t.appendBertWords(w, dst, s, front)
	}
	if t.meta != nil {
		return t.appendMetaspaceWords(w, dst, s, front)
	}
	if t.split.whole || t.split.literal != "" {
		return t.appendLiteralWords(w, dst, s, front)
	}
	if t.digits == digitsNone {
		return t.appendScanned(w, dst, s, front)
	}
	// Digits first: the split pattern runs in each of its pieces.
	w.steps += len(s)
	for i := 0; i < len(s); {
		end := t.digits.next(s, i)
		var err error
		if dst, err = t.appendScanned(w, dst, s[i:end], front); err != nil {
			return dst, err
		}
		i = end
	}
	return dst, nil
}

// appendScanned is appendWords for a byte-level split pattern.
func (t *Tokenizer) appendScanned(w *work, dst []uint32, s string, front *wordFront) ([]uint32, error) {
	if t.split.deepseek {
		return t.appendDeepSeek(w, dst, s, front)
	}
	for i := 0; i < len(s); {
		var end, far int
		switch {
		case t.split.gpt2:
			end, far = t.split.nextGPT2(s, i)
		case t.split.o200k:
			end, far = t.split.cases.next(s, i)
		default:
			end, far = t.split.next(s, i)
		}
		w.steps += far - i
		dst = t.model.encodeWord(dst, s[i:end], front, &w.steps)
		if err := w.check(end - i); err != nil {
			return dst, err
		}
		i = end
	}
	return dst, nil
}

// appendDeepSeek is appendWords for DeepSeek V3's three split steps: each
// step's pieces are cut by the next.
func (t *Tokenizer) appendDeepSeek(w *work, dst []uint32, s string, front *wordFront) ([]uint32, error) {
	for i := 0; i < len(s); {
		e1 := deepSeekDigits(s, i)
		w.steps += e1 - i
		p1 := s[i:e1]
		for j := 0; j < len(p1); {
			e2 := deepSeekCJK(p1, j)
			w.steps += e2 - j
			p2 := p1[j:e2]
			for k := 0; k < len(p2); {
				end, far := nextDeepSeek(p2, k)
				w.steps += max(end, far) - k
				dst = t.model.encodeWord(dst, p2[k:end], front, &w.steps)
				if err := w.check(end - k); err != nil {
					return dst, err
				}
				k = end
			}
			j = e2
		}
		i = e1
	}
	return dst, nil
}

// appendLiteralWords is appendWords for no pre-tokenizer (the segment is
// one word) or a split after each occurrence of a string.
func (t *Tokenizer) appendLiteralWords(w *work, dst []uint32, s string, front *wordFront) ([]uint32, error) {
	cut := t.split.spaceCuts(s)
	if cut {
		w.steps += len(s) * len(t.split.spaceExcept) // searched for each
	}
	for len(s) > 0 {
		end := len(s)
		if t.split.literal != "" {
			if k := strings.Index(s, t.split.literal); k >= 0 {
				end = k + len(t.split.literal)
			}
		}
		if cut {
			end = t.split.nextChunk(t.model, s[:end])
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

// Decode turns ids back into text, special tokens included, as the
// ByteLevel decoder does. Unknown ids are skipped. The result is the exact
// bytes the ids stand for: it is valid UTF-8 whenever the ids end on a
// character boundary (Hugging Face would replace a cut character with
// U+FFFD). Decode(Encode(s)) == s for any s the normalizer leaves unchanged.
func (t *Tokenizer) Decode(ids []uint32) string {
	return t.decode(ids, false)
}

// DecodeSkipSpecial is Decode with skip_special_tokens=True.
func (t *Tokenizer) DecodeSkipSpecial(ids []uint32) string {
	return t.decode(ids, true)
}

func (t *Tokenizer) decode(ids []uint32, skipSpecial bool) string {
	n := 0
	for _, id := range ids {
		if int(id) < t.pieces.len() {
			n += len(t.pieces.at(int(id)))
		}
	}
	var b strings.Builder
	b.Grow(n)
	first := t.firstPieces.len() > 0 // the first token decodes otherwise (metaspace.go)
	for _, id := range ids {
		if int(id) >= len(t.known) || !t.known[id] || (skipSpecial && t.special[id]) {
			continue
		}
		if first {
			b.WriteString(t.firstPieces.at(int(id)))
			first = false
			continue
		}
		b.WriteString(t.pieces.at(int(id)))
	}
	out := b.String()
	for k := 0; k < t.stripStart && strings.HasPrefix(out, " "); k++ {
		out = out[1:]
	}
	return out
}

// VocabSize is one more than the largest id.
func (t *Tokenizer) VocabSize() int { return t.pieces.len() }

// AddedTokenID returns the id of an added (or special) token by its text.
func (t *Tokenizer) AddedTokenID(content string) (uint32, bool) {
	id, ok := t.addedByContent[content]
	return id, ok
}

// IsSpecial reports whether id is a special added token.
func (t *Tokenizer) IsSpecial(id uint32) bool { return t.special[id] }
