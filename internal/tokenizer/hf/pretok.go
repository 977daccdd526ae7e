package hf

import (
	"unicode"
	"unicode/utf8"
)

// The pre-tokenizer split patterns this package implements, exactly as
// tokenizer.json spells them. Each is matched by a hand-written scanner
// rather than a regexp engine: Go's regexp has no look-ahead, and a scanner
// that follows the alternation order of the pattern is both exact and several
// times faster. A pattern not listed here is refused at load.
const (
	// patternLlama3 is Llama 3's (and OpenAI cl100k's) split: numbers in
	// groups of up to three digits.
	patternLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// patternQwen2 is Qwen2/Qwen2.5/Qwen3's: the same with single digits.
	patternQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// patternGPT2 is the ByteLevel pre-tokenizer's built-in split
	// (use_regex: true).
	patternGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// splitter cuts normalized text into pre-tokens.
type splitter struct {
	gpt2     bool   // patternGPT2; otherwise the cl100k family
	o200k    bool   // patternO200k or patternTekken (o200k.go), as cases says
	deepseek bool   // DeepSeek V3's three steps (deepseek.go)
	whole    bool   // no pre-tokenizer: a segment is one word
	literal  string // words end after each occurrence of this string
	// spaceMark, for a vocabulary of characters (whole or literal), cuts
	// a word before each run of this mark (the normalizer's "▁") that
	// follows other text, in a segment holding none of spaceExcept:
	// spaceChunks says when that is exact.
	spaceMark   string
	spaceExcept []string
	maxDigits   int // cl100k family: digits per pre-token (1 or 3)
	// spaceKeep, when spaceExcept would be too long, replaces it: a run
	// of spaceMark is not cut from a character in it, nor from one that
	// is not a token of its own (spaceKeepers).
	spaceKeep []rune

	cases caseSplit // o200k: which of the two patterns
}

func splitterFor(pattern string) (splitter, bool) {
	switch pattern {
	case patternLlama3:
		return splitter{maxDigits: 3}, true
	case patternQwen2:
		return splitter{maxDigits: 1}, true
	case patternGPT2:
		return splitter{gpt2: true}, true
	case patternO200k:
		return splitter{o200k: true, cases: caseO200k}, true
	case patternTekken:
		return splitter{o200k: true, cases: caseTekken}, true
	}
	return splitter{}, false
}

// splitterForSteps returns the splitter of a sequence of Split steps
// (each isolating the matches of its regex in what the one before made).
func splitterForSteps(patterns []string) (splitter, bool) {
	if len(patterns) == 1 {
		return splitterFor(patterns[0])
	}
	if len(patterns) == 3 && patterns[0] == patternDeepSeekDigits && patterns[1] == patternDeepSeekCJK &&
		patterns[2] == patternDeepSeekWords {
		return splitter{deepseek: true}, true
	}
	return splitter{}, false
}

// Character classes of the patterns. Invalid UTF-8 bytes (which a Go string
// may hold but a Rust &str cannot) count as "other": not a letter, digit or
// space, so they travel with neighbouring punctuation and round-trip.
const (
	clsOther = iota
	clsLetter
	clsNumber
	clsSpace   // \s other than \r and \n
	clsNewline // \r or \n
)

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for c := 0; c < utf8.RuneSelf; c++ {
		r := rune(c)
		switch {
		case r == '\r' || r == '\n':
			t[c] = clsNewline
		case isSpace(r):
			t[c] = clsSpace
		case unicode.Is(ucd16Lu, r) || unicode.Is(ucd16Ll, r):
			t[c] = clsLetter
		case unicode.Is(ucd16N, r):
			t[c] = clsNumber
		default:
			t[c] = clsOther
		}
	}
	return t
}()

// isSpace is the regex \s: Unicode White_Space (Unicode 16's, as the
// other classes; unchanged since Unicode 6.3).
func isSpace(r rune) bool { return unicode.Is(ucd16WhiteSpace, r) }

// classAt returns the class and byte width of the character at s[i].
func classAt(s string, i int) (uint8, int) {
	c := s[i]
	if c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	// \p{L}, \p{N} and \s are properties too: looked up, not searched
	// for in the Unicode tables (bmpProps).
	p, n := propsAt(s, i)
	switch {
	case p&propLetter != 0:
		return clsLetter, n
	case p&propNumber != 0:
		return clsNumber, n
	case p&propSpace != 0: // \r and \n are ASCII
		return clsSpace, n
	}
	return clsOther, n
}

// run returns the end of the run of characters of class cls starting at i.
func run(s string, i int, cls uint8) int {
	for i < len(s) {
		// ASCII without the call: a word is a run, and most text ASCII.
		if b := s[i]; b < utf8.RuneSelf {
			if asciiClass[b] != cls {
				break
			}
			i++
			continue
		}
		c, n := classAt(s, i)
		if c != cls {
			break
		}
		i += n
	}
	return i
}

// contraction returns the length of a contraction ('s, 't, 're, 've, 'm,
// 'll, 'd) at s[i:] (s[i] == '\”), or 0. foldCase follows (?i:...), whose
// Unicode case folding also maps U+017F LATIN SMALL LETTER LONG S to s.
func contraction(s string, i int, foldCase bool) int {
	rest := s[i+1:]
	lower := func(j int) (rune, int) {
		if j >= len(rest) {
			return -1, 0
		}
		r, n := utf8.DecodeRuneInString(rest[j:])
		if foldCase {
			if r == 'ſ' {
				r = 's'
			} else if r < utf8.RuneSelf {
				r = unicode.ToLower(r)
			}
		}
		return r, n
	}
	r1, n1 := lower(0)
	switch r1 {
	case 's', 't', 'm', 'd':
		return 1 + n1
	case 'r', 'v':
		if r2, n2 := lower(n1); r2 == 'e' {
			return 1 + n1 + n2
		}
	case 'l':
		if r2, n2 := lower(n1); r2 == 'l' {
			return 1 + n1 + n2
		}
	}
	return 0
}

// next matches the cl100k-family pattern at s[i:] and returns the end of the
// match, and how far it read: a whitespace run is read to its end to find
// its last newline, though the match may stop before. Alternatives are
// tried in pattern order, as a backtracking engine does.
func (sp splitter) next(s string, i int) (end, far int) {
	end = sp.match(s, i, &far)
	return end, max(end, far)
}

func (sp splitter) match(s string, i int, far *int) int {
	c, n := classAt(s, i)
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if s[i] == '\'' {
		if m := contraction(s, i, true); m > 0 {
			return i + m
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c == clsLetter {
		return run(s, i+n, clsLetter)
	}
	if c != clsNewline && c != clsNumber && i+n < len(s) {
		if c2, _ := classAt(s, i+n); c2 == clsLetter {
			return run(s, i+n, clsLetter)
		}
	}
	// \p{N}{1,maxDigits}
	if c == clsNumber {
		j := i + n
		for k := 1; k < sp.maxDigits && j < len(s); k++ {
			c2, n2 := classAt(s, j)
			if c2 != clsNumber {
				break
			}
			j += n2
		}
		return j
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	j := i
	if s[i] == ' ' && i+1 < len(s) {
		if c2, _ := classAt(s, i+1); c2 == clsOther {
			j = i + 1
		}
	}
	if cj, _ := classAt(s, j); cj == clsOther {
		j = run(s, j, clsOther)
		for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j
	}
	// Only whitespace is left (c is clsSpace or clsNewline).
	// \s*[\r\n]+ : up to and including the last newline of the whitespace
	// run.
	end, lastNL := i, -1
	for end < len(s) {
		c2, n2 := classAt(s, end)
		if c2 == clsNewline {
			lastNL = end
		} else if c2 != clsSpace {
			break
		}
		end += n2
	}
	*far = end
	if lastNL >= 0 {
		return lastNL + 1
	}
	return spaceRun(s, i, end)
}

// spaceRun resolves \s+(?!\S)|\s+ for a whitespace run s[i:end]: the whole run
// at the end of the text, else all of it but its last character (which then
// leads the next pre-token), else the single character.
func spaceRun(s string, i, end int) int {
	if end == len(s) {
		return end
	}
	_, last := utf8.DecodeLastRuneInString(s[i:end])
	if end-last > i {
		return end - last
	}
	return end
}

// nextGPT2 matches patternGPT2 at s[i:], returning what next does.
func (sp splitter) nextGPT2(s string, i int) (end, far int) {
	end = sp.matchGPT2(s, i, &far)
	return end, max(end, far)
}

func (sp splitter) matchGPT2(s string, i int, far *int) int {
	if s[i] == '\'' {
		if m := contraction(s, i, false); m > 0 {
			return i + m
		}
	}
	j := i
	if s[i] == ' ' && i+1 < len(s) {
		j = i + 1
	}
	// ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+' in that order.
	if c, _ := classAt(s, j); c == clsLetter || c == clsNumber || c == clsOther {
		if j == i+1 || c != clsSpace {
			return run(s, j, c)
		}
	}
	if c, _ := classAt(s, i); c != clsSpace && c != clsNewline {
		return run(s, i, c)
	}
	end := i
	for end < len(s) {
		c, n := classAt(s, end)
		if c != clsSpace && c != clsNewline {
			break
		}
		end += n
	}
	*far = end
	return spaceRun(s, i, end)
}
