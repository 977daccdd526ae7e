package piirules

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func mustCompile(t testing.TB, s Spec) *Set {
	t.Helper()
	set, errs := Compile(s)
	if errs != nil {
		t.Fatalf("compile: %v", errs)
	}
	return set
}

// found is the kinds set finds in text, sorted.
func found(set *Set, text string) []string {
	hit := make([]bool, len(set.Kinds()))
	set.Scan(text, hit)
	var out []string
	for i, h := range hit {
		if h {
			out = append(out, set.Kinds()[i])
		}
	}
	slices.Sort(out)
	return out
}

var spec = Spec{
	Patterns: []Pattern{
		{Kind: "employee-id", Regex: `EMP-[0-9]{6}`},
		{Kind: "customer", Regex: `(?i)cu[0-9]{8}`},
		{Kind: "passport", Regex: `[A-Z]{2}[0-9]{7}`},
	},
	Dictionaries: []Dictionary{
		{Kind: "codename", Terms: []string{"Project Falcon", "Bluebird", "青い鳥"}},
		{Kind: "patient", Terms: []string{"Jane  Roe", "山田太郎"}},
	},
}

func TestScan(t *testing.T) {
	set := mustCompile(t, spec)
	for _, c := range []struct {
		text string
		want []string
	}{
		{"ask EMP-123456 about it", []string{"employee-id"}},
		{"(EMP-123456).", []string{"employee-id"}},
		{"社員番号EMP-123456です", []string{"employee-id"}},
		{"EMP-1234567 has seven digits", nil},
		{"XEMP-123456 is glued", nil},
		{"emp-123456 is lower case", nil},
		{"customer CU12345678, or cu87654321", []string{"customer"}},
		{"passport TK1234567 expires", []string{"passport"}},
		{"tk1234567", nil},
		{"the project\n  FALCON launch", []string{"codename"}},
		{"falconry and bluebirds", nil},
		{"Bluebird.", []string{"codename"}},
		{"この青い鳥は", []string{"codename"}},
		{"患者：山田太郎さん", []string{"patient"}},
		{"jane roe and EMP-000001", []string{"employee-id", "patient"}},
		{"nothing here at all", nil},
		{"", nil},
	} {
		if got := found(set, c.text); !slices.Equal(got, c.want) {
			t.Errorf("%q: found %v, want %v", c.text, got, c.want)
		}
	}
}

func TestOverlappingTerms(t *testing.T) {
	// Terms that are suffixes and prefixes of each other: every one found
	// is reported, through fail and output links.
	set := mustCompile(t, Spec{Dictionaries: []Dictionary{
		{Kind: "a", Terms: []string{"he"}},
		{Kind: "b", Terms: []string{"she"}},
		{Kind: "c", Terms: []string{"hers"}},
		{Kind: "d", Terms: []string{"his"}},
		{Kind: "e", Terms: []string{"ありがとう"}},
		{Kind: "f", Terms: []string{"がと"}},
	}})
	for _, c := range []struct {
		text string
		want []string
	}{
		{"ushers", nil}, // inside a word: none stands alone
		{"she", []string{"b"}},
		{"he hers", []string{"a", "c"}},
		{"ありがとう", []string{"e", "f"}},
	} {
		if got := found(set, c.text); !slices.Equal(got, c.want) {
			t.Errorf("%q: found %v, want %v", c.text, got, c.want)
		}
	}
}

// againstRegexp checks that the automaton finds exactly what one regular
// expression per term finds in the folded text (ASCII).
type againstRegexp struct {
	terms []string
	set   *Set
	res   []*regexp.Regexp
}

func newAgainstRegexp(t testing.TB) *againstRegexp {
	a := &againstRegexp{terms: []string{"ab", "abc", "bca", "c", "caab", "x y", "b", "b.a", "-x"}}
	var dicts []Dictionary
	for i, term := range a.terms {
		dicts = append(dicts, Dictionary{Kind: fmt.Sprintf("k%d", i), Terms: []string{term}})
		// A term is glued to a word byte only where its own end is one.
		left, right := `(^|[^a-z0-9])`, `([^a-z0-9]|$)`
		if !isWordByte(term[0]) {
			left = ""
		}
		if !isWordByte(term[len(term)-1]) {
			right = ""
		}
		a.res = append(a.res, regexp.MustCompile(left+regexp.QuoteMeta(term)+right))
	}
	a.set = mustCompile(t, Spec{Dictionaries: dicts})
	return a
}

func (a *againstRegexp) check(t testing.TB, text string) {
	var want []string
	folded := strings.Join(strings.Fields(strings.ToLower(text)), " ")
	for i, re := range a.res {
		if re.MatchString(folded) {
			want = append(want, fmt.Sprintf("k%d", i))
		}
	}
	slices.Sort(want)
	if got := found(a.set, text); !slices.Equal(got, want) {
		t.Errorf("%q: found %v, regexp finds %v", text, got, want)
	}
}

func TestAgainstRegexp(t *testing.T) {
	a := newAgainstRegexp(t)
	for _, text := range []string{"abcaab", "x  y abc", "c a b", "bcabca", "ab-c", "aBc", "xx y", "cab caab.", "B.A", "a-x", "zb", "zb.a"} {
		a.check(t, text)
	}
}

// FuzzAgainstRegexp is TestAgainstRegexp on any text of the terms'
// letters, spaces and punctuation.
func FuzzAgainstRegexp(f *testing.F) {
	a := newAgainstRegexp(f)
	f.Add([]byte("abcaab x  y"))
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
	const alphabet = "abcxyABC .-z\n\t"
	f.Fuzz(func(t *testing.T, in []byte) {
		text := make([]byte, len(in))
		for i, c := range in {
			text[i] = alphabet[int(c)%len(alphabet)]
		}
		a.check(t, string(text))
	})
}

func TestCompileErrors(t *testing.T) {
	many := make([]Pattern, MaxPatterns+1)
	for i := range many {
		many[i] = Pattern{Kind: "k", Regex: "a[0-9]"}
	}
	for _, c := range []struct {
		name  string
		spec  Spec
		field string
		msg   string
	}{
		{"bad regex", Spec{Patterns: []Pattern{{Kind: "k", Regex: "EMP-[0-9"}}}, "patterns[0].regex", "missing closing ]"},
		{"empty regex", Spec{Patterns: []Pattern{{Kind: "k"}}}, "patterns[0].regex", "required"},
		{"matches empty", Spec{Patterns: []Pattern{{Kind: "k", Regex: "[0-9]*"}}}, "patterns[0].regex", "empty word"},
		{"matches a space", Spec{Patterns: []Pattern{{Kind: "k", Regex: `Project [A-Z]\w+`}}}, "patterns[0].regex", "whitespace"},
		{"any char", Spec{Patterns: []Pattern{{Kind: "k", Regex: `ID.+`}}}, "patterns[0].regex", "whitespace"},
		{"long regex", Spec{Patterns: []Pattern{{Kind: "k", Regex: strings.Repeat("a", MaxRegexLen+1)}}}, "patterns[0].regex", "at most"},
		{"too many", Spec{Patterns: many}, "patterns", "at most 64"},
		{"no kind", Spec{Patterns: []Pattern{{Regex: "a1"}}}, "patterns[0].kind", "required"},
		{"bad kind", Spec{Dictionaries: []Dictionary{{Kind: "Card:X", Terms: []string{"x"}}}}, "dictionaries[0].kind", "lowercase"},
		{"no terms", Spec{Dictionaries: []Dictionary{{Kind: "k"}}}, "dictionaries[0].terms", "at least one"},
		{"blank term", Spec{Dictionaries: []Dictionary{{Kind: "k", Terms: []string{"ok", "  "}}}}, "dictionaries[0].terms[1]", "empty"},
		{"long term", Spec{Dictionaries: []Dictionary{{Kind: "k", Terms: []string{strings.Repeat("x", MaxTermLen+1)}}}}, "dictionaries[0].terms[0]", "at most"},
		{"bad utf-8", Spec{Dictionaries: []Dictionary{{Kind: "k", Terms: []string{"a\xffb"}}}}, "dictionaries[0].terms[0]", "UTF-8"},
		{"too many terms", Spec{Dictionaries: []Dictionary{{Kind: "k", Terms: make([]string, MaxTerms+1)}}}, "dictionaries", "at most 10000 terms"},
	} {
		set, errs := Compile(c.spec)
		if set != nil {
			t.Errorf("%s: compiled", c.name)
		}
		i := slices.IndexFunc(errs, func(e Error) bool { return e.Field == c.field && strings.Contains(e.Msg, c.msg) })
		if i < 0 {
			t.Errorf("%s: errors %v, want one at %s saying %q", c.name, errs, c.field, c.msg)
		}
	}
	// Every error is reported, not the first only.
	_, errs := Compile(Spec{Patterns: []Pattern{{Kind: "", Regex: "("}}, Dictionaries: []Dictionary{{Kind: "k"}}})
	if len(errs) != 3 {
		t.Errorf("errors %v, want 3", errs)
	}
}

func TestBounds(t *testing.T) {
	for _, c := range []struct {
		re     string
		lo, hi int
		starts string // bytes the first set must hold
		not    string // bytes it must not
	}{
		{`EMP-[0-9]{6}`, 10, 10 * 4, "E", "e0"},
		{`(?i)cu[0-9]+`, 3, -1, "cC", "u"},
		{`(a|bc)?d`, 1, 3 * 4, "abd", "c"},
		{`x{2,}`, 2, -1, "x", "y"},
		{`\bAB\b`, 2, 2 * 4, "A", "B"},
		{`[é-ë]x`, 2, 2 * 4, "\xc3", "x"},
	} {
		p, msg := compilePattern(c.re)
		if msg != "" {
			t.Fatalf("%s: %s", c.re, msg)
		}
		if p.minLen != c.lo || p.maxLen != c.hi {
			t.Errorf("%s: bounds %d..%d, want %d..%d", c.re, p.minLen, p.maxLen, c.lo, c.hi)
		}
		for _, b := range []byte(c.starts) {
			if !p.first[b] {
				t.Errorf("%s: %q not a first byte", c.re, b)
			}
		}
		for _, b := range []byte(c.not) {
			if p.first[b] {
				t.Errorf("%s: %q a first byte", c.re, b)
			}
		}
	}
}

// TestHostile: long words, long texts of near-misses and many terms stay
// linear (the benchmarks measure it); here, that they finish and find.
func TestHostile(t *testing.T) {
	var terms []string
	for i := range MaxTerms {
		terms = append(terms, fmt.Sprintf("a%04d", i))
	}
	terms[MaxTerms-1] = strings.Repeat("a", MaxTermLen)
	set := mustCompile(t, Spec{
		Patterns:     []Pattern{{Kind: "p", Regex: `a+b`}, {Kind: "q", Regex: `(?i)[a-z0-9]{3,}-[0-9]+`}},
		Dictionaries: []Dictionary{{Kind: "d", Terms: terms}},
	})
	for _, c := range []struct {
		name, text string
		want       []string
	}{
		// A run of a's holds the 256-a term only glued to more a's.
		{"one megabyte word", strings.Repeat("a", 1<<20), nil},
		{"many short near-misses", strings.Repeat("a00 ", 1<<18), nil},
		{"a megabyte of spaces", strings.Repeat(" \n", 1<<19), nil},
		{"found at the end", strings.Repeat("x ", 1<<18) + "aaab", []string{"p"}},
	} {
		if got := found(set, c.text); !slices.Equal(got, c.want) {
			t.Errorf("%s: found %v, want %v", c.name, got, c.want)
		}
	}
}

func FuzzScan(f *testing.F) {
	set := mustCompile(f, spec)
	f.Add("ask EMP-123456 about Project Falcon")
	f.Add("社員番号EMP-123456です 青い鳥")
	f.Add("\xff\xfeCU12345678\u3000jane\u00a0roe")
	f.Fuzz(func(t *testing.T, text string) {
		hit := make([]bool, len(set.Kinds()))
		set.Scan(text, hit)
		// Adding spaces around the text never loses a kind: words and
		// terms are cut at whitespace anyway.
		again := make([]bool, len(set.Kinds()))
		set.Scan(" "+text+" ", again)
		for i := range hit {
			if hit[i] && !again[i] {
				t.Fatalf("%q: kind %s found, but not with spaces around", text, set.Kinds()[i])
			}
		}
	})
}

func FuzzCompile(f *testing.F) {
	f.Add(`EMP-[0-9]{6}`, "Project Falcon")
	f.Add(`(?i)(a|b)*c{2,5}`, "青い鳥")
	f.Fuzz(func(t *testing.T, re, term string) {
		set, errs := Compile(Spec{Patterns: []Pattern{{Kind: "p", Regex: re}}, Dictionaries: []Dictionary{{Kind: "d", Terms: []string{term}}}})
		if (set == nil) == (errs == nil) {
			t.Fatalf("set %v, errors %v", set, errs)
		}
		if set == nil {
			return
		}
		// What the pattern matches, the set finds as a word; the term, as
		// itself.
		hit := make([]bool, len(set.Kinds()))
		set.Scan(term, hit)
		if !hit[1] {
			t.Fatalf("term %q not found in itself", term)
		}
	})
}

var benchText = strings.Repeat("The quick brown fox jumps over the lazy dog 1234 times; see order 55-1234 and ask 山田さん. ", 360)

func BenchmarkScan(b *testing.B) {
	var terms []string
	for i := range 1000 {
		terms = append(terms, fmt.Sprintf("codename%d", i))
	}
	for _, c := range []struct {
		name string
		spec Spec
	}{
		{"example", Spec{Patterns: spec.Patterns[:1], Dictionaries: []Dictionary{{Kind: "codename", Terms: []string{"Project Falcon", "Bluebird"}}}}},
		{"3 patterns", Spec{Patterns: spec.Patterns}},
		{"1000 terms", Spec{Dictionaries: []Dictionary{{Kind: "d", Terms: terms}}}},
		{"both", Spec{Patterns: spec.Patterns, Dictionaries: append([]Dictionary{{Kind: "d", Terms: terms}}, spec.Dictionaries...)}},
	} {
		set := mustCompile(b, c.spec)
		hit := make([]bool, len(set.Kinds()))
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(benchText)))
			b.ReportAllocs()
			for b.Loop() {
				clear(hit)
				set.Scan(benchText, hit)
			}
		})
	}
}
