// Package complexity is the classifier of how hard a prompt is: it tags
// every request whose prompt text it can read complexity-low or
// complexity-high, the tags the example policy smart-semantic-routing
// matches on (complexity-low lets a simple prompt asked of the large model
// go to the small one, unless the large one is faster for it).
//
// The score is a sum of cheap signals, read from the request's last user
// message (the ask; without one, the last piece of text) and the prompt's
// total length:
//
//   - length: the whole prompt (every message, the tools, the documents)
//     of 400 estimated tokens or more +1, of 2,000 or more +2; the ask of
//     26 or more +1, of 150 or more +1 more. Tokens are estimated by
//     script, the language signal:
//     four bytes of ASCII text a token, one CJK character a token;
//   - code: a fenced block (```) +2; three or more code tokens (func,
//     def, return, =>, #include, SELECT, ...) +1, and asking for code to
//     be written or fixed (implement, refactor, debug, 実装, ...) +1;
//   - math: notation (\frac, ∫, ∑, x^2, =, ...) +1 and words (prove,
//     derive, integral, equation, probability, 証明, Beweis, démontrer,
//     ...) +1;
//   - multi-step instructions: two or more numbered lines, "step by step"
//     (Schritt für Schritt, étape par étape, ステップ), or two or more
//     sequence words (first, then, finally; まず, 次に; zuerst, dann;
//     d'abord, ensuite) +1 each kind;
//   - analysis: two or more of explain why, compare, analyse, design,
//     trade-off, optimise (and their Japanese, German and French) +1, one
//     of them +1 when the ask is not short.
//
// A score of 1 or more is complexity-high, 0 complexity-low: a prompt is
// low only when nothing in it suggests otherwise (Threshold says why).
//
// Accuracy, measured by TestAccuracy: on the labelled set in testdata
// (labelled.tsv: 107 hand-labelled asks, 54 low and 53 high, in English,
// Japanese, German and French) 1.000 — but that is the set the keywords
// and thresholds were chosen on, so it says little. On the held-out set
// (holdout.tsv: 24 asks written after the tuning) 0.79: 9 of 12 hard asks
// and 10 of 12 simple ones right. (Honesty note: the held-out set was read
// once before the ask-length signal was added; its threshold was chosen
// on the labelled set alone.) The test fails below 0.85 on the labelled
// set and 0.75 on the held-out one. What the scorer cannot see: a short
// ask that is hard ("Is P equal to NP?") is low; a simple ask phrased
// with a sequence word ("..., then a few for a boy") is high; a long
// paste with a trivial ask ("thanks") is high by length. Read the tag as
// "nothing suggests this needs the large model", not as a judgement.
//
// Only the first and last 1 KB of the ask are searched for keywords, so
// that part of the cost is bounded whatever the prompt's size, and all
// the keywords in one pass over it (countKeywords), not one pass each;
// the rest is one pass to estimate the length, eight bytes a step
// (BenchmarkClassify), over the text of the body the router already
// parsed to read the prompt (package chattext). The classifier runs only when
// some rule of the request's program reads complexity-low or
// complexity-high; otherwise it returns at once. It cannot fail: a body
// without readable text (token ids) gets no tag, and it never returns an
// error.
package complexity

import (
	"context"
	"math/bits"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/switchyard-dev/switchyard/internal/bytescan"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify/chattext"
)

// Name is the classifier's name in --classifiers.
const Name = "complexity"

// The tags.
const (
	Low  = "complexity-low"
	High = "complexity-high"
)

// Threshold is the score from which a prompt is complexity-high: any
// signal at all. A prompt is low only when nothing in it suggests
// otherwise, because the errors cost differently: a simple prompt scored
// high is served by the large model, as it would have been without the
// classifier, while a hard prompt scored low may get a worse answer from
// the small one.
const Threshold = 1

// longAsk is the ask's length, in estimated tokens, from which it scores:
// the shortest with no simple ask as long in the labelled set.
const longAsk = 26

// Classifier implements classify.Classifier.
type Classifier struct{}

var _ classify.Classifier = Classifier{}

// New is the classifier's factory.
func New() (classify.Classifier, error) { return Classifier{}, nil }

func readsOurs(tag string) bool { return tag == Low || tag == High }

// Classify appends complexity-low or complexity-high when the request's
// program reads either.
func (Classifier) Classify(_ context.Context, req *classify.Request, tags []string) ([]string, error) {
	if !req.Program.ReadsTag(readsOurs) {
		return tags, nil
	}
	segs, err := req.Text()
	if err != nil || len(segs) == 0 {
		return tags, nil
	}
	if Score(segs) >= Threshold {
		return append(tags, High), nil
	}
	return append(tags, Low), nil
}

// Score is the prompt's complexity score (see the package doc).
func Score(segs []chattext.Segment) int {
	total := 0
	ask, askTokens := "", 0
	for _, s := range segs {
		n := estimateTokens(s.Text)
		total += n
		if s.Role == chattext.User {
			ask, askTokens = s.Text, n
		}
	}
	if ask == "" && len(segs) > 0 {
		ask = segs[len(segs)-1].Text // no user message: the last of any
		askTokens = estimateTokens(ask)
	}
	score := 0
	switch {
	case total >= 2000:
		score += 2
	case total >= 400:
		score++
	}
	if ask == "" {
		return score
	}
	if askTokens >= longAsk {
		score++
	}
	if askTokens >= 150 {
		score++
	}
	bp := lowerPool.Get().(*[]byte)
	low := lowerWindow((*bp)[:0], ask)
	// Read in place: the buffer goes back to the pool only after the last
	// read of t.
	t := unsafe.String(unsafe.SliceData(low), len(low))

	n := countKeywords(t)
	if strings.Contains(t, "```") {
		score += 2
	} else if n[codeTokens] >= 3 {
		score++
	}
	if n[codeAsks] > 0 {
		score++
	}
	if n[mathNotation] > 0 {
		score++
	}
	if n[mathWords] > 0 {
		score++
	}
	if numberedLines(t) >= 2 {
		score++
	}
	if n[stepByStep] > 0 {
		score++
	}
	if n[sequenceWords] >= 2 {
		score++
	}
	switch a := n[analysisWords]; {
	case a >= 2:
		score++
	case a == 1 && askTokens >= 12:
		score++
	}
	*bp = low[:0]
	lowerPool.Put(bp)
	return score
}

// estimateTokens: four bytes of ASCII a token, one character of other
// scripts a token (CJK is about one; accented Latin letters are
// over-counted a little). It counts eight bytes a step: a byte is ASCII
// when its top bit is clear, a character's first byte of another script
// when its top two bits are set (11xxxxxx; continuation bytes are
// 10xxxxxx).
func estimateTokens(s string) int {
	ascii, other := 0, 0
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := bytescan.Load64(s, i)
		ascii += 8 - bits.OnesCount64(bytescan.HighBytes(x))
		other += bits.OnesCount64(bytescan.HighBytes(x & (x << 1)))
	}
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c < utf8.RuneSelf:
			ascii++
		case c&0xc0 != 0x80:
			other++
		}
	}
	return ascii/4 + other
}

const window = 1 << 10

var lowerPool = sync.Pool{New: func() any { b := make([]byte, 0, 2*window+1); return &b }}

// lowerWindow appends the ask's first and last 1 KB (all of a shorter
// one), ASCII letters in lower case, to dst.
func lowerWindow(dst []byte, s string) []byte {
	if len(s) > 2*window {
		dst = appendLower(dst, s[:window])
		dst = append(dst, '\n')
		return appendLower(dst, s[len(s)-window:])
	}
	return appendLower(dst, s)
}

func appendLower(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// countKeywords is, for each keyword list, how many of its entries occur
// in t (an entry listed twice counts twice). One pass over t finds them
// all: a position is looked at further only when its two bytes start
// some keyword (a bit of keywords.pairs), and then only the keywords
// with its first byte are compared. Searching t once per keyword instead
// (about 150 of them) read the 2 KB window 150 times.
func countKeywords(t string) (n [numLists]int) {
	var seen [(maxKeywords + 63) / 64]uint64
	for i := 0; i+1 < len(t); i++ {
		pair := uint16(t[i])<<8 | uint16(t[i+1])
		if keywords.pairs[pair/64]&(1<<(pair%64)) == 0 {
			continue
		}
		for _, k := range keywords.byFirst[t[i]] {
			if seen[k/64]&(1<<(k%64)) == 0 && strings.HasPrefix(t[i:], keywords.words[k].text) {
				seen[k/64] |= 1 << (k % 64)
			}
		}
	}
	for k := range keywords.words {
		if seen[k/64]&(1<<(k%64)) != 0 {
			for l, c := range keywords.words[k].in {
				n[l] += int(c)
			}
		}
	}
	return n
}

// numberedLines counts the lines (or sentence starts) that open with "1."
// to "9." or "1)": an enumerated list of things to do.
func numberedLines(t string) int {
	n := 0
	for i := 0; i+1 < len(t); i++ {
		if t[i] < '1' || t[i] > '9' || (t[i+1] != '.' && t[i+1] != ')') {
			continue
		}
		if i+2 < len(t) && t[i+2] != ' ' {
			continue
		}
		if i == 0 || t[i-1] == '\n' || t[i-1] == ' ' && (i < 2 || t[i-2] != ',' && !('0' <= t[i-2] && t[i-2] <= '9')) {
			n++
		}
	}
	return n
}

// The keyword lists, in lists' order.
const (
	codeTokens = iota
	codeAsks
	mathNotation
	mathWords
	stepByStep
	sequenceWords
	analysisWords
	numLists
)

const maxKeywords = 256

// keywords is lists' entries, each once, indexed for countKeywords.
var keywords = func() (ix struct {
	words []struct {
		text string
		in   [numLists]uint8 // times listed in each list
	}
	byFirst [256][]uint8    // the words' indices, by first byte
	pairs   [1 << 10]uint64 // the words' first two bytes, a bit each
}) {
	at := map[string]int{}
	for l, list := range lists {
		for _, w := range list {
			k, ok := at[w]
			if !ok {
				k = len(ix.words)
				at[w] = k
				ix.words = append(ix.words, struct {
					text string
					in   [numLists]uint8
				}{text: w})
				ix.byFirst[w[0]] = append(ix.byFirst[w[0]], uint8(k))
				pair := uint16(w[0])<<8 | uint16(w[1])
				ix.pairs[pair/64] |= 1 << (pair % 64)
			}
			ix.words[k].in[l]++
		}
	}
	if len(ix.words) > maxKeywords {
		panic("complexity: more keywords than maxKeywords")
	}
	return ix
}()

// lists are the keywords, lower case, each two bytes or more.
var lists = [numLists][]string{
	codeTokens: {"func ", "def ", "return ", "=>", "#include", "select ", " from ", "class ", "import ", "const ",
		"var ", "let ", "();", "{ ", " }", "==", "!=", "$_", "->", "::", "print(", "console.", "malloc", "async "},
	codeAsks: {"implement", "refactor", "debug", "write a function", "write a script", "write a sql", "write a go ",
		"write a python", "write a regular", "write example code", "optimize this", "fix it", "review this code", "find the bug",
		"実装", "リファクタ", "デバッグ", "バグ", "コードを書", "最適化してください",
		"funktion, die", "schreibe eine python", "schreibe ein", "implementiere", "speicherleck", "debugge",
		"écris un script", "écris une fonction", "implémente", "fuit de la mémoire", "débogue"},
	mathNotation: {"\\frac", "\\int", "\\sum", "∫", "∑", "√", "≤", "≥", "≠", "∞", "^2", "^n", "x^", "dx", "y''", "y'(", " = 0", "= -"},
	mathWords: {"prove", "proof", "derive", "integral", "equation", "eigen", "probability", "theorem", "induction",
		"compute the", "calculate", "solve",
		"証明", "微分", "積分", "方程式", "固有値", "確率", "解の公式", "求め",
		"beweis", "ableitung", "integral", "gleichung", "wahrscheinlichkeit", "berechne",
		"démontre", "prouve", "dérivée", "intégrale", "équation", "probabilité", "résous", "calcule"},
	stepByStep: {"step by step", "step-by-step", "walk me through", "runbook", "ステップ", "手順", "schritt für schritt", "étape par étape"},
	sequenceWords: {"first", " then ", "finally", "after that", "まず", "次に", "最後に", "その後",
		"zuerst", " dann ", "danach", "anschließend", "d'abord", "ensuite", " puis ", "enfin"},
	analysisWords: {"explain why", "explain how", "explain the", "explain what", "compare", "analy", "design", "trade-off",
		"tradeoff", "optimiz", "optimis", "evaluate", "architecture", "argue", "critique", "recommend an",
		"分析", "比較", "設計", "最適化", "なぜ", "考察", "説明してください",
		"vergleiche", "entwirf", "optimier", "warum", "erkläre", "begründe", "architektur",
		"compare", "analyse", "conçois", "optimise", "pourquoi", "explique", "justifiant", "critique"},
}
