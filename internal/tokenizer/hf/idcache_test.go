package hf

import (
	"slices"
	"strconv"
	"sync"
	"testing"
)

func idsFor(key string) []uint32 {
	ids := make([]uint32, len(key)%7+1)
	for i := range ids {
		ids[i] = uint32(len(key)*31 + i)
	}
	return ids
}

// TestIDCacheEvictsButNeverLies: a small cache rotates its generations
// many times; every hit must be exactly what was put for that key, and
// recently used keys must survive.
func TestIDCacheEvictsButNeverLies(t *testing.T) {
	c := newIDCache(64 << 10)
	hits := 0
	for i := range 20000 {
		key := "word-" + strconv.Itoa(i%300) + "-padding"
		got, ok := c.appendGet([]uint32{99}, key)
		if ok {
			hits++
			if got[0] != 99 || !slices.Equal(got[1:], idsFor(key)) {
				t.Fatalf("key %q: got %v", key, got)
			}
			continue
		}
		c.put(key, idsFor(key))
	}
	if hits == 0 {
		t.Fatal("no hits")
	}
	// The hot key stays cached however much else passes through.
	c.put("hot", []uint32{1, 2, 3})
	for i := range 50000 {
		c.put("cold-"+strconv.Itoa(i), []uint32{uint32(i)})
		if i%100 == 0 {
			if _, ok := c.appendGet(nil, "hot"); !ok {
				t.Fatalf("hot key evicted after %d other entries", i)
			}
		}
	}
}

func TestIDCacheCollisionIsAMiss(t *testing.T) {
	var g idGen
	g.add(42, "alpha", []uint32{1})
	if _, ok := g.lookup(42, "alphb"); ok {
		t.Fatal("a different key with the same hash was a hit")
	}
	if sp, ok := g.lookup(42, "alpha"); !ok || g.ids[sp.ids] != 1 {
		t.Fatal("the key itself missed")
	}
}

func TestIDCacheTooLargeIsNotCached(t *testing.T) {
	c := newIDCache(64 << 10)
	big := make([]uint32, c.budget)
	c.put("big", big)
	if _, ok := c.appendGet(nil, "big"); ok {
		t.Fatal("an entry over the generation budget was cached")
	}
}

func TestIDCacheConcurrent(t *testing.T) {
	c := newIDCache(32 << 10)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			var buf []uint32
			for i := range 5000 {
				key := strconv.Itoa((i * (g + 1)) % 700)
				var ok bool
				if buf, ok = c.appendGet(buf[:0], key); ok {
					if !slices.Equal(buf, idsFor(key)) {
						t.Errorf("key %q: got %v", key, buf)
						return
					}
				} else {
					c.put(key, idsFor(key))
				}
			}
		})
	}
	wg.Wait()
}
