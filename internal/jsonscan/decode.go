package jsonscan

import "strconv"

// The typed readers of Decoder. Each reads one value of the kind it names
// at the next non-space byte; a value of another kind makes it return
// false without a syntax error, so a fast path can give up and leave the
// document to a general decoder.

// StringBytes reads a string and returns its decoded bytes: a slice of the
// document when it has no escapes, else of a buffer reused by the next
// call. Invalid UTF-8 gives up, as the caller would have to replace it.
func (d *Decoder) StringBytes() ([]byte, bool) {
	if d.Peek() != '"' {
		return nil, false
	}
	return d.str(true, true)
}

// Str reads a string as a new Go string.
func (d *Decoder) Str() (string, bool) {
	v, ok := d.StringBytes()
	return string(v), ok
}

// Null consumes a null if one comes next.
func (d *Decoder) Null() bool {
	return d.Peek() == 'n' && d.literal("null")
}

// Bool reads true or false.
func (d *Decoder) Bool() (v, ok bool) {
	switch d.Peek() {
	case 't':
		return true, d.literal("true")
	case 'f':
		return false, d.literal("false")
	}
	return false, false
}

// Int reads a number that is an integer fitting an int64, as a Go integer
// field requires; anything else gives up.
func (d *Decoder) Int() (int64, bool) {
	lit, ok := d.num()
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(string(lit), 10, 64)
	return n, err == nil
}

// Float reads a number into a float64; one out of its range gives up.
func (d *Decoder) Float() (float64, bool) {
	lit, ok := d.num()
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	return f, err == nil
}

func (d *Decoder) num() ([]byte, bool) {
	if c := d.Peek(); c != '-' && (c < '0' || c > '9') {
		return nil, false
	}
	return d.number()
}

// Skip validates and steps over one value of any kind.
func (d *Decoder) Skip() bool {
	_, ok := d.value(d.depth, nil)
	return ok
}

// Raw steps over a value and returns a copy of its bytes.
func (d *Decoder) Raw() ([]byte, bool) {
	d.ws()
	start := d.i
	if !d.Skip() {
		return nil, false
	}
	return append([]byte(nil), d.b[start:d.i]...), true
}

// Object reads an object, calling member with each key (decoded, valid
// only during the call) and the Decoder at its value. member must consume
// the value or return false. Repeated keys are all reported, in order: the
// caller applies the key rule (the last one counts) by letting a later
// value replace an earlier one.
func (d *Decoder) Object(member func(key []byte) bool) bool {
	if !d.enter('{') {
		return false
	}
	defer func() { d.depth-- }()
	if d.eat('}') {
		return true
	}
	for {
		if d.Peek() != '"' {
			return d.stop(failKey, d.i)
		}
		key, ok := d.str(true, true)
		if !ok {
			return false
		}
		if !d.eat(':') {
			return d.stop(failColon, d.i)
		}
		d.ws()
		if !member(key) {
			return false
		}
		if d.eat('}') {
			return true
		}
		if !d.eat(',') {
			return d.stop(failObjectNext, d.i)
		}
	}
}

// Array reads an array, calling elem with the Decoder at each element.
func (d *Decoder) Array(elem func() bool) bool {
	if !d.enter('[') {
		return false
	}
	defer func() { d.depth-- }()
	if d.eat(']') {
		return true
	}
	for {
		d.ws()
		if !elem() {
			return false
		}
		if d.eat(']') {
			return true
		}
		if !d.eat(',') {
			return d.stop(failArrayNext, d.i)
		}
	}
}

// enter consumes the opener of an object or array, one level deeper
// (counted in d.depth, for the caller to give back).
func (d *Decoder) enter(open byte) bool {
	if !d.eat(open) {
		return false
	}
	if d.depth >= MaxDepth {
		return d.stop(failDepth, d.i-1)
	}
	d.depth++
	return true
}

// End reports whether only whitespace is left.
func (d *Decoder) End() bool {
	d.ws()
	if d.i != len(d.b) {
		return d.stop(failTrailing, d.i)
	}
	return true
}
