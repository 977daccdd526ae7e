package hf

import (
	"hash/maphash"
	"strings"
)

// The vocabulary is kept in a few large allocations rather than one string
// per token: 150k token strings were 90 % of a router's live heap objects,
// and every garbage collection cycle marked them all while requests were
// being answered.

// stringList is an id-indexed list of strings stored in one arena.
type stringList struct {
	arena string
	ends  []uint32 // string i is arena[ends[i-1]:ends[i]] (from 0 for i = 0)
}

func newStringList(strs []string) stringList {
	var b strings.Builder
	n := 0
	for _, s := range strs {
		n += len(s)
	}
	b.Grow(n)
	ends := make([]uint32, len(strs))
	for i, s := range strs {
		b.WriteString(s)
		ends[i] = uint32(b.Len())
	}
	return stringList{arena: b.String(), ends: ends}
}

func (l *stringList) len() int { return len(l.ends) }

func (l *stringList) at(i int) string {
	start := uint32(0)
	if i > 0 {
		start = l.ends[i-1]
	}
	return l.arena[start:l.ends[i]]
}

// stringIndex maps strings to ids: a map from the string's hash to its
// entry, checked against the stored string. The rare string whose hash an
// earlier one already took goes to a small overflow map.
type stringIndex struct {
	seed     maphash.Seed
	index    map[uint64]uint32 // hash → entry
	keys     stringList        // entry → string
	vals     []uint32          // entry → id
	overflow map[string]uint32
}

func newStringIndex(m map[string]uint32) *stringIndex {
	x := &stringIndex{seed: maphash.MakeSeed(), index: make(map[uint64]uint32, len(m))}
	keys := make([]string, 0, len(m))
	for k, v := range m {
		h := maphash.String(x.seed, k)
		if _, taken := x.index[h]; taken {
			if x.overflow == nil {
				x.overflow = map[string]uint32{}
			}
			x.overflow[k] = v
			continue
		}
		x.index[h] = uint32(len(keys))
		keys = append(keys, k)
		x.vals = append(x.vals, v)
	}
	x.keys = newStringList(keys)
	return x
}

func (x *stringIndex) get(s string) (uint32, bool) {
	if e, ok := x.index[maphash.String(x.seed, s)]; ok && x.keys.at(int(e)) == s {
		return x.vals[e], true
	}
	if x.overflow != nil {
		id, ok := x.overflow[s]
		return id, ok
	}
	return 0, false
}
