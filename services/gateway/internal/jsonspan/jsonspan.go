// Package jsonspan validates a JSON document in one pass and reports the
// byte spans of its top-level object members, without decoding them.
//
// The gateway needs only a handful of fields from a request body that may be
// megabytes of prompt, and it needs to know exactly where those fields sit so
// it can splice a small change into the body instead of re-encoding it. Key
// matching is exact (case-sensitive, escapes decoded), like the Python JSON
// parser behind vLLM, not case-insensitive like encoding/json.
package jsonspan

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Kind is the JSON type of a value.
type Kind uint8

// Kinds of JSON values.
const (
	Invalid Kind = iota
	Object
	Array
	String
	Number
	Bool
	Null
)

// String names the kind the way error messages talk about JSON types.
func (k Kind) String() string {
	switch k {
	case Object:
		return "object"
	case Array:
		return "array"
	case String:
		return "string"
	case Number:
		return "number"
	case Bool:
		return "boolean"
	case Null:
		return "null"
	}
	return "invalid"
}

// MaxDepth is the deepest nesting accepted, the same limit encoding/json
// applies, so a body valid for one is valid for the other.
const MaxDepth = 10000

// Member is one top-level member of an object.
type Member struct {
	// quotedKey is the key as written, quotes included.
	quotedKey []byte
	// Value is the raw value, as written.
	Value []byte
	// Offset is where Value starts in the document.
	Offset int
	Kind   Kind
}

// KeyIs reports whether the member's key, once unescaped, equals name.
func (m Member) KeyIs(name string) bool {
	raw := m.quotedKey[1 : len(m.quotedKey)-1]
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == name
	}
	var k string
	if err := json.Unmarshal(m.quotedKey, &k); err != nil {
		return false
	}
	return k == name
}

// SyntaxError says where a document stops being JSON.
type SyntaxError struct {
	Offset int // byte offset of the offending byte (len(doc) at end of input)
	Line   int // 1-based
	Column int // 1-based, in bytes
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("line %d, column %d (offset %d): %s", e.Line, e.Column, e.Offset, e.Msg)
}

// Members validates doc as exactly one JSON value (surrounded by optional
// whitespace). When the value is an object, fn (if not nil) is called for
// each top-level member in document order, duplicates included; spans stay
// valid as long as doc does. It returns the kind of the top-level value and
// the offset of the top-level closing brace (for objects; -1 otherwise).
func Members(doc []byte, fn func(Member)) (kind Kind, closeBrace int, err error) {
	s := scanner{data: doc}
	closeBrace = -1
	s.skipWS()
	if s.pos < len(s.data) && s.data[s.pos] == '{' {
		kind = Object
		s.base = 1
		closeBrace, err = s.object(fn)
	} else {
		kind, err = s.value()
	}
	if err != nil {
		return Invalid, -1, err
	}
	s.skipWS()
	if s.pos < len(s.data) {
		return Invalid, -1, s.errf("invalid character %s after top-level value", quoteChar(s.data[s.pos]))
	}
	return kind, closeBrace, nil
}

type scanner struct {
	data  []byte
	pos   int
	stack []byte
	// base is the depth the scan starts at: 1 inside the top-level object.
	base int
}

func (s *scanner) errf(format string, args ...any) *SyntaxError {
	line, col := 1, 1
	end := min(s.pos, len(s.data))
	for i := 0; i < end; i++ {
		if s.data[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return &SyntaxError{Offset: s.pos, Line: line, Column: col, Msg: fmt.Sprintf(format, args...)}
}

func (s *scanner) eof(what string) *SyntaxError {
	return s.errf("unexpected end of JSON input %s", what)
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

func (s *scanner) skipWS() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// object scans the top-level object, reporting members; s.pos is at '{'.
func (s *scanner) object(fn func(Member)) (int, error) {
	s.pos++
	s.skipWS()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		return s.pos - 1, nil
	}
	for {
		s.skipWS()
		if s.pos >= len(s.data) {
			return -1, s.eof("looking for object key")
		}
		if s.data[s.pos] != '"' {
			return -1, s.errf("invalid character %s looking for beginning of object key string", quoteChar(s.data[s.pos]))
		}
		keyStart := s.pos
		if err := s.str(); err != nil {
			return -1, err
		}
		key := s.data[keyStart:s.pos]
		s.skipWS()
		if s.pos >= len(s.data) {
			return -1, s.eof("after object key")
		}
		if s.data[s.pos] != ':' {
			return -1, s.errf("invalid character %s after object key", quoteChar(s.data[s.pos]))
		}
		s.pos++
		s.skipWS()
		start := s.pos
		kind, err := s.value()
		if err != nil {
			return -1, err
		}
		if fn != nil {
			fn(Member{quotedKey: key, Value: s.data[start:s.pos], Offset: start, Kind: kind})
		}
		s.skipWS()
		if s.pos >= len(s.data) {
			return -1, s.eof("after object value")
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return s.pos - 1, nil
		default:
			return -1, s.errf("invalid character %s after object key:value pair", quoteChar(s.data[s.pos]))
		}
	}
}

// value scans one value starting at the next non-space byte.
func (s *scanner) value() (Kind, error) {
	s.skipWS()
	if s.pos >= len(s.data) {
		return Invalid, s.eof("looking for beginning of value")
	}
	switch c := s.data[s.pos]; {
	case c == '{':
		return Object, s.container()
	case c == '[':
		return Array, s.container()
	case c == '"':
		return String, s.str()
	case c == 't':
		return Bool, s.literal("true")
	case c == 'f':
		return Bool, s.literal("false")
	case c == 'n':
		return Null, s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return Number, s.number()
	default:
		return Invalid, s.errf("invalid character %s looking for beginning of value", quoteChar(c))
	}
}

// scalar scans a value that is not a container.
func (s *scanner) scalar() error {
	switch c := s.data[s.pos]; {
	case c == '"':
		return s.str()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	default:
		return s.errf("invalid character %s looking for beginning of value", quoteChar(c))
	}
}

// container scans a nested object or array without recursion, so hostile
// nesting costs a byte of stack per level, not a goroutine stack frame.
func (s *scanner) container() error {
	const (
		stOpen  = iota // s.pos at '{' or '['
		stKey          // expecting an object key
		stElem         // expecting a value
		stAfter        // after a value: ',' or a closer
	)
	s.stack = s.stack[:0]
	state := stOpen
	for {
		switch state {
		case stOpen:
			c := s.data[s.pos]
			s.pos++
			s.stack = append(s.stack, c)
			if s.base+len(s.stack) > MaxDepth {
				s.pos--
				return s.errf("exceeded max depth %d", MaxDepth)
			}
			s.skipWS()
			if s.pos >= len(s.data) {
				return s.eof("inside " + containerName(c))
			}
			if (c == '{' && s.data[s.pos] == '}') || (c == '[' && s.data[s.pos] == ']') {
				s.pos++
				if s.pop() {
					return nil
				}
				state = stAfter
			} else if c == '{' {
				state = stKey
			} else {
				state = stElem
			}
		case stKey:
			s.skipWS()
			if s.pos >= len(s.data) {
				return s.eof("looking for object key")
			}
			if s.data[s.pos] != '"' {
				return s.errf("invalid character %s looking for beginning of object key string", quoteChar(s.data[s.pos]))
			}
			if err := s.str(); err != nil {
				return err
			}
			s.skipWS()
			if s.pos >= len(s.data) {
				return s.eof("after object key")
			}
			if s.data[s.pos] != ':' {
				return s.errf("invalid character %s after object key", quoteChar(s.data[s.pos]))
			}
			s.pos++
			state = stElem
		case stElem:
			s.skipWS()
			if s.pos >= len(s.data) {
				return s.eof("looking for beginning of value")
			}
			if c := s.data[s.pos]; c == '{' || c == '[' {
				state = stOpen
				continue
			}
			if err := s.scalar(); err != nil {
				return err
			}
			state = stAfter
		case stAfter:
			s.skipWS()
			top := s.stack[len(s.stack)-1]
			if s.pos >= len(s.data) {
				return s.eof("inside " + containerName(top))
			}
			c := s.data[s.pos]
			switch {
			case c == ',':
				s.pos++
				if top == '{' {
					state = stKey
				} else {
					state = stElem
				}
			case (top == '{' && c == '}') || (top == '[' && c == ']'):
				s.pos++
				if s.pop() {
					return nil
				}
			default:
				if top == '{' {
					return s.errf("invalid character %s after object key:value pair", quoteChar(c))
				}
				return s.errf("invalid character %s after array element", quoteChar(c))
			}
		}
	}
}

// pop closes the innermost container and reports whether it was the
// outermost one.
func (s *scanner) pop() bool {
	s.stack = s.stack[:len(s.stack)-1]
	return len(s.stack) == 0
}

func containerName(c byte) string {
	if c == '{' {
		return "object"
	}
	return "array"
}

// str scans a string; s.pos is at the opening quote.
func (s *scanner) str() error {
	s.pos++
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return nil
		case c == '\\':
			s.pos++
			if s.pos >= len(s.data) {
				return s.eof("in string escape code")
			}
			switch s.data[s.pos] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.pos++
			case 'u':
				s.pos++
				for range 4 {
					if s.pos >= len(s.data) {
						return s.eof("in \\u hexadecimal character escape")
					}
					if !isHex(s.data[s.pos]) {
						return s.errf("invalid character %s in \\u hexadecimal character escape", quoteChar(s.data[s.pos]))
					}
					s.pos++
				}
			default:
				return s.errf("invalid character %s in string escape code", quoteChar(s.data[s.pos]))
			}
		case c < 0x20:
			return s.errf("invalid character %s in string literal", quoteChar(c))
		default:
			s.pos++
		}
	}
	return s.eof("in string literal")
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func (s *scanner) literal(word string) error {
	for i := 0; i < len(word); i++ {
		if s.pos >= len(s.data) {
			return s.eof("in literal " + word)
		}
		if s.data[s.pos] != word[i] {
			return s.errf("invalid character %s in literal %s (expecting '%c')", quoteChar(s.data[s.pos]), word, word[i])
		}
		s.pos++
	}
	return nil
}

func (s *scanner) number() error {
	if s.data[s.pos] == '-' {
		s.pos++
	}
	if s.pos >= len(s.data) {
		return s.eof("in numeric literal")
	}
	switch c := s.data[s.pos]; {
	case c == '0':
		s.pos++
	case c >= '1' && c <= '9':
		s.digits()
	default:
		return s.errf("invalid character %s in numeric literal", quoteChar(c))
	}
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		s.pos++
		if err := s.requireDigits("after decimal point in numeric literal"); err != nil {
			return err
		}
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
		if err := s.requireDigits("in exponent of numeric literal"); err != nil {
			return err
		}
	}
	return nil
}

func (s *scanner) requireDigits(where string) error {
	if s.pos >= len(s.data) {
		return s.eof(where)
	}
	if c := s.data[s.pos]; c < '0' || c > '9' {
		return s.errf("invalid character %s %s", quoteChar(c), where)
	}
	s.digits()
	return nil
}

func (s *scanner) digits() {
	for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
		s.pos++
	}
}
