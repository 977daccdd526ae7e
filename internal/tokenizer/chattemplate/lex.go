package chattemplate

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The lexer follows Jinja's with the environment Hugging Face uses for chat
// templates: trim_blocks (the first newline after a block or comment tag is
// dropped), lstrip_blocks (spaces and tabs before a block or comment tag on
// its own line are dropped), "-" and "+" whitespace control on every tag,
// newlines normalized to "\n", and one trailing newline of the source
// dropped (keep_trailing_newline=False).

type tokKind uint8

const (
	tData tokKind = iota
	tVarBegin
	tVarEnd
	tBlockBegin
	tBlockEnd
	tName
	tString
	tInt
	tFloat
	tOp
	tEOF
)

type token struct {
	kind tokKind
	val  string // name, operator, data, decoded string literal, number text
	line int
}

func (t token) String() string {
	switch t.kind {
	case tEOF:
		return "end of template"
	case tVarEnd:
		return "'}}'"
	case tBlockEnd:
		return "'%}'"
	case tData:
		return "template data"
	}
	return strconv.Quote(t.val)
}

// SyntaxError is a template that does not parse.
type SyntaxError struct {
	Line int
	Msg  string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("chat template line %d: %s", e.Line, e.Msg) }

type lexer struct {
	src          string
	pos          int
	line         int
	toks         []token
	lineStarting bool
}

func normalizeNewlines(s string) string {
	if !strings.ContainsRune(s, '\r') {
		return s
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.ReplaceAll(s, "\r", "\n")
}

func lex(src string) ([]token, error) {
	src = normalizeNewlines(src)
	src = strings.TrimSuffix(src, "\n")
	lx := &lexer{src: src, line: 1, lineStarting: true}
	if err := lx.run(); err != nil {
		return nil, err
	}
	return lx.toks, nil
}

func (lx *lexer) errorf(format string, args ...any) error {
	return &SyntaxError{Line: lx.line, Msg: fmt.Sprintf(format, args...)}
}

func (lx *lexer) emit(kind tokKind, val string) {
	lx.toks = append(lx.toks, token{kind: kind, val: val, line: lx.line})
}

// nextTag finds the next "{{", "{%" or "{#" at or after pos.
func (lx *lexer) nextTag(from int) int {
	for i := from; ; {
		j := strings.IndexByte(lx.src[i:], '{')
		if j < 0 || i+j+1 >= len(lx.src) {
			return -1
		}
		i += j
		switch lx.src[i+1] {
		case '{', '%', '#':
			return i
		}
		i++
	}
}

func (lx *lexer) run() error {
	for lx.pos < len(lx.src) {
		k := lx.nextTag(lx.pos)
		if k < 0 {
			lx.data(lx.src[lx.pos:])
			lx.pos = len(lx.src)
			break
		}
		text := lx.src[lx.pos:k]
		kind := lx.src[k+1]
		sign := byte(0)
		if k+2 < len(lx.src) && (lx.src[k+2] == '-' || lx.src[k+2] == '+') {
			sign = lx.src[k+2]
		}
		switch {
		case sign == '-':
			text = strings.TrimRightFunc(text, pyIsSpace)
		case sign != '+' && kind != '{':
			lpos := strings.LastIndexByte(text, '\n') + 1
			if lpos > 0 || lx.lineStarting {
				rest := text[lpos:]
				if rest != "" && strings.TrimLeftFunc(rest, pyIsSpace) == "" {
					text = text[:lpos]
				}
			}
		}
		lx.data(text)
		lx.line += strings.Count(lx.src[lx.pos:k], "\n") - strings.Count(text, "\n")
		lx.pos = k + 2
		if sign != 0 {
			lx.pos++
		}
		var err error
		switch kind {
		case '#':
			err = lx.comment()
		case '{':
			lx.emit(tVarBegin, "")
			err = lx.expr("}}", tVarEnd, false)
		case '%':
			start := len(lx.toks)
			lx.emit(tBlockBegin, "")
			if err = lx.expr("%}", tBlockEnd, true); err == nil {
				if len(lx.toks) == start+3 && lx.toks[start+1].kind == tName && lx.toks[start+1].val == "raw" {
					lx.toks = lx.toks[:start]
					err = lx.raw()
				}
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (lx *lexer) data(s string) {
	if s != "" {
		lx.emit(tData, s)
		lx.line += strings.Count(s, "\n")
	}
}

// afterEnd consumes what follows a closing delimiter: all whitespace after a
// "-", else one newline for a block or comment (trim_blocks) unless "+".
func (lx *lexer) afterEnd(sign byte, trim bool) {
	start := lx.pos
	switch {
	case sign == '-':
		lx.pos = len(lx.src) - len(strings.TrimLeftFunc(lx.src[lx.pos:], pyIsSpace))
	case sign != '+' && trim && lx.pos < len(lx.src) && lx.src[lx.pos] == '\n':
		lx.pos++
	}
	consumed := lx.src[start:lx.pos]
	lx.line += strings.Count(consumed, "\n")
	if consumed != "" {
		lx.lineStarting = consumed[len(consumed)-1] == '\n'
	} else {
		lx.lineStarting = false
	}
}

func (lx *lexer) comment() error {
	j := strings.Index(lx.src[lx.pos:], "#}")
	if j < 0 {
		return lx.errorf("unclosed comment")
	}
	body := lx.src[lx.pos : lx.pos+j]
	lx.line += strings.Count(body, "\n")
	sign := byte(0)
	if strings.HasSuffix(body, "-") {
		sign = '-'
	} else if strings.HasSuffix(body, "+") {
		sign = '+'
	}
	lx.pos += j + 2
	lx.afterEnd(sign, true)
	return nil
}

// raw handles {% raw %}: everything up to {% endraw %} is data.
func (lx *lexer) raw() error {
	for i := lx.pos; ; {
		k := strings.Index(lx.src[i:], "{%")
		if k < 0 {
			return lx.errorf("missing endraw")
		}
		k += i
		p := k + 2
		sign := byte(0)
		if p < len(lx.src) && (lx.src[p] == '-' || lx.src[p] == '+') {
			sign = lx.src[p]
			p++
		}
		q := p
		for q < len(lx.src) && pyIsSpace(rune(lx.src[q])) {
			q++
		}
		if !strings.HasPrefix(lx.src[q:], "endraw") {
			i = k + 2
			continue
		}
		q += len("endraw")
		for q < len(lx.src) && pyIsSpace(rune(lx.src[q])) {
			q++
		}
		endSign := byte(0)
		if q < len(lx.src) && (lx.src[q] == '-' || lx.src[q] == '+') {
			endSign = lx.src[q]
			q++
		}
		if !strings.HasPrefix(lx.src[q:], "%}") {
			i = k + 2
			continue
		}
		text := lx.src[lx.pos:k]
		if sign == '-' {
			text = strings.TrimRightFunc(text, pyIsSpace)
		}
		lx.data(text)
		lx.pos = q + 2
		lx.afterEnd(endSign, true)
		return nil
	}
}

// expr lexes expression tokens up to the closing delimiter.
func (lx *lexer) expr(end string, endKind tokKind, trim bool) error {
	depth := 0
	for {
		for lx.pos < len(lx.src) {
			r, n := utf8.DecodeRuneInString(lx.src[lx.pos:])
			if !pyIsSpace(r) {
				break
			}
			if r == '\n' {
				lx.line++
			}
			lx.pos += n
		}
		if lx.pos >= len(lx.src) {
			return lx.errorf("unexpected end of template, expected %q", end)
		}
		s := lx.src[lx.pos:]
		if depth == 0 {
			for _, sign := range []string{"-", "+", ""} {
				if sign == "+" && end == "}}" {
					continue
				}
				if strings.HasPrefix(s, sign+end) {
					lx.emit(endKind, "")
					lx.pos += len(sign) + len(end)
					var sb byte
					if sign != "" {
						sb = sign[0]
					}
					lx.afterEnd(sb, trim)
					return nil
				}
			}
		}
		c := s[0]
		switch {
		case c == '\'' || c == '"':
			if err := lx.str(c); err != nil {
				return err
			}
		case c >= '0' && c <= '9':
			lx.num()
		case c == '_' || unicode.IsLetter(rune(c)) || c >= utf8.RuneSelf:
			i := 0
			for i < len(s) {
				r, n := utf8.DecodeRuneInString(s[i:])
				if r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
					break
				}
				i += n
			}
			if i == 0 {
				return lx.errorf("unexpected character %q", s[:1])
			}
			lx.emit(tName, s[:i])
			lx.pos += i
		default:
			op := ""
			for _, o := range []string{"//", "**", "==", "!=", "<=", ">="} {
				if strings.HasPrefix(s, o) {
					op = o
					break
				}
			}
			if op == "" {
				if !strings.ContainsRune("+-*/%~<>=()[]{}.,:|", rune(c)) {
					return lx.errorf("unexpected character %q", s[:1])
				}
				op = s[:1]
			}
			switch op {
			case "(", "[", "{":
				depth++
			case ")", "]", "}":
				depth--
			}
			lx.emit(tOp, op)
			lx.pos += len(op)
		}
	}
}

func (lx *lexer) num() {
	s := lx.src[lx.pos:]
	i := 0
	digits := func() {
		for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '_' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9') {
			i++
		}
	}
	digits()
	kind := tInt
	if i+1 < len(s) && s[i] == '.' && s[i+1] >= '0' && s[i+1] <= '9' {
		i++
		digits()
		kind = tFloat
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && s[j] >= '0' && s[j] <= '9' {
			i = j
			digits()
			kind = tFloat
		}
	}
	lx.emit(kind, strings.ReplaceAll(s[:i], "_", ""))
	lx.pos += i
}

// str lexes a string literal and decodes its escapes as Python's
// "unicode-escape" does (Jinja's rule); unknown escapes stay as written.
func (lx *lexer) str(q byte) error {
	s := lx.src[lx.pos+1:]
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == q:
			lx.emit(tString, b.String())
			lx.line += strings.Count(s[:i], "\n")
			lx.pos += i + 2
			return nil
		case c == '\\' && i+1 < len(s):
			e := s[i+1]
			i += 2
			switch e {
			case '\n':
			case '\\', '\'', '"':
				b.WriteByte(e)
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'v':
				b.WriteByte('\v')
			case 'x', 'u', 'U':
				n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
				if i+n > len(s) {
					return lx.errorf("truncated \\%c escape", e)
				}
				v, err := strconv.ParseUint(s[i:i+n], 16, 32)
				if err != nil || v > unicode.MaxRune {
					return lx.errorf("bad \\%c escape", e)
				}
				b.WriteRune(rune(v))
				i += n
			case '0', '1', '2', '3', '4', '5', '6', '7':
				j := i - 1
				for j < len(s) && j < i+2 && s[j] >= '0' && s[j] <= '7' {
					j++
				}
				v, _ := strconv.ParseUint(s[i-1:j], 8, 32)
				b.WriteRune(rune(v))
				i = j
			default:
				b.WriteByte('\\')
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
			i++
		}
	}
	return lx.errorf("unterminated string")
}
