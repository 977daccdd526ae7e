package hf

import "strings"

// matcher finds added tokens in text: the leftmost match, the longest among
// those starting at the same place (tokenizers' leftmost-longest
// Aho-Corasick).
//
// It is a byte trie of the tokens' contents. find skips to the bytes that
// start a token (one IndexByte when a single byte starts them all, as "<"
// does in every chat model's vocabulary) and walks the trie from each, so a
// place costs at most the longest token's length, whatever the text and
// however many tokens share a prefix. Comparing each candidate token in
// turn cost the number of tokens sharing the first byte instead: Llama 3's
// 256 "<|reserved_special_token_N|>" made every "<|" in a prompt some
// 6,000 byte comparisons.
type matcher struct {
	first  [256]bool
	single int // the only first byte in use, or -1
	nodes  []trieNode
	tokens []addedToken
}

// trieNode's children are kids[c-lo] for the bytes c in [lo, lo+len(kids)):
// the children of a node are few and close together (letters, digits), so
// a range is both compact and one index away.
type trieNode struct {
	lo   byte
	kids []int32 // node index, 0 for none (the root is no one's child)
	tok  int32   // index in tokens of the token ending here, -1 for none
}

func newMatcher(tokens []addedToken) *matcher {
	if len(tokens) == 0 {
		return nil
	}
	m := &matcher{single: -1, nodes: []trieNode{{tok: -1}}, tokens: tokens}
	n := 0
	for i, a := range tokens {
		if c := a.content[0]; !m.first[c] {
			m.first[c] = true
			n++
			m.single = int(c)
		}
		at := int32(0)
		for j := 0; j < len(a.content); j++ {
			at = m.child(at, a.content[j])
		}
		if m.nodes[at].tok < 0 { // the first of equal contents wins
			m.nodes[at].tok = int32(i)
		}
	}
	if n != 1 {
		m.single = -1
	}
	return m
}

// child returns the child of node at for byte c, adding it when missing.
func (m *matcher) child(at int32, c byte) int32 {
	if next := m.next(at, c); next > 0 {
		return next
	}
	next := int32(len(m.nodes))
	m.nodes = append(m.nodes, trieNode{tok: -1})
	nd := &m.nodes[at]
	switch {
	case len(nd.kids) == 0:
		nd.lo, nd.kids = c, []int32{0}
	case c < nd.lo:
		kids := make([]int32, int(nd.lo-c)+len(nd.kids))
		copy(kids[nd.lo-c:], nd.kids)
		nd.lo, nd.kids = c, kids
	case int(c-nd.lo) >= len(nd.kids):
		nd.kids = append(nd.kids, make([]int32, int(c-nd.lo)+1-len(nd.kids))...)
	}
	nd.kids[c-nd.lo] = next
	return next
}

// next returns the child of node at for byte c, 0 when there is none.
func (m *matcher) next(at int32, c byte) int32 {
	nd := &m.nodes[at]
	if c < nd.lo || int(c-nd.lo) >= len(nd.kids) {
		return 0
	}
	return nd.kids[c-nd.lo]
}

// find returns the first added token in s and where it starts, or at < 0,
// and the bytes it read (skipped over or walked in the trie).
func (m *matcher) find(s string) (at int, tok addedToken, read int) {
	if m == nil {
		return -1, addedToken{}, 0
	}
	for i := 0; i < len(s); i++ {
		if m.single >= 0 {
			j := strings.IndexByte(s[i:], byte(m.single))
			if j < 0 {
				return -1, addedToken{}, read + len(s) - i
			}
			i += j
			read += j
		} else if !m.first[s[i]] {
			read++
			continue
		}
		k, walked := m.longestAt(s[i:])
		read += walked
		if k >= 0 {
			return i, m.tokens[k], read
		}
	}
	return -1, addedToken{}, read
}

// longestAt returns the index of the longest token s starts with, or -1,
// and the bytes it walked.
func (m *matcher) longestAt(s string) (int32, int) {
	best, at := int32(-1), int32(0)
	j := 0
	for ; j < len(s); j++ {
		if at = m.next(at, s[j]); at == 0 {
			break
		}
		if k := m.nodes[at].tok; k >= 0 {
			best = k
		}
	}
	return best, j + 1
}
