package tokenizer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Simple is the deterministic default tokenizer. It is not a real
// vocabulary, but it behaves like BPE on English where the simulator and the
// router can tell: about four characters per token, stable ids, a shared
// prefix of text gives a shared prefix of ids.
//
// Rules, applied to the text between special tokens:
//
//   - A run of letters and digits is a word. It is cut into pieces of at
//     most four runes. When the word directly follows a single space, that
//     space is folded into the first piece as a leading marker "▁" (so
//     " hello" is "▁hell", "o"), as SentencePiece and GPT-2 BPE do.
//   - Every other whitespace rune is its own token (a space is "▁").
//   - Every other rune (punctuation, symbols, invalid bytes) is its own
//     token.
//   - A piece's id is ReservedIDs + FNV-1a-64(piece) mod (VocabSize -
//     ReservedIDs). Ids below ReservedIDs are special tokens.
//   - The strings "<|im_start|>", "<|im_end|>" and "<|endoftext|>" are
//     special tokens wherever they occur, with ids IMStartID, IMEndID and
//     EndOfTextID.
//
// Decode knows the pieces of SampleText, single ASCII characters and the
// special tokens; any other id decodes to U+FFFD, since hashes cannot be
// inverted. The simulator generates only from SampleText.
type Simple struct {
	pieces map[uint32]string
}

// Vocabulary layout of Simple.
const (
	VocabSize   = 1 << 18
	ReservedIDs = 256
	UnknownID   = 0
	IMStartID   = 1
	IMEndID     = 2
	EndOfTextID = 3
)

// Special-token strings.
const (
	IMStart   = "<|im_start|>"
	IMEnd     = "<|im_end|>"
	EndOfText = "<|endoftext|>"
)

const spaceMarker = "▁"

var specials = []struct {
	text string
	id   uint32
}{
	{IMStart, IMStartID},
	{IMEnd, IMEndID},
	{EndOfText, EndOfTextID},
}

// SampleText is English prose every Tokenizer can encode and decode back. The
// simulator draws its generated tokens from its encoding.
const SampleText = "The quick brown fox jumps over the lazy dog while the river runs " +
	"past the old mill, and the people of the valley gather their harvest " +
	"before the first snow. Every morning the baker opens her shop at dawn, " +
	"the children walk to school along the stone bridge, and the bells of the " +
	"tower ring seven times. In the evening the lamps are lit one by one, " +
	"travellers arrive with stories from distant cities, and the market square " +
	"fills with music, bread, apples, cheese and warm tea. Nothing here is " +
	"urgent; the seasons turn, the water keeps moving, and each day begins " +
	"again with light over the hills."

// NewSimple builds the default tokenizer.
func NewSimple() *Simple {
	t := &Simple{pieces: make(map[uint32]string, 512)}
	for _, s := range specials {
		t.pieces[s.id] = s.text
	}
	for c := rune(0x20); c < 0x7f; c++ {
		p := string(c)
		if c == ' ' {
			p = spaceMarker
		}
		t.learn(p)
	}
	t.learn("\n")
	t.learn("\t")
	forEachPiece(SampleText, func(marked bool, p string) {
		if marked {
			p = spaceMarker + p
		}
		t.learn(p)
	})
	return t
}

func (t *Simple) learn(piece string) {
	id := pieceID(false, piece)
	if _, ok := t.pieces[id]; !ok {
		t.pieces[id] = piece
	}
}

// Encode implements Tokenizer.
func (t *Simple) Encode(text string) []uint32 {
	return t.AppendEncode(make([]uint32, 0, len(text)/3+1), text)
}

// AppendEncode implements Tokenizer.
func (t *Simple) AppendEncode(ids []uint32, text string) []uint32 {
	ids, _ = t.AppendEncodeContext(context.Background(), ids, text)
	return ids
}

// AppendEncodeContext implements Tokenizer.
func (t *Simple) AppendEncodeContext(ctx context.Context, ids []uint32, text string) ([]uint32, error) {
	var work int
	return t.appendEncode(ctx, ids, text, &work)
}

// appendEncode is AppendEncodeContext, adding to *work the bytes it reads:
// those the special-token search goes through and compares, and those
// cut into pieces. Tests hold it to a constant times the text's length.
func (t *Simple) appendEncode(ctx context.Context, ids []uint32, text string, work *int) ([]uint32, error) {
	emit := func(m bool, p string) { ids = append(ids, pieceID(m, p)) }
	for len(text) > 0 {
		at, sp, scanned := nextSpecial(text)
		*work += scanned
		seg := text
		if at >= 0 {
			seg = text[:at]
		}
		// Pieces need no state from the ones before them, so a long
		// segment is done in slices, with a look at ctx between them.
		for i := 0; ; {
			if err := ctx.Err(); err != nil {
				return ids, err
			}
			next := piecesFrom(seg, i, i+CheckEvery, emit)
			*work += next - i
			if i = next; i >= len(seg) {
				break
			}
		}
		if at < 0 {
			break
		}
		ids = append(ids, specials[sp].id)
		text = text[at+len(specials[sp].text):]
	}
	return ids, nil
}

// Decode implements Tokenizer.
func (t *Simple) Decode(ids []uint32) string {
	var b strings.Builder
	for _, id := range ids {
		p, ok := t.pieces[id]
		if !ok {
			b.WriteRune(utf8.RuneError)
			continue
		}
		if rest, ok := strings.CutPrefix(p, spaceMarker); ok {
			b.WriteByte(' ')
			p = rest
		}
		b.WriteString(p)
	}
	return b.String()
}

// ApplyChatTemplate implements Tokenizer with a ChatML-like format:
//
//	<|im_start|>tools\n{tools JSON}<|im_end|>\n          (when tools are given)
//	<|im_start|>{role}\n{content}<|im_end|>\n            (per message; an
//	                                     assistant's tool calls follow its
//	                                     content as \n<tool_call>{JSON})
//	<|im_start|>assistant\n                            (generation prompt)
//
// JSON is compacted, so only its content, not its spacing, changes tokens.
func (t *Simple) ApplyChatTemplate(c *Chat) (string, error) {
	return t.ApplyChatTemplateContext(context.Background(), c, 0)
}

// ApplyChatTemplateContext implements Tokenizer.
func (t *Simple) ApplyChatTemplateContext(ctx context.Context, c *Chat, maxBytes int) (string, error) {
	if c == nil || len(c.Messages) == 0 {
		return "", errors.New("no messages to render")
	}
	var b bytes.Buffer
	if len(c.Tools) > 0 {
		b.WriteString(IMStart + "tools\n")
		if err := json.Compact(&b, c.Tools); err != nil {
			return "", fmt.Errorf("tools: %w", err)
		}
		b.WriteString(IMEnd + "\n")
	}
	checked := 0
	for i, m := range c.Messages {
		if b.Len()-checked >= CheckEvery {
			if err := ctx.Err(); err != nil {
				return "", err
			}
			checked = b.Len()
		}
		if maxBytes > 0 && b.Len() > maxBytes {
			return "", tooLarge(maxBytes)
		}
		if m.Role == "" {
			return "", errors.New("message without a role")
		}
		b.WriteString(IMStart)
		b.WriteString(m.Role)
		b.WriteByte('\n')
		b.WriteString(m.Content)
		if len(m.ToolCalls) > 0 {
			b.WriteString("\n<tool_call>")
			if err := json.Compact(&b, m.ToolCalls); err != nil {
				return "", fmt.Errorf("messages[%d].tool_calls: %w", i, err)
			}
		}
		b.WriteString(IMEnd)
		b.WriteByte('\n')
	}
	if c.AddGenerationPrompt {
		b.WriteString(IMStart)
		b.WriteString("assistant\n")
	}
	if maxBytes > 0 && b.Len() > maxBytes {
		return "", tooLarge(maxBytes)
	}
	if c.ContinueFinalMessage {
		return ContinueFinal(b.String(), c.Messages)
	}
	return b.String(), nil
}

func tooLarge(maxBytes int) error {
	return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, maxBytes)
}

// nextSpecial finds the first special token in s. It scans s once: every
// special token starts with '<', so only the places holding one are
// compared. (Searching s for each token in turn, from each match on, was
// quadratic: text full of one token rescanned the rest for the others.)
func nextSpecial(s string) (at, which, scanned int) {
	for i := 0; i < len(s); i++ {
		j := strings.IndexByte(s[i:], '<')
		if j < 0 {
			return -1, -1, scanned + len(s) - i
		}
		i += j
		scanned += j + 1
		for k, sp := range specials {
			scanned += min(len(sp.text), len(s)-i)
			if strings.HasPrefix(s[i:], sp.text) {
				return i, k, scanned
			}
		}
	}
	return -1, -1, scanned
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// forEachPiece calls fn with every piece of s in order, following the rules
// documented on Simple. marked reports a folded leading space: the piece is
// then "▁" followed by p. p is always a substring of s (no allocation).
func forEachPiece(s string, fn func(marked bool, p string)) {
	piecesFrom(s, 0, len(s), fn)
}

// piecesFrom is forEachPiece from the piece starting at s[i], stopping at
// the first piece that starts at or after until; it returns where that
// piece starts (len(s) at the end). A piece depends only on the text from
// its start on, so the pieces of s are those of piecesFrom(s, 0, k) and
// then of piecesFrom(s, the returned index, ...).
func piecesFrom(s string, i, until int, fn func(marked bool, p string)) int {
	for i < len(s) && i < until {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case isWordRune(r):
			i = emitWord(s, i, false, fn)
		case r == ' ' && i+1 < len(s) && startsWord(s[i+1:]):
			i = emitWord(s, i+1, true, fn)
		case r == ' ':
			fn(false, spaceMarker)
			i += size
		default:
			fn(false, s[i:i+size])
			i += size
		}
	}
	return i
}

func startsWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return isWordRune(r)
}

// emitWord emits the word starting at i in pieces of at most four runes and
// returns the index after it.
func emitWord(s string, i int, marked bool, fn func(bool, string)) int {
	for first := true; i < len(s); first = false {
		start, n := i, 0
		for i < len(s) && n < 4 {
			r, size := utf8.DecodeRuneInString(s[i:])
			if !isWordRune(r) {
				break
			}
			i += size
			n++
		}
		if n == 0 {
			break
		}
		fn(first && marked, s[start:i])
		if n < 4 {
			break
		}
	}
	return i
}

// pieceID hashes a piece (with the space marker first when marked) into the
// non-reserved id range.
func pieceID(marked bool, p string) uint32 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	if marked {
		for i := 0; i < len(spaceMarker); i++ {
			h ^= uint64(spaceMarker[i])
			h *= prime
		}
	}
	for i := 0; i < len(p); i++ {
		h ^= uint64(p[i])
		h *= prime
	}
	return ReservedIDs + uint32(h%(VocabSize-ReservedIDs))
}
