package scrape

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// A vLLM page carries a hundred or more series (latency histograms per
// model, Python's process and GC counters) and the router needs five.
// Parsing all of it into protobuf families cost a router half its CPU at
// 128 workers scraped each second: the work grows with routers × workers,
// so it is the one place a fleet of hundreds pays for every line.
//
// scanPage reads the lines of the wanted families in the text format's
// grammar (as github.com/prometheus/common/expfmt reads it) and skips every
// other line after looking at its first bytes. It is exact or it gives up:
// whenever a wanted line is not in the plain form it reads (a histogram or
// summary TYPE, a quoted UTF-8 name, an escape it does not decode, a
// malformed value, a last line without its newline), it returns false and
// the caller parses the page in full, so the result is always the one the
// full parser gives (FuzzScanMatchesFullParse). Lines of other families are
// not validated: an odd series elsewhere does not make a worker unhealthy.

// pagePool holds page buffers: a scrape reads the whole page (bounded by
// maxBody), so that a page scan cannot read exactly is parsed again.
var pagePool = sync.Pool{New: func() any { return bytes.NewBuffer(make([]byte, 0, 32<<10)) }}

// scanPage fills p from b and reports whether it read every wanted line
// exactly; false means p is incomplete and b must be parsed in full.
func scanPage(b []byte, p *page) bool {
	for len(b) > 0 {
		nl := bytes.IndexByte(b, '\n')
		if nl < 0 {
			// The full parser refuses a last line without its newline
			// unless it is blank.
			return len(trimBlank(b)) == 0
		}
		line := trimLeftBlank(b[:nl])
		b = b[nl+1:]
		if len(line) == 0 {
			continue
		}
		switch line[0] {
		case '#':
			if !scanComment(line[1:]) {
				return false
			}
			continue
		case '{':
			// A quoted UTF-8 metric name inside the braces.
			return false
		}
		name, rest := cutName(line)
		fam := wantedFamily(name)
		if fam < 0 {
			if len(rest) > 0 && rest[0] == '"' {
				// Part of a quoted name the full parser reads differently.
				return false
			}
			continue
		}
		s, ok := scanSample(rest)
		if !ok {
			return false
		}
		p.series[fam] = append(p.series[fam], s)
	}
	return true
}

// scanComment checks a comment line (after its '#'): a TYPE line of a
// wanted family must give a type whose series carry one value (gauge,
// counter, untyped, or none given).
func scanComment(c []byte) bool {
	c = trimLeftBlank(c)
	kw, rest := cutToken(c)
	if string(kw) != "TYPE" {
		return true
	}
	rest = trimLeftBlank(rest)
	if len(rest) > 0 && rest[0] == '"' {
		return false
	}
	name, rest := cutName(rest)
	if wantedFamily(name) < 0 {
		return true
	}
	if len(rest) == 0 {
		return true
	}
	if !isBlank(rest[0]) {
		return false
	}
	typ := trimLeftBlank(rest)
	switch strings.ToUpper(string(typ)) {
	case "", "GAUGE", "COUNTER", "UNTYPED":
		return true
	}
	return false
}

// scanSample reads what follows a wanted series' name: optional labels,
// the value, an optional integer timestamp.
func scanSample(rest []byte) (sample, bool) {
	var s sample
	rest = trimLeftBlank(rest)
	if len(rest) > 0 && rest[0] == '{' {
		var ok bool
		if rest, ok = scanLabels(rest[1:], &s); !ok {
			return s, false
		}
		rest = trimLeftBlank(rest)
	}
	val, rest := cutToken(rest)
	if len(val) == 0 || bytes.ContainsAny(val, "pP_") {
		return s, false
	}
	v, err := strconv.ParseFloat(string(val), 64)
	if err != nil {
		return s, false
	}
	s.value, s.isValue = v, true
	if len(rest) == 0 {
		return s, true
	}
	ts, rest := cutToken(trimLeftBlank(rest))
	if _, err := strconv.ParseInt(string(ts), 10, 64); err != nil || len(rest) > 0 {
		return s, false
	}
	return s, true
}

// scanLabels reads name="value" pairs up to the closing brace, keeping
// the labels ParseMetrics uses, and returns what follows the brace.
func scanLabels(b []byte, s *sample) ([]byte, bool) {
	for {
		b = trimLeftBlank(b)
		if len(b) == 0 {
			return nil, false
		}
		if b[0] == '}' {
			// "{}", or a trailing comma.
			return b[1:], true
		}
		i := 0
		for i < len(b) && isLabelNameByte(b[i], i == 0) {
			i++
		}
		if i == 0 || i == len(b) {
			return nil, false
		}
		name := b[:i]
		b = trimLeftBlank(b[i:])
		if len(b) == 0 || b[0] != '=' {
			return nil, false
		}
		b = trimLeftBlank(b[1:])
		if len(b) == 0 || b[0] != '"' {
			return nil, false
		}
		var val string
		var ok bool
		if val, b, ok = scanLabelValue(b[1:]); !ok {
			return nil, false
		}
		if string(name) == "__name__" {
			return nil, false
		}
		switch string(name) {
		case "engine":
			s.engine = val
		case "block_size":
			s.blockSize = val
		case "num_gpu_blocks":
			s.gpuBlocks = val
		}
		b = trimLeftBlank(b)
		if len(b) == 0 {
			return nil, false
		}
		switch b[0] {
		case ',':
			b = b[1:]
		case '}':
			return b[1:], true
		default:
			return nil, false
		}
	}
}

// scanLabelValue reads a quoted label value (after its opening quote),
// decoding \\, \" and \n, and returns what follows the closing quote.
func scanLabelValue(b []byte) (string, []byte, bool) {
	end := bytes.IndexByte(b, '"')
	if end < 0 {
		return "", nil, false
	}
	if bytes.IndexByte(b[:end], '\\') < 0 {
		if !utf8.Valid(b[:end]) {
			return "", nil, false
		}
		return string(b[:end]), b[end+1:], true
	}
	var out []byte
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			if !utf8.Valid(out) {
				return "", nil, false
			}
			return string(out), b[i+1:], true
		case '\\':
			if i+1 == len(b) {
				return "", nil, false
			}
			i++
			switch b[i] {
			case '"', '\\':
				out = append(out, b[i])
			case 'n':
				out = append(out, '\n')
			default:
				return "", nil, false
			}
		default:
			out = append(out, c)
		}
	}
	return "", nil, false
}

// labelsBounded reports whether every line of b has at most n labels,
// counting each '=' as one (an upper bound), and the first line that has
// more.
func labelsBounded(b []byte, n int) (int, bool) {
	line := 1
	for len(b) > 0 {
		end := bytes.IndexByte(b, '\n')
		if end < 0 {
			end = len(b)
		}
		if bytes.Count(b[:end], []byte{'='}) > n {
			return line, false
		}
		b = b[min(end+1, len(b)):]
		line++
	}
	return 0, true
}

// wantedFamily is name's index in wantedFamilies, or -1.
func wantedFamily(name []byte) int {
	for i, w := range wantedFamilies {
		if string(name) == w {
			return i
		}
	}
	return -1
}

// cutName splits off the leading metric name ([a-zA-Z_:][a-zA-Z0-9_:]*).
func cutName(b []byte) (name, rest []byte) {
	i := 0
	for i < len(b) && isMetricNameByte(b[i], i == 0) {
		i++
	}
	return b[:i], b[i:]
}

// cutToken splits off the bytes up to the first blank or tab.
func cutToken(b []byte) (tok, rest []byte) {
	i := 0
	for i < len(b) && !isBlank(b[i]) {
		i++
	}
	return b[:i], b[i:]
}

func isMetricNameByte(c byte, first bool) bool {
	return c == ':' || isLabelNameByte(c, first)
}

func isLabelNameByte(c byte, first bool) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!first && c >= '0' && c <= '9')
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' }

func trimLeftBlank(b []byte) []byte {
	for len(b) > 0 && isBlank(b[0]) {
		b = b[1:]
	}
	return b
}

func trimBlank(b []byte) []byte {
	b = trimLeftBlank(b)
	for len(b) > 0 && isBlank(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}
