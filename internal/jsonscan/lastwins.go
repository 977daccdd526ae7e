package jsonscan

import (
	"bytes"
	"slices"
	"sort"
)

// LastWins validates doc as one JSON value and returns it with the key rule
// applied to every object at every depth: an object whose key repeats is
// rewritten with that key once, at its first position, holding the value of
// its last occurrence — the dict json.loads builds. Everything else keeps
// its bytes. When no key repeats, which is every body a client library
// writes, doc itself is returned and nothing is allocated for the output.
func LastWins(doc []byte) ([]byte, error) {
	d := Decoder{b: doc}
	var h dedupe
	if _, ok := d.value(0, &h); !ok || !d.End() {
		return nil, d.Err()
	}
	if len(h.rewrites) == 0 {
		return doc, nil
	}
	return h.apply(doc), nil
}

// linearLimit is how many members an object may have before repeated keys
// are found with a map rather than by comparing with every earlier key.
const linearLimit = 16

// dedupe is told about the objects of a scan (Decoder.container) and
// records those whose keys repeat.
type dedupe struct {
	frames   []dframe
	members  []dmember // the members of the open objects, frame after frame
	rewrites []rewrite
}

// dframe is one open object.
type dframe struct {
	start int            // its '{'
	base  int            // its first member in members
	index map[string]int // key → first occurrence, once there are many members
	dup   bool           // a key repeats
}

type dmember struct {
	key                  []byte
	keyStart, keyEnd     int
	valueStart, valueEnd int
	last                 int  // the occurrence of this key whose value counts
	later                bool // a repeat of an earlier key
}

// rewrite is an object written anew: its members, in order, each with the
// value that counts.
type rewrite struct {
	from, to int // the object, braces included
	members  []span2
}

type span2 struct{ keyStart, keyEnd, valueStart, valueEnd int }

func (h *dedupe) open(pos int) {
	h.frames = append(h.frames, dframe{start: pos, base: len(h.members)})
}

func (h *dedupe) key(doc, key []byte, keyStart, keyEnd int) {
	f := &h.frames[len(h.frames)-1]
	if bytes.IndexByte(doc[keyStart:keyEnd], '\\') >= 0 {
		key = bytes.Clone(key) // decoded into the Decoder's scratch
	}
	ms := h.members[f.base:]
	n := len(ms)
	first := -1
	if f.index != nil {
		if j, ok := f.index[string(key)]; ok {
			first = j
		}
	} else {
		for j := range ms {
			if !ms[j].later && bytes.Equal(ms[j].key, key) {
				first = j
				break
			}
		}
	}
	m := dmember{key: key, keyStart: keyStart, keyEnd: keyEnd, last: n}
	if first >= 0 {
		ms[first].last = n
		m.later = true
		f.dup = true
	}
	h.members = append(h.members, m)
	switch {
	case f.index != nil && first < 0:
		f.index[string(key)] = n
	case f.index == nil && n+1 > linearLimit:
		f.index = make(map[string]int, 2*linearLimit)
		for j, m := range h.members[f.base:] {
			if !m.later {
				f.index[string(m.key)] = j
			}
		}
	}
}

func (h *dedupe) valueStart(pos int) { h.members[len(h.members)-1].valueStart = pos }
func (h *dedupe) valueEnd(pos int)   { h.members[len(h.members)-1].valueEnd = pos }

func (h *dedupe) close(pos int) {
	f := h.frames[len(h.frames)-1]
	h.frames = h.frames[:len(h.frames)-1]
	ms := h.members[f.base:]
	if f.dup {
		rw := rewrite{from: f.start, to: pos}
		for _, m := range ms {
			if m.later {
				continue
			}
			v := ms[m.last]
			rw.members = append(rw.members, span2{m.keyStart, m.keyEnd, v.valueStart, v.valueEnd})
		}
		h.rewrites = append(h.rewrites, rw)
	}
	h.members = h.members[:f.base]
}

// apply writes doc with the recorded objects rewritten. Rewritten objects
// nest (an inner one is inside a value of an outer one); each is written
// once, where its value lands.
func (h *dedupe) apply(doc []byte) []byte {
	slices.SortFunc(h.rewrites, func(a, b rewrite) int { return a.from - b.from })
	return h.copyRange(make([]byte, 0, len(doc)), doc, 0, len(doc))
}

// copyRange appends doc[from:to] with the rewrites inside it applied.
func (h *dedupe) copyRange(out, doc []byte, from, to int) []byte {
	rws := h.rewrites
	next := func(pos int) int { return sort.Search(len(rws), func(k int) bool { return rws[k].from >= pos }) }
	at := from
	for k := next(from); k < len(rws) && rws[k].from < to; k = next(rws[k].to) {
		r := rws[k]
		out = append(out, doc[at:r.from]...)
		out = append(out, '{')
		for i, m := range r.members {
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, doc[m.keyStart:m.keyEnd]...)
			out = append(out, ':')
			out = h.copyRange(out, doc, m.valueStart, m.valueEnd)
		}
		out = append(out, '}')
		at = r.to
	}
	return append(out, doc[at:to]...)
}
