package chattemplate

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxRange is the sandbox's limit on range() (Jinja's MAX_RANGE).
const maxRange = 100000

// globals are the functions every template sees: Jinja's own plus what
// transformers adds (raise_exception, strftime_now).
var globals = &scope{vars: map[string]any{
	"range": callable(func(_ *renderer, args []any, _ *Dict) (any, error) {
		var start, stop, step int64 = 0, 0, 1
		ints := make([]int64, len(args))
		for i, a := range args {
			n, ok := integer(a)
			if !ok {
				return nil, errorf("range() arguments must be integers, not %s", typeName(a))
			}
			ints[i] = n
		}
		switch len(ints) {
		case 1:
			stop = ints[0]
		case 2:
			start, stop = ints[0], ints[1]
		case 3:
			start, stop, step = ints[0], ints[1], ints[2]
		default:
			return nil, errorf("range expected 1 to 3 arguments, got %d", len(args))
		}
		if step == 0 {
			return nil, errorf("range() arg 3 must not be zero")
		}
		var out []any
		for i := start; (step > 0 && i < stop) || (step < 0 && i > stop); i += step {
			if len(out) >= maxRange {
				return nil, errorf("range too big")
			}
			out = append(out, i)
		}
		if out == nil {
			out = []any{}
		}
		return out, nil
	}),
	"namespace": callable(func(_ *renderer, args []any, kw *Dict) (any, error) {
		ns := &namespace{attrs: NewDict()}
		for _, a := range args {
			d, ok := a.(*Dict)
			if !ok {
				return nil, errorf("namespace() takes a dict, not %s", typeName(a))
			}
			for i, k := range d.keys {
				ns.attrs.Set(k, d.vals[i])
			}
		}
		if kw != nil {
			for i, k := range kw.keys {
				ns.attrs.Set(k, kw.vals[i])
			}
		}
		return ns, nil
	}),
	"dict": callable(func(_ *renderer, args []any, kw *Dict) (any, error) {
		d := NewDict()
		for _, a := range args {
			src, ok := a.(*Dict)
			if !ok {
				return nil, errorf("dict() takes a dict, not %s", typeName(a))
			}
			for i, k := range src.keys {
				d.Set(k, src.vals[i])
			}
		}
		if kw != nil {
			for i, k := range kw.keys {
				d.Set(k, kw.vals[i])
			}
		}
		return d, nil
	}),
	"raise_exception": callable(func(_ *renderer, args []any, _ *Dict) (any, error) {
		msg := ""
		if len(args) > 0 {
			msg = str(args[0])
		}
		return nil, &RenderError{Msg: msg, Raised: true}
	}),
	"strftime_now": callable(func(r *renderer, args []any, _ *Dict) (any, error) {
		if len(args) != 1 {
			return nil, errorf("strftime_now() takes one argument")
		}
		f, ok := args[0].(string)
		if !ok {
			return nil, errorf("strftime_now() argument must be str")
		}
		return strftime(r.now(), f), nil
	}),
}}

func argOr(args []any, kw *Dict, i int, name string, def any) any {
	if i < len(args) {
		return args[i]
	}
	if kw != nil {
		if v, ok := kw.Get(name); ok {
			return v
		}
	}
	return def
}

func (r *renderer) applyFilter(f *filterExpr, v any, sc *scope) (any, error) {
	args, err := r.evalList(f.args, sc)
	if err != nil {
		return nil, err
	}
	kw, err := r.evalKwargs(f.kwargs, sc)
	if err != nil {
		return nil, err
	}
	fn, ok := filters[f.name]
	if !ok {
		return nil, &SyntaxError{Line: f.line, Msg: fmt.Sprintf("no filter named %q", f.name)}
	}
	return fn(r, v, args, kw)
}

type filterFunc func(r *renderer, v any, args []any, kw *Dict) (any, error)

var filters map[string]filterFunc

func init() {
	filters = map[string]filterFunc{
		"tojson": func(_ *renderer, v any, args []any, kw *Dict) (any, error) {
			opts := jsonOptions{itemSep: ", ", keySep: ": "}
			if ind := argOr(args, kw, 0, "indent", nil); ind != nil {
				switch x := ind.(type) {
				case string:
					opts.indent, opts.indented = x, true
				default:
					n, ok := integer(x)
					if !ok {
						return nil, errorf("tojson: indent must be an int or str")
					}
					opts.indent, opts.indented = strings.Repeat(" ", int(max(n, 0))), true
				}
				opts.itemSep = ","
			}
			if kw != nil {
				if a, ok := kw.Get("ensure_ascii"); ok {
					opts.ensureASCII = truthy(a)
				}
				if s, ok := kw.Get("sort_keys"); ok {
					opts.sortKeys = truthy(s)
				}
				if s, ok := kw.Get("separators"); ok && s != nil {
					l, ok := elems(s)
					if !ok || len(l) != 2 {
						return nil, errorf("tojson: separators must be a pair of strings")
					}
					a, ok1 := l[0].(string)
					b, ok2 := l[1].(string)
					if !ok1 || !ok2 {
						return nil, errorf("tojson: separators must be a pair of strings")
					}
					opts.itemSep, opts.keySep = a, b
				}
			}
			var b strings.Builder
			if err := writeJSON(&b, v, opts, 0); err != nil {
				return nil, err
			}
			return b.String(), nil
		},
		"trim": func(_ *renderer, v any, args []any, kw *Dict) (any, error) {
			return pyStrip(str(v), argOr(args, kw, 0, "chars", nil), true, true)
		},
		"length": filterLength,
		"count":  filterLength,
		"default": func(_ *renderer, v any, args []any, kw *Dict) (any, error) {
			def := argOr(args, kw, 0, "default_value", "")
			boolean := truthy(argOr(args, kw, 1, "boolean", false))
			if _, ok := v.(undefined); ok || (boolean && !truthy(v)) {
				return def, nil
			}
			return v, nil
		},
		"join": func(_ *renderer, v any, args []any, kw *Dict) (any, error) {
			items, err := iterate(v)
			if err != nil {
				return nil, errorf("%v", err)
			}
			sep := str(argOr(args, kw, 0, "d", ""))
			attr := argOr(args, kw, 1, "attribute", nil)
			parts := make([]string, len(items))
			for i, it := range items {
				if attr != nil {
					if it, err = attrPath(it, attr); err != nil {
						return nil, err
					}
				}
				parts[i] = str(it)
			}
			return strings.Join(parts, sep), nil
		},
		"upper":      strFilter(strings.ToUpper),
		"lower":      strFilter(strings.ToLower),
		"capitalize": strFilter(pyCapitalize),
		"title": strFilter(func(s string) string {
			var b strings.Builder
			start := true
			for _, r := range s {
				sep := pyIsSpace(r) || strings.ContainsRune("-({[<", r)
				switch {
				case sep:
					b.WriteRune(r)
					start = true
				case start:
					b.WriteRune(unicode.ToUpper(r))
					start = false
				default:
					b.WriteRune(unicode.ToLower(r))
				}
			}
			return b.String()
		}),
		"string": func(_ *renderer, v any, _ []any, _ *Dict) (any, error) { return str(v), nil },
		"safe":   func(_ *renderer, v any, _ []any, _ *Dict) (any, error) { return v, nil },
		"escape": filterEscape,
		"e":      filterEscape,
		"first": func(_ *renderer, v any, _ []any, _ *Dict) (any, error) {
			items, err := iterate(v)
			if err != nil {
				return nil, errorf("%v", err)
			}
			if len(items) == 0 {
				return undefined{}, nil
			}
			return items[0], nil
		},
		"last": func(_ *renderer, v any, _ []any, _ *Dict) (any, error) {
			items, err := iterate(v)
			if err != nil {
				return nil, errorf("%v", err)
			}
			if len(items) == 0 {
				return undefined{}, nil
			}
			return items[len(items)-1], nil
		},
		"list": func(_ *renderer, v any, _ []any, _ *Dict) (any, error) {
			items, err := iterate(v)
			if err != nil {
				return nil, errorf("%v", err)
			}
			return slices.Clone(items), nil
		},
		"reverse": func(_ *renderer, v any, _ []any, _ *Dict) (any, error) {
			if s, ok := v.(string); ok {
				r := []rune(s)
				slices.Reverse(r)
				return string(r), nil
			}
			items, err := iterate(v)
			if err != nil {
				return nil, errorf("%v", err)
			}
			out := slices.Clone(items)
			slices.Reverse(out)
			return out, nil
		},
		"unique": func(_ *renderer, v any, args []any, kw *Dict) (any, error) {
			items, err := iterate(v)
			if err != nil {
				return nil, errorf("%v", err)
			}
			cs := truthy(argOr(args, kw, 0, "case_sensitive", false))
			attr := argOr(args, kw, 1, "attribute", nil)
			var out, seen []any
			for _, it := range items {
				key, err := sortKey(it, attr, cs)
				if err != nil {
					return nil, err
				}
				if !slices.ContainsFunc(seen, func(s any) bool { return equal(s, key) }) {
					seen = append(seen, key)
					out = append(out, it)
				}
			}
			if out == nil {
				out = []any{}
			}
			return out, nil
		},
		"sort": func(_ *renderer, v any, args []any, kw *Dict) (any, error) {
			items, err := iterate(v)
			if err != nil {
				return nil, errorf("%v", err)
			}
			rev := truthy(argOr(args, kw, 0, "reverse", false))
			cs := truthy(argOr(args, kw, 1, "case_sensitive", false))
			attr := argOr(args, kw, 2, "attribute", nil)
			return sortItems(items, attr, cs, rev)
		},
		"dictsort": func(_ *renderer, v any, args []any, kw *Dict) (any, error) {
			d, ok := v.(*Dict)
			if !ok {
				return nil, errorf("dictsort: expected a dict, got %s", typeName(v))
			}
			cs := truthy(argOr(args, kw, 0, "case_sensitive", false))
			by := str(argOr(args, kw, 1, "by", "key"))
			rev := truthy(argOr(args, kw, 2, "reverse", false))
			pos := int64(0)
			if by == "value" {
				pos = 1
			}
			items := make([]any, d.Len())
			for i, k := range d.keys {
				items[i] = tuple{k, d.vals[i]}
			}
			return sortItems(items, pos, cs, rev)
		},
		"items": func(_ *renderer, v any, _ []any, _ *Dict) (any, error) {
			switch d := v.(type) {
			case undefined:
				return []any{}, nil
			case *Dict:
				out := make([]any, d.Len())
				for i, k := range d.keys {
					out[i] = tuple{k, d.vals[i]}
				}
				return out, nil
			}
			return nil, errorf("items: expected a dict, got %s", typeName(v))
		},
		"map": func(r *renderer, v any, args []any, kw *Dict) (any, error) {
			items, err := iterate(v)
			if err != nil {
				return nil, errorf("%v", err)
			}
			out := make([]any, len(items))
			if attr, ok := kwGet(kw, "attribute"); ok {
				def, hasDef := kwGet(kw, "default")
				for i, it := range items {
					x, err := attrPath(it, attr)
					if err != nil {
						return nil, err
					}
					if _, u := x.(undefined); u && hasDef {
						x = def
					}
					out[i] = x
				}
				return out, nil
			}
			if len(args) == 0 {
				return nil, errorf("map: no filter or attribute given")
			}
			name := str(args[0])
			fn, ok := filters[name]
			if !ok {
				return nil, errorf("no filter named %q", name)
			}
			for i, it := range items {
				if out[i], err = fn(r, it, args[1:], kw); err != nil {
					return nil, err
				}
			}
			return out, nil
		},
		"select":     selectFilter(false, false),
		"reject":     selectFilter(true, false),
		"selectattr": selectFilter(false, true),
		"rejectattr": selectFilter(true, true),
		"int": func(_ *renderer, v any, args []any, kw *Dict) (any, error) {
			def := argOr(args, kw, 0, "default", int64(0))
			switch x := v.(type) {
			case bool, int64:
				n, _ := integer(x)
				return n, nil
			case float64:
				if math.IsNaN(x) || math.IsInf(x, 0) {
					return def, nil
				}
				return int64(x), nil
			case string:
				s := strings.TrimFunc(x, pyIsSpace)
				if n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64); err == nil {
					return n, nil
				}
				if f, err := strconv.ParseFloat(s, 64); err == nil {
					return int64(f), nil
				}
			}
			return def, nil
		},
		"float": func(_ *renderer, v any, args []any, kw *Dict) (any, error) {
			def := argOr(args, kw, 0, "default", 0.0)
			if f, ok := number(v); ok {
				return f, nil
			}
			if s, ok := v.(string); ok {
				if f, err := strconv.ParseFloat(strings.TrimFunc(s, pyIsSpace), 64); err == nil {
					return f, nil
				}
			}
			return def, nil
		},
		"abs": func(_ *renderer, v any, _ []any, _ *Dict) (any, error) {
			switch x := v.(type) {
			case int64:
				if x < 0 {
					return -x, nil
				}
				return x, nil
			case bool:
				n, _ := integer(x)
				return n, nil
			case float64:
				return math.Abs(x), nil
			}
			return nil, errorf("bad operand type for abs(): '%s'", typeName(v))
		},
		"round": func(_ *renderer, v any, args []any, kw *Dict) (any, error) {
			f, ok := number(v)
			if !ok {
				return nil, errorf("round: expected a number")
			}
			prec, _ := integer(argOr(args, kw, 0, "precision", int64(0)))
			method := str(argOr(args, kw, 1, "method", "common"))
			p := math.Pow(10, float64(prec))
			switch method {
			case "ceil":
				return math.Ceil(f*p) / p, nil
			case "floor":
				return math.Floor(f*p) / p, nil
			}
			// Python's round(): an int stays an int; a float rounds its
			// exact binary value half-to-even, which strconv also does.
			if n, isInt := integer(v); isInt && prec >= 0 {
				return n, nil
			}
			if prec < 0 {
				return math.RoundToEven(f*p) / p, nil
			}
			r, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'f', int(prec), 64), 64)
			return r, nil
		},
		"replace": func(_ *renderer, v any, args []any, kw *Dict) (any, error) {
			s := str(v)
			old := str(argOr(args, kw, 0, "old", ""))
			nw := str(argOr(args, kw, 1, "new", ""))
			n := int64(-1)
			if c := argOr(args, kw, 2, "count", nil); c != nil {
				n, _ = integer(c)
			}
			return strings.Replace(s, old, nw, int(n)), nil
		},
		"indent": func(_ *renderer, v any, args []any, kw *Dict) (any, error) {
			s := str(v)
			ind := "    "
			switch w := argOr(args, kw, 0, "width", int64(4)).(type) {
			case string:
				ind = w
			default:
				n, _ := integer(w)
				ind = strings.Repeat(" ", int(max(n, 0)))
			}
			first := truthy(argOr(args, kw, 1, "first", false))
			blank := truthy(argOr(args, kw, 2, "blank", false))
			lines := pySplitlines(s + "\n")
			var out string
			if blank {
				out = strings.Join(lines, "\n"+ind)
			} else {
				out = lines[0]
				for _, l := range lines[1:] {
					out += "\n"
					if l != "" {
						out += ind
					}
					out += l
				}
			}
			if first {
				out = ind + out
			}
			return out, nil
		},
		"wordcount": func(_ *renderer, v any, _ []any, _ *Dict) (any, error) {
			return int64(len(strings.FieldsFunc(str(v), func(r rune) bool {
				return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_')
			}))), nil
		},
		"center": func(_ *renderer, v any, args []any, kw *Dict) (any, error) {
			s := str(v)
			w, _ := integer(argOr(args, kw, 0, "width", int64(80)))
			n := utf8.RuneCountInString(s)
			if int(w) <= n {
				return s, nil
			}
			pad := int(w) - n
			left := pad / 2
			if pad%2 == 1 && int(w)%2 == 1 {
				left++
			}
			return strings.Repeat(" ", left) + s + strings.Repeat(" ", pad-left), nil
		},
		"max": minMax(1),
		"min": minMax(-1),
		"sum": func(_ *renderer, v any, args []any, kw *Dict) (any, error) {
			items, err := iterate(v)
			if err != nil {
				return nil, errorf("%v", err)
			}
			attr := argOr(args, kw, 0, "attribute", nil)
			total := argOr(args, kw, 1, "start", int64(0))
			for _, it := range items {
				if attr != nil {
					if it, err = attrPath(it, attr); err != nil {
						return nil, err
					}
				}
				if total, err = arith("+", total, it); err != nil {
					return nil, err
				}
			}
			return total, nil
		},
		"attr": func(_ *renderer, v any, args []any, _ *Dict) (any, error) {
			if len(args) != 1 {
				return nil, errorf("attr: one argument expected")
			}
			return getAttr(v, str(args[0]))
		},
	}
}

func kwGet(kw *Dict, name string) (any, bool) {
	if kw == nil {
		return nil, false
	}
	return kw.Get(name)
}

func strFilter(f func(string) string) filterFunc {
	return func(_ *renderer, v any, _ []any, _ *Dict) (any, error) { return f(str(v)), nil }
}

func filterLength(_ *renderer, v any, _ []any, _ *Dict) (any, error) {
	n, ok := length(v)
	if !ok {
		return nil, errorf("object of type '%s' has no len()", typeName(v))
	}
	return int64(n), nil
}

func filterEscape(_ *renderer, v any, _ []any, _ *Dict) (any, error) {
	return html.EscapeString(str(v)), nil
}

// attrPath resolves Jinja's attribute argument: a dotted path or an index.
func attrPath(v, attr any) (any, error) {
	if s, ok := attr.(string); ok {
		for _, part := range strings.Split(s, ".") {
			var key any = part
			if n, err := strconv.ParseInt(part, 10, 64); err == nil {
				key = n
			}
			var err error
			if v, err = getItem(v, key); err != nil {
				return nil, err
			}
		}
		return v, nil
	}
	return getItem(v, attr)
}

func sortKey(v, attr any, caseSensitive bool) (any, error) {
	if attr != nil {
		var err error
		if v, err = attrPath(v, attr); err != nil {
			return nil, err
		}
	}
	if s, ok := v.(string); ok && !caseSensitive {
		return strings.ToLower(s), nil
	}
	return v, nil
}

func sortItems(items []any, attr any, caseSensitive, reverse bool) (any, error) {
	type keyed struct{ key, v any }
	ks := make([]keyed, len(items))
	for i, it := range items {
		k, err := sortKey(it, attr, caseSensitive)
		if err != nil {
			return nil, err
		}
		if l, ok := elems(k); ok && !caseSensitive {
			lc := make(tuple, len(l))
			for j, e := range l {
				lc[j], _ = sortKey(e, nil, false)
			}
			k = lc
		}
		ks[i] = keyed{k, it}
	}
	var bad error
	slices.SortStableFunc(ks, func(a, b keyed) int {
		c, ok := compare(a.key, b.key)
		if !ok && bad == nil {
			bad = errorf("'<' not supported between instances of '%s' and '%s'", typeName(a.key), typeName(b.key))
		}
		if reverse {
			return -c
		}
		return c
	})
	if bad != nil {
		return nil, bad
	}
	out := make([]any, len(ks))
	for i, k := range ks {
		out[i] = k.v
	}
	return out, nil
}

func minMax(sign int) filterFunc {
	return func(_ *renderer, v any, args []any, kw *Dict) (any, error) {
		items, err := iterate(v)
		if err != nil {
			return nil, errorf("%v", err)
		}
		cs := truthy(argOr(args, kw, 0, "case_sensitive", false))
		attr := argOr(args, kw, 1, "attribute", nil)
		var best, bestKey any
		for i, it := range items {
			k, err := sortKey(it, attr, cs)
			if err != nil {
				return nil, err
			}
			if i == 0 {
				best, bestKey = it, k
				continue
			}
			c, ok := compare(k, bestKey)
			if !ok {
				return nil, errorf("cannot compare %s and %s", typeName(k), typeName(bestKey))
			}
			if c*sign > 0 {
				best, bestKey = it, k
			}
		}
		if len(items) == 0 {
			return undefined{}, nil
		}
		return best, nil
	}
}

func selectFilter(reject, byAttr bool) filterFunc {
	return func(r *renderer, v any, args []any, _ *Dict) (any, error) {
		items, err := iterate(v)
		if err != nil {
			return nil, errorf("%v", err)
		}
		var attr any
		if byAttr {
			if len(args) == 0 {
				return nil, errorf("missing attribute argument")
			}
			attr, args = args[0], args[1:]
		}
		out := []any{}
		for _, it := range items {
			x := it
			if byAttr {
				if x, err = attrPath(it, attr); err != nil {
					return nil, err
				}
			}
			var ok bool
			if len(args) == 0 {
				ok = truthy(x)
			} else {
				if ok, err = r.applyTest(str(args[0]), x, args[1:], nil); err != nil {
					return nil, err
				}
			}
			if ok != reject {
				out = append(out, it)
			}
		}
		return out, nil
	}
}

func (r *renderer) applyTest(name string, v any, args []any, _ *scope) (bool, error) {
	arg := func() (any, error) {
		if len(args) == 0 {
			return nil, errorf("test %q needs an argument", name)
		}
		return args[0], nil
	}
	switch name {
	case "defined":
		_, u := v.(undefined)
		return !u, nil
	case "undefined":
		_, u := v.(undefined)
		return u, nil
	case "none":
		return v == nil, nil
	case "string":
		_, ok := v.(string)
		return ok, nil
	case "number":
		_, ok := number(v)
		return ok, nil
	case "integer":
		_, ok := v.(int64)
		return ok, nil
	case "float":
		_, ok := v.(float64)
		return ok, nil
	case "boolean":
		_, ok := v.(bool)
		return ok, nil
	case "true":
		return v == true, nil
	case "false":
		return v == false, nil
	case "mapping":
		_, ok := v.(*Dict)
		return ok, nil
	case "iterable":
		switch v.(type) {
		case string, []any, tuple, *Dict, undefined:
			return true, nil
		}
		return false, nil
	case "sequence":
		switch v.(type) {
		case string, []any, tuple, *Dict, undefined:
			return true, nil
		}
		return false, nil
	case "callable":
		switch v.(type) {
		case callable, *macro:
			return true, nil
		}
		return false, nil
	case "odd", "even":
		n, ok := integer(v)
		if !ok {
			return false, errorf("test %s: not an integer", name)
		}
		return (n%2 != 0) == (name == "odd"), nil
	case "divisibleby":
		a, err := arg()
		if err != nil {
			return false, err
		}
		n, ok1 := integer(v)
		d, ok2 := integer(a)
		if !ok1 || !ok2 || d == 0 {
			return false, errorf("divisibleby: bad operands")
		}
		return n%d == 0, nil
	case "lower":
		s := str(v)
		return s == strings.ToLower(s) && strings.IndexFunc(s, unicode.IsLower) >= 0, nil
	case "upper":
		s := str(v)
		return s == strings.ToUpper(s) && strings.IndexFunc(s, unicode.IsUpper) >= 0, nil
	case "sameas":
		a, err := arg()
		if err != nil {
			return false, err
		}
		switch a.(type) {
		case nil, bool:
			return v == a, nil
		}
		return equal(v, a), nil
	case "eq", "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=", "gt", "greaterthan", ">", "ge", ">=", "in":
		a, err := arg()
		if err != nil {
			return false, err
		}
		op := map[string]string{"eq": "==", "equalto": "==", "ne": "!=", "lt": "<", "lessthan": "<",
			"le": "<=", "gt": ">", "greaterthan": ">", "ge": ">="}[name]
		if op == "" {
			op = name
		}
		return compareOp(op, v, a)
	case "filter":
		_, ok := filters[str(v)]
		return ok, nil
	case "test":
		switch str(v) {
		case "defined", "undefined", "none", "string", "number", "integer", "float", "boolean", "true",
			"false", "mapping", "iterable", "sequence", "callable", "odd", "even", "divisibleby", "lower",
			"upper", "sameas", "eq", "ne", "lt", "le", "gt", "ge", "in", "filter", "test":
			return true, nil
		}
		return false, nil
	}
	return false, errorf("no test named %q", name)
}

// Methods: Python's str, dict and list methods that chat templates call.
// Mutating list and dict methods are refused, as the immutable sandbox
// Hugging Face uses refuses them.

func method(f func(args []any, kw *Dict) (any, error)) callable {
	return func(_ *renderer, args []any, kw *Dict) (any, error) { return f(args, kw) }
}

func strArg(args []any, kw *Dict, i int, name string) (string, bool, error) {
	v := argOr(args, kw, i, name, nil)
	if v == nil {
		return "", false, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", false, errorf("expected a string argument, got %s", typeName(v))
	}
	return s, true, nil
}

func strMethod(s, name string) any {
	switch name {
	case "startswith", "endswith":
		return method(func(args []any, kw *Dict) (any, error) {
			if len(args) != 1 {
				return nil, errorf("%s() takes one argument", name)
			}
			var prefixes []any
			switch p := args[0].(type) {
			case string:
				prefixes = []any{p}
			case []any:
				prefixes = p
			case tuple:
				prefixes = p
			default:
				return nil, errorf("%s first arg must be str or a tuple of str", name)
			}
			for _, p := range prefixes {
				ps, ok := p.(string)
				if !ok {
					return nil, errorf("%s first arg must be str or a tuple of str", name)
				}
				if (name == "startswith" && strings.HasPrefix(s, ps)) || (name == "endswith" && strings.HasSuffix(s, ps)) {
					return true, nil
				}
			}
			return false, nil
		})
	case "strip", "lstrip", "rstrip":
		return method(func(args []any, kw *Dict) (any, error) {
			return pyStrip(s, argOr(args, kw, 0, "chars", nil), name != "rstrip", name != "lstrip")
		})
	case "split", "rsplit":
		return method(func(args []any, kw *Dict) (any, error) {
			sep, hasSep, err := strArg(args, kw, 0, "sep")
			if err != nil {
				return nil, err
			}
			n := int64(-1)
			if m := argOr(args, kw, 1, "maxsplit", nil); m != nil {
				n, _ = integer(m)
			}
			return pySplit(s, sep, hasSep, int(n), name == "rsplit")
		})
	case "splitlines":
		return method(func([]any, *Dict) (any, error) {
			lines := pySplitlines(s)
			out := make([]any, len(lines))
			for i, l := range lines {
				out[i] = l
			}
			return out, nil
		})
	case "upper":
		return method(func([]any, *Dict) (any, error) { return strings.ToUpper(s), nil })
	case "lower":
		return method(func([]any, *Dict) (any, error) { return strings.ToLower(s), nil })
	case "capitalize":
		return method(func([]any, *Dict) (any, error) { return pyCapitalize(s), nil })
	case "title":
		return method(func([]any, *Dict) (any, error) { return pyTitle(s), nil })
	case "replace":
		return method(func(args []any, kw *Dict) (any, error) {
			if len(args) < 2 {
				return nil, errorf("replace() takes at least 2 arguments")
			}
			old, ok1 := args[0].(string)
			nw, ok2 := args[1].(string)
			if !ok1 || !ok2 {
				return nil, errorf("replace() arguments must be str")
			}
			n := int64(-1)
			if len(args) > 2 {
				n, _ = integer(args[2])
			}
			return strings.Replace(s, old, nw, int(n)), nil
		})
	case "find", "rfind", "index", "rindex", "count":
		return method(func(args []any, kw *Dict) (any, error) {
			if len(args) != 1 {
				return nil, errorf("%s() takes one argument", name)
			}
			sub, ok := args[0].(string)
			if !ok {
				return nil, errorf("%s() argument must be str", name)
			}
			if name == "count" {
				if sub == "" {
					return int64(utf8.RuneCountInString(s) + 1), nil
				}
				return int64(strings.Count(s, sub)), nil
			}
			var i int
			if name == "find" || name == "index" {
				i = strings.Index(s, sub)
			} else {
				i = strings.LastIndex(s, sub)
			}
			if i < 0 {
				if name == "index" || name == "rindex" {
					return nil, errorf("substring not found")
				}
				return int64(-1), nil
			}
			return int64(utf8.RuneCountInString(s[:i])), nil
		})
	case "join":
		return method(func(args []any, kw *Dict) (any, error) {
			if len(args) != 1 {
				return nil, errorf("join() takes one argument")
			}
			items, err := iterate(args[0])
			if err != nil {
				return nil, errorf("%v", err)
			}
			parts := make([]string, len(items))
			for i, it := range items {
				p, ok := it.(string)
				if !ok {
					return nil, errorf("sequence item %d: expected str instance, %s found", i, typeName(it))
				}
				parts[i] = p
			}
			return strings.Join(parts, s), nil
		})
	case "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower":
		return method(func([]any, *Dict) (any, error) { return pyIs(name, s), nil })
	}
	return nil
}

func dictMethod(d *Dict, name string) any {
	switch name {
	case "items":
		return method(func([]any, *Dict) (any, error) {
			out := make([]any, d.Len())
			for i, k := range d.keys {
				out[i] = tuple{k, d.vals[i]}
			}
			return out, nil
		})
	case "keys":
		return method(func([]any, *Dict) (any, error) { return slices.Clone(d.keys), nil })
	case "values":
		return method(func([]any, *Dict) (any, error) { return slices.Clone(d.vals), nil })
	case "get":
		return method(func(args []any, kw *Dict) (any, error) {
			if len(args) < 1 || len(args) > 2 {
				return nil, errorf("get expected 1 or 2 arguments")
			}
			if !hashable(args[0]) {
				return nil, unhashable(args[0])
			}
			if v, ok := d.Get(args[0]); ok {
				return v, nil
			}
			if len(args) == 2 {
				return args[1], nil
			}
			return nil, nil
		})
	case "copy":
		return method(func([]any, *Dict) (any, error) {
			c := NewDict()
			for i, k := range d.keys {
				c.Set(k, d.vals[i])
			}
			return c, nil
		})
	case "clear", "pop", "popitem", "setdefault", "update", "fromkeys":
		return unsafeMethod("dict", name)
	}
	return nil
}

func listMethod(l []any, name string) any {
	switch name {
	case "index", "count":
		return method(func(args []any, kw *Dict) (any, error) {
			if len(args) != 1 {
				return nil, errorf("%s() takes one argument", name)
			}
			n := int64(0)
			for i, e := range l {
				if equal(e, args[0]) {
					if name == "index" {
						return int64(i), nil
					}
					n++
				}
			}
			if name == "index" {
				return nil, errorf("value is not in list")
			}
			return n, nil
		})
	case "copy":
		return method(func([]any, *Dict) (any, error) { return slices.Clone(l), nil })
	case "append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear":
		return unsafeMethod("list", name)
	}
	return nil
}

func unsafeMethod(typ, name string) callable {
	return func(*renderer, []any, *Dict) (any, error) {
		return nil, errorf("access to %s.%s is unsafe in an immutable sandbox", typ, name)
	}
}

func pyStrip(s string, chars any, left, right bool) (any, error) {
	var f func(rune) bool
	switch c := chars.(type) {
	case nil:
		f = pyIsSpace
	case string:
		f = func(r rune) bool { return strings.ContainsRune(c, r) }
	case undefined:
		f = pyIsSpace
	default:
		return nil, errorf("strip arg must be None or str")
	}
	if left {
		s = strings.TrimLeftFunc(s, f)
	}
	if right {
		s = strings.TrimRightFunc(s, f)
	}
	return s, nil
}

func pySplit(s, sep string, hasSep bool, maxsplit int, fromRight bool) (any, error) {
	var parts []string
	switch {
	case hasSep && sep == "":
		return nil, errorf("empty separator")
	case hasSep:
		if maxsplit < 0 {
			parts = strings.Split(s, sep)
		} else if !fromRight {
			parts = strings.SplitN(s, sep, maxsplit+1)
		} else {
			parts = []string{}
			rest := s
			for i := 0; i < maxsplit; i++ {
				j := strings.LastIndex(rest, sep)
				if j < 0 {
					break
				}
				parts = append(parts, rest[j+len(sep):])
				rest = rest[:j]
			}
			parts = append(parts, rest)
			slices.Reverse(parts)
		}
	default:
		fields := strings.FieldsFunc(s, pyIsSpace)
		if maxsplit < 0 || maxsplit >= len(fields) {
			parts = fields
		} else if !fromRight {
			// Keep the remainder after maxsplit words as written.
			rest := strings.TrimLeftFunc(s, pyIsSpace)
			for i := 0; i < maxsplit; i++ {
				j := strings.IndexFunc(rest, pyIsSpace)
				parts = append(parts, rest[:j])
				rest = strings.TrimLeftFunc(rest[j:], pyIsSpace)
			}
			parts = append(parts, rest)
		} else {
			rest := strings.TrimRightFunc(s, pyIsSpace)
			var rev []string
			for i := 0; i < maxsplit; i++ {
				j := strings.LastIndexFunc(rest, pyIsSpace)
				_, n := utf8.DecodeRuneInString(rest[j:])
				rev = append(rev, rest[j+n:])
				rest = strings.TrimRightFunc(rest[:j], pyIsSpace)
			}
			rev = append(rev, rest)
			slices.Reverse(rev)
			parts = rev
		}
	}
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out, nil
}

// pySplitlines is Python's str.splitlines().
func pySplitlines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch r {
		case '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
			out = append(out, s[start:i])
			if r == '\r' && i+1 < len(s) && s[i+1] == '\n' {
				n++
			}
			start = i + n
		}
		i += n
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	if out == nil {
		out = []string{""}
	}
	return out
}

func pyCapitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToTitle(r)) + strings.ToLower(s[n:])
}

func pyTitle(s string) string {
	var b strings.Builder
	prevCased := false
	for _, r := range s {
		switch {
		case unicode.IsUpper(r) || unicode.IsTitle(r):
			if prevCased {
				r = unicode.ToLower(r)
			}
			prevCased = true
		case unicode.IsLower(r):
			if !prevCased {
				r = unicode.ToTitle(r)
			}
			prevCased = true
		default:
			prevCased = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

func pyIs(name, s string) bool {
	if s == "" {
		return false
	}
	cased := false
	for _, r := range s {
		switch name {
		case "isdigit":
			if !unicode.IsDigit(r) {
				return false
			}
		case "isalpha":
			if !unicode.IsLetter(r) {
				return false
			}
		case "isalnum":
			if !unicode.IsLetter(r) && !unicode.IsNumber(r) {
				return false
			}
		case "isspace":
			if !pyIsSpace(r) {
				return false
			}
		case "isupper":
			if unicode.IsLower(r) {
				return false
			}
			cased = cased || unicode.IsUpper(r)
		case "islower":
			if unicode.IsUpper(r) {
				return false
			}
			cased = cased || unicode.IsLower(r)
		}
	}
	if name == "isupper" || name == "islower" {
		return cased
	}
	return true
}
