package hf

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"unicode/utf8"
)

// The Unigram model (SentencePiece's, as Hugging Face's tokenizers runs
// it): every vocabulary piece has a score, and a word is cut into the
// pieces whose scores sum highest — a Viterbi best path over the word's
// characters. A character no piece covers on its own is an unknown node
// scored the lowest piece score less 10. Consecutive unknown nodes are
// fused into one string, which becomes its own piece when the vocabulary
// has it, else its UTF-8 bytes' <0xXX> pieces under byte_fallback when all
// of them exist, else the unknown token.
//
// Ties go as in Hugging Face's loop: positions are visited left to right,
// the pieces starting at one position shortest first, the unknown node
// after them, and a candidate replaces the best path into its end only when
// it scores strictly higher. Sums are added in the same order, so the
// floating-point results are the same too.

// unkPenalty is what an unknown node scores below the lowest piece.
const unkPenalty = 10.0

// unigramJSON is a Unigram model's tokenizer.json fields.
type unigramJSON struct {
	UnkID        *int           `json:"unk_id"`
	Vocab        []unigramPiece `json:"vocab"`
	ByteFallback bool           `json:"byte_fallback"`
}

type unigramPiece struct {
	piece string
	score float64
}

func (p *unigramPiece) UnmarshalJSON(data []byte) error {
	var pair []json.RawMessage
	if err := json.Unmarshal(data, &pair); err != nil || len(pair) != 2 {
		return fmt.Errorf("a Unigram vocab entry is not a [piece, score] pair: %s", trimJSON(data))
	}
	if err := json.Unmarshal(pair[0], &p.piece); err != nil {
		return fmt.Errorf("a Unigram vocab piece is not a string: %s", trimJSON(data))
	}
	if err := json.Unmarshal(pair[1], &p.score); err != nil {
		return fmt.Errorf("a Unigram vocab score is not a number: %s", trimJSON(data))
	}
	return nil
}

func trimJSON(data []byte) string {
	if len(data) > 80 {
		return string(data[:80]) + "…"
	}
	return string(data)
}

// readUnigram reads a Unigram model's fields when parsing tokenizer.json
// failed (err) only for them: its vocab is a list of [piece, score] pairs,
// which modelJSON's vocabulary of ids cannot hold. Only Unigram files are
// parsed twice.
func readUnigram(data []byte, f *fileJSON, err error) error {
	var te *json.UnmarshalTypeError
	if f.Model.Type != "Unigram" || !errors.As(err, &te) || te.Field != "model.vocab" {
		return err
	}
	var u struct {
		Model unigramJSON `json:"model"`
	}
	if err := json.Unmarshal(data, &u); err != nil {
		return fmt.Errorf("model Unigram: %w", err)
	}
	f.Model.unigram = &u.Model
	return nil
}

// unigram is a loaded Unigram model.
type unigram struct {
	trie         pieceDA
	scores       []float64 // id → score
	unkID        uint32
	unkScore     float64
	byteFallback bool
	fallback     [256]uint32 // the <0xXX> pieces, where hasByte
	hasByte      [256]bool
	scratch      sync.Pool // *unigramWork
}

type unigramWork struct {
	score []float64 // best path score into each byte position
	from  []int32   // where the best path's last node starts; -1 unreached
	id    []int32   // the last node's piece (unkID for an unknown node)
	ends  []int32   // the best path's node ends, last first
}

// loadUnigram reads a Unigram model over a vocabulary of characters (no
// pre-tokenizer, Metaspace, or a split on a string).
func (t *Tokenizer) loadUnigram(m *modelJSON) error {
	u := m.unigram
	if u == nil || u.Vocab == nil {
		return errors.New("tokenizer.json: model Unigram without a vocab")
	}
	if !t.charLevel {
		return unsupported("model Unigram after a byte-level pre-tokenizer")
	}
	if u.UnkID == nil {
		// Hugging Face fails the whole encoding at the first character no
		// piece covers.
		return unsupported("model Unigram without unk_id")
	}
	n := len(u.Vocab)
	if n == 0 {
		return errors.New("tokenizer.json: model Unigram has an empty vocab")
	}
	if *u.UnkID < 0 || *u.UnkID >= n {
		return fmt.Errorf("tokenizer.json: model Unigram unk_id %d outside the vocab of %d", *u.UnkID, n)
	}
	if n > math.MaxInt32 {
		return unsupported("model Unigram vocab of %d pieces", n)
	}
	uni := &unigram{
		scores:       make([]float64, n),
		unkID:        uint32(*u.UnkID),
		byteFallback: u.ByteFallback,
	}
	minScore := math.Inf(1)
	ids := make(map[string]uint32, n) // a piece listed twice is its last id
	for id, p := range u.Vocab {
		uni.scores[id] = p.score
		minScore = min(minScore, p.score)
		if !utf8.ValidString(p.piece) {
			return fmt.Errorf("tokenizer.json: model Unigram piece %d is not UTF-8", id)
		}
		ids[p.piece] = uint32(id)
	}
	uni.unkScore = minScore - unkPenalty
	tr := newPieceTrie(ids)
	uni.trie = newPieceDA(&tr, uni.scores)
	for c := 0; c < 256; c++ {
		if id, ok := ids[fmt.Sprintf("<0x%02X>", c)]; ok {
			uni.fallback[c], uni.hasByte[c] = id, true
		}
	}
	b := &bpe{uni: uni, charLevel: true, cache: newIDCache(wordCacheBytes)}
	for c := 0; c < 256; c++ {
		ops := 0
		out := uni.encode(nil, string([]byte{byte(c)}), &ops)
		if len(out) != 1 {
			// Only an unknown byte of a vocabulary without byte fallback
			// yields other than one token: the unknown token.
			return fmt.Errorf("tokenizer.json: model Unigram: byte 0x%02x encodes to %d tokens", c, len(out))
		}
		b.byteID[c] = out[0]
	}
	t.model = b
	t.buildPieces = make([]string, n)
	t.known = make([]bool, n)
	for id, p := range u.Vocab {
		t.buildPieces[id] = p.piece // the decoder maps it (loadDecoder)
		t.known[id] = true
	}
	return nil
}

// encode appends the ids of word w (non-empty) and adds its work to *ops:
// the trie steps and one per byte.
func (u *unigram) encode(dst []uint32, w string, ops *int) []uint32 {
	work, _ := u.scratch.Get().(*unigramWork)
	if work == nil {
		work = &unigramWork{}
	}
	defer u.scratch.Put(work)
	n := len(w)
	if cap(work.score) < n+1 {
		work.score = make([]float64, n+1)
		work.from = make([]int32, n+1)
		work.id = make([]int32, n+1)
	}
	score, from, ids := work.score[:n+1], work.from[:n+1], work.id[:n+1]
	for i := range from {
		from[i] = -1
	}
	score[0] = 0
	steps := n
	for i := 0; i < n; {
		base := score[i]
		mblen := 1
		if w[i] >= utf8.RuneSelf {
			_, mblen = utf8.DecodeRuneInString(w[i:]) // an invalid byte is a character of its own
		}
		single := false
		slots := u.trie.slots
		for j, node := i, int32(0); j < n; j++ {
			next := slots[node].base + int32(w[j])
			if int(next) >= len(slots) || slots[next].check != node {
				break
			}
			node = next
			steps++
			if sl := &slots[node]; sl.id >= 0 {
				id := sl.id
				end := j + 1
				cand := sl.score + base
				if from[end] < 0 || cand > score[end] {
					score[end], from[end], ids[end] = cand, int32(i), id
				}
				if end-i == mblen {
					single = true
				}
			}
		}
		if !single {
			end := i + mblen
			cand := u.unkScore + base
			if from[end] < 0 || cand > score[end] {
				score[end], from[end], ids[end] = cand, int32(i), int32(u.unkID)
			}
		}
		i += mblen
	}
	*ops += steps
	ends := work.ends[:0]
	for e := int32(n); e > 0; e = from[e] {
		ends = append(ends, e)
	}
	work.ends = ends
	start, unkStart := int32(0), int32(-1)
	for k := len(ends) - 1; k >= 0; k-- {
		e := ends[k]
		if id := uint32(ids[e]); id == u.unkID {
			if unkStart < 0 {
				unkStart = start
			}
		} else {
			if unkStart >= 0 {
				dst = u.appendUnknown(dst, w[unkStart:start])
				unkStart = -1
			}
			dst = append(dst, id)
		}
		start = e
	}
	if unkStart >= 0 {
		dst = u.appendUnknown(dst, w[unkStart:])
	}
	return dst
}

// appendUnknown appends the ids of a run of fused unknown nodes: the piece
// it spells when there is one (a run of characters with no piece each may
// spell a longer piece), else its bytes' <0xXX> pieces under byte fallback
// when all exist, else the unknown token.
func (u *unigram) appendUnknown(dst []uint32, s string) []uint32 {
	if id, ok := u.trie.get(s); ok {
		return append(dst, id)
	}
	if u.byteFallback {
		all := true
		for i := 0; i < len(s) && all; i++ {
			all = u.hasByte[s[i]]
		}
		if all {
			for i := 0; i < len(s); i++ {
				dst = append(dst, u.fallback[s[i]])
			}
			return dst
		}
	}
	return append(dst, u.unkID)
}

// pieceDA is the pieces' trie as a double array: the child of slot s by
// byte b is slot base[s]+b when check there is s. One look-up a byte,
// without a search among a node's children, and half the memory of
// pieceTrie, from which it is built.
type pieceDA struct {
	slots []daSlot
}

// daSlot is one slot: what a step reads, in one cache line.
type daSlot struct {
	base  int32   // where its children start (0 for none)
	check int32   // its parent slot; -1 free, -2 the root
	id    int32   // the piece ending there, -1 for none
	score float64 // the piece's score
}

// newPieceDA builds the double array of t, with the pieces' scores (by id;
// nil for none).
func newPieceDA(t *pieceTrie, scores []float64) pieceDA {
	var d pieceDA
	grow := func(size int32) {
		for int32(len(d.slots)) < size {
			d.slots = append(d.slots, daSlot{check: -1, id: -1})
		}
	}
	grow(257)
	d.slots[0].check, d.slots[0].id = -2, -1
	type item struct{ node, slot int32 }
	queue := []item{{0, 0}}
	nextFree := int32(1)
	for head := 0; head < len(queue); head++ {
		it := queue[head]
		nd := t.nodes[it.node]
		es := t.edges[nd.first : nd.first+nd.n]
		if len(es) == 0 {
			continue
		}
		for int(nextFree) < len(d.slots) && d.slots[nextFree].check != -1 {
			nextFree++
		}
		// The first base from the first free slot where the children fit;
		// after a few tries, past the end, so that a node of many children
		// does not scan a full region slot by slot (quadratic on a large
		// vocabulary).
		base := max(1, nextFree-int32(es[0].b))
		for tries := 0; ; base++ {
			if tries++; tries > 32 {
				base = max(1, int32(len(d.slots))-int32(es[0].b))
			}
			free := true
			for _, e := range es {
				p := base + int32(e.b)
				grow(p + 1)
				if d.slots[p].check != -1 {
					free = false
					break
				}
			}
			if free {
				break
			}
		}
		d.slots[it.slot].base = base
		for _, e := range es {
			p := base + int32(e.b)
			sl := &d.slots[p]
			sl.check, sl.id = it.slot, t.nodes[e.child].id
			if sl.id >= 0 && scores != nil {
				sl.score = scores[sl.id]
			}
			queue = append(queue, item{e.child, p})
		}
	}
	return d
}

// get is the id of piece s.
func (d *pieceDA) get(s string) (uint32, bool) {
	node := int32(0)
	for i := 0; i < len(s); i++ {
		next := d.slots[node].base + int32(s[i])
		if int(next) >= len(d.slots) || d.slots[next].check != node {
			return 0, false
		}
		node = next
	}
	if s == "" || d.slots[node].id < 0 {
		return 0, false
	}
	return uint32(d.slots[node].id), true
}

// pieceTrie is a byte trie of the vocabulary's pieces, flattened into
// arrays without pointers: a node's children are a run of edges sorted by
// byte. It is pieceDA's blueprint.
type pieceTrie struct {
	nodes []pieceNode
	edges []pieceEdge
}

type pieceNode struct {
	first int32 // edges[first : first+n] are the children
	n     int32
	id    int32 // the piece ending here, -1 for none
}

type pieceEdge struct {
	b     byte
	child int32
}

// newPieceTrie builds the trie of ids' pieces (the empty piece, which
// Hugging Face's prefix search never yields, left out).
func newPieceTrie(ids map[string]uint32) pieceTrie {
	pieces := make([]string, 0, len(ids))
	for p := range ids {
		if p != "" {
			pieces = append(pieces, p)
		}
	}
	slices.Sort(pieces)
	t := pieceTrie{nodes: make([]pieceNode, 0, len(pieces)*2)}
	// build makes the node for the common prefix of length depth of
	// pieces[lo:hi] (sorted; the one that ends there, if any, first).
	var build func(lo, hi, depth int) int32
	build = func(lo, hi, depth int) int32 {
		k := int32(len(t.nodes))
		t.nodes = append(t.nodes, pieceNode{id: -1})
		if lo < hi && len(pieces[lo]) == depth {
			t.nodes[k].id = int32(ids[pieces[lo]])
			lo++
		}
		groups := 0
		for i := lo; i < hi; {
			j := i + 1
			for j < hi && pieces[j][depth] == pieces[i][depth] {
				j++
			}
			groups++
			i = j
		}
		first := int32(len(t.edges))
		t.nodes[k].first, t.nodes[k].n = first, int32(groups)
		for range groups {
			t.edges = append(t.edges, pieceEdge{})
		}
		g := first
		for i := lo; i < hi; {
			j := i + 1
			for j < hi && pieces[j][depth] == pieces[i][depth] {
				j++
			}
			b := pieces[i][depth]
			child := build(i, j, depth+1)
			t.edges[g] = pieceEdge{b: b, child: child}
			g++
			i = j
		}
		return k
	}
	build(0, len(pieces), 0)
	return t
}
