package usage

import (
	"math/rand/v2"
	"testing"
	"time"
)

// Cover's buckets tile the range exactly (no gap, no overlap), use
// the coarsest bucket that fits, and fall back to hours where minutes have
// expired. Checked against a brute-force minute count on random ranges.
func TestCover(t *testing.T) {
	base := time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC)
	long := base.Add(-365 * 24 * time.Hour) // minutes kept forever, for the tiling check
	count := func(bs []Bucket) map[string]int {
		n := map[string]int{}
		for _, b := range bs {
			n[b.Res.Name]++
		}
		return n
	}
	bs, lo, hi := Cover(base.Add(90*time.Second), base.Add(30*24*time.Hour+5*time.Hour+30*time.Minute), long)
	if !lo.Equal(base.Add(time.Minute)) || !hi.Equal(base.Add(30*24*time.Hour+5*time.Hour+30*time.Minute)) {
		t.Errorf("range %s – %s", lo, hi)
	}
	// 00:01 → 01:00 is 59 minutes, then hours 01–24 (23), days 1–30 (29),
	// hours 0–5 (5), minutes 05:00–05:30 (30).
	if n := count(bs); n["d"] != 29 || n["h"] != 28 || n["m"] != 89 {
		t.Errorf("buckets %v, want 29 days, 28 hours, 89 minutes", n)
	}

	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		from := base.Add(time.Duration(r.Int64N(int64(40 * 24 * time.Hour))))
		to := from.Add(time.Duration(r.Int64N(int64(20 * 24 * time.Hour))))
		bs, lo, hi := Cover(from, to, long)
		covered := map[int64]int{}
		for _, b := range bs {
			if b.Start%int64(b.Res.Step/time.Second) != 0 {
				t.Fatalf("bucket %v not aligned", b)
			}
			for m := b.Start; m < b.Start+int64(b.Res.Step/time.Second); m += 60 {
				covered[m]++
			}
		}
		want := int((hi.Unix() - lo.Unix()) / 60)
		if len(covered) != want {
			t.Fatalf("%s – %s: %d minutes covered, want %d", from, to, len(covered), want)
		}
		for m, n := range covered {
			if n != 1 || m < lo.Unix() || m >= hi.Unix() {
				t.Fatalf("%s – %s: minute %d covered %d times or outside %s – %s", from, to, m, n, lo, hi)
			}
		}
		if lo.After(from) || hi.Before(to) || from.Sub(lo) >= time.Minute || hi.Sub(to) >= time.Minute {
			t.Fatalf("%s – %s counted as %s – %s", from, to, lo, hi)
		}
	}

	// Minutes expired: the edges before minutesSince are whole hours.
	now := base.Add(10 * 24 * time.Hour)
	bs, lo, hi = Cover(now.Add(-5*24*time.Hour+17*time.Minute), now.Add(-3*time.Minute), now.Add(-48*time.Hour))
	if !lo.Equal(now.Add(-5*24*time.Hour)) || !hi.Equal(now.Add(-3*time.Minute)) {
		t.Errorf("expired minutes: range %s – %s", lo, hi)
	}
	for _, b := range bs {
		if b.Res == Minute && time.Unix(b.Start, 0).Before(now.Add(-48*time.Hour)) {
			t.Errorf("an expired minute bucket %v", b)
		}
	}
	if bs, lo, hi := Cover(base, base, long); len(bs) != 0 || !lo.Equal(hi) {
		t.Errorf("empty range: %v %s %s", bs, lo, hi)
	}
}

func TestParseHash(t *testing.T) {
	dst := map[string]*Counters{}
	ParseHash(dst, map[string]string{
		Field(FieldRequests, "qwen"): "3", Field(FieldOutcome+"ok", "qwen"): "2", Field(FieldOutcome+"shed", "qwen"): "1",
		Field(FieldCachedInput, "qwen"): "100", Field(FieldUncachedInput, "qwen"): "20", Field(FieldOutput, "qwen"): "9",
		Field(FieldRequests, "meta/llama|x"): "1", "garbage": "1", Field("from_the_future", "qwen"): "4", Field(FieldOutput, "qwen2"): "x",
	})
	q := dst["qwen"]
	if q == nil || q.Requests != 3 || q.Outcomes["ok"] != 2 || q.Outcomes["shed"] != 1 || q.CachedInput != 100 || q.UncachedInput != 20 || q.Output != 9 || q.Tokens() != 129 {
		t.Errorf("qwen: %+v", q)
	}
	if l := dst["llama|x"]; l != nil || dst["meta/llama|x"].Requests != 1 {
		t.Errorf("a model with '|' is split at the first: %+v", dst)
	}
	if _, ok := dst["qwen2"]; ok {
		t.Error("an unreadable value made a row")
	}
	var sum Counters
	sum.Add(q)
	sum.Add(q)
	if sum.Requests != 6 || sum.Outcomes["ok"] != 4 {
		t.Errorf("Add: %+v", sum)
	}
	r := Row{Counters: Counters{Requests: 2, TTFTMillis: 300, TTFTCount: 1, E2EMillis: 5000}}
	r.Finish()
	if r.TTFTMean != 0.3 || r.E2EMean != 2.5 {
		t.Errorf("means: %+v", r)
	}
}
