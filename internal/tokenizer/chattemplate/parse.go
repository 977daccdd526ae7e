package chattemplate

import (
	"fmt"
	"strconv"
)

// Expressions.
type (
	expr interface{}

	constExpr struct{ v any }
	nameExpr  struct{ name string }
	getattr   struct {
		obj  expr
		name string
	}
	getitem struct{ obj, key expr }
	slice   struct{ obj, start, stop, step expr } // nil parts are omitted
	call    struct {
		fn     expr
		args   []expr
		kwargs []kwarg
	}
	filterExpr struct {
		node   expr // nil inside a {% filter %} block
		name   string
		args   []expr
		kwargs []kwarg
		line   int
	}
	testExpr struct {
		node   expr
		name   string
		args   []expr
		negate bool
		line   int
	}
	binary struct {
		op   string
		l, r expr
	}
	unary struct {
		op string // "-", "+", "not"
		x  expr
	}
	compareExpr struct {
		first expr
		ops   []string
		rest  []expr
	}
	condExpr   struct{ test, yes, no expr } // no may be nil
	listExpr   struct{ items []expr }
	tupleExpr  struct{ items []expr }
	dictExpr   struct{ keys, vals []expr }
	concatExpr struct{ parts []expr }
)

type kwarg struct {
	name string
	val  expr
}

// Statements.
type (
	node interface{}

	dataNode  struct{ s string }
	printNode struct{ x expr }
	ifNode    struct {
		conds  []expr
		bodies [][]node
		els    []node
	}
	forNode struct {
		target    expr // nameExpr or tupleExpr of names
		iter      expr
		cond      expr
		body, els []node
		recursive bool
		// definesMacro: the body defines a macro, which keeps the scope
		// it was defined in (so each iteration needs a scope of its own).
		definesMacro bool
	}
	setNode struct {
		target expr // nameExpr, tupleExpr or getattr on a name (namespace)
		x      expr
	}
	setBlockNode struct {
		target  expr
		body    []node
		filters []*filterExpr
	}
	macroNode struct {
		name     string
		params   []string
		defaults []expr // aligned to the end of params
		body     []node
	}
	filterBlockNode struct {
		filters []*filterExpr
		body    []node
	}
	withNode struct {
		targets []expr
		vals    []expr
		body    []node
	}
	breakNode    struct{}
	continueNode struct{}
)

type parser struct {
	toks []token
	pos  int
}

func parse(src string) ([]node, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: append(toks, token{kind: tEOF, line: lineOf(toks)})}
	body, end, err := p.subparse(nil)
	if err != nil {
		return nil, err
	}
	if end != "" {
		return nil, p.errorf("unexpected '%s'", end)
	}
	return body, nil
}

func lineOf(toks []token) int {
	if len(toks) == 0 {
		return 1
	}
	return toks[len(toks)-1].line
}

func (p *parser) cur() token  { return p.toks[p.pos] }
func (p *parser) peek() token { return p.toks[min(p.pos+1, len(p.toks)-1)] }
func (p *parser) next() token {
	t := p.toks[p.pos]
	if p.pos < len(p.toks)-1 {
		p.pos++
	}
	return t
}

func (p *parser) errorf(format string, args ...any) error {
	return &SyntaxError{Line: p.cur().line, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) isOp(op string) bool  { t := p.cur(); return t.kind == tOp && t.val == op }
func (p *parser) isName(n string) bool { t := p.cur(); return t.kind == tName && t.val == n }
func (p *parser) skipOp(op string) bool {
	if p.isOp(op) {
		p.next()
		return true
	}
	return false
}

func (p *parser) skipName(n string) bool {
	if p.isName(n) {
		p.next()
		return true
	}
	return false
}

func (p *parser) expectOp(op string) error {
	if !p.isOp(op) {
		return p.errorf("expected '%s', got %s", op, p.cur())
	}
	p.next()
	return nil
}

func (p *parser) expectKind(k tokKind, what string) (token, error) {
	if p.cur().kind != k {
		return token{}, p.errorf("expected %s, got %s", what, p.cur())
	}
	return p.next(), nil
}

func (p *parser) expectName() (string, error) {
	t, err := p.expectKind(tName, "a name")
	return t.val, err
}

// subparse parses nodes until a block tag whose name is in ends (returned,
// with the parser just after the tag name) or the end of the template.
func (p *parser) subparse(ends []string) ([]node, string, error) {
	var body []node
	for {
		t := p.cur()
		switch t.kind {
		case tEOF:
			if len(ends) > 0 {
				return nil, "", p.errorf("unexpected end of template, expected one of %v", ends)
			}
			return body, "", nil
		case tData:
			p.next()
			body = append(body, &dataNode{s: t.val})
		case tVarBegin:
			p.next()
			x, err := p.parseTuple(false)
			if err != nil {
				return nil, "", err
			}
			if _, err := p.expectKind(tVarEnd, "'}}'"); err != nil {
				return nil, "", err
			}
			body = append(body, &printNode{x: x})
		case tBlockBegin:
			p.next()
			name, err := p.expectName()
			if err != nil {
				return nil, "", err
			}
			for _, e := range ends {
				if e == name {
					return body, name, nil
				}
			}
			n, err := p.statement(name)
			if err != nil {
				return nil, "", err
			}
			if n != nil {
				body = append(body, n)
			}
		default:
			return nil, "", p.errorf("unexpected %s", t)
		}
	}
}

func (p *parser) endBlock() error {
	_, err := p.expectKind(tBlockEnd, "'%}'")
	return err
}

func (p *parser) statement(name string) (node, error) {
	line := p.cur().line
	switch name {
	case "if":
		return p.parseIf()
	case "for":
		return p.parseFor()
	case "set":
		return p.parseSet()
	case "macro":
		return p.parseMacro()
	case "filter":
		filters, err := p.parseFilterChain()
		if err != nil {
			return nil, err
		}
		if err := p.endBlock(); err != nil {
			return nil, err
		}
		body, _, err := p.subparse([]string{"endfilter"})
		if err != nil {
			return nil, err
		}
		return &filterBlockNode{filters: filters, body: body}, p.endBlock()
	case "with":
		w := &withNode{}
		for !p.isOpKind(tBlockEnd) {
			if len(w.targets) > 0 {
				if err := p.expectOp(","); err != nil {
					return nil, err
				}
			}
			n, err := p.expectName()
			if err != nil {
				return nil, err
			}
			if err := p.expectOp("="); err != nil {
				return nil, err
			}
			v, err := p.parseExpr(true)
			if err != nil {
				return nil, err
			}
			w.targets = append(w.targets, &nameExpr{name: n})
			w.vals = append(w.vals, v)
		}
		if err := p.endBlock(); err != nil {
			return nil, err
		}
		body, _, err := p.subparse([]string{"endwith"})
		if err != nil {
			return nil, err
		}
		w.body = body
		return w, p.endBlock()
	case "generation":
		// transformers' AssistantTracker tag: marks assistant text for
		// masks; it renders its body unchanged.
		if err := p.endBlock(); err != nil {
			return nil, err
		}
		body, _, err := p.subparse([]string{"endgeneration"})
		if err != nil {
			return nil, err
		}
		return &ifNode{conds: []expr{&constExpr{v: true}}, bodies: [][]node{body}}, p.endBlock()
	case "break":
		return &breakNode{}, p.endBlock()
	case "continue":
		return &continueNode{}, p.endBlock()
	}
	return nil, &SyntaxError{Line: line, Msg: fmt.Sprintf("unsupported tag %q", name)}
}

func (p *parser) isOpKind(k tokKind) bool { return p.cur().kind == k }

func (p *parser) parseIf() (node, error) {
	n := &ifNode{}
	for {
		cond, err := p.parseTuple(true)
		if err != nil {
			return nil, err
		}
		if err := p.endBlock(); err != nil {
			return nil, err
		}
		body, end, err := p.subparse([]string{"elif", "else", "endif"})
		if err != nil {
			return nil, err
		}
		n.conds = append(n.conds, cond)
		n.bodies = append(n.bodies, body)
		switch end {
		case "elif":
			continue
		case "else":
			if err := p.endBlock(); err != nil {
				return nil, err
			}
			els, _, err := p.subparse([]string{"endif"})
			if err != nil {
				return nil, err
			}
			n.els = els
		}
		return n, p.endBlock()
	}
}

func (p *parser) parseAssignTarget(allowAttr bool) (expr, error) {
	var items []expr
	for {
		name, err := p.expectName()
		if err != nil {
			return nil, err
		}
		var t expr = &nameExpr{name: name}
		if allowAttr && p.isOp(".") {
			p.next()
			attr, err := p.expectName()
			if err != nil {
				return nil, err
			}
			t = &getattr{obj: t, name: attr}
		}
		items = append(items, t)
		if !p.isOp(",") {
			break
		}
		p.next()
	}
	if len(items) == 1 {
		return items[0], nil
	}
	return &tupleExpr{items: items}, nil
}

func (p *parser) parseFor() (node, error) {
	target, err := p.parseAssignTarget(false)
	if err != nil {
		return nil, err
	}
	if !p.skipName("in") {
		return nil, p.errorf("expected 'in', got %s", p.cur())
	}
	iter, err := p.parseTupleNoCond()
	if err != nil {
		return nil, err
	}
	n := &forNode{target: target, iter: iter}
	if p.skipName("if") {
		if n.cond, err = p.parseTuple(true); err != nil {
			return nil, err
		}
	}
	n.recursive = p.skipName("recursive")
	if err := p.endBlock(); err != nil {
		return nil, err
	}
	body, end, err := p.subparse([]string{"endfor", "else"})
	if err != nil {
		return nil, err
	}
	n.body = body
	if end == "else" {
		if err := p.endBlock(); err != nil {
			return nil, err
		}
		if n.els, _, err = p.subparse([]string{"endfor"}); err != nil {
			return nil, err
		}
	}
	if n.recursive {
		return nil, p.errorf("recursive for loops are not supported")
	}
	n.definesMacro = definesMacro(n.body)
	return n, p.endBlock()
}

// definesMacro reports whether body defines a macro at any depth.
func definesMacro(body []node) bool {
	for _, n := range body {
		switch n := n.(type) {
		case *macroNode:
			return true
		case *ifNode:
			for _, b := range n.bodies {
				if definesMacro(b) {
					return true
				}
			}
			if definesMacro(n.els) {
				return true
			}
		case *forNode:
			if n.definesMacro || definesMacro(n.els) {
				return true
			}
		case *setBlockNode:
			if definesMacro(n.body) {
				return true
			}
		case *filterBlockNode:
			if definesMacro(n.body) {
				return true
			}
		case *withNode:
			if definesMacro(n.body) {
				return true
			}
		}
	}
	return false
}

// parseTupleNoCond parses a for loop's iterable, where "if" starts the
// loop filter rather than a conditional expression.
func (p *parser) parseTupleNoCond() (expr, error) {
	var items []expr
	for {
		x, err := p.parseExpr(false)
		if err != nil {
			return nil, err
		}
		items = append(items, x)
		if !p.isOp(",") {
			break
		}
		p.next()
	}
	if len(items) == 1 {
		return items[0], nil
	}
	return &tupleExpr{items: items}, nil
}

func (p *parser) parseSet() (node, error) {
	target, err := p.parseAssignTarget(true)
	if err != nil {
		return nil, err
	}
	if p.skipOp("=") {
		x, err := p.parseTuple(false)
		if err != nil {
			return nil, err
		}
		return &setNode{target: target, x: x}, p.endBlock()
	}
	n := &setBlockNode{target: target}
	if p.skipOp("|") {
		if n.filters, err = p.parseFilterChain(); err != nil {
			return nil, err
		}
	}
	if err := p.endBlock(); err != nil {
		return nil, err
	}
	if n.body, _, err = p.subparse([]string{"endset"}); err != nil {
		return nil, err
	}
	return n, p.endBlock()
}

// parseFilterChain parses "name(args)|name..." of a filter block or block
// set.
func (p *parser) parseFilterChain() ([]*filterExpr, error) {
	var out []*filterExpr
	for {
		f, err := p.parseFilterCall(nil)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
		if !p.skipOp("|") {
			return out, nil
		}
	}
}

func (p *parser) parseMacro() (node, error) {
	name, err := p.expectName()
	if err != nil {
		return nil, err
	}
	n := &macroNode{name: name}
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	for !p.isOp(")") {
		if len(n.params) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		param, err := p.expectName()
		if err != nil {
			return nil, err
		}
		n.params = append(n.params, param)
		if p.skipOp("=") {
			d, err := p.parseExpr(true)
			if err != nil {
				return nil, err
			}
			n.defaults = append(n.defaults, d)
		} else if len(n.defaults) > 0 {
			return nil, p.errorf("non-default argument follows default argument")
		}
	}
	p.next()
	if err := p.endBlock(); err != nil {
		return nil, err
	}
	if n.body, _, err = p.subparse([]string{"endmacro"}); err != nil {
		return nil, err
	}
	return n, p.endBlock()
}

// parseTuple parses an expression or a comma-separated tuple of them.
func (p *parser) parseTuple(withCond bool) (expr, error) {
	var items []expr
	trailing := false
	for {
		x, err := p.parseExpr(true)
		if err != nil {
			return nil, err
		}
		items = append(items, x)
		trailing = false
		if !p.isOp(",") {
			break
		}
		p.next()
		trailing = true
		if k := p.cur().kind; k == tBlockEnd || k == tVarEnd || p.isOp(")") {
			break
		}
	}
	_ = withCond
	if len(items) == 1 && !trailing {
		return items[0], nil
	}
	return &tupleExpr{items: items}, nil
}

func (p *parser) parseExpr(withCond bool) (expr, error) {
	x, err := p.parseOr()
	if err != nil || !withCond {
		return x, err
	}
	for p.isName("if") {
		p.next()
		test, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		c := &condExpr{test: test, yes: x}
		if p.skipName("else") {
			if c.no, err = p.parseExpr(true); err != nil {
				return nil, err
			}
		}
		x = c
	}
	return x, nil
}

func (p *parser) parseOr() (expr, error) {
	x, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	for p.skipName("or") {
		r, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		x = &binary{op: "or", l: x, r: r}
	}
	return x, nil
}

func (p *parser) parseAnd() (expr, error) {
	x, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	for p.skipName("and") {
		r, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		x = &binary{op: "and", l: x, r: r}
	}
	return x, nil
}

func (p *parser) parseNot() (expr, error) {
	if p.skipName("not") {
		x, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		return &unary{op: "not", x: x}, nil
	}
	return p.parseCompare()
}

func (p *parser) parseCompare() (expr, error) {
	x, err := p.parseMath1()
	if err != nil {
		return nil, err
	}
	c := &compareExpr{first: x}
	for {
		var op string
		switch t := p.cur(); {
		case t.kind == tOp && (t.val == "==" || t.val == "!=" || t.val == "<" || t.val == ">" || t.val == "<=" || t.val == ">="):
			op = t.val
			p.next()
		case p.isName("in"):
			op = "in"
			p.next()
		case p.isName("not") && p.peek().kind == tName && p.peek().val == "in":
			op = "notin"
			p.next()
			p.next()
		}
		if op == "" {
			break
		}
		r, err := p.parseMath1()
		if err != nil {
			return nil, err
		}
		c.ops = append(c.ops, op)
		c.rest = append(c.rest, r)
	}
	if len(c.ops) == 0 {
		return x, nil
	}
	return c, nil
}

func (p *parser) parseMath1() (expr, error) {
	x, err := p.parseConcat()
	if err != nil {
		return nil, err
	}
	for p.isOp("+") || p.isOp("-") {
		op := p.next().val
		r, err := p.parseConcat()
		if err != nil {
			return nil, err
		}
		x = &binary{op: op, l: x, r: r}
	}
	return x, nil
}

func (p *parser) parseConcat() (expr, error) {
	x, err := p.parseMath2()
	if err != nil {
		return nil, err
	}
	if !p.isOp("~") {
		return x, nil
	}
	c := &concatExpr{parts: []expr{x}}
	for p.skipOp("~") {
		r, err := p.parseMath2()
		if err != nil {
			return nil, err
		}
		c.parts = append(c.parts, r)
	}
	return c, nil
}

func (p *parser) parseMath2() (expr, error) {
	x, err := p.parsePow()
	if err != nil {
		return nil, err
	}
	for p.isOp("*") || p.isOp("/") || p.isOp("//") || p.isOp("%") {
		op := p.next().val
		r, err := p.parsePow()
		if err != nil {
			return nil, err
		}
		x = &binary{op: op, l: x, r: r}
	}
	return x, nil
}

func (p *parser) parsePow() (expr, error) {
	x, err := p.parseUnary(true)
	if err != nil {
		return nil, err
	}
	for p.skipOp("**") {
		r, err := p.parseUnary(true)
		if err != nil {
			return nil, err
		}
		x = &binary{op: "**", l: x, r: r}
	}
	return x, nil
}

func (p *parser) parseUnary(withFilter bool) (expr, error) {
	var x expr
	var err error
	switch {
	case p.isOp("-") || p.isOp("+"):
		op := p.next().val
		inner, err := p.parseUnary(false)
		if err != nil {
			return nil, err
		}
		x = &unary{op: op, x: inner}
	default:
		if x, err = p.parsePrimary(); err != nil {
			return nil, err
		}
	}
	if x, err = p.parsePostfix(x); err != nil {
		return nil, err
	}
	if withFilter {
		return p.parseFilterExpr(x)
	}
	return x, nil
}

func (p *parser) parsePrimary() (expr, error) {
	t := p.cur()
	switch t.kind {
	case tName:
		p.next()
		switch t.val {
		case "true", "True":
			return &constExpr{v: true}, nil
		case "false", "False":
			return &constExpr{v: false}, nil
		case "none", "None":
			return &constExpr{v: nil}, nil
		}
		return &nameExpr{name: t.val}, nil
	case tString:
		s := ""
		for p.cur().kind == tString {
			s += p.next().val
		}
		return &constExpr{v: s}, nil
	case tInt:
		p.next()
		v, err := strconv.ParseInt(t.val, 10, 64)
		if err != nil {
			f, _ := strconv.ParseFloat(t.val, 64)
			return &constExpr{v: f}, nil
		}
		return &constExpr{v: v}, nil
	case tFloat:
		p.next()
		v, err := strconv.ParseFloat(t.val, 64)
		if err != nil {
			return nil, p.errorf("bad number %q", t.val)
		}
		return &constExpr{v: v}, nil
	case tOp:
		switch t.val {
		case "(":
			p.next()
			if p.skipOp(")") {
				return &tupleExpr{}, nil
			}
			x, err := p.parseTuple(true)
			if err != nil {
				return nil, err
			}
			return x, p.expectOp(")")
		case "[":
			p.next()
			l := &listExpr{}
			for !p.isOp("]") {
				if len(l.items) > 0 {
					if err := p.expectOp(","); err != nil {
						return nil, err
					}
					if p.isOp("]") {
						break
					}
				}
				x, err := p.parseExpr(true)
				if err != nil {
					return nil, err
				}
				l.items = append(l.items, x)
			}
			p.next()
			return l, nil
		case "{":
			p.next()
			d := &dictExpr{}
			for !p.isOp("}") {
				if len(d.keys) > 0 {
					if err := p.expectOp(","); err != nil {
						return nil, err
					}
					if p.isOp("}") {
						break
					}
				}
				k, err := p.parseExpr(true)
				if err != nil {
					return nil, err
				}
				if err := p.expectOp(":"); err != nil {
					return nil, err
				}
				v, err := p.parseExpr(true)
				if err != nil {
					return nil, err
				}
				d.keys = append(d.keys, k)
				d.vals = append(d.vals, v)
			}
			p.next()
			return d, nil
		}
	}
	return nil, p.errorf("unexpected %s", t)
}

func (p *parser) parsePostfix(x expr) (expr, error) {
	for {
		switch {
		case p.isOp("."):
			p.next()
			t := p.next()
			switch t.kind {
			case tName:
				x = &getattr{obj: x, name: t.val}
			case tInt:
				v, _ := strconv.ParseInt(t.val, 10, 64)
				x = &getitem{obj: x, key: &constExpr{v: v}}
			default:
				return nil, p.errorf("expected an attribute name, got %s", t)
			}
		case p.isOp("["):
			p.next()
			s, err := p.parseSubscript(x)
			if err != nil {
				return nil, err
			}
			x = s
		case p.isOp("("):
			c, err := p.parseCall(x)
			if err != nil {
				return nil, err
			}
			x = c
		default:
			return x, nil
		}
	}
}

func (p *parser) parseSubscript(obj expr) (expr, error) {
	var parts [3]expr
	i := 0
	isSlice := false
	for {
		if p.isOp("]") {
			p.next()
			break
		}
		if p.isOp(":") {
			p.next()
			isSlice = true
			i++
			if i > 2 {
				return nil, p.errorf("too many ':' in subscript")
			}
			continue
		}
		x, err := p.parseExpr(true)
		if err != nil {
			return nil, err
		}
		parts[i] = x
	}
	if !isSlice {
		if parts[0] == nil {
			return nil, p.errorf("empty subscript")
		}
		return &getitem{obj: obj, key: parts[0]}, nil
	}
	return &slice{obj: obj, start: parts[0], stop: parts[1], step: parts[2]}, nil
}

func (p *parser) parseArgs() ([]expr, []kwarg, error) {
	if err := p.expectOp("("); err != nil {
		return nil, nil, err
	}
	var args []expr
	var kwargs []kwarg
	for !p.isOp(")") {
		if len(args)+len(kwargs) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, nil, err
			}
			if p.isOp(")") {
				break
			}
		}
		if p.cur().kind == tName && p.peek().kind == tOp && p.peek().val == "=" {
			name := p.next().val
			p.next()
			v, err := p.parseExpr(true)
			if err != nil {
				return nil, nil, err
			}
			kwargs = append(kwargs, kwarg{name: name, val: v})
			continue
		}
		if len(kwargs) > 0 {
			return nil, nil, p.errorf("positional argument follows keyword argument")
		}
		x, err := p.parseExpr(true)
		if err != nil {
			return nil, nil, err
		}
		args = append(args, x)
	}
	p.next()
	return args, kwargs, nil
}

func (p *parser) parseCall(fn expr) (expr, error) {
	args, kwargs, err := p.parseArgs()
	if err != nil {
		return nil, err
	}
	return &call{fn: fn, args: args, kwargs: kwargs}, nil
}

func (p *parser) parseFilterCall(node expr) (*filterExpr, error) {
	line := p.cur().line
	name, err := p.expectName()
	if err != nil {
		return nil, err
	}
	for p.isOp(".") {
		p.next()
		part, err := p.expectName()
		if err != nil {
			return nil, err
		}
		name += "." + part
	}
	f := &filterExpr{node: node, name: name, line: line}
	if p.isOp("(") {
		if f.args, f.kwargs, err = p.parseArgs(); err != nil {
			return nil, err
		}
	}
	return f, nil
}

func (p *parser) parseFilterExpr(x expr) (expr, error) {
	for {
		switch {
		case p.isOp("|"):
			p.next()
			f, err := p.parseFilterCall(x)
			if err != nil {
				return nil, err
			}
			x = f
		case p.isName("is"):
			line := p.cur().line
			p.next()
			t := &testExpr{node: x, negate: p.skipName("not"), line: line}
			name, err := p.expectName()
			if err != nil {
				return nil, err
			}
			for p.isOp(".") {
				p.next()
				part, err := p.expectName()
				if err != nil {
					return nil, err
				}
				name += "." + part
			}
			t.name = name
			switch c := p.cur(); {
			case c.kind == tOp && c.val == "(":
				args, _, err := p.parseArgs()
				if err != nil {
					return nil, err
				}
				t.args = args
			case c.kind == tString || c.kind == tInt || c.kind == tFloat ||
				(c.kind == tOp && (c.val == "[" || c.val == "{" || c.val == "-")) ||
				(c.kind == tName && c.val != "else" && c.val != "or" && c.val != "and" && c.val != "if" && c.val != "is" && c.val != "in" && c.val != "not"):
				arg, err := p.parsePrimaryWithPostfix()
				if err != nil {
					return nil, err
				}
				t.args = []expr{arg}
			}
			x = t
		case p.isOp("("):
			c, err := p.parseCall(x)
			if err != nil {
				return nil, err
			}
			x = c
		default:
			return x, nil
		}
	}
}

func (p *parser) parsePrimaryWithPostfix() (expr, error) {
	x, err := p.parseUnary(false)
	if err != nil {
		return nil, err
	}
	return x, nil
}
