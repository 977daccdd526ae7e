// Package flaghelp checks flag help text the flag package cannot: that a
// usage string does not state a default the flag prints anyway.
package flaghelp

import (
	"bytes"
	"flag"
	"strings"
)

// RepeatedDefaults returns the flags of fs whose usage mentions a default
// while the flag package also prints one, "(default X)", after it. The
// printing is the flag package's own decision (it omits zero values), so
// the check asks it rather than guessing: a usage may explain a computed
// default ("default: hostname") only when the flag's registered default
// is zero and nothing else gets printed.
func RepeatedDefaults(fs *flag.FlagSet) []string {
	var bad []string
	fs.VisitAll(func(f *flag.Flag) {
		mentions := countWord(f.Usage, "default")
		if mentions == 0 {
			return
		}
		// PrintDefaults of a set holding only f, with f's registered
		// default (Var would take its current value).
		one := flag.NewFlagSet("", flag.ContinueOnError)
		one.Var(f.Value, f.Name, f.Usage)
		one.Lookup(f.Name).DefValue = f.DefValue
		var out bytes.Buffer
		one.SetOutput(&out)
		one.PrintDefaults()
		if countWord(out.String(), "default") > mentions {
			bad = append(bad, "--"+f.Name+": "+strings.TrimSpace(out.String()))
		}
	})
	return bad
}

// countWord counts word (or its plural) in s as a word of its own,
// case-insensitively: not inside a name such as default-tenant (a flag's
// value or a listed name).
func countWord(s, word string) int {
	s = strings.ToLower(s)
	n := 0
	for i := 0; ; {
		j := strings.Index(s[i:], word)
		if j < 0 {
			return n
		}
		start, end := i+j, i+j+len(word)
		if end < len(s) && s[end] == 's' { // "defaults to"
			end++
		}
		if !namePart(s, start-1) && !namePart(s, end) {
			n++
		}
		i = end
	}
}

// namePart reports whether s[i] continues a name: a letter, digit, - or _.
func namePart(s string, i int) bool {
	if i < 0 || i >= len(s) {
		return false
	}
	c := s[i]
	return c == '-' || c == '_' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
}
