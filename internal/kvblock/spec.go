package kvblock

// A shard's speculative holders of a hash: the first in spec (inline,
// pointer-free), any others in specMore, flagged by the first's more bit.
// A cold prompt speculates dozens of grid blocks on one worker (see
// onGrid), so the common case must cost one map entry and no allocation.

// speculate records slot s as holding h until the given time, extending
// an existing hold, never shortening it. It reports whether the hold is
// new: an extended one is already listed in due at or before its old
// expiry, where Sweep finds it alive and lists it again (see Sweep).
func (sh *shard) speculate(h Hash, s int, until int64) bool {
	first, ok := sh.spec[h]
	switch {
	case !ok:
		sh.spec[h] = specHold{until: until, slot: uint16(s)}
		return true
	case int(first.slot) == s:
		if until > first.until {
			first.until = until
			sh.spec[h] = first
		}
		return false
	}
	more := sh.specMore[h]
	for i := range more {
		if int(more[i].slot) == s {
			more[i].until = max(more[i].until, until)
			return false
		}
	}
	if sh.specMore == nil {
		sh.specMore = map[Hash][]specHold{}
	}
	sh.specMore[h] = append(more, specHold{until: until, slot: uint16(s)})
	if !first.more {
		first.more = true
		sh.spec[h] = first
	}
	return true
}

// inlineMask is the inline slots among holds unexpired at nowNs.
func inlineMask(holds []specHold, nowNs int64) uint64 {
	var m uint64
	for _, e := range holds {
		if e.until > nowNs && e.slot < inlineSlots {
			m |= 1 << e.slot
		}
	}
	return m
}

// holders appends every speculative holder of h to dst.
func (sh *shard) holders(h Hash, dst []specHold) []specHold {
	first, ok := sh.spec[h]
	if !ok {
		return dst
	}
	dst = append(dst, first)
	if first.more {
		dst = append(dst, sh.specMore[h]...)
	}
	return dst
}

// setHolders makes hs (which may alias a holders result) the speculative
// holders of h.
func (sh *shard) setHolders(h Hash, hs []specHold) {
	if len(hs) == 0 {
		delete(sh.spec, h)
		delete(sh.specMore, h)
		return
	}
	first := hs[0]
	first.more = len(hs) > 1
	sh.spec[h] = first
	if !first.more {
		delete(sh.specMore, h)
		return
	}
	more := append(sh.specMore[h][:0], hs[1:]...)
	sh.specMore[h] = more
}

// unspeculate drops slot s's speculative hold on h. Its listing in due
// stays; Sweep finds nothing there and moves on.
func (sh *shard) unspeculate(h Hash, s int) {
	first, ok := sh.spec[h]
	if !ok {
		return
	}
	if !first.more {
		if int(first.slot) == s {
			delete(sh.spec, h)
		}
		return
	}
	var buf [8]specHold
	hs := sh.holders(h, buf[:0])
	kept := hs[:0]
	for _, e := range hs {
		if int(e.slot) != s {
			kept = append(kept, e)
		}
	}
	sh.setHolders(h, kept)
}

// expire drops h's speculative holds expired at n. It returns how many it
// dropped and the earliest expiry of those left (0: none left).
func (sh *shard) expire(h Hash, n int64) (freed int, next int64) {
	first, ok := sh.spec[h]
	if !ok {
		return 0, 0
	}
	if !first.more {
		if first.until > n {
			return 0, first.until
		}
		delete(sh.spec, h)
		return 1, 0
	}
	var buf [8]specHold
	hs := sh.holders(h, buf[:0])
	kept := hs[:0]
	for _, e := range hs {
		if e.until > n {
			kept = append(kept, e)
			if next == 0 || e.until < next {
				next = e.until
			}
		}
	}
	freed = len(hs) - len(kept)
	sh.setHolders(h, kept)
	return freed, next
}

// specCount is the number of speculative holds in the shard.
func (sh *shard) specCount() int {
	n := len(sh.spec)
	for _, more := range sh.specMore {
		n += len(more)
	}
	return n
}
