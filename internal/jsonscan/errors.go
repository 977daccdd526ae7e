package jsonscan

import (
	"fmt"
	"strconv"
	"strings"
)

// SyntaxError says where a document stops being JSON.
type SyntaxError struct {
	Offset int // byte offset of the offending byte (len(doc) at the end of input)
	Line   int // 1-based
	Column int // 1-based, in bytes
	// Path is the member the error is in, as a client would name it
	// (messages[2].content); empty at the top level.
	Path string
	Msg  string
}

func (e *SyntaxError) Error() string {
	if e.Path != "" {
		return fmt.Sprintf("line %d, column %d (offset %d), in %s: %s", e.Line, e.Column, e.Offset, e.Path, e.Msg)
	}
	return fmt.Sprintf("line %d, column %d (offset %d): %s", e.Line, e.Column, e.Offset, e.Msg)
}

// failCode is why the grammar stopped a scan. The message is built only when
// someone asks (Decoder.Err): a fast path that gives up never pays for it.
type failCode uint8

const (
	failNone failCode = iota
	failValue
	failKey
	failColon
	failObjectNext
	failArrayNext
	failString
	failEscape
	failHex
	failLiteral
	failNumber
	failFraction
	failExponent
	failDepth
	failTrailing
)

// failure is where and why a scan stopped.
type failure struct {
	code failCode
	pos  int
	// lit and k are the literal being read and the index of its byte
	// expected at pos (failLiteral).
	lit string
	k   int
}

// syntaxError describes f in doc.
func syntaxError(doc []byte, f failure) *SyntaxError {
	line, col := 1, 1
	end := min(f.pos, len(doc))
	for i := range end {
		if doc[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return &SyntaxError{Offset: f.pos, Line: line, Column: col, Path: pathAt(doc, end), Msg: f.message(doc)}
}

// failWhere says where in the grammar each failure is, for the two ways of
// failing there: the input ended, or a byte did not fit.
var failWhere = [...]struct{ atEOF, atChar string }{
	failValue:      {"looking for beginning of value", "looking for beginning of value"},
	failKey:        {"looking for object key", "looking for beginning of object key string"},
	failColon:      {"after object key", "after object key"},
	failObjectNext: {"inside object", "after object key:value pair"},
	failArrayNext:  {"inside array", "after array element"},
	failString:     {"in string literal", "in string literal"},
	failEscape:     {"in string escape code", "in string escape code"},
	failHex:        {`in \u hexadecimal character escape`, `in \u hexadecimal character escape`},
	failNumber:     {"in numeric literal", "in numeric literal"},
	failFraction:   {"after decimal point in numeric literal", "after decimal point in numeric literal"},
	failExponent:   {"in exponent of numeric literal", "in exponent of numeric literal"},
	failTrailing:   {"", "after top-level value"},
}

func (f failure) message(doc []byte) string {
	where := failWhere[min(int(f.code), len(failWhere)-1)]
	switch f.code {
	case failDepth:
		return "exceeded max depth " + strconv.Itoa(MaxDepth)
	case failLiteral:
		where.atEOF = "in literal " + f.lit
		where.atChar = fmt.Sprintf("in literal %s (expecting '%c')", f.lit, f.lit[f.k])
	}
	if f.pos >= len(doc) {
		return "unexpected end of JSON input " + where.atEOF
	}
	return "invalid character " + quoteChar(doc[f.pos]) + " " + where.atChar
}

func quoteChar(c byte) string {
	switch {
	case c == '\'':
		return `'\''`
	case c == '"':
		return `'"'`
	case c < 0x20 || c >= 0x7f:
		return fmt.Sprintf("0x%02x", c)
	}
	return "'" + string(c) + "'"
}

// maxPathFrames bounds the path an error names; deeper, it names the
// innermost levels only.
const maxPathFrames = 32

// pathAt names the member that contains doc[end], from a scan of
// doc[:end], which is grammatical: the error is at end.
func pathAt(doc []byte, end int) string {
	type frame struct {
		obj     bool
		key     string
		hasKey  bool
		index   int
		wantKey bool
	}
	var st []frame
	for i := 0; i < end; {
		switch doc[i] {
		case '{':
			st = append(st, frame{obj: true, wantKey: true})
		case '[':
			st = append(st, frame{})
		case '}', ']':
			if len(st) > 0 {
				st = st[:len(st)-1]
			}
		case ',':
			if n := len(st); n > 0 {
				if st[n-1].obj {
					st[n-1].wantKey, st[n-1].hasKey = true, false
				} else {
					st[n-1].index++
				}
			}
		case '"':
			j := stringEnd(doc, i, end)
			if j < 0 {
				i = end // the error is inside this string
				continue
			}
			if n := len(st); n > 0 && st[n-1].obj && st[n-1].wantKey {
				k, _ := Unquote(doc[i:j])
				st[n-1].key, st[n-1].hasKey, st[n-1].wantKey = k, true, false
			}
			i = j
			continue
		}
		i++
	}
	var b strings.Builder
	if len(st) > maxPathFrames {
		b.WriteString("…")
		st = st[len(st)-maxPathFrames:]
	}
	for _, f := range st {
		switch {
		case f.obj && f.hasKey:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		case f.obj:
			return b.String() // between members: the object itself
		default:
			b.WriteString("[" + strconv.Itoa(f.index) + "]")
		}
	}
	return b.String()
}

// stringEnd returns the index after the string starting at doc[i] (a
// quote), or -1 when it does not end before end.
func stringEnd(doc []byte, i, end int) int {
	for j := i + 1; j < end; j++ {
		switch doc[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}
