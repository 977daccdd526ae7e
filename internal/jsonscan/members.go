package jsonscan

import "bytes"

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

// End is the offset just after the value.
func (m Member) End() int { return m.Offset + len(m.Value) }

// KeyIs reports whether the member's key, once unescaped, is exactly name.
func (m Member) KeyIs(name string) bool {
	raw := m.quotedKey[1 : len(m.quotedKey)-1]
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == name
	}
	k, ok := Unquote(m.quotedKey)
	return ok && k == name
}

// Members validates doc as exactly one JSON value (surrounded by optional
// whitespace). When the value is an object, fn (if not nil) is called for
// each top-level member in document order, repeated keys included (Last
// applies the key rule); spans stay valid as long as doc does. It returns
// the kind of the top-level value and the offset of the top-level closing
// brace (for objects; -1 otherwise).
func Members(doc []byte, fn func(Member)) (kind Kind, closeBrace int, err error) {
	d := Decoder{b: doc}
	closeBrace = -1
	ok := false
	if d.Peek() == '{' {
		kind = Object
		closeBrace, ok = d.members(fn)
	} else {
		kind, ok = d.value(0, nil)
	}
	if !ok || !d.End() {
		return Invalid, -1, d.Err()
	}
	return kind, closeBrace, nil
}

// members scans the top-level object at d.i, reporting its members.
func (d *Decoder) members(fn func(Member)) (int, bool) {
	d.i++
	if d.eat('}') {
		return d.i - 1, true
	}
	for {
		d.ws()
		if d.i >= len(d.b) || d.b[d.i] != '"' {
			return -1, d.stop(failKey, d.i)
		}
		keyStart := d.i
		if _, ok := d.str(false, false); !ok {
			return -1, false
		}
		key := d.b[keyStart:d.i]
		if !d.eat(':') {
			return -1, d.stop(failColon, d.i)
		}
		d.ws()
		start := d.i
		kind, ok := d.value(1, nil)
		if !ok {
			return -1, false
		}
		if fn != nil {
			fn(Member{quotedKey: key, Value: d.b[start:d.i], Offset: start, Kind: kind})
		}
		switch d.Peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return d.i - 1, true
		default:
			return -1, d.stop(failObjectNext, d.i)
		}
	}
}

// Last finds the member called key of the object obj by the key rule: the
// last one of that name. found is false when there is none, and closeBrace
// is -1 (and found false) when obj is not a valid JSON object.
func Last(obj []byte, key string) (m Member, found bool, closeBrace int) {
	kind, closeBrace, err := Members(obj, func(c Member) {
		if c.KeyIs(key) {
			m, found = c, true
		}
	})
	if err != nil || kind != Object {
		return Member{}, false, -1
	}
	return m, found, closeBrace
}

// Unquote decodes a JSON string literal (quotes included), as the Decoder
// decodes strings; it allocates only when the literal has escapes. ok is
// false when lit is not one valid string literal.
func Unquote(lit []byte) (s string, ok bool) {
	if len(lit) < 2 || lit[0] != '"' {
		return "", false
	}
	d := Decoder{b: lit}
	v, ok := d.str(true, false)
	if !ok || d.i != len(lit) {
		return "", false
	}
	return string(v), true
}
