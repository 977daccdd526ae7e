package pick

import (
	"math"
	"strconv"
	"strings"
)

// ParseGauges sums, per requested metric name, the values of its samples
// in a Prometheus text exposition (every label set added up: vLLM exports
// one series per engine). Comments, other metrics, malformed lines and
// non-finite values are skipped; a name with no sample is absent.
func ParseGauges(text string, names ...string) map[string]float64 {
	out := make(map[string]float64, len(names))
	for len(text) > 0 {
		var line string
		line, text, _ = strings.Cut(text, "\n")
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ \t"); i >= 0 {
			name, rest = line[:i], line[i:]
		} else {
			continue
		}
		want := false
		for _, n := range names {
			if n == name {
				want = true
				break
			}
		}
		if !want {
			continue
		}
		if strings.HasPrefix(rest, "{") {
			end := labelsEnd(rest)
			if end < 0 {
				continue
			}
			rest = rest[end+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 || len(fields) > 2 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		out[name] += v
	}
	return out
}

// labelsEnd finds the "}" closing a label set that starts at s[0], minding
// quoted values (which may hold "}" and escaped quotes); -1 if none.
func labelsEnd(s string) int {
	inQuote := false
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case inQuote && c == '\\':
			i++
		case c == '"':
			inQuote = !inQuote
		case !inQuote && c == '}':
			return i
		}
	}
	return -1
}
