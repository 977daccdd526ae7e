package chattemplate

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Values inside the interpreter follow Python's data model, since that is
// what the templates were written against:
//
//	nil        None
//	bool       bool
//	int64      int
//	float64    float
//	string     str
//	[]any      list (and tuple)
//	*Dict      dict, insertion-ordered as Python's is
//	undefined  Jinja's Undefined
//
// plus the interpreter's own callables, namespaces, macros and loop objects.
// Render accepts these and converts other Go values (maps, typed slices,
// ints) once at the boundary.

// Dict is an insertion-ordered dictionary, like Python's dict. Order matters:
// tojson writes keys in it, and templates iterate in it.
type Dict struct {
	keys []any
	vals []any
	// index is built once the dict outgrows a linear search: a message or
	// a tool is a handful of keys, and a prompt builds one Dict per
	// message, every request.
	index map[any]int
}

// dictLinear is the size up to which a Dict is searched linearly.
const dictLinear = 8

// NewDict returns an empty Dict.
func NewDict() *Dict { return &Dict{} }

// Set sets key to v, keeping the key's position when it exists. A key
// that is not hashable is ignored: callers with keys from a template check
// first and raise Python's TypeError.
func (d *Dict) Set(key, v any) {
	if !hashable(key) {
		return
	}
	key = hashKey(key)
	if i, ok := d.find(key); ok {
		d.vals[i] = v
		return
	}
	if d.index != nil {
		d.index[key] = len(d.keys)
	} else if len(d.keys) == dictLinear {
		d.index = make(map[any]int, 2*dictLinear)
		for i, k := range d.keys {
			d.index[k] = i
		}
		d.index[key] = len(d.keys)
	}
	d.keys = append(d.keys, key)
	d.vals = append(d.vals, v)
}

// Get returns the value of key; a key that is not hashable is in no dict.
func (d *Dict) Get(key any) (any, bool) {
	if !hashable(key) {
		return nil, false
	}
	i, ok := d.find(hashKey(key))
	if !ok {
		return nil, false
	}
	return d.vals[i], true
}

// find looks up a key already through hashKey.
func (d *Dict) find(key any) (int, bool) {
	if d.index != nil {
		i, ok := d.index[key]
		return i, ok
	}
	for i, k := range d.keys {
		if k == key {
			return i, true
		}
	}
	return 0, false
}

// hashable reports whether v can be a dict key here: None, booleans,
// numbers, strings and Undefined. Python also hashes tuples and
// callables; no chat template keys a dict by those, and refusing them
// keeps every key a comparable Go value (a list or a function as a Go map
// key is a run-time panic, and keys can come from a request's
// chat_template_kwargs).
func hashable(v any) bool {
	switch v.(type) {
	case nil, bool, int, int64, float64, string, undefined:
		return true
	}
	return false
}

// Len is the number of keys.
func (d *Dict) Len() int { return len(d.keys) }

// Keys returns the keys in insertion order.
func (d *Dict) Keys() []any { return slices.Clone(d.keys) }

// hashKey makes Python-equal keys equal Go map keys: True == 1 == 1.0.
func hashKey(k any) any {
	switch v := k.(type) {
	case bool:
		if v {
			return int64(1)
		}
		return int64(0)
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int64(v)
		}
	case int:
		return int64(v)
	}
	return k
}

type undefined struct{ name string }

// tuple is a Python tuple: a list that prints with parentheses.
type tuple []any

// elems returns the items of a list or tuple.
func elems(v any) ([]any, bool) {
	switch x := v.(type) {
	case []any:
		return x, true
	case tuple:
		return x, true
	}
	return nil, false
}

// namespace is Jinja's namespace(): the one mutable object a template can
// assign attributes on, to carry state out of a loop.
type namespace struct{ attrs *Dict }

// callable is a global function or bound method.
type callable func(r *renderer, args []any, kw *Dict) (any, error)

// toValue converts a Go value handed to Render into the interpreter's model.
func toValue(v any) (any, error) {
	switch x := v.(type) {
	case nil, bool, int64, float64, string, *Dict, undefined, tuple:
		return v, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case float32:
		return float64(x), nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := toValue(e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case []string:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e
		}
		return out, nil
	case []*Dict:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e
		}
		return out, nil
	case map[string]any:
		// Go maps have no order; sort keys so renders are at least stable.
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		d := NewDict()
		for _, k := range keys {
			c, err := toValue(x[k])
			if err != nil {
				return nil, err
			}
			d.Set(k, c)
		}
		return d, nil
	case map[string]string:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		d := NewDict()
		for _, k := range keys {
			d.Set(k, x[k])
		}
		return d, nil
	}
	return nil, fmt.Errorf("chat template: cannot use a %T as a template value", v)
}

// truthy is Python's bool().
func truthy(v any) bool {
	switch x := v.(type) {
	case nil, undefined:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case float64:
		return x != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case tuple:
		return len(x) > 0
	case *Dict:
		return x.Len() > 0
	}
	return true
}

// typeName is Python's type(v).__name__, for error messages.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "NoneType"
	case undefined:
		return "Undefined"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []any:
		return "list"
	case tuple:
		return "tuple"
	case *Dict:
		return "dict"
	case *namespace:
		return "Namespace"
	case callable, *macro:
		return "function"
	case *loopInfo:
		return "LoopContext"
	}
	return fmt.Sprintf("%T", v)
}

// str is Python's str() as Jinja prints a value (Undefined prints empty).
func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case undefined:
		return ""
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return pyFloat(x)
	}
	var b strings.Builder
	writeRepr(&b, v)
	return b.String()
}

// pyFloat is Python's repr(float): the shortest round-tripping digits, in
// positional notation for exponents -4..15 and always with a fraction or an
// exponent.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		return fmt.Sprintf("%se%s%02d", mant, sign, exp)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// writeRepr writes Python's repr(v).
func writeRepr(b *strings.Builder, v any) {
	switch x := v.(type) {
	case string:
		writeStrRepr(b, x)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, e)
		}
		b.WriteByte(']')
	case tuple:
		b.WriteByte('(')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, e)
		}
		if len(x) == 1 {
			b.WriteByte(',')
		}
		b.WriteByte(')')
	case *Dict:
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, k)
			b.WriteString(": ")
			writeRepr(b, x.vals[i])
		}
		b.WriteByte('}')
	case *namespace:
		b.WriteString("<Namespace ")
		writeRepr(b, x.attrs)
		b.WriteByte('>')
	case undefined:
		b.WriteString("Undefined")
	case callable, *macro, *loopInfo:
		fmt.Fprintf(b, "<%s>", typeName(v))
	default:
		b.WriteString(str(v))
	}
}

func writeStrRepr(b *strings.Builder, s string) {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == ' ' || (r != utf8.RuneError && unicode.IsPrint(r)):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(b, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			fmt.Fprintf(b, `\U%08x`, r)
		}
	}
	b.WriteByte(q)
}

// number returns v as a float64 and whether it is numeric (bool included,
// as in Python).
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// integer returns v as an int64 when it is an int or bool.
func integer(v any) (int64, bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	case int64:
		return x, true
	}
	return 0, false
}

// equal is Python's ==.
func equal(a, b any) bool {
	if ia, ok := integer(a); ok {
		if ib, ok := integer(b); ok {
			return ia == ib
		}
	}
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		return ok && fa == fb
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case undefined:
		_, ok := b.(undefined)
		return ok
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []any, tuple:
		xs, _ := elems(x)
		_, aTuple := a.(tuple)
		_, bTuple := b.(tuple)
		y, ok := elems(b)
		if !ok || aTuple != bTuple || len(xs) != len(y) {
			return false
		}
		for i := range xs {
			if !equal(xs[i], y[i]) {
				return false
			}
		}
		return true
	case *Dict:
		y, ok := b.(*Dict)
		if !ok || x.Len() != y.Len() {
			return false
		}
		for i, k := range x.keys {
			v, ok := y.Get(k)
			if !ok || !equal(x.vals[i], v) {
				return false
			}
		}
		return true
	case *namespace:
		return a == b
	}
	return false
}

// compare is Python's ordering for <, <=, >, >=; ok is false where Python
// raises TypeError.
func compare(a, b any) (int, bool) {
	if ia, ok := integer(a); ok {
		if ib, ok := integer(b); ok {
			switch {
			case ia < ib:
				return -1, true
			case ia > ib:
				return 1, true
			}
			return 0, true
		}
	}
	if fa, ok := number(a); ok {
		if fb, ok := number(b); ok {
			switch {
			case fa < fb:
				return -1, true
			case fa > fb:
				return 1, true
			}
			return 0, true
		}
		return 0, false
	}
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), true
		}
	case []any, tuple:
		xs, _ := elems(x)
		if y, ok := elems(b); ok {
			for i := 0; i < len(xs) && i < len(y); i++ {
				if !equal(xs[i], y[i]) {
					return compare(xs[i], y[i])
				}
			}
			return len(xs) - len(y), true
		}
	}
	return 0, false
}

// length is Python's len(); strings count code points.
func length(v any) (int, bool) {
	switch x := v.(type) {
	case string:
		return utf8.RuneCountInString(x), true
	case []any:
		return len(x), true
	case tuple:
		return len(x), true
	case *Dict:
		return x.Len(), true
	case undefined:
		return 0, true
	case *namespace:
		return 0, false
	}
	return 0, false
}

// iterate returns the items of an iterable: list items, dict keys, string
// characters; Undefined iterates as empty.
func iterate(v any) ([]any, error) {
	switch x := v.(type) {
	case []any:
		return x, nil
	case tuple:
		return x, nil
	case *Dict:
		return slices.Clone(x.keys), nil
	case string:
		out := make([]any, 0, len(x))
		for _, r := range x {
			out = append(out, string(r))
		}
		return out, nil
	case undefined:
		return nil, nil
	}
	return nil, fmt.Errorf("'%s' object is not iterable", typeName(v))
}

// pyIsSpace is Python's str.isspace for one character.
func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}
