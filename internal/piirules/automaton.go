package piirules

import (
	"slices"
	"unicode"
	"unicode/utf8"
)

// automaton is Aho–Corasick over the folded bytes of every term: a trie
// of the terms whose nodes also link to the longest proper suffix of
// their path that is a path too (fail), so the text is read once, each
// byte moving one state on, or back along fail links it has paid for by
// moving on before. Each node links to the nearest node on its fail chain
// where a term ends (link), so the terms ending at a byte are listed
// without walking the rest of the chain.
//
// Children are sorted edge lists (most nodes have one or two); the root,
// where the scan spends most bytes, has a table.
type automaton struct {
	nodes []node
	edges []edge // each node's children: edges[node.first : node.first+node.n]
	root  [256]int32
	// starts are the text bytes a term can start with: its first folded
	// byte in both cases, and every byte of other scripts when a term
	// starts with one (their case is found by decoding).
	starts [256]bool
	// seconds holds, for each folded ASCII byte a term starts with, the
	// folded ASCII bytes its second can be (all of them after a term of
	// one byte): see nextStart.
	seconds [utf8.RuneSelf]byteSet
	terms   []term
}

// byteSet is a set of ASCII bytes.
type byteSet [2]uint64

func (s *byteSet) add(c byte)      { s[c>>6] |= 1 << (c & 63) }
func (s *byteSet) has(c byte) bool { return s[c>>6]&(1<<(c&63)) != 0 }

type node struct {
	first, n int32
	fail     int32
	link     int32 // nearest node on the fail chain with a term; 0: none
	out      int32 // first term ending here; -1: none
}

type edge struct {
	c  byte
	to int32
}

type term struct {
	kind                int32
	len                 int32
	next                int32 // another term ending at the same node; -1: none
	leftWord, rightWord bool  // the term starts/ends with a word byte: it must not be glued to one there
}

// builder grows the trie before it is frozen into an automaton.
type builder struct {
	kids  []map[byte]int32
	out   []int32
	terms []term
}

func newBuilder() *builder {
	return &builder{kids: []map[byte]int32{nil}, out: []int32{-1}}
}

// add inserts a folded, non-empty term.
func (b *builder) add(t string, kind int) {
	n := int32(0)
	for i := 0; i < len(t); i++ {
		next, ok := b.kids[n][t[i]]
		if !ok {
			if b.kids[n] == nil {
				b.kids[n] = map[byte]int32{}
			}
			next = int32(len(b.kids))
			b.kids[n][t[i]] = next
			b.kids = append(b.kids, nil)
			b.out = append(b.out, -1)
		}
		n = next
	}
	for t := b.out[n]; t >= 0; t = b.terms[t].next {
		if b.terms[t].kind == int32(kind) {
			return // listed twice
		}
	}
	b.terms = append(b.terms, term{kind: int32(kind), len: int32(len(t)), next: b.out[n],
		leftWord: isWordByte(t[0]), rightWord: isWordByte(t[len(t)-1])})
	b.out[n] = int32(len(b.terms) - 1)
}

func (b *builder) build() *automaton {
	a := &automaton{nodes: make([]node, len(b.kids)), terms: b.terms}
	for i, kids := range b.kids {
		a.nodes[i] = node{first: int32(len(a.edges)), n: int32(len(kids)), out: b.out[i]}
		for _, c := range slices.Sorted(mapsKeys(kids)) {
			a.edges = append(a.edges, edge{c, kids[c]})
		}
	}
	for _, e := range a.children(0) {
		a.root[e.c] = e.to
		switch {
		case e.c >= utf8.RuneSelf:
			for c := utf8.RuneSelf; c < len(a.starts); c++ {
				a.starts[c] = true
			}
		case e.c >= 'a' && e.c <= 'z':
			a.starts[e.c], a.starts[e.c-'a'+'A'] = true, true
		default:
			a.starts[e.c] = true
		}
		if e.c < utf8.RuneSelf {
			sec := &a.seconds[e.c]
			if a.nodes[e.to].out >= 0 {
				*sec = byteSet{^uint64(0), ^uint64(0)}
			}
			for _, f := range a.children(e.to) {
				if f.c < utf8.RuneSelf {
					sec.add(f.c)
				}
			}
		}
	}
	// Breadth first: a node's fail link is shallower, so set already.
	queue := make([]int32, 0, len(a.nodes))
	for _, e := range a.children(0) {
		queue = append(queue, e.to)
	}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, e := range a.children(u) {
			f := a.nodes[u].fail
			for f != 0 && a.child(f, e.c) < 0 {
				f = a.nodes[f].fail
			}
			v := a.step(f, e.c)
			if v == e.to {
				v = 0
			}
			a.nodes[e.to].fail = v
			if a.nodes[v].out >= 0 {
				a.nodes[e.to].link = v
			} else {
				a.nodes[e.to].link = a.nodes[v].link
			}
			queue = append(queue, e.to)
		}
	}
	return a
}

func mapsKeys(m map[byte]int32) func(func(byte) bool) {
	return func(yield func(byte) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (a *automaton) children(n int32) []edge {
	nd := &a.nodes[n]
	return a.edges[nd.first : nd.first+nd.n]
}

// child is n's child on c, or -1.
func (a *automaton) child(n int32, c byte) int32 {
	for _, e := range a.children(n) {
		if e.c == c {
			return e.to
		}
		if e.c > c {
			break
		}
	}
	return -1
}

// step is where the trie goes from n on c, from the root if n has no
// such child: the root's table is total (0 where no term starts).
func (a *automaton) step(n int32, c byte) int32 {
	if n == 0 {
		return a.root[c]
	}
	return a.child(n, c)
}

// ringSize bounds how far back scan can look for where a match started:
// more than the longest folded term (MaxTermLen bytes fold to at most half
// as many again).
const ringSize = 512

// scan marks the kinds of the terms found in text. It folds the text as
// it goes, as fold does, without a copy: each ASCII byte through a table,
// other runes lower-cased one by one. Where the automaton is at its root
// it skips to the next byte that can start a term (starts), so prose
// costs about a table lookup a byte. A ring keeps where in text each of
// the last folded bytes came from, for the check before a match.
func (a *automaton) scan(text string, hit []bool) {
	var from [ringSize]int32
	fed := 0 // folded bytes so far
	state := int32(0)
	lastSpace := false
	for i := 0; i < len(text); {
		if state == 0 {
			if i = a.nextStart(text, i); i == len(text) {
				return
			}
			lastSpace = false // a term starts with no space
		}
		c := text[i]
		if c < utf8.RuneSelf {
			f := asciiFold[c]
			if f == ' ' {
				if lastSpace {
					i++
					continue
				}
				lastSpace = true
			} else {
				lastSpace = false
			}
			from[fed%ringSize] = int32(i)
			fed++
			i++
			if state = a.advance(state, f); state != 0 && a.nodes[state].reports() {
				nextWord := i < len(text) && text[i] < utf8.RuneSelf && isWordByte(asciiFold[text[i]])
				a.report(state, text, &from, fed, nextWord, hit)
			}
			continue
		}
		var b [utf8.UTFMax]byte
		folded, size := foldRune(text[i:], &b)
		if folded[0] == ' ' {
			if lastSpace {
				i += size
				continue
			}
			lastSpace = true
		} else {
			lastSpace = false
		}
		for _, f := range folded {
			from[fed%ringSize] = int32(i)
			fed++
			if state = a.advance(state, f); state != 0 && a.nodes[state].reports() {
				// A term ending inside a rune's bytes, or with a space,
				// ends with no word byte: what follows does not matter.
				a.report(state, text, &from, fed, false, hit)
			}
		}
		i += size
	}
}

// nextStart is the first place at or after i where a term can start, or
// len(text); the scan skips there from the root. A byte a term starts with
// is passed over when no term can start there for what is around it, in
// ASCII: glued to a word byte before it when it is a word byte itself
// (the term must stand on its own), or followed by a byte no term starting
// with it continues with (seconds). In prose most of the bytes terms start
// with are inside words or start other words, so the automaton is rarely
// entered at all.
func (a *automaton) nextStart(text string, i int) int {
	for ; i < len(text); i++ {
		c := text[i]
		if !a.starts[c] {
			continue
		}
		if c >= utf8.RuneSelf {
			return i
		}
		f := asciiFold[c]
		if isWordByte(f) && gluedBefore(text, i) {
			continue
		}
		if i+1 < len(text) && text[i+1] < utf8.RuneSelf && !a.seconds[f].has(asciiFold[text[i+1]]) {
			continue
		}
		return i
	}
	return i
}

// advance is the state after reading c in state.
func (a *automaton) advance(state int32, c byte) int32 {
	for state != 0 {
		if next := a.child(state, c); next >= 0 {
			return next
		}
		state = a.nodes[state].fail
	}
	return a.root[c]
}

// reports: a term ends at the node or on its fail chain.
func (n *node) reports() bool { return n.out >= 0 || n.link != 0 }

// report marks the terms ending at state that stand on their own: fed
// folded bytes were read, from holds where in text the last came from;
// nextWord is whether the next folded byte is a word byte.
func (a *automaton) report(state int32, text string, from *[ringSize]int32, fed int, nextWord bool, hit []bool) {
	n := state
	if a.nodes[n].out < 0 {
		n = a.nodes[n].link
	}
	for n != 0 {
		for t := a.nodes[n].out; t >= 0; t = a.terms[t].next {
			tm := &a.terms[t]
			if tm.leftWord && gluedBefore(text, int(from[(fed-int(tm.len))%ringSize])) || tm.rightWord && nextWord {
				continue
			}
			hit[tm.kind] = true
		}
		n = a.nodes[n].link
	}
}

// gluedBefore: the byte before text[start] is a word byte, folded (bytes of
// other scripts are not).
func gluedBefore(text string, start int) bool {
	return start > 0 && text[start-1] < utf8.RuneSelf && isWordByte(asciiFold[text[start-1]])
}

// isWordByte: a folded ASCII letter or digit.
func isWordByte(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// fold appends text to buf lower-cased, each run of whitespace one space,
// so terms match whatever their case and line breaks: what scan reads, as
// a copy (the terms are folded with it).
func fold(text string, buf []byte) []byte {
	lastSpace := false
	for i := 0; i < len(text); {
		var b [utf8.UTFMax]byte
		var folded []byte
		if c := text[i]; c < utf8.RuneSelf {
			b[0], folded = asciiFold[c], b[:1]
			i++
		} else {
			var size int
			folded, size = foldRune(text[i:], &b)
			i += size
		}
		if folded[0] == ' ' {
			if lastSpace {
				continue
			}
			lastSpace = true
		} else {
			lastSpace = false
		}
		buf = append(buf, folded...)
	}
	return buf
}

// foldRune folds the rune text starts with, outside ASCII, into b and
// says how many bytes of text it took: a space for a space, else its
// lower case; an invalid byte is kept as it is.
func foldRune(text string, b *[utf8.UTFMax]byte) ([]byte, int) {
	r, size := utf8.DecodeRuneInString(text)
	switch {
	case r == utf8.RuneError && size == 1:
		b[0] = text[0]
		return b[:1], 1
	case unicode.IsSpace(r):
		b[0] = ' '
		return b[:1], size
	}
	return utf8.AppendRune(b[:0], unicode.ToLower(r)), size
}

// asciiFold lower-cases ASCII letters and turns every whitespace byte into
// a space.
var asciiFold = func() (t [utf8.RuneSelf]byte) {
	for c := range t {
		switch {
		case isSpace(byte(c)):
			t[c] = ' '
		case c >= 'A' && c <= 'Z':
			t[c] = byte(c) + 'a' - 'A'
		default:
			t[c] = byte(c)
		}
	}
	return t
}()

// foldTerm is a term as the automaton holds it: folded, without spaces at
// its ends.
func foldTerm(t string) string {
	f := fold(t, nil)
	for len(f) > 0 && f[0] == ' ' {
		f = f[1:]
	}
	for len(f) > 0 && f[len(f)-1] == ' ' {
		f = f[:len(f)-1]
	}
	return string(f)
}
