package jsonscan

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting accepted, the limit encoding/json and
// go-json-experiment apply, so a body one of them reads is one this package
// reads.
const MaxDepth = 10000

// Decoder reads one JSON document. The zero value is not usable; see
// NewDecoder. Every reader either consumes what it reads and returns true,
// or returns false and leaves the Decoder where it stopped; Err then says
// whether it stopped on a syntax error.
type Decoder struct {
	b []byte
	i int
	// depth is how many objects and arrays Object and Array are inside.
	depth int
	// scratch holds a string being unescaped; reused across strings.
	scratch []byte
	stack   bitStack
	fail    failure
}

// NewDecoder returns a Decoder at the start of doc.
func NewDecoder(doc []byte) Decoder { return Decoder{b: doc} }

// Err is the syntax error that stopped the Decoder, or nil when it stopped
// for another reason (a value its caller did not expect, invalid UTF-8 in
// a decoded string) or did not stop.
func (d *Decoder) Err() error {
	if d.fail.code == failNone {
		return nil
	}
	return syntaxError(d.b, d.fail)
}

// Offset is the index of the next byte to read.
func (d *Decoder) Offset() int { return d.i }

// stop records a syntax error at pos and returns false.
func (d *Decoder) stop(code failCode, pos int) bool {
	d.fail = failure{code: code, pos: pos}
	return false
}

func (d *Decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// Peek skips whitespace and returns the next byte, 0 at the end.
func (d *Decoder) Peek() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// eat consumes c after optional whitespace.
func (d *Decoder) eat(c byte) bool {
	if d.Peek() != c {
		return false
	}
	d.i++
	return true
}

// literal consumes the keyword lit (true, false or null) at d.i.
func (d *Decoder) literal(lit string) bool {
	b, i := d.b, d.i
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		d.i += len(lit)
		return true
	}
	for k := 0; k < len(lit); k++ {
		if i+k >= len(b) || b[i+k] != lit[k] {
			d.fail = failure{code: failLiteral, pos: i + k, lit: lit, k: k}
			return false
		}
	}
	return false // not reached
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

// specialASCII is special without non-ASCII bytes, for scans that do not
// check UTF-8.
func specialASCII(w uint64) uint64 {
	q := w ^ (ones * '"')
	bs := w ^ (ones * '\\')
	return ((q-ones)&^q | (bs-ones)&^bs | (w-ones*0x20)&^w) & highs
}

// str scans the string at d.i (its opening quote). With decode, it returns
// the string's bytes with escapes decoded: a slice of the document when it
// has none, else of d.scratch, valid until the next call. With strict,
// invalid UTF-8 stops it (without a syntax error: the grammar allows it,
// but a caller that decodes wants encoding/json's replacement of it). Lone
// and unpaired surrogate escapes decode to U+FFFD, as encoding/json does.
func (d *Decoder) str(decode, strict bool) ([]byte, bool) {
	b := d.b
	i := d.i + 1
	start := i // first byte not yet copied to out
	var out []byte
	escaped := false
	for {
		// Whole words while no byte needs a look, then straight to the first
		// one that does: the lowest flag of special is never a false one.
		for i+8 <= len(b) {
			var m uint64
			if w := binary.LittleEndian.Uint64(b[i:]); strict {
				m = special(w)
			} else {
				m = specialASCII(w)
			}
			if m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(b) {
			d.i = i
			return nil, d.stop(failString, i)
		}
		switch c := b[i]; {
		case c == '"':
			d.i = i + 1
			if !escaped {
				return b[start:i], true
			}
			out = append(out, b[start:i]...)
			d.scratch = out
			return out, true
		case c == '\\':
			if decode {
				if !escaped {
					escaped, out = true, d.scratch[:0]
				}
				out = append(out, b[start:i]...)
			}
			if i+1 < len(b) && escapes[b[i+1]] != 0 {
				if decode {
					out = append(out, escapes[b[i+1]])
				}
				i += 2
				start = i
				continue
			}
			var code failCode
			var pos int
			if out, i, code, pos = unescape(out, b, i, decode); code != failNone {
				d.i = pos
				return nil, d.stop(code, pos)
			}
			start = i
		case c < 0x20:
			d.i = i
			return nil, d.stop(failString, i)
		case c < utf8.RuneSelf || !strict:
			i++
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				d.i = i
				return nil, false
			}
			i += n
		}
	}
}

// escapes maps the byte after a backslash to what it stands for, for the
// one-byte escapes (zero for the others).
var escapes = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// unescape reads the escape sequence at b[i] (a backslash), appending its
// bytes to out when decode is set, and returns the index after it; or the
// failure and its position.
func unescape(out, b []byte, i int, decode bool) ([]byte, int, failCode, int) {
	if i+1 >= len(b) {
		return out, i, failEscape, len(b)
	}
	if c := escapes[b[i+1]]; c != 0 {
		if decode {
			out = append(out, c)
		}
		return out, i + 2, failNone, 0
	}
	switch b[i+1] {
	case 'u':
		r, bad := hex4(b, i+2)
		if bad >= 0 {
			return out, i, failHex, bad
		}
		i += 6
		if !decode {
			return out, i, failNone, 0
		}
		if utf16.IsSurrogate(r) {
			if len(b) >= i+6 && b[i] == '\\' && b[i+1] == 'u' {
				if r2, bad := hex4(b, i+2); bad < 0 {
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						return utf8.AppendRune(out, dec), i + 6, failNone, 0
					}
				}
			}
			r = utf8.RuneError
		}
		return utf8.AppendRune(out, r), i, failNone, 0
	}
	return out, i, failEscape, i + 1
}

// hex4 reads four hex digits at b[i:]; bad is the index of the first byte
// that is not one (len(b) when the input ends), -1 when all are.
func hex4(b []byte, i int) (r rune, bad int) {
	for k := i; k < i+4; k++ {
		if k >= len(b) {
			return 0, len(b)
		}
		c := b[k]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, k
		}
		r = r<<4 | rune(c)
	}
	return r, -1
}

// number scans a JSON number at d.i and returns its text.
func (d *Decoder) number() ([]byte, bool) {
	b, i := d.b, d.i
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
		d.i = i
		return nil, d.stop(failNumber, i)
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			d.i = i
			return nil, d.stop(failFraction, i)
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
			d.i = i
			return nil, d.stop(failExponent, i)
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	d.i = i
	return b[start:i], true
}

// scalar scans a string, number or literal at d.i.
func (d *Decoder) scalar() (Kind, bool) {
	switch c := d.b[d.i]; {
	case c == '"':
		_, ok := d.str(false, false)
		return String, ok
	case c == 't':
		return Bool, d.literal("true")
	case c == 'f':
		return Bool, d.literal("false")
	case c == 'n':
		return Null, d.literal("null")
	case c == '-' || ('0' <= c && c <= '9'):
		_, ok := d.number()
		return Number, ok
	}
	return Invalid, d.stop(failValue, d.i)
}

// value scans the value starting at the next non-space byte, depth levels
// below the top, and returns its kind.
func (d *Decoder) value(depth int, h *dedupe) (Kind, bool) {
	d.ws()
	if d.i >= len(d.b) {
		return Invalid, d.stop(failValue, d.i)
	}
	switch d.b[d.i] {
	case '{':
		return Object, d.container(depth, h)
	case '[':
		return Array, d.container(depth, h)
	}
	return d.scalar()
}

// container scans the object or array at d.i, whose parent is depth levels
// below the top, without recursion: hostile nesting costs a bit of the
// stack per level. h, when not nil, is told about every object's members.
func (d *Decoder) container(depth int, h *dedupe) bool {
	const (
		stOpen  = iota // d.i at '{' or '['
		stKey          // expecting an object key
		stElem         // expecting a value
		stAfter        // after a value: ',' or a closer
	)
	st := &d.stack
	st.reset()
	state := stOpen
	for {
		switch state {
		case stOpen:
			c := d.b[d.i]
			if depth+st.n+1 > MaxDepth {
				return d.stop(failDepth, d.i)
			}
			st.push(c == '{')
			if h != nil && c == '{' {
				h.open(d.i)
			}
			d.i++
			d.ws()
			if d.i >= len(d.b) {
				if c == '{' {
					return d.stop(failKey, d.i)
				}
				return d.stop(failValue, d.i)
			}
			switch {
			case c == '{' && d.b[d.i] == '}', c == '[' && d.b[d.i] == ']':
				d.i++
				if h != nil && c == '{' {
					h.close(d.i)
				}
				if st.pop() {
					return true
				}
				state = stAfter
			case c == '{':
				state = stKey
			default:
				state = stElem
			}
		case stKey:
			d.ws()
			if d.i >= len(d.b) || d.b[d.i] != '"' {
				return d.stop(failKey, d.i)
			}
			keyStart := d.i
			key, ok := d.str(h != nil, false)
			if !ok {
				return false
			}
			if h != nil {
				h.key(d.b, key, keyStart, d.i)
			}
			d.ws()
			if d.i >= len(d.b) || d.b[d.i] != ':' {
				return d.stop(failColon, d.i)
			}
			d.i++
			state = stElem
		case stElem:
			d.ws()
			if d.i >= len(d.b) {
				return d.stop(failValue, d.i)
			}
			if h != nil && st.top() {
				h.valueStart(d.i)
			}
			if c := d.b[d.i]; c == '{' || c == '[' {
				state = stOpen
				continue
			}
			if _, ok := d.scalar(); !ok {
				return false
			}
			state = stAfter
		case stAfter:
			obj := st.top()
			if h != nil && obj {
				h.valueEnd(d.i)
			}
			d.ws()
			if d.i >= len(d.b) {
				if obj {
					return d.stop(failObjectNext, d.i)
				}
				return d.stop(failArrayNext, d.i)
			}
			c := d.b[d.i]
			switch {
			case c == ',':
				d.i++
				if obj {
					state = stKey
				} else {
					state = stElem
				}
			case obj && c == '}', !obj && c == ']':
				d.i++
				if h != nil && obj {
					h.close(d.i)
				}
				if st.pop() {
					return true
				}
			case obj:
				return d.stop(failObjectNext, d.i)
			default:
				return d.stop(failArrayNext, d.i)
			}
		}
	}
}

// bitStack is the nesting of a scan, one bit a level (set: an object). The
// first 64 levels cost no allocation.
type bitStack struct {
	n     int
	small uint64
	big   []uint64
}

func (s *bitStack) reset() { s.n = 0 }

func (s *bitStack) push(obj bool) {
	var bit uint64
	if obj {
		bit = 1
	}
	if s.n < 64 {
		s.small = s.small&^(1<<s.n) | bit<<s.n
	} else {
		w, k := (s.n-64)/64, (s.n-64)%64
		if w == len(s.big) {
			s.big = append(s.big, 0)
		}
		s.big[w] = s.big[w]&^(1<<k) | bit<<k
	}
	s.n++
}

// pop closes the innermost level and reports whether it was the outermost.
func (s *bitStack) pop() bool {
	s.n--
	return s.n == 0
}

// top reports whether the innermost level is an object.
func (s *bitStack) top() bool {
	k := s.n - 1
	if k < 64 {
		return s.small>>k&1 == 1
	}
	k -= 64
	return s.big[k/64]>>(k%64)&1 == 1
}
