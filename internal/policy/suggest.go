package policy

import (
	"strconv"
	"strings"
)

// suggest returns the candidate closest to s when it is close enough to be
// a likely typo (case differences, or an edit distance of about a third of
// the word), or "".
func suggest(s string, candidates []string) string {
	best, bestDist := "", 1<<30
	for _, c := range candidates {
		if strings.EqualFold(s, c) {
			return c
		}
		if len(s) >= 4 && len(c) > len(s) && strings.HasPrefix(strings.ToLower(c), strings.ToLower(s)) {
			return c // a truncated name: "match" for "matches"
		}
		d := editDistance(strings.ToLower(s), strings.ToLower(c))
		if d < bestDist {
			best, bestDist = c, d
		}
	}
	limit := max(1, min(len(s), len(best))/3)
	if best == "" || bestDist > limit {
		return ""
	}
	return best
}

// didYouMean renders ` (did you mean X?)` or ` (want one of A, B)`.
func didYouMean(s string, candidates []string) string {
	if m := suggest(s, candidates); m != "" {
		return " (did you mean " + m + "?)"
	}
	if len(candidates) > 0 && len(candidates) <= 8 {
		return " (want one of " + strings.Join(candidates, ", ") + ")"
	}
	return ""
}

// editDistance is the Damerau–Levenshtein distance (optimal string
// alignment): a transposition of two letters counts as one edit, the
// typo "TTTF" for "TTFT" being the common case.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		if a == b {
			return 0
		}
		return 1 << 20
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

func quoteList(names []string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(n))
	}
	b.WriteByte(']')
	return b.String()
}
