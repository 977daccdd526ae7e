// Package piirules finds an operator's own kinds of personal data in a
// prompt: employee and customer numbers, internal code names, a country's
// identifiers the built-in pii classifier does not know. A GatewayBackend
// declares them (spec.pii) as patterns and dictionaries, each under a kind;
// the router's pii-rules classifier tags a prompt holding one with
// pii-detected and pii:<kind>, as the built-in kinds are.
//
// Patterns are regular expressions in Go's RE2 syntax, matched against
// whole words: a prompt is cut at whitespace and where ASCII text meets
// other scripts (社員番号EMP-123456です holds the word EMP-123456), a word's
// surrounding punctuation is trimmed, and a pattern matches a word when it
// matches all of it. Matching words rather than the whole text keeps the
// cost low: Go's regexp runs a 32 KB prompt at about 10 MB/s (3 ms a
// pattern), but a word is a few bytes, and most words are skipped without
// running the expression at all, on their length and first byte, both
// bounded from the expression's syntax (a pattern for EMP-[0-9]{6} looks
// only at 10-byte words starting with E). Patterns that could match a
// space are refused: they could never match a word.
//
// Dictionaries are lists of terms (a word or a phrase) found anywhere in
// the text, ignoring case and the width of the whitespace between a
// phrase's words, with one Aho–Corasick automaton over every dictionary's
// terms: one pass over the text whatever their number. A term whose first
// or last character is an ASCII letter or digit must stand on its own at
// that end (falcon does not match falconry); other scripts are matched as
// substrings, since Japanese and Chinese put no spaces between words.
//
// Both are linear in the text, bounded by the limits below, and both skip
// what cannot start a match a table lookup a byte: for an 8k-token prompt
// (34 KB) of prose, a pattern and two terms take about 0.1 ms of CPU, a
// thousand terms 0.03 ms (BenchmarkScan, a loaded 2-core Xeon).
package piirules

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"unicode"
	"unicode/utf8"

	"github.com/switchyard-dev/switchyard/internal/bytescan"
)

// Limits on a Spec: they bound the work per prompt and the memory of the
// automaton.
const (
	MaxPatterns     = 64
	MaxRegexLen     = 1024
	MaxDictionaries = 64
	// MaxTerms bounds the terms of every dictionary together.
	MaxTerms = 10000
	// MaxTermLen bounds one term, in bytes.
	MaxTermLen = 256
	// MaxKindLen bounds a kind's name (it becomes the tag pii:<kind>).
	MaxKindLen = 63
)

// Pattern is one regular expression under a kind.
type Pattern struct {
	Kind, Regex string
}

// Dictionary is a list of terms under a kind.
type Dictionary struct {
	Kind  string
	Terms []string
}

// Spec is what an operator declares.
type Spec struct {
	Patterns     []Pattern
	Dictionaries []Dictionary
}

// Error is one invalid entry of a Spec; Field is its path below the spec
// (patterns[2].regex).
type Error struct {
	Field, Msg string
}

func (e Error) Error() string { return e.Field + ": " + e.Msg }

// Set is a compiled Spec, safe for concurrent use.
type Set struct {
	kinds []string
	pats  []pattern
	// firstAny: the bytes any pattern's match can start with (never
	// whitespace: no pattern matches it).
	firstAny [256]bool
	first    bytescan.Set // firstAny, searched eight bytes at a time
	dict     *automaton   // nil without terms
}

type pattern struct {
	kind   int
	re     *regexp.Regexp // anchored at both ends
	first  [256]bool      // bytes a match can start with
	minLen int            // bytes
	maxLen int            // bytes; -1: unbounded
}

// Compile checks and compiles s. It returns every error found, each with
// its field; a nil Set with them.
func Compile(s Spec) (*Set, []Error) {
	var errs []Error
	set := &Set{}
	kindID := map[string]int{}
	kind := func(field, k string) int {
		if msg := kindError(k); msg != "" {
			errs = append(errs, Error{field, msg})
			return -1
		}
		id, ok := kindID[k]
		if !ok {
			id = len(set.kinds)
			kindID[k] = id
			set.kinds = append(set.kinds, k)
		}
		return id
	}
	if len(s.Patterns) > MaxPatterns {
		errs = append(errs, Error{"patterns", fmt.Sprintf("at most %d patterns, got %d", MaxPatterns, len(s.Patterns))})
	}
	for i, p := range s.Patterns {
		f := fmt.Sprintf("patterns[%d]", i)
		id := kind(f+".kind", p.Kind)
		cp, msg := compilePattern(p.Regex)
		if msg != "" {
			errs = append(errs, Error{f + ".regex", msg})
			continue
		}
		cp.kind = id
		set.pats = append(set.pats, cp)
		for c, ok := range cp.first {
			set.firstAny[c] = set.firstAny[c] || ok && byteClass[c] != classSpace
		}
	}
	if len(s.Dictionaries) > MaxDictionaries {
		errs = append(errs, Error{"dictionaries", fmt.Sprintf("at most %d dictionaries, got %d", MaxDictionaries, len(s.Dictionaries))})
	}
	b := newBuilder()
	total := 0
	for i, d := range s.Dictionaries {
		f := fmt.Sprintf("dictionaries[%d]", i)
		id := kind(f+".kind", d.Kind)
		if len(d.Terms) == 0 {
			errs = append(errs, Error{f + ".terms", "list at least one term"})
		}
		total += len(d.Terms)
		for j, t := range d.Terms {
			folded := foldTerm(t)
			switch {
			case len(t) > MaxTermLen:
				errs = append(errs, Error{fmt.Sprintf("%s.terms[%d]", f, j), fmt.Sprintf("at most %d bytes, got %d", MaxTermLen, len(t))})
			case !utf8.ValidString(t):
				errs = append(errs, Error{fmt.Sprintf("%s.terms[%d]", f, j), "not valid UTF-8"})
			case folded == "":
				errs = append(errs, Error{fmt.Sprintf("%s.terms[%d]", f, j), "empty term"})
			case id >= 0:
				b.add(folded, id)
			}
		}
	}
	if total > MaxTerms {
		errs = append(errs, Error{"dictionaries", fmt.Sprintf("at most %d terms in all, got %d", MaxTerms, total)})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if total > 0 {
		set.dict = b.build()
	}
	set.first = bytescan.NewSet(&set.firstAny)
	return set, nil
}

func kindError(k string) string {
	if k == "" {
		return "kind is required"
	}
	if len(k) > MaxKindLen {
		return fmt.Sprintf("at most %d characters, got %d", MaxKindLen, len(k))
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' && i > 0 && i < len(k)-1
		if !ok {
			return fmt.Sprintf("want lowercase letters, digits and inner dashes (it becomes the tag pii:%s)", k)
		}
	}
	return ""
}

// Kinds are the kinds s finds, each once; Scan reports them by index.
func (s *Set) Kinds() []string { return s.kinds }

// Scan marks in hit (len(Kinds()) long) each kind found in text.
func (s *Set) Scan(text string, hit []bool) {
	if len(s.pats) > 0 {
		s.scanWords(text, hit)
	}
	if s.dict != nil {
		s.dict.scan(text, hit)
	}
}

// Byte classes of the word scan: a word is a run of one class.
const (
	classSpace = iota
	classASCII
	classOther // bytes of runes outside ASCII
)

var byteClass = func() (t [256]uint8) {
	for c := range t {
		switch {
		case c >= utf8.RuneSelf:
			t[c] = classOther
		case isSpace(byte(c)):
			t[c] = classSpace
		default:
			t[c] = classASCII
		}
	}
	return t
}()

// leadPunct and trailPunct are what trimPunct drops at a word's ends.
var leadPunct, trailPunct = func() (lead, trail [256]bool) {
	for _, c := range []byte(`([{"'<`) {
		lead[c] = true
	}
	for _, c := range []byte(`.,;:!?)]}"'>`) {
		trail[c] = true
	}
	return lead, trail
}()

// scanWords runs the patterns over each word of text that holds a byte a
// match can start with (firstAny): only those words can match, so the
// others cost one table lookup a byte, and a word is found around its
// first such byte.
func (s *Set) scanWords(text string, hit []bool) {
	for i := 0; i < len(text); {
		if i = s.first.Next(text, i); i == len(text) {
			return
		}
		class := byteClass[text[i]]
		start, end := i, i+1
		for start > 0 && byteClass[text[start-1]] == class {
			start--
		}
		for end < len(text) && byteClass[text[end]] == class {
			end++
		}
		if w := trimPunct(text[start:end]); w != "" {
			s.matchWord(w, hit)
		}
		i = end
	}
}

func (s *Set) matchWord(w string, hit []bool) {
	for i := range s.pats {
		p := &s.pats[i]
		if hit[p.kind] || len(w) < p.minLen || p.maxLen >= 0 && len(w) > p.maxLen || !p.first[w[0]] {
			continue
		}
		if p.re.MatchString(w) {
			hit[p.kind] = true
		}
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// trimPunct drops the punctuation a word is written between: brackets,
// quotes, and a sentence's marks after it.
func trimPunct(w string) string {
	for w != "" && leadPunct[w[0]] {
		w = w[1:]
	}
	for w != "" && trailPunct[w[len(w)-1]] {
		w = w[:len(w)-1]
	}
	return w
}

// compilePattern compiles re anchored at both ends and bounds what its
// matches can look like; msg says why re is refused.
func compilePattern(re string) (p pattern, msg string) {
	switch {
	case re == "":
		return p, "regex is required"
	case len(re) > MaxRegexLen:
		return p, fmt.Sprintf("at most %d characters, got %d", MaxRegexLen, len(re))
	}
	tree, err := syntax.Parse(re, syntax.Perl)
	if err != nil {
		return p, err.Error()
	}
	tree = tree.Simplify()
	if matchesSpace(tree) {
		return p, "patterns match single words: this one can match whitespace (use a dictionary for phrases)"
	}
	anchored, err := regexp.Compile(`^(?:` + re + `)$`)
	if err != nil {
		return p, err.Error()
	}
	if anchored.MatchString("") {
		return p, "matches the empty word: it would tag every prompt"
	}
	p.re = anchored
	var nullable bool
	p.first, nullable = firstBytes(tree)
	if nullable {
		for c := range p.first {
			p.first[c] = true
		}
	}
	lo, hi := runeBounds(tree)
	p.minLen, p.maxLen = lo, -1
	if hi >= 0 {
		p.maxLen = hi * utf8.UTFMax
	}
	return p, ""
}

// matchesSpace reports whether a match of re could hold whitespace.
func matchesSpace(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpLiteral:
		return slices.ContainsFunc(re.Rune, unicode.IsSpace)
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			for _, sp := range []rune{' ', '\t', '\n', '\r', '\f', '\v'} {
				if re.Rune[i] <= sp && sp <= re.Rune[i+1] {
					return true
				}
			}
		}
		return false
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return true
	}
	return slices.ContainsFunc(re.Sub, matchesSpace)
}

// firstBytes is the set of bytes a match of re can start with, and
// whether re can match the empty string (then what follows it may start
// the match too).
func firstBytes(re *syntax.Regexp) (set [256]bool, nullable bool) {
	addRune := func(r rune) {
		if r < utf8.RuneSelf {
			set[r] = true
			return
		}
		var b [utf8.UTFMax]byte
		utf8.EncodeRune(b[:], r)
		set[b[0]] = true
	}
	switch re.Op {
	case syntax.OpLiteral:
		if len(re.Rune) == 0 {
			return set, true
		}
		r := re.Rune[0]
		addRune(r)
		if re.Flags&syntax.FoldCase != 0 {
			for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
				addRune(f)
			}
		}
		return set, false
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			for r := lo; r <= hi && r < utf8.RuneSelf; r++ {
				set[r] = true
			}
			if hi >= utf8.RuneSelf {
				for c := 0xC2; c <= 0xF4; c++ { // any lead byte: cheap enough to be loose
					set[c] = true
				}
			}
		}
		return set, false
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		for c := range set {
			set[c] = true
		}
		return set, false
	case syntax.OpCapture, syntax.OpPlus:
		return firstBytes(re.Sub[0])
	case syntax.OpStar, syntax.OpQuest:
		set, _ = firstBytes(re.Sub[0])
		return set, true
	case syntax.OpRepeat:
		set, nullable = firstBytes(re.Sub[0])
		return set, nullable || re.Min == 0
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			s, n := firstBytes(sub)
			for c, ok := range s {
				set[c] = set[c] || ok
			}
			if !n {
				return set, false
			}
		}
		return set, true
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			s, n := firstBytes(sub)
			for c, ok := range s {
				set[c] = set[c] || ok
			}
			nullable = nullable || n
		}
		return set, nullable
	}
	// Empty matches and assertions (^, $, \b): they consume nothing.
	return set, true
}

// runeBounds are the fewest and most runes a match of re holds; hi is -1
// when unbounded.
func runeBounds(re *syntax.Regexp) (lo, hi int) {
	const unbounded = -1
	add := func(a, b int) int {
		if a == unbounded || b == unbounded {
			return unbounded
		}
		return a + b
	}
	switch re.Op {
	case syntax.OpLiteral:
		return len(re.Rune), len(re.Rune)
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 1, 1
	case syntax.OpCapture:
		return runeBounds(re.Sub[0])
	case syntax.OpStar:
		return 0, unbounded
	case syntax.OpPlus:
		l, _ := runeBounds(re.Sub[0])
		return l, unbounded
	case syntax.OpQuest:
		_, h := runeBounds(re.Sub[0])
		return 0, h
	case syntax.OpRepeat:
		l, h := runeBounds(re.Sub[0])
		lo = l * re.Min
		if re.Max == -1 || h == unbounded {
			return lo, unbounded
		}
		return lo, h * re.Max
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			l, h := runeBounds(sub)
			lo, hi = lo+l, add(hi, h)
		}
		return lo, hi
	case syntax.OpAlternate:
		for i, sub := range re.Sub {
			l, h := runeBounds(sub)
			if i == 0 || l < lo {
				lo = l
			}
			if i == 0 || hi != unbounded && (h == unbounded || h > hi) {
				hi = h
			}
		}
		return lo, hi
	}
	return 0, 0
}
