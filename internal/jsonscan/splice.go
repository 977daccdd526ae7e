package jsonscan

import (
	"slices"
	"unicode/utf8"
)

// Edit replaces doc[From:To] with Text; From == To inserts.
type Edit struct {
	From, To int
	Text     []byte
}

// Splice returns a copy of doc with the edits applied, in one allocation:
// every byte outside the edited spans is kept as it was, so a body with a
// changed model name is still the client's body, prompt bytes and all.
// Edits must not overlap; they may come in any order. doc is not modified.
func Splice(doc []byte, edits ...Edit) []byte {
	if !slices.IsSortedFunc(edits, byFrom) {
		edits = slices.SortedFunc(slices.Values(edits), byFrom)
	}
	n := len(doc)
	for _, e := range edits {
		n += len(e.Text) - (e.To - e.From)
	}
	out := make([]byte, 0, n)
	at := 0
	for _, e := range edits {
		out = append(out, doc[at:e.From]...)
		out = append(out, e.Text...)
		at = e.To
	}
	return append(out, doc[at:]...)
}

func byFrom(a, b Edit) int { return a.From - b.From }

// AppendString appends s to dst as a JSON string literal, escaping what JSON
// requires and replacing invalid UTF-8 with U+FFFD, as encoding/json does.
func AppendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
