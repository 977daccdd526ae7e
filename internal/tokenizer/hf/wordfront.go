package hf

// wordFront is one encoding's private front for the word cache: a
// direct-mapped table of recent words and their ids, owned by one
// goroutine at a time (the bpe hands them out from a sync.Pool, so there
// is about one per core), read and written with no lock.
//
// Text repeats its common words thousands of times a prompt: an 8k-token
// prompt is some 6,500 words of a few hundred distinct ones. Through the
// shared cache each cost a shard lock, a probe of a map sized for 100k
// words and a copy under the lock, some 70 ns, a third of the router's
// tokenizing time; here a hit is a slot read and a compare. A miss goes
// to the shared cache, then to the merges, and the result is kept here
// too. Entries are never wrong for another encoding — a word's ids depend
// on the word only — so a table outliving its encoding is only warmer.
type wordFront struct {
	slots [frontSlots]frontSlot
	keys  []byte
	ids   []uint32
}

// frontSlots is a power of two: a few times the distinct words of a long
// prompt, so that collisions evict rarely, and small enough (96 KB) to stay
// in the core's cache.
const (
	frontSlots = 1 << 12
	// frontKeyBytes and frontIDs bound the arenas; when either fills the
	// table starts over.
	frontKeyBytes = 64 << 10
	frontIDs      = 16 << 10
)

type frontSlot struct {
	h         uint64
	key, ids  uint32
	keyLen, n uint16
}

func newWordFront() *wordFront {
	return &wordFront{keys: make([]byte, 0, frontKeyBytes), ids: make([]uint32, 0, frontIDs)}
}

// appendGet appends the ids of w (whose hash is h) to dst if the table
// holds it.
func (f *wordFront) appendGet(dst []uint32, h uint64, w string) ([]uint32, bool) {
	sl := &f.slots[h&(frontSlots-1)]
	if sl.h != h || int(sl.keyLen) != len(w) || sl.keyLen == 0 || string(f.keys[sl.key:sl.key+uint32(sl.keyLen)]) != w {
		return dst, false
	}
	return append(dst, f.ids[sl.ids:sl.ids+uint32(sl.n)]...), true
}

// put keeps a copy of w's ids, over whatever shared its slot.
func (f *wordFront) put(h uint64, w string, ids []uint32) {
	if len(w) > maxCachedWord || len(ids) > 0xffff {
		return
	}
	if len(f.keys)+len(w) > cap(f.keys) || len(f.ids)+len(ids) > cap(f.ids) {
		f.slots = [frontSlots]frontSlot{}
		f.keys, f.ids = f.keys[:0], f.ids[:0]
		if len(w) > cap(f.keys) || len(ids) > cap(f.ids) {
			return
		}
	}
	f.slots[h&(frontSlots-1)] = frontSlot{h: h, key: uint32(len(f.keys)), ids: uint32(len(f.ids)), keyLen: uint16(len(w)), n: uint16(len(ids))}
	f.keys = append(f.keys, w...)
	f.ids = append(f.ids, ids...)
}
