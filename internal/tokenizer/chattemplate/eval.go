package chattemplate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Template is a compiled Jinja template. It is safe for concurrent use.
type Template struct {
	body []node
}

// Compile parses a Jinja template.
func Compile(src string) (*Template, error) {
	body, err := parse(src)
	if err != nil {
		return nil, err
	}
	return &Template{body: body}, nil
}

// Render renders the template with vars as its top-level variables. Values
// may be nil, bool, int, int64, float64, string, []any, *Dict (ordered, as
// ParseJSON returns), map[string]any (keys sorted), []string.
func (t *Template) Render(vars map[string]any) (string, error) {
	return t.render(context.Background(), vars, time.Now, 0, 0)
}

// render is Render under ctx, with a clock, the expected output size (0:
// unknown), which saves the output buffer's regrowth on long prompts, and
// a cap on the output (0: none), beyond which it fails with ErrTooLarge.
func (t *Template) render(ctx context.Context, vars map[string]any, now func() time.Time, sizeHint, maxBytes int) (string, error) {
	s, _, err := t.renderCounted(ctx, vars, now, sizeHint, maxBytes)
	return s, err
}

// renderCounted is render, also returning the steps it took (see
// renderer.steps).
func (t *Template) renderCounted(ctx context.Context, vars map[string]any, now func() time.Time, sizeHint, maxBytes int) (string, int64, error) {
	root := &scope{vars: make(map[string]any, len(vars)+8), parent: globals}
	for k, v := range vars {
		c, err := toValue(v)
		if err != nil {
			return "", 0, err
		}
		root.set(k, c)
	}
	var b strings.Builder
	r := &renderer{now: now, ctx: ctx, maxBytes: maxBytes, out: &b}
	if maxBytes > 0 {
		sizeHint = min(sizeHint, maxBytes)
	}
	b.Grow(sizeHint)
	if _, err := r.exec(t.body, root, &b); err != nil {
		return "", r.steps, err
	}
	if maxBytes > 0 && b.Len() > maxBytes {
		return "", r.steps, r.tooLarge()
	}
	return b.String(), r.steps, nil
}

// ErrTooLarge is what a render beyond its byte cap fails with (wrapped).
var ErrTooLarge = errors.New("rendered template exceeds its size limit")

// RenderError is a failure while rendering: a template's raise_exception,
// or an operation Python would refuse (e.g. adding a string to a number,
// using an undefined value).
type RenderError struct {
	Msg string
	// Raised is true for the template's own raise_exception.
	Raised bool
}

func (e *RenderError) Error() string { return "chat template: " + e.Msg }

func errorf(format string, args ...any) error {
	return &RenderError{Msg: fmt.Sprintf(format, args...)}
}

// scope is one level of variables. Most scopes (a loop iteration's, a
// macro call's) hold a handful of names: they live in an inline array, and
// only a scope that outgrows it gets a map — a map per loop iteration was
// most of a chat render's allocations.
type scope struct {
	vars   map[string]any // nil until the inline array is full
	n      int
	inline [6]binding
	parent *scope
}

type binding struct {
	name string
	v    any
}

func newScope(parent *scope) *scope { return &scope{parent: parent} }

func (s *scope) lookup(name string) (any, bool) {
	for ; s != nil; s = s.parent {
		if v, ok := s.local(name); ok {
			return v, true
		}
	}
	return nil, false
}

// local looks name up in this scope only.
func (s *scope) local(name string) (any, bool) {
	if s.vars != nil {
		v, ok := s.vars[name]
		return v, ok
	}
	for i := range s.n {
		if s.inline[i].name == name {
			return s.inline[i].v, true
		}
	}
	return nil, false
}

func (s *scope) set(name string, v any) {
	if s.vars != nil {
		s.vars[name] = v
		return
	}
	for i := range s.n {
		if s.inline[i].name == name {
			s.inline[i].v = v
			return
		}
	}
	if s.n < len(s.inline) {
		s.inline[s.n] = binding{name, v}
		s.n++
		return
	}
	s.vars = make(map[string]any, 2*len(s.inline))
	for _, b := range s.inline[:s.n] {
		s.vars[b.name] = b.v
	}
	s.inline = [len(s.inline)]binding{}
	s.n = 0
	s.vars[name] = v
}

type renderer struct {
	now   func() time.Time
	depth int
	// The bounds of one render: ctx, looked at every checkSteps steps,
	// and the output's size (out is the top-level output; every loop
	// iteration checks its own output too), so that neither a caller that
	// gave up nor a template that multiplies its input keeps a core.
	ctx      context.Context
	maxBytes int
	out      *strings.Builder
	// steps counts the nodes executed and expressions evaluated: the
	// render's work, in a unit that does not depend on the machine.
	steps int64
}

// checkSteps is how many steps a render takes between looks at its
// context: some tens of microseconds.
const checkSteps = 1 << 10

// step counts one step, and every checkSteps steps checks the render's
// bounds.
func (r *renderer) step() error {
	r.steps++
	if r.steps%checkSteps != 0 {
		return nil
	}
	if err := r.ctx.Err(); err != nil {
		return err
	}
	if r.maxBytes > 0 && r.out.Len() > r.maxBytes {
		return r.tooLarge()
	}
	return nil
}

// bulk counts the work of an expression whose value it made (a string
// built, a list copied) in steps: one per list item, one per 16 bytes.
// A template that rebuilds the conversation for every message (a running
// concatenation, a slice of the messages in a loop) then takes steps
// quadratic in the messages, as it takes time.
func (r *renderer) bulk(v any, err error) (any, error) {
	switch v := v.(type) {
	case string:
		r.steps += int64(len(v)) >> 4
	case []any:
		r.steps += int64(len(v))
	case tuple:
		r.steps += int64(len(v))
	}
	return v, err
}

func (r *renderer) tooLarge() error {
	return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, r.maxBytes)
}

// maxRepeatBytes bounds what a string or list repetition ('=' * n) may
// build when the render has no byte cap of its own.
const maxRepeatBytes = 64 << 20

// checkRepeat refuses a repetition whose result would exceed the render's
// byte cap (or maxRepeatBytes without one).
func (r *renderer) checkRepeat(l, rv any) error {
	limit := int64(maxRepeatBytes)
	if r.maxBytes > 0 {
		limit = int64(r.maxBytes)
	}
	size := func(seq, n any) (int64, bool) {
		k, ok := integer(n)
		if !ok {
			return 0, false
		}
		switch s := seq.(type) {
		case string:
			return int64(len(s)), k > 0
		case []any:
			return int64(len(s)), k > 0
		}
		return 0, false
	}
	for _, p := range [2][2]any{{l, rv}, {rv, l}} {
		if n, ok := size(p[0], p[1]); ok {
			k, _ := integer(p[1])
			if n > 0 && k > limit/n {
				if r.maxBytes > 0 {
					return r.tooLarge()
				}
				return errorf("repetition of %d × %d is too large", n, k)
			}
		}
	}
	return nil
}

type ctrl uint8

const (
	ctrlNone ctrl = iota
	ctrlBreak
	ctrlContinue
)

const maxMacroDepth = 64

type macro struct {
	n   *macroNode
	def *scope
}

type loopInfo struct {
	index0, length int
	items          []any
}

func (r *renderer) exec(body []node, sc *scope, out *strings.Builder) (ctrl, error) {
	for _, n := range body {
		if err := r.step(); err != nil {
			return 0, err
		}
		switch n := n.(type) {
		case *dataNode:
			out.WriteString(n.s)
		case *printNode:
			if err := r.print(n.x, sc, out); err != nil {
				return 0, err
			}
		case *ifNode:
			ran := false
			for i, c := range n.conds {
				v, err := r.eval(c, sc)
				if err != nil {
					return 0, err
				}
				if truthy(v) {
					ran = true
					if c, err := r.exec(n.bodies[i], sc, out); err != nil || c != ctrlNone {
						return c, err
					}
					break
				}
			}
			if !ran && n.els != nil {
				if c, err := r.exec(n.els, sc, out); err != nil || c != ctrlNone {
					return c, err
				}
			}
		case *forNode:
			if err := r.execFor(n, sc, out); err != nil {
				return 0, err
			}
		case *setNode:
			v, err := r.eval(n.x, sc)
			if err != nil {
				return 0, err
			}
			if err := r.assign(n.target, v, sc); err != nil {
				return 0, err
			}
		case *setBlockNode:
			var b strings.Builder
			if _, err := r.exec(n.body, sc, &b); err != nil {
				return 0, err
			}
			v, err := r.applyFilters(b.String(), n.filters, sc)
			if err != nil {
				return 0, err
			}
			if err := r.assign(n.target, v, sc); err != nil {
				return 0, err
			}
		case *filterBlockNode:
			var b strings.Builder
			if _, err := r.exec(n.body, sc, &b); err != nil {
				return 0, err
			}
			v, err := r.applyFilters(b.String(), n.filters, sc)
			if err != nil {
				return 0, err
			}
			out.WriteString(str(v))
		case *withNode:
			inner := newScope(sc)
			for i, t := range n.targets {
				v, err := r.eval(n.vals[i], sc)
				if err != nil {
					return 0, err
				}
				if err := r.assign(t, v, inner); err != nil {
					return 0, err
				}
			}
			if c, err := r.exec(n.body, inner, out); err != nil || c != ctrlNone {
				return c, err
			}
		case *macroNode:
			sc.set(n.name, &macro{n: n, def: sc})
		case *breakNode:
			return ctrlBreak, nil
		case *continueNode:
			return ctrlContinue, nil
		default:
			return 0, errorf("internal: unknown node %T", n)
		}
	}
	return ctrlNone, nil
}

func (r *renderer) applyFilters(v any, filters []*filterExpr, sc *scope) (any, error) {
	for _, f := range filters {
		var err error
		if v, err = r.applyFilter(f, v, sc); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func (r *renderer) execFor(n *forNode, sc *scope, out *strings.Builder) error {
	it, err := r.eval(n.iter, sc)
	if err != nil {
		return err
	}
	items, err := iterate(it)
	if err != nil {
		return errorf("%v", err)
	}
	if n.cond != nil {
		kept := make([]any, 0, len(items))
		for _, item := range items {
			probe := newScope(sc)
			if err := r.assign(n.target, item, probe); err != nil {
				return err
			}
			v, err := r.eval(n.cond, probe)
			if err != nil {
				return err
			}
			if truthy(v) {
				kept = append(kept, item)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		if n.els != nil {
			_, err := r.exec(n.els, sc, out)
			return err
		}
		return nil
	}
	// Each iteration starts from an empty scope: as in Jinja, a variable
	// set in the body does not survive into the next iteration
	// (namespace() does). One scope is emptied and reused unless the body
	// defines a macro, which would keep it; a chat render loops over every
	// message of the conversation, and a scope per iteration was a
	// tenth of its time. The loop object is one for the whole loop, as
	// Jinja's LoopContext is.
	loop := &loopInfo{length: len(items), items: items}
	inner := &scope{parent: sc}
	for i, item := range items {
		if i > 0 {
			if n.definesMacro {
				inner = &scope{parent: sc}
			} else {
				*inner = scope{parent: sc}
			}
		}
		if r.maxBytes > 0 && out.Len() > r.maxBytes {
			return r.tooLarge()
		}
		if err := r.assign(n.target, item, inner); err != nil {
			return err
		}
		loop.index0 = i
		inner.set("loop", loop)
		c, err := r.exec(n.body, inner, out)
		if err != nil {
			return err
		}
		if c == ctrlBreak {
			break
		}
	}
	return nil
}

func (r *renderer) assign(target expr, v any, sc *scope) error {
	switch t := target.(type) {
	case *nameExpr:
		sc.set(t.name, v)
		return nil
	case *tupleExpr:
		items, err := iterate(v)
		if err != nil {
			return errorf("cannot unpack: %v", err)
		}
		if len(items) != len(t.items) {
			return errorf("cannot unpack %d values into %d names", len(items), len(t.items))
		}
		for i, sub := range t.items {
			if err := r.assign(sub, items[i], sc); err != nil {
				return err
			}
		}
		return nil
	case *getattr:
		obj, err := r.eval(t.obj, sc)
		if err != nil {
			return err
		}
		ns, ok := obj.(*namespace)
		if !ok {
			return errorf("cannot assign attribute on non-namespace object")
		}
		ns.attrs.Set(t.name, v)
		return nil
	}
	return errorf("cannot assign to %T", target)
}

func (r *renderer) eval(x expr, sc *scope) (any, error) {
	if err := r.step(); err != nil {
		return nil, err
	}
	switch x := x.(type) {
	case *constExpr:
		return x.v, nil
	case *nameExpr:
		if v, ok := sc.lookup(x.name); ok {
			return v, nil
		}
		return undefined{name: x.name}, nil
	case *getattr:
		obj, err := r.eval(x.obj, sc)
		if err != nil {
			return nil, err
		}
		return getAttr(obj, x.name)
	case *getitem:
		obj, err := r.eval(x.obj, sc)
		if err != nil {
			return nil, err
		}
		key, err := r.eval(x.key, sc)
		if err != nil {
			return nil, err
		}
		return getItem(obj, key)
	case *slice:
		return r.bulk(r.evalSlice(x, sc))
	case *call:
		return r.bulk(r.evalCall(x, sc))
	case *filterExpr:
		v, err := r.eval(x.node, sc)
		if err != nil {
			return nil, err
		}
		return r.bulk(r.applyFilter(x, v, sc))
	case *testExpr:
		v, err := r.eval(x.node, sc)
		if err != nil {
			return nil, err
		}
		args, err := r.evalList(x.args, sc)
		if err != nil {
			return nil, err
		}
		ok, err := r.applyTest(x.name, v, args, sc)
		if err != nil {
			return nil, err
		}
		return ok != x.negate, nil
	case *binary:
		return r.bulk(r.evalBinary(x, sc))
	case *unary:
		v, err := r.eval(x.x, sc)
		if err != nil {
			return nil, err
		}
		switch x.op {
		case "not":
			return !truthy(v), nil
		case "-":
			switch n := v.(type) {
			case int64:
				return -n, nil
			case bool:
				i, _ := integer(n)
				return -i, nil
			case float64:
				return -n, nil
			}
			return nil, errorf("bad operand type for unary -: '%s'", typeName(v))
		default:
			if _, ok := number(v); !ok {
				return nil, errorf("bad operand type for unary +: '%s'", typeName(v))
			}
			return v, nil
		}
	case *compareExpr:
		left, err := r.eval(x.first, sc)
		if err != nil {
			return nil, err
		}
		for i, op := range x.ops {
			right, err := r.eval(x.rest[i], sc)
			if err != nil {
				return nil, err
			}
			ok, err := compareOp(op, left, right)
			if err != nil {
				return nil, err
			}
			if !ok {
				return false, nil
			}
			left = right
		}
		return true, nil
	case *condExpr:
		t, err := r.eval(x.test, sc)
		if err != nil {
			return nil, err
		}
		if truthy(t) {
			return r.eval(x.yes, sc)
		}
		if x.no == nil {
			return undefined{}, nil
		}
		return r.eval(x.no, sc)
	case *listExpr:
		return r.evalList(x.items, sc)
	case *tupleExpr:
		l, err := r.evalList(x.items, sc)
		return tuple(l), err
	case *dictExpr:
		d := NewDict()
		for i := range x.keys {
			k, err := r.eval(x.keys[i], sc)
			if err != nil {
				return nil, err
			}
			if !hashable(k) {
				return nil, unhashable(k)
			}
			v, err := r.eval(x.vals[i], sc)
			if err != nil {
				return nil, err
			}
			d.Set(k, v)
		}
		return d, nil
	case *concatExpr:
		var b strings.Builder
		for _, p := range x.parts {
			v, err := r.eval(p, sc)
			if err != nil {
				return nil, err
			}
			b.WriteString(str(v))
		}
		return r.bulk(b.String(), nil)
	}
	return nil, errorf("internal: unknown expression %T", x)
}

func (r *renderer) evalList(xs []expr, sc *scope) ([]any, error) {
	out := make([]any, len(xs))
	for i, x := range xs {
		v, err := r.eval(x, sc)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (r *renderer) evalKwargs(kws []kwarg, sc *scope) (*Dict, error) {
	if len(kws) == 0 {
		return nil, nil
	}
	d := NewDict()
	for _, k := range kws {
		v, err := r.eval(k.val, sc)
		if err != nil {
			return nil, err
		}
		d.Set(k.name, v)
	}
	return d, nil
}

// print writes the value of x. Concatenations — templates print every
// message as one — are written piece by piece rather than built first.
func (r *renderer) print(x expr, sc *scope, out *strings.Builder) error {
	switch x := x.(type) {
	case *binary:
		if x.op == "+" {
			v, written, err := r.evalPlus(x, sc, out)
			if err == nil && !written {
				out.WriteString(str(v))
			}
			return err
		}
	case *concatExpr:
		for _, p := range x.parts {
			v, err := r.eval(p, sc)
			if err != nil {
				return err
			}
			out.WriteString(str(v))
		}
		return nil
	}
	v, err := r.eval(x, sc)
	if err != nil {
		return err
	}
	out.WriteString(str(v))
	return nil
}

// evalPlus evaluates a chain of "+" (a + b + c parses as (a + b) + c).
// Chat templates build each message as one such chain around its content;
// pairwise, every step would copy the content again. The operands are
// evaluated and combined left to right as the pairwise form would — same
// values, same errors, same order — but a run of strings is joined once,
// or, when out is not nil, written to out (written reports it).
func (r *renderer) evalPlus(x *binary, sc *scope, out *strings.Builder) (v any, written bool, err error) {
	var opsBuf [16]expr
	ops := opsBuf[:0]
	var n expr = x
	for {
		b, ok := n.(*binary)
		if !ok || b.op != "+" {
			break
		}
		ops = append(ops, b.r)
		n = b.l
	}
	ops = append(ops, n)
	slices.Reverse(ops)

	var strsBuf [16]string
	strs := strsBuf[:0] // the operands so far, while all are strings
	var acc any         // the running value once one is not a string (mixed)
	mixed := false
	for i, op := range ops {
		v, err := r.eval(op, sc)
		if err != nil {
			return nil, false, err
		}
		if !mixed {
			if s, ok := v.(string); ok {
				strs = append(strs, s)
				continue
			}
			mixed = true
			if i == 0 {
				acc = v
				continue
			}
			acc = strings.Join(strs, "")
		}
		if acc, err = arith("+", acc, v); err != nil {
			return nil, false, err
		}
	}
	switch {
	case mixed:
		return acc, false, nil
	case out != nil:
		for _, s := range strs {
			out.WriteString(s)
		}
		return nil, true, nil
	case len(strs) == 1:
		return strs[0], false, nil
	}
	return strings.Join(strs, ""), false, nil
}

func (r *renderer) evalBinary(x *binary, sc *scope) (any, error) {
	if x.op == "+" {
		v, _, err := r.evalPlus(x, sc, nil)
		return v, err
	}
	l, err := r.eval(x.l, sc)
	if err != nil {
		return nil, err
	}
	switch x.op {
	case "and":
		if !truthy(l) {
			return l, nil
		}
		return r.eval(x.r, sc)
	case "or":
		if truthy(l) {
			return l, nil
		}
		return r.eval(x.r, sc)
	}
	rv, err := r.eval(x.r, sc)
	if err != nil {
		return nil, err
	}
	if x.op == "*" {
		if err := r.checkRepeat(l, rv); err != nil {
			return nil, err
		}
	}
	return arith(x.op, l, rv)
}

func undefinedError(u undefined) error {
	if u.name != "" {
		return errorf("'%s' is undefined", u.name)
	}
	return errorf("undefined value used")
}

func arith(op string, l, r any) (any, error) {
	if u, ok := l.(undefined); ok {
		return nil, undefinedError(u)
	}
	if u, ok := r.(undefined); ok {
		return nil, undefinedError(u)
	}
	switch op {
	case "+":
		switch a := l.(type) {
		case string:
			if b, ok := r.(string); ok {
				return a + b, nil
			}
		case []any:
			if b, ok := r.([]any); ok {
				out := make([]any, 0, len(a)+len(b))
				return append(append(out, a...), b...), nil
			}
		case tuple:
			if b, ok := r.(tuple); ok {
				out := make(tuple, 0, len(a)+len(b))
				return append(append(out, a...), b...), nil
			}
		}
	case "*":
		if n, ok := integer(r); ok {
			if s, ok := l.(string); ok {
				return strings.Repeat(s, int(max(n, 0))), nil
			}
			if s, ok := l.([]any); ok {
				return repeatList(s, n), nil
			}
		}
		if n, ok := integer(l); ok {
			if s, ok := r.(string); ok {
				return strings.Repeat(s, int(max(n, 0))), nil
			}
			if s, ok := r.([]any); ok {
				return repeatList(s, n), nil
			}
		}
	}
	ia, aInt := integer(l)
	ib, bInt := integer(r)
	if aInt && bInt {
		switch op {
		case "+":
			return ia + ib, nil
		case "-":
			return ia - ib, nil
		case "*":
			return ia * ib, nil
		case "/":
			if ib == 0 {
				return nil, errorf("division by zero")
			}
			return float64(ia) / float64(ib), nil
		case "//":
			if ib == 0 {
				return nil, errorf("integer division or modulo by zero")
			}
			q := ia / ib
			if (ia%ib != 0) && ((ia < 0) != (ib < 0)) {
				q--
			}
			return q, nil
		case "%":
			if ib == 0 {
				return nil, errorf("integer division or modulo by zero")
			}
			m := ia % ib
			if m != 0 && ((m < 0) != (ib < 0)) {
				m += ib
			}
			return m, nil
		case "**":
			if ib >= 0 {
				res := int64(1)
				for i := int64(0); i < ib; i++ {
					res *= ia
				}
				return res, nil
			}
			return math.Pow(float64(ia), float64(ib)), nil
		}
	}
	fa, aNum := number(l)
	fb, bNum := number(r)
	if aNum && bNum {
		switch op {
		case "+":
			return fa + fb, nil
		case "-":
			return fa - fb, nil
		case "*":
			return fa * fb, nil
		case "/":
			if fb == 0 {
				return nil, errorf("float division by zero")
			}
			return fa / fb, nil
		case "//":
			if fb == 0 {
				return nil, errorf("float floor division by zero")
			}
			return math.Floor(fa / fb), nil
		case "%":
			if fb == 0 {
				return nil, errorf("float modulo")
			}
			m := math.Mod(fa, fb)
			if m != 0 && ((m < 0) != (fb < 0)) {
				m += fb
			}
			return m, nil
		case "**":
			return math.Pow(fa, fb), nil
		}
	}
	return nil, errorf("unsupported operand type(s) for %s: '%s' and '%s'", op, typeName(l), typeName(r))
}

func repeatList(s []any, n int64) []any {
	out := make([]any, 0, len(s)*int(max(n, 0)))
	for i := int64(0); i < n; i++ {
		out = append(out, s...)
	}
	return out
}

func compareOp(op string, l, r any) (bool, error) {
	switch op {
	case "==":
		return equal(l, r), nil
	case "!=":
		return !equal(l, r), nil
	case "in":
		return contains(r, l)
	case "notin":
		ok, err := contains(r, l)
		return !ok, err
	}
	c, ok := compare(l, r)
	if !ok {
		if u, isU := l.(undefined); isU {
			return false, undefinedError(u)
		}
		if u, isU := r.(undefined); isU {
			return false, undefinedError(u)
		}
		return false, errorf("'%s' not supported between instances of '%s' and '%s'", op, typeName(l), typeName(r))
	}
	switch op {
	case "<":
		return c < 0, nil
	case ">":
		return c > 0, nil
	case "<=":
		return c <= 0, nil
	default:
		return c >= 0, nil
	}
}

func contains(container, item any) (bool, error) {
	switch c := container.(type) {
	case string:
		s, ok := item.(string)
		if !ok {
			return false, errorf("'in <string>' requires string as left operand, not %s", typeName(item))
		}
		return strings.Contains(c, s), nil
	case []any, tuple:
		items, _ := elems(c)
		for _, e := range items {
			if equal(e, item) {
				return true, nil
			}
		}
		return false, nil
	case *Dict:
		if !hashable(item) {
			return false, unhashable(item)
		}
		_, ok := c.Get(item)
		return ok, nil
	case undefined:
		return false, nil
	}
	return false, errorf("argument of type '%s' is not iterable", typeName(container))
}

func (r *renderer) evalSlice(x *slice, sc *scope) (any, error) {
	obj, err := r.eval(x.obj, sc)
	if err != nil {
		return nil, err
	}
	var idx [3]*int64
	for i, part := range []expr{x.start, x.stop, x.step} {
		if part == nil {
			continue
		}
		v, err := r.eval(part, sc)
		if err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		n, ok := integer(v)
		if !ok {
			return nil, errorf("slice indices must be integers or None")
		}
		idx[i] = &n
	}
	if t, ok := obj.(tuple); ok {
		l, err := sliceValue([]any(t), idx)
		return tuple(l), err
	}
	switch o := obj.(type) {
	case []any:
		return sliceValue(o, idx)
	case string:
		runes := []rune(o)
		pos, err := sliceIndices(len(runes), idx)
		if err != nil {
			return nil, err
		}
		out := make([]rune, len(pos))
		for i, p := range pos {
			out[i] = runes[p]
		}
		return string(out), nil
	case undefined:
		return nil, undefinedError(o)
	}
	return undefined{}, nil
}

func sliceValue(o []any, idx [3]*int64) ([]any, error) {
	pos, err := sliceIndices(len(o), idx)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(pos))
	for i, p := range pos {
		out[i] = o[p]
	}
	return out, nil
}

// sliceIndices is Python's slice.indices, returning the selected positions.
func sliceIndices(n int, idx [3]*int64) ([]int, error) {
	step := int64(1)
	if idx[2] != nil {
		step = *idx[2]
	}
	if step == 0 {
		return nil, errorf("slice step cannot be zero")
	}
	clamp := func(p *int64, def int64, lo, hi int64) int64 {
		if p == nil {
			return def
		}
		v := *p
		if v < 0 {
			v += int64(n)
			if v < lo {
				v = lo
			}
		} else if v > hi {
			v = hi
		}
		return v
	}
	var start, stop int64
	if step > 0 {
		start = clamp(idx[0], 0, 0, int64(n))
		stop = clamp(idx[1], int64(n), 0, int64(n))
	} else {
		start = clamp(idx[0], int64(n)-1, -1, int64(n)-1)
		stop = clamp(idx[1], -1, -1, int64(n)-1)
	}
	var out []int
	for i := start; (step > 0 && i < stop) || (step < 0 && i > stop); i += step {
		out = append(out, int(i))
	}
	return out, nil
}

func (r *renderer) evalCall(x *call, sc *scope) (any, error) {
	fn, err := r.eval(x.fn, sc)
	if err != nil {
		return nil, err
	}
	args, err := r.evalList(x.args, sc)
	if err != nil {
		return nil, err
	}
	kw, err := r.evalKwargs(x.kwargs, sc)
	if err != nil {
		return nil, err
	}
	return r.callValue(fn, args, kw)
}

func (r *renderer) callValue(fn any, args []any, kw *Dict) (any, error) {
	switch f := fn.(type) {
	case callable:
		return f(r, args, kw)
	case *macro:
		return r.callMacro(f, args, kw)
	case undefined:
		return nil, undefinedError(f)
	}
	return nil, errorf("'%s' object is not callable", typeName(fn))
}

func (r *renderer) callMacro(m *macro, args []any, kw *Dict) (any, error) {
	if r.depth >= maxMacroDepth {
		return nil, errorf("macro recursion too deep")
	}
	r.depth++
	defer func() { r.depth-- }()
	sc := newScope(m.def)
	n := m.n
	firstDefault := len(n.params) - len(n.defaults)
	var varargs []any
	for i, a := range args {
		if i < len(n.params) {
			sc.set(n.params[i], a)
		} else {
			varargs = append(varargs, a)
		}
	}
	extra := NewDict()
	if kw != nil {
		for i, k := range kw.keys {
			name, _ := k.(string)
			found := false
			for _, p := range n.params {
				if p == name {
					sc.set(p, kw.vals[i])
					found = true
				}
			}
			if !found {
				extra.Set(k, kw.vals[i])
			}
		}
	}
	for i, p := range n.params {
		if _, ok := sc.local(p); ok {
			continue
		}
		if i >= firstDefault {
			v, err := r.eval(n.defaults[i-firstDefault], sc)
			if err != nil {
				return nil, err
			}
			sc.set(p, v)
		} else {
			sc.set(p, undefined{name: p})
		}
	}
	if varargs == nil {
		varargs = []any{}
	}
	sc.set("varargs", varargs)
	sc.set("kwargs", extra)
	var b strings.Builder
	if _, err := r.exec(n.body, sc, &b); err != nil {
		return nil, err
	}
	return b.String(), nil
}

// getAttr is Jinja's obj.name: an attribute (a method) first, then an item.
func getAttr(obj any, name string) (any, error) {
	switch o := obj.(type) {
	case undefined:
		return nil, undefinedError(o)
	case *Dict:
		if m := dictMethod(o, name); m != nil {
			return m, nil
		}
		if v, ok := o.Get(name); ok {
			return v, nil
		}
		return undefined{name: name}, nil
	case string:
		if m := strMethod(o, name); m != nil {
			return m, nil
		}
	case []any:
		if m := listMethod(o, name); m != nil {
			return m, nil
		}
	case *namespace:
		if v, ok := o.attrs.Get(name); ok {
			return v, nil
		}
	case *loopInfo:
		return o.attr(name), nil
	}
	return undefined{name: name}, nil
}

// getItem is Jinja's obj[key]: an item first, then an attribute.
func getItem(obj, key any) (any, error) {
	switch o := obj.(type) {
	case undefined:
		return nil, undefinedError(o)
	case *Dict:
		if v, ok := o.Get(key); ok {
			return v, nil
		}
	case []any, tuple:
		l, _ := elems(o)
		if i, ok := integer(key); ok {
			if i < 0 {
				i += int64(len(l))
			}
			if i >= 0 && i < int64(len(l)) {
				return l[i], nil
			}
			return undefined{}, nil
		}
	case string:
		if i, ok := integer(key); ok {
			n := int64(utf8.RuneCountInString(o))
			if i < 0 {
				i += n
			}
			if i >= 0 && i < n {
				if n == int64(len(o)) {
					return o[i : i+1], nil
				}
				return string([]rune(o)[i]), nil
			}
			return undefined{}, nil
		}
	}
	if name, ok := key.(string); ok {
		return getAttr(obj, name)
	}
	return undefined{}, nil
}

func (l *loopInfo) attr(name string) any {
	switch name {
	case "index":
		return int64(l.index0 + 1)
	case "index0":
		return int64(l.index0)
	case "revindex":
		return int64(l.length - l.index0)
	case "revindex0":
		return int64(l.length - l.index0 - 1)
	case "first":
		return l.index0 == 0
	case "last":
		return l.index0 == l.length-1
	case "length":
		return int64(l.length)
	case "depth":
		return int64(1)
	case "depth0":
		return int64(0)
	case "previtem":
		if l.index0 > 0 {
			return l.items[l.index0-1]
		}
	case "nextitem":
		if l.index0+1 < l.length {
			return l.items[l.index0+1]
		}
	case "cycle":
		return callable(func(_ *renderer, args []any, _ *Dict) (any, error) {
			if len(args) == 0 {
				return nil, errorf("no items for cycling given")
			}
			return args[l.index0%len(args)], nil
		})
	}
	return undefined{name: name}
}

// unhashable is Python's TypeError for a dict key that cannot be one.
func unhashable(k any) error {
	return errorf("unhashable type: '%s'", typeName(k))
}
