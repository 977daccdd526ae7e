package hf

// DeepSeek V3's pre-tokenizer is three Split steps, each isolating its
// matches in every piece the step before made (the text between matches
// stays a piece of its own): digit groups, then runs of CJK ideographs and
// kana, then words, punctuation and whitespace. Each step sees only its
// piece, so a piece boundary is the end of the text for the next step's
// `(?!\S)`.
const (
	patternDeepSeekDigits = `\p{N}{1,3}`
	patternDeepSeekCJK    = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
	patternDeepSeekWords  = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
)

// deepSeekDigits returns the end of the first-step piece starting at s[i]:
// up to three digits, or the text up to the next digit.
func deepSeekDigits(s string, i int) int {
	p, n := propsAt(s, i)
	if p&propNumber != 0 {
		return runPropsMax(s, i, propNumber, 3)
	}
	return untilProps(s, i+n, propNumber)
}

// deepSeekCJK returns the end of the second-step piece starting at s[i]:
// a CJK run, or the text up to the next CJK character.
func deepSeekCJK(s string, i int) int {
	p, n := propsAt(s, i)
	if p&propCJK != 0 {
		return runProps(s, i, propCJK)
	}
	return untilProps(s, i+n, propCJK)
}

// nextDeepSeek returns the end of the third-step piece starting at s[i] (s
// being a second-step piece), and how far it read: a match of
// patternDeepSeekWords, or the characters up to the next match, which no
// alternative matches (format and control characters, unassigned code
// points; digits, which the first step isolated).
func nextDeepSeek(s string, i int) (end, far int) {
	if e, f := matchDeepSeek(s, i); e > 0 {
		return e, f
	}
	_, n := propsAt(s, i)
	j := i + n
	for j < len(s) {
		if e, _ := matchDeepSeek(s, j); e > 0 {
			break
		}
		_, m := propsAt(s, j)
		j += m
	}
	return j, j + 1
}

// matchDeepSeek matches patternDeepSeekWords at s[i:], trying the
// alternatives in order, and returns the end of the match (-1 when there
// is none) and how far it read.
func matchDeepSeek(s string, i int) (end, far int) {
	// [ASCII punctuation][A-Za-z]+
	if isASCIIPunct(s[i]) && i+1 < len(s) && isASCIIAlpha(s[i+1]) {
		j := i + 2
		for j < len(s) && isASCIIAlpha(s[j]) {
			j++
		}
		return j, j
	}
	// [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+ : a mark may be the prefix or
	// the first letter, and either way the match is the run from it.
	p, n := propsAt(s, i)
	const word = propLetter | propMark
	if p&word != 0 {
		e := runProps(s, i, word)
		return e, e
	}
	if p&(propNewline|propLetter|propPunct) == 0 && i+n < len(s) {
		if q, _ := propsAt(s, i+n); q&word != 0 {
			e := runProps(s, i+n, word)
			return e, e
		}
	}
	// ' ?[\p{P}\p{S}]+[\r\n]*'
	j := i
	if s[i] == ' ' && i+1 < len(s) {
		if q, _ := propsAt(s, i+1); q&propPunct != 0 {
			j = i + 1
		}
	}
	if q, _ := propsAt(s, j); q&propPunct != 0 {
		j = runProps(s, j, propPunct)
		for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j, j
	}
	if p&propSpace != 0 {
		return whitespace(s, i)
	}
	return -1, i + n
}

func isASCIIAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// isASCIIPunct is [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]: every printable
// ASCII character that is not a letter, digit or space.
func isASCIIPunct(c byte) bool {
	return '!' <= c && c <= '/' || ':' <= c && c <= '@' || '[' <= c && c <= '`' || '{' <= c && c <= '~'
}
