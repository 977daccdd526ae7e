package openaiapi

import (
	"encoding/binary"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// scanner is the JSON reader of the fast paths (chatfast.go). It knows only
// the grammar and the inputs those paths are built for: whatever else it
// meets — a syntax error, invalid UTF-8, a nesting deeper than maxDepth —
// makes it give up (ok = false) rather than report anything, and the
// caller reads the body again with the general decoder, whose answer,
// error messages included, is encoding/json's.
//
// Strings are scanned 8 bytes at a time (see special) and decoded in the
// same pass; prompt bodies are mostly long message strings, which
// jsontext scans a byte at a time and then unquotes in a second pass.
type scanner struct {
	b []byte
	i int
	// scratch holds a string being unescaped; reused across strings.
	scratch []byte
}

// maxDepth bounds the nesting the scanner follows before giving up, so a
// hostile body cannot grow its stack: the general decoder has its own
// limits and errors.
const maxDepth = 256

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek skips whitespace and returns the next byte, 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// eat consumes c after optional whitespace.
func (s *scanner) eat(c byte) bool {
	if s.peek() != c {
		return false
	}
	s.i++
	return true
}

// literal consumes the keyword lit (true, false or null) at s.i.
func (s *scanner) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special is non-zero when one of the 8 bytes of w needs a look: a quote,
// a backslash, a control character or a non-ASCII byte. It has no false
// negatives; a false positive (a borrow above a true one) only costs a
// few bytes of the byte-wise loop.
func special(w uint64) uint64 {
	q := w ^ (ones * '"')
	bs := w ^ (ones * '\\')
	return ((q-ones)&^q | (bs-ones)&^bs | (w - ones*0x20) | w) & highs
}

// stringBytes scans the string at s.i (its opening quote) and returns its
// decoded bytes: a slice of the body when it has no escapes, else of
// s.scratch, valid until the next call.
func (s *scanner) stringBytes() ([]byte, bool) {
	b := s.b
	if s.i >= len(b) || b[s.i] != '"' {
		return nil, false
	}
	i := s.i + 1
	start := i // first byte not yet copied to out
	var out []byte
	escaped := false
	for {
		for i+8 <= len(b) && special(binary.LittleEndian.Uint64(b[i:])) == 0 {
			i += 8
		}
		if i >= len(b) {
			return nil, false
		}
		switch c := b[i]; {
		case c == '"':
			s.i = i + 1
			if !escaped {
				return b[start:i], true
			}
			out = append(out, b[start:i]...)
			s.scratch = out
			return out, true
		case c == '\\':
			if !escaped {
				escaped, out = true, s.scratch[:0]
			}
			out = append(out, b[start:i]...)
			var ok bool
			if out, i, ok = unescape(out, b, i); !ok {
				return nil, false
			}
			start = i
		case c < 0x20:
			return nil, false
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				return nil, false // encoding/json replaces it; leave that to it
			}
			i += n
		}
	}
}

// unescape appends the escape sequence at b[i] (a backslash) to out and
// returns the index after it. Surrogates follow encoding/json: a valid
// pair is one rune, any other surrogate U+FFFD.
func unescape(out, b []byte, i int) ([]byte, int, bool) {
	if i+1 >= len(b) {
		return out, i, false
	}
	switch c := b[i+1]; c {
	case '"', '\\', '/':
		return append(out, c), i + 2, true
	case 'b':
		return append(out, '\b'), i + 2, true
	case 'f':
		return append(out, '\f'), i + 2, true
	case 'n':
		return append(out, '\n'), i + 2, true
	case 'r':
		return append(out, '\r'), i + 2, true
	case 't':
		return append(out, '\t'), i + 2, true
	case 'u':
		r, ok := hex4(b, i+2)
		if !ok {
			return out, i, false
		}
		i += 6
		if utf16.IsSurrogate(r) {
			if len(b) >= i+6 && b[i] == '\\' && b[i+1] == 'u' {
				if r2, ok := hex4(b, i+2); ok {
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						return utf8.AppendRune(out, dec), i + 6, true
					}
				}
			}
			r = utf8.RuneError
		}
		return utf8.AppendRune(out, r), i, true
	}
	return out, i, false
}

func hex4(b []byte, i int) (rune, bool) {
	if len(b) < i+4 {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// str reads a string value as a new Go string.
func (s *scanner) str() (string, bool) {
	v, ok := s.stringBytes()
	return string(v), ok
}

// number scans a JSON number at s.i and returns its text.
func (s *scanner) number() ([]byte, bool) {
	b, i := s.b, s.i
	start := i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		return nil, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return nil, false
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return nil, false
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	s.i = i
	return b[start:i], true
}

// integer reads a number that must be an integer fitting an int64, as
// encoding/json requires of an int field; anything else gives up (the
// general decoder reports the type error).
func (s *scanner) integer() (int64, bool) {
	lit, ok := s.number()
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(string(lit), 10, 64)
	return n, err == nil
}

// float reads a number into a float64 as encoding/json does.
func (s *scanner) float() (float64, bool) {
	lit, ok := s.number()
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	return f, err == nil
}

// boolean reads true or false.
func (s *scanner) boolean() (bool, bool) {
	switch s.peek() {
	case 't':
		return true, s.literal("true")
	case 'f':
		return false, s.literal("false")
	}
	return false, false
}

// null consumes a null if one comes next.
func (s *scanner) null() bool {
	return s.peek() == 'n' && s.literal("null")
}

// skip validates and steps over one value of any kind.
func (s *scanner) skip(depth int) bool {
	if depth > maxDepth {
		return false
	}
	switch c := s.peek(); {
	case c == '"':
		_, ok := s.stringBytes()
		return ok
	case c == '{':
		s.i++
		if s.eat('}') {
			return true
		}
		for {
			if s.peek() != '"' {
				return false
			}
			if _, ok := s.stringBytes(); !ok || !s.eat(':') || !s.skip(depth+1) {
				return false
			}
			if s.eat('}') {
				return true
			}
			if !s.eat(',') {
				return false
			}
		}
	case c == '[':
		s.i++
		if s.eat(']') {
			return true
		}
		for {
			if !s.skip(depth + 1) {
				return false
			}
			if s.eat(']') {
				return true
			}
			if !s.eat(',') {
				return false
			}
		}
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || ('0' <= c && c <= '9'):
		_, ok := s.number()
		return ok
	}
	return false
}

// raw steps over a value and returns a copy of its bytes, as
// json.RawMessage keeps them.
func (s *scanner) raw() ([]byte, bool) {
	s.ws()
	start := s.i
	if !s.skip(0) {
		return nil, false
	}
	return append([]byte(nil), s.b[start:s.i]...), true
}

// object reads an object's members, calling member with each key (the
// decoded bytes, valid only during the call) with s.i at its value. A
// member must consume its value or give up.
func (s *scanner) object(member func(key []byte) bool) bool {
	if !s.eat('{') {
		return false
	}
	if s.eat('}') {
		return true
	}
	for {
		if s.peek() != '"' {
			return false
		}
		key, ok := s.stringBytes()
		if !ok || !s.eat(':') {
			return false
		}
		s.ws()
		if !member(key) {
			return false
		}
		if s.eat('}') {
			return true
		}
		if !s.eat(',') {
			return false
		}
	}
}

// array reads an array, calling elem with s.i at each element.
func (s *scanner) array(elem func() bool) bool {
	if !s.eat('[') {
		return false
	}
	if s.eat(']') {
		return true
	}
	for {
		s.ws()
		if !elem() {
			return false
		}
		if s.eat(']') {
			return true
		}
		if !s.eat(',') {
			return false
		}
	}
}

// end reports whether only whitespace is left.
func (s *scanner) end() bool {
	s.ws()
	return s.i == len(s.b)
}
