package hf

// The segment cache (Tokenizer.segments) remembers the ids of long text
// segments — the stretches between added/special tokens, which in a
// rendered chat prompt are whole message contents. A multi-turn
// conversation resends its whole history on every turn; with the cache
// only the new messages are tokenized. It is exact: an added token always
// splits the text (it is matched before BPE), so a segment's ids never
// depend on what surrounds it.
const (
	// segCacheBytes bounds the segment cache per tokenizer (text plus ids).
	segCacheBytes = 64 << 20
	// segCacheMin is the shortest segment worth caching: below it the
	// word cache already makes tokenizing cheap.
	segCacheMin = 64
)
