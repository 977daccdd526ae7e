package hf

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// refCaseSplit is the reference the case-shape scanner (o200k.go) is held
// to, written from the pattern rather than from the scanner: every
// alternative before the look-ahead is matched by Go's regexp, which picks
// the match a backtracking engine would (leftmost-first, greedy and lazy
// as written), with \s and the \p{…} classes spelled out as Unicode 16's
// (spellClasses: Go's \s is ASCII only, its \p tables Unicode 15's); the
// last two, `\s+(?!\S)|\s+`, which Go's regexp cannot express, are
// resolved from what the look-ahead means.
type refCaseSplit struct{ head *regexp.Regexp }

func newRefCaseSplit(tb testing.TB, pattern string) refCaseSplit {
	tb.Helper()
	head, ok := strings.CutSuffix(pattern, `|\s+(?!\S)|\s+`)
	if !ok || strings.Contains(head, "(?!") || strings.Contains(head, "(?=") {
		tb.Fatalf("pattern %q does not end in the look-ahead alternatives", pattern)
	}
	return refCaseSplit{head: regexp.MustCompile(`\A(?:` + spellClasses(tb, head) + `)`)}
}

// spellClasses rewrites a pattern's \s and \p{…} as the code points of
// the reference's Unicode 16 classes (ucd_tables.go), inside a bracket
// expression as its items, outside as one.
func spellClasses(tb testing.TB, pattern string) string {
	tb.Helper()
	items := func(tabs ...*unicode.RangeTable) string {
		var b strings.Builder
		for _, t := range tabs {
			for _, r := range t.R16 {
				for c := int(r.Lo); c <= int(r.Hi); c += int(r.Stride) {
					fmt.Fprintf(&b, `\x{%x}`, c)
				}
			}
			for _, r := range t.R32 {
				for c := int(r.Lo); c <= int(r.Hi); c += int(r.Stride) {
					fmt.Fprintf(&b, `\x{%x}`, c)
				}
			}
		}
		return b.String()
	}
	classes := map[string]string{
		`\s`: items(ucd16WhiteSpace), `\p{L}`: items(ucd16Lu, ucd16Ll, ucd16Lt, ucd16Lm, ucd16Lo),
		`\p{Lu}`: items(ucd16Lu), `\p{Ll}`: items(ucd16Ll), `\p{Lt}`: items(ucd16Lt), `\p{Lm}`: items(ucd16Lm),
		`\p{Lo}`: items(ucd16Lo), `\p{M}`: items(ucd16M), `\p{N}`: items(ucd16N), `\p{P}`: items(ucd16P),
		`\p{S}`: items(ucd16S),
	}
	var b strings.Builder
	inBracket := false
	for i := 0; i < len(pattern); {
		switch c := pattern[i]; {
		case c == '\\' && i+1 < len(pattern):
			n := 2
			if pattern[i+1] == 'p' {
				n = strings.IndexByte(pattern[i:], '}') + 1
			}
			esc := pattern[i : i+n]
			if cls, ok := classes[esc]; ok {
				if inBracket {
					b.WriteString(cls)
				} else {
					b.WriteString("[" + cls + "]")
				}
			} else if esc[1] == 'p' || esc[1] == 'P' || esc[1] == 'S' || esc[1] == 'd' || esc[1] == 'w' {
				tb.Fatalf("spellClasses: %s in %q is not spelled out", esc, pattern)
			} else {
				b.WriteString(esc)
			}
			i += n
		case c == '[' && !inBracket:
			inBracket = true
			b.WriteByte(c)
			if i+1 < len(pattern) && pattern[i+1] == '^' {
				b.WriteByte('^')
				i++
			}
			i++
		case c == ']' && inBracket:
			inBracket = false
			b.WriteByte(c)
			i++
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// next is the end of the match at s[i:], or -1 when there is none.
func (r refCaseSplit) next(s string, i int) int {
	if loc := r.head.FindStringIndex(s[i:]); loc != nil && loc[1] > 0 {
		return i + loc[1]
	}
	// \s+(?!\S): the whitespace run, less its last character unless it
	// ends the text (then what follows is not \S); \s+: one character.
	var starts []int
	j := i
	for j < len(s) {
		r, n := decodeRune(s, j)
		if s[j] < 0x80 {
			r, n = rune(s[j]), 1
		}
		if !unicode.Is(ucd16WhiteSpace, r) {
			break
		}
		starts = append(starts, j)
		j += n
	}
	switch {
	case len(starts) == 0:
		return -1
	case j == len(s):
		return j
	case len(starts) >= 2:
		return starts[len(starts)-1]
	}
	return j
}

func (r refCaseSplit) pieces(s string) ([]string, bool) {
	var out []string
	for i := 0; i < len(s); {
		e := r.next(s, i)
		if e <= i {
			return out, false
		}
		out = append(out, s[i:e])
		i = e
	}
	return out, true
}

func casePieces(cs caseSplit, s string) []string {
	var out []string
	for i := 0; i < len(s); {
		end, _ := cs.next(s, i)
		out = append(out, s[i:end])
		i = end
	}
	return out
}

var caseSplits = []struct {
	name    string
	pattern string
	cs      caseSplit
}{
	{"o200k", patternO200k, caseO200k},
	{"tekken", patternTekken, caseTekken},
}

// checkCaseSplit compares the scanner with the reference on s.
func checkCaseSplit(t *testing.T, refs []refCaseSplit, s string) {
	t.Helper()
	for k, c := range caseSplits {
		want, ok := refs[k].pieces(s)
		if !ok {
			t.Fatalf("%s: the reference matches nothing at %q", c.name, s[len(strings.Join(want, "")):])
		}
		if got := casePieces(c.cs, s); !slices.Equal(got, want) {
			t.Fatalf("%s: split(%q)\n got %q\nwant %q", c.name, s, got, want)
		}
	}
}

func caseRefs(tb testing.TB) []refCaseSplit {
	refs := make([]refCaseSplit, len(caseSplits))
	for k, c := range caseSplits {
		refs[k] = newRefCaseSplit(tb, c.pattern)
	}
	return refs
}

// TestCaseSplitReference holds the o200k and tekken scanners to the
// reference on the golden corpus and on shapes where the order of the
// alternatives decides.
func TestCaseSplitReference(t *testing.T) {
	if sp, ok := splitterFor(patternTekken); !ok || !sp.o200k || sp.cases != caseTekken {
		t.Fatalf("splitterFor(patternTekken) = %+v, %v", sp, ok)
	}
	refs := caseRefs(t)
	data, err := os.ReadFile(filepath.Join("testdata", "golden", "gptoss.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	texts := []string{"HTTPServer's", "DON'T'S", "x'll", "12345 ٣٤٥", "\u0301A\u0301", "a\u200db", "ǅǅx", "ʰʰA",
		" !!/\n/ x", "a  \n\n  b  ", "\t\t a", "a\xffb", "'s'S'ſ", " \u3000x", "\u0085\u00a0y"}
	for _, c := range g.Cases {
		texts = append(texts, c.Text)
	}
	for _, s := range texts {
		checkCaseSplit(t, refs, s)
	}
	if got := casePieces(caseTekken, "I'm 2024 HTTPServer"); !slices.Equal(got, []string{"I", "'m", " ", "2", "0", "2", "4", " HTTPServer"}) {
		t.Errorf("tekken split = %q", got)
	}
}

// TestMistralNemoPrompt: a rendered Mistral Nemo prompt's control tokens
// are their ids, text between them goes through the tekken split, and
// EncodeWithSpecialTokens adds <s> (ids from the reference).
func TestMistralNemoPrompt(t *testing.T) {
	tok := fixture(t, "mistral_nemo")
	for _, c := range []struct {
		text string
		want []uint32
	}{
		{"<s>[INST]Hello, 2024![/INST]Hi</s>", []uint32{1, 3, 22177, 1044, 1032, 1050, 1048, 1050, 1052, 1033, 4, 37133, 2}},
		{`[TOOL_CALLS][{"name": "f"}]</s>`, []uint32{9, 1091, 19227, 2391, 2811, 1429, 1102, 1034, 27028, 2}},
	} {
		if got := tok.Encode(c.text); !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q) = %v, want %v", c.text, got, c.want)
		}
		if got := tok.EncodeWithSpecialTokens(c.text); !slices.Equal(got, append([]uint32{1}, c.want...)) {
			t.Errorf("EncodeWithSpecialTokens(%q) = %v, want <s> and %v", c.text, got, c.want)
		}
	}
}
