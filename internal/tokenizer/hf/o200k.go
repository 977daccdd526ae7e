package hf

// patternO200k is gpt-oss's (OpenAI o200k's) split: a word ends where an
// upper-case letter follows lower case (a run of capitals stays with the
// lower case after it: "XMLHttpRequest" → "XMLHttp", "Request";
// "HTTPServer" is one word), contractions stay on the word, numbers go in
// groups of three.
const patternO200k = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// patternTekken is Mistral's tekken split (Mistral Nemo's tokenizer.json):
// o200k's without the contraction suffixes and with single digits.
const patternTekken = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// caseSplit is what tells the case-shape patterns apart: patternO200k and
// patternTekken differ in these two parameters only.
type caseSplit struct {
	contractions bool // words take an optional (?i:'s|'t|'re|'ve|'m|'ll|'d)
	maxDigits    int  // \p{N}{1,maxDigits}
}

var (
	caseO200k  = caseSplit{contractions: true, maxDigits: 3}
	caseTekken = caseSplit{contractions: false, maxDigits: 1}
)

// nextO200k matches patternO200k at s[i:], returning what caseSplit.next
// does.
func nextO200k(s string, i int) (end, far int) { return caseO200k.next(s, i) }

// next matches cs's pattern at s[i:] and returns the end of the match
// and how far it read. Every character starts some alternative, so there
// is always a match. The alternatives, and within them the optional
// prefix and the greedy runs, are tried in the order a backtracking engine
// tries them; the comments say where that order decides the result.
func (cs caseSplit) next(s string, i int) (end, far int) {
	p, n := propsAt(s, i)
	// The prefix [^\r\n\p{L}\p{N}]: any character but these; a mark is
	// both a possible prefix and a possible first letter, so for a mark
	// both ways are tried, the prefix first.
	prefix := p&(propLetter|propNumber|propNewline) == 0 && i+n < len(s)
	word := p&(propUpper|propLower) != 0
	for _, alt := range [2]func(string, int, bool) int{o200kLowerWord, o200kUpperWord} {
		if prefix {
			if e := alt(s, i+n, cs.contractions); e > 0 {
				return e, e
			}
		}
		if word {
			if e := alt(s, i, cs.contractions); e > 0 {
				return e, e
			}
		}
	}
	// \p{N}{1,maxDigits}
	if p&propNumber != 0 {
		j := runPropsMax(s, i, propNumber, cs.maxDigits)
		return j, j
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n/]*'
	const notOther = propSpace | propLetter | propNumber
	j := i
	if s[i] == ' ' && i+1 < len(s) {
		if q, _ := propsAt(s, i+1); q&notOther == 0 {
			j = i + 1
		}
	}
	if q, _ := propsAt(s, j); q&notOther == 0 {
		for j < len(s) {
			q, m := propsAt(s, j)
			if q&notOther != 0 {
				break
			}
			j += m
		}
		for j < len(s) && (s[j] == '\r' || s[j] == '\n' || s[j] == '/') {
			j++
		}
		return j, j
	}
	// Only whitespace is left.
	return whitespace(s, i)
}

// o200kLowerWord matches `[U]*[L]+(?i:'s|…)?` at s[j:] (the contraction
// only with contractions), U and L being the pattern's upper and lower
// classes (which share Lm, Lo and marks), and returns its end or -1. U* is
// greedy: it takes the whole U run, and if no L follows, gives characters
// back until the last one it gave is an L.
func o200kLowerWord(s string, j int, contractions bool) int {
	k, lastL, lastLEnd := j, -1, 0
	for k < len(s) {
		p, n := propsAt(s, k)
		if p&propUpper == 0 {
			break
		}
		if p&propLower != 0 {
			lastL, lastLEnd = k, k+n
		}
		k += n
	}
	if k < len(s) {
		if p, _ := propsAt(s, k); p&propLower != 0 {
			return contractionAfter(s, runProps(s, k, propLower), contractions)
		}
	}
	if lastL < 0 {
		return -1
	}
	// L+ from the last L of the run stops after it: what follows in the
	// run is not L.
	return contractionAfter(s, lastLEnd, contractions)
}

// o200kUpperWord matches `[U]+[L]*(?i:'s|…)?` at s[j:], or returns -1.
func o200kUpperWord(s string, j int, contractions bool) int {
	if j >= len(s) {
		return -1
	}
	if p, _ := propsAt(s, j); p&propUpper == 0 {
		return -1
	}
	k := runProps(s, j, propUpper)
	return contractionAfter(s, runProps(s, k, propLower), contractions)
}

// contractionAfter extends a word ending at e by an optional
// (?i:'s|'t|'re|'ve|'m|'ll|'d), when the pattern has it.
func contractionAfter(s string, e int, contractions bool) int {
	if contractions && e < len(s) && s[e] == '\'' {
		return e + contraction(s, e, true)
	}
	return e
}
