package pii

import (
	"math/bits"
	"net/netip"
	"strings"
	"sync"
	"unsafe"

	"github.com/switchyard-dev/switchyard/internal/bytescan"
)

// Kind is one kind of personal data, a bit of Kinds.
type Kind uint8

// The kinds, in the order tags are reported.
const (
	Email Kind = iota
	Phone
	Card
	MyNumber
	SSN
	IBAN
	IP
	numKinds
)

var kindNames = [numKinds]string{"email", "phone", "card", "mynumber", "ssn", "iban", "ip"}

// String is the kind's name, as in its tag (pii:<name>).
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "unknown"
}

// Kinds is a set of kinds.
type Kinds uint8

// Has reports whether k is in the set.
func (s Kinds) Has(k Kind) bool { return s&(1<<k) != 0 }

// Len is the number of kinds in the set.
func (s Kinds) Len() int { return bits.OnesCount8(uint8(s)) }

const allKinds = Kinds(1<<numKinds - 1)

// Scan returns found with the kinds of personal data text holds added. It
// reads text once, left to right; every check it makes at a position
// reads a bounded number of bytes (at most about 64), and no position
// starts a check of a kind twice, so the time is linear in len(text). It
// allocates nothing (text with full-width forms is read through a pooled
// copy, see fold).
//
// Lines are independent: nothing spans a line break, so the result for
// text is the union of its lines' results.
func Scan(text string, found Kinds) Kinds {
	if found == allKinds {
		return found
	}
	if needsFold(text) {
		bp := foldPool.Get().(*[]byte)
		b := fold((*bp)[:0], text)
		found = scanLines(unsafe.String(unsafe.SliceData(b), len(b)), found)
		if cap(b) <= maxPooledFold {
			*bp = b[:0]
			foldPool.Put(bp)
		}
		return found
	}
	return scanLines(text, found)
}

func scanLines(text string, found Kinds) Kinds {
	for len(text) > 0 && found != allKinds {
		n := strings.IndexByte(text, '\n')
		if n < 0 {
			return scanLine(text, found)
		}
		found = scanLine(text[:n], found)
		text = text[n+1:]
	}
	return found
}

// maxPooledFold bounds the buffers the pool keeps.
const maxPooledFold = 1 << 20

var foldPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// needsFold says whether text has a full-width form (U+FF01–FF5E), an
// ideographic space or a Unicode hyphen or minus that fold rewrites.
func needsFold(text string) bool {
	if strings.Contains(text, "\u3000") {
		return true
	}
	for _, lead := range []byte{0xef, 0xe2} {
		for t := text; ; {
			i := strings.IndexByte(t, lead)
			if i < 0 {
				break
			}
			if _, n := foldRune(t[i:]); n > 0 {
				return true
			}
			t = t[i+1:]
		}
	}
	return false
}

// fold appends text to dst with Japanese full-width forms written in
// ASCII (０３－１２３４ is 03-1234, ＠ is @), the ideographic space a space and
// Unicode hyphens and minus '-'. Line breaks are kept where they were.
func fold(dst []byte, text string) []byte {
	for i := 0; i < len(text); {
		if c, n := foldRune(text[i:]); n > 0 {
			dst = append(dst, c)
			i += n
			continue
		}
		dst = append(dst, text[i])
		i++
	}
	return dst
}

// foldRune is the ASCII byte for the 3-byte UTF-8 sequence s starts with
// and its length, or 0, 0.
func foldRune(s string) (byte, int) {
	if len(s) < 3 {
		return 0, 0
	}
	switch {
	case s[0] == 0xef && s[1] == 0xbc && s[2] >= 0x81: // U+FF01–FF3F: ！ to ＿
		return s[2] - 0x81 + '!', 3
	case s[0] == 0xef && s[1] == 0xbd && s[2] >= 0x80 && s[2] <= 0x9e: // U+FF40–FF5E: ｀ to ～
		return s[2] - 0x80 + '`', 3
	case s[0] == 0xe3 && s[1] == 0x80 && s[2] == 0x80: // U+3000 ideographic space
		return ' ', 3
	case s[0] == 0xe2 && s[1] == 0x80 && s[2] >= 0x90 && s[2] <= 0x93: // U+2010–2013 hyphens, en dash
		return '-', 3
	case s[0] == 0xe2 && s[1] == 0x88 && s[2] == 0x92: // U+2212 minus
		return '-', 3
	}
	return 0, 0
}

// Byte classes, for the checks at a position.
const (
	cDigit = 1 << iota
	cUpper
	cLower
	cWord  // letters, digits, '_'
	cStart // may start a check: a letter, a digit, '@', ':', '+', '('
)

var class = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		b := byte(c)
		switch {
		case '0' <= b && b <= '9':
			t[c] = cDigit | cWord | cStart
		case 'A' <= b && b <= 'Z':
			t[c] = cUpper | cWord | cStart
		case 'a' <= b && b <= 'z':
			t[c] = cLower | cWord | cStart
		case b == '_':
			t[c] = cWord
		case b == '@' || b == ':' || b == '+' || b == '(':
			t[c] = cStart
		}
	}
	return t
}()

// scanLine scans one line. Every value holds a digit, an '@' or a ':'
// within its first three bytes: a number starts with a digit or with '+'
// or '(' and one, an IBAN has its check digits third, an e-mail address
// its '@', an IPv6 address a ':' (and "fe80::abcd" no decimal digit). So
// the line is searched eight bytes at a time for those (nextCandidate),
// and only the position of each and the two before it are looked at
// (checkAt): a prompt of prose is passed over at the speed of that
// search, instead of a table look-up and a branch a byte. The positions
// looked at are those where the checks of a byte-by-byte scan could
// succeed, in the same order, so the result is the same. Text dense with
// candidates (a digit every few bytes) pays a search per candidate
// instead: on BenchmarkHostile's near-misses up to about twice the time
// of a byte-by-byte scan, still linear.
func scanLine(s string, found Kinds) Kinds {
	v6End := 0 // positions before it were covered by an IPv6 candidate
	next := 0  // positions before it were looked at, or are inside a word
	for q := nextCandidate(s, 0); q < len(s) && found != allKinds; q = nextCandidate(s, next) {
		for p := max(next, q-2); p <= q; p++ {
			if class[s[p]]&cStart != 0 {
				found, v6End = checkAt(s, p, found, v6End)
			}
		}
		next = q + 1
		if class[s[q]]&cWord != 0 {
			// No value starts inside a word: the rest of it is passed
			// over, its candidates too.
			for next < len(s) && class[s[next]]&cWord != 0 {
				next++
			}
		}
	}
	return found
}

// checkAt runs the checks of the kinds that may start at s[p]: an e-mail
// address at an '@', an IPv6 address at a ':' not covered by the last
// one, a number at '+' or '(' or a word's first digit, an IBAN at a
// word's first letter. A word right after '+' or '(' is that number's:
// nothing else starts there.
func checkAt(s string, p int, found Kinds, v6End int) (Kinds, int) {
	c := s[p]
	switch {
	case c == '@':
		if !found.Has(Email) && isEmail(s, p) {
			found |= 1 << Email
		}
		return found, v6End
	case c == ':':
		if p >= v6End && !found.Has(IP) {
			var ok bool
			if ok, v6End = ipv6At(s, p); ok {
				found |= 1 << IP
			}
		}
		return found, v6End
	case c == '+' || c == '(':
		if startOK(s, p) {
			found = numbers(s, p, found)
		}
		return found, v6End
	}
	cl := class[c]
	if cl&(cDigit|cUpper|cLower) == 0 || p > 0 && (class[s[p-1]]&cWord != 0 || s[p-1] == '+' || s[p-1] == '(') || !startOK(s, p) {
		return found, v6End
	}
	if cl&cDigit == 0 {
		if !found.Has(IBAN) && p+3 < len(s) && class[s[p+2]]&cDigit != 0 && isIBAN(s, p) {
			found |= 1 << IBAN
		}
		return found, v6End
	}
	found = numbers(s, p, found)
	if !found.Has(IP) && isIPv4(s, p) {
		found |= 1 << IP
	}
	return found, v6End
}

// SWAR constants: a byte's lowest and highest bit, in each of eight.
const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// nextCandidate is the index of the first digit, ':' or '@' at or after
// s[i], or len(s). It reads eight bytes a step and tests them together
// (the bit tricks of "Bit Twiddling Hacks": hasbetween and haszero,
// exact per byte, with no carry between bytes).
func nextCandidate(s string, i int) int {
	if i < len(s) && isCandidate(s[i]) {
		return i // dense text (numbers, addresses): no word to load
	}
	for ; i+8 <= len(s); i += 8 {
		if m := candidates(bytescan.Load64(s, i)); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(s); i++ {
		if isCandidate(s[i]) {
			return i
		}
	}
	return len(s)
}

func isCandidate(c byte) bool { return '0' <= c && c <= ':' || c == '@' }

// candidates has the high bit set of each byte of x (eight bytes of
// text, the first lowest) that is '0' to '9', ':' (0x30 to 0x3a) or '@'
// (0x40).
func candidates(x uint64) uint64 {
	low := x &^ msb
	inRange := (lsb*(127+0x3b) - low) & (low + lsb*(127-0x2f)) // 0x2f < b&0x7f < 0x3b
	at := x ^ lsb*'@'
	isAt := ^((at&^msb + lsb*0x7f) | at) // zero bytes of at
	return (inRange | isAt) &^ x & msb   // no byte of 0x80 or more
}

// ipv6At checks the IPv6 candidate around the ':' at s[i]: the span of hex
// digits, colons and dots it is in, when that starts where a value may.
func ipv6At(s string, i int) (bool, int) {
	start := i
	for start > 0 && i-start <= maxIPv6 && (isHex(s[start-1]) || s[start-1] == ':' || s[start-1] == '.') {
		start--
	}
	if i-start > maxIPv6 || !startOK(s, start) {
		end := i + 1
		for end < len(s) && (isHex(s[end]) || s[end] == ':' || s[end] == '.') {
			end++
		}
		return false, end
	}
	return isIPv6(s, start)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }
func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isHex(c byte) bool   { return isDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// isWord: ASCII letters, digits and '_'. Other scripts' letters are not:
// in Japanese a number follows a word with no space between them.
func isWord(c byte) bool { return isDigit(c) || isUpper(c) || isLower(c) || c == '_' }

// startOK says whether a value may start at s[i]: not inside a word, an
// identifier (INV-4111..., v1.2.3, path/123), a time (12:30) or another
// number's groups (the 1111 of 4111 1111).
func startOK(s string, i int) bool {
	if i == 0 {
		return true
	}
	p := s[i-1]
	if isWord(p) {
		return false
	}
	if i >= 2 {
		pp := s[i-2]
		switch p {
		case '-', '.', '/', '+', '\'':
			if isWord(pp) {
				return false
			}
		case ' ', ')':
			if isDigit(pp) {
				return false
			}
		case ':':
			if isDigit(pp) {
				return false
			}
		}
	}
	return true
}

// endOK says whether a value may end before s[j]: not followed by more of
// a word or an identifier.
func endOK(s string, j int) bool {
	if j >= len(s) {
		return true
	}
	c := s[j]
	if isWord(c) || c == '@' {
		return false
	}
	switch c {
	case '-', '.', '/', ':', ',':
		if j+1 < len(s) && isDigit(s[j+1]) {
			return false
		}
		if c != ',' && j+1 < len(s) && isWord(s[j+1]) {
			return false
		}
	}
	return true
}

// run is a number written in groups: digits with single separators
// between them (space, '-', '.', '/', or a closing parenthesis with an
// optional space), optionally opened by '+' or '('.
type run struct {
	plus, paren bool
	n           int      // groups
	digits      int      // total digits
	d           [24]byte // the digits' values
	glen        [8]uint8 // group lengths
	sep         [8]byte  // separator after each group (0: none; ')' for a parenthesis)
	end         [8]int   // position after each group
}

const maxRunDigits = 24

// parseRun reads the run starting at s[i] (at most 24 digits in 8 groups).
// A group may be wrapped in parentheses ("(03) 1234-5678", "+1 (212)
// 555-0123", "+49 (0)30 1234567"): its separator is then ')'.
func parseRun(s string, i int, r *run) {
	*r = run{}
	open := false
	switch s[i] {
	case '+':
		r.plus = true
		i++
	case '(':
		r.paren, open = true, true
		i++
	}
	for r.n < len(r.glen) {
		j := i
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		l := j - i
		if l == 0 || r.digits+l > maxRunDigits {
			if l > 0 && r.n > 0 {
				// More digits than any kind has: no group ends here.
				r.sep[r.n-1] = 'x'
			} else if l > 0 {
				r.n = 0
			}
			return
		}
		for k := i; k < j; k++ {
			r.d[r.digits] = s[k] - '0'
			r.digits++
		}
		r.glen[r.n] = uint8(l)
		r.end[r.n] = j
		r.n++
		if open {
			// The group closes, and the number goes on.
			k := j + 1
			if j >= len(s) || s[j] != ')' {
				r.sep[r.n-1] = 'x'
				return
			}
			if k < len(s) && (s[k] == ' ' || s[k] == '-') {
				k++
			}
			if k >= len(s) || !isDigit(s[k]) {
				r.sep[r.n-1] = 'x'
				return
			}
			r.sep[r.n-1] = ')'
			i, open = k, false
			continue
		}
		// A separator, followed by a digit.
		switch {
		case j+1 < len(s) && (s[j] == ' ' || s[j] == '-' || s[j] == '.' || s[j] == '/') && isDigit(s[j+1]):
			r.sep[r.n-1] = s[j]
			i = j + 1
		case r.plus && j+2 < len(s) && s[j] == ' ' && s[j+1] == '(' && isDigit(s[j+2]):
			r.sep[r.n-1] = ' '
			r.paren, open = true, true
			i = j + 2
		case r.plus && j+1 < len(s) && s[j] == '(' && isDigit(s[j+1]):
			r.sep[r.n-1] = ' '
			r.paren, open = true, true
			i = j + 1
		default:
			return
		}
	}
	// Eight groups and more to come: the last group ends nothing.
	if r.n == len(r.glen) {
		r.sep[r.n-1] = 'x'
	}
}

// ends says whether the first k groups may be a value of their own: the
// run ends there, or goes on with a separator other than sep.
func (r *run) ends(s string, k int, sep byte) bool {
	if k < r.n {
		return r.sep[k-1] != sep && r.sep[k-1] != 'x' && r.sep[k-1] != ')' && r.sep[k-1] != '.'
	}
	if r.sep[k-1] == 'x' {
		return false
	}
	return endOK(s, r.end[k-1])
}

// sameSep says whether groups 0..k-1 are joined by one separator, which
// it returns (0 for one group); a parenthesis counts as any separator.
func (r *run) sameSep(k int) (byte, bool) {
	sep := byte(0)
	for g := 0; g < k-1; g++ {
		switch c := r.sep[g]; {
		case c == ')':
			if sep == 0 {
				sep = ')'
			}
		case sep == 0 || sep == ')':
			sep = c
		case c != sep:
			return 0, false
		}
	}
	return sep, true
}

// minNumberDigits is the fewest digits of any number kind: an
// international phone number's eight (SSNs have nine, national phone
// numbers ten, cards thirteen). Most runs of digits in text (years,
// dates, versions, amounts) have fewer, and need no check of a kind.
const minNumberDigits = 8

// numbers runs the checks of the number kinds at s[i].
func numbers(s string, i int, found Kinds) Kinds {
	var r run
	parseRun(s, i, &r)
	if r.digits < minNumberDigits {
		return found
	}
	digits := 0
	for k := 1; k <= r.n; k++ {
		digits += int(r.glen[k-1])
		sep, same := r.sameSep(k)
		if !same {
			if !r.plus && !r.paren {
				break
			}
			sep = 'm' // mixed: only a phone number, written by hand
		}
		if !r.ends(s, k, sep) {
			continue
		}
		if !found.Has(Phone) && r.phone(k, digits, sep) {
			found |= 1 << Phone
		}
		if r.plus || r.paren {
			continue
		}
		if !found.Has(Card) && r.card(k, digits, sep) {
			found |= 1 << Card
		}
		if !found.Has(MyNumber) && r.myNumber(k, digits, sep) {
			found |= 1 << MyNumber
		}
		if !found.Has(SSN) && r.ssn(k, sep) {
			found |= 1 << SSN
		}
	}
	return found
}

// card: 13 to 19 digits starting 2–6 (the major networks), in one group or
// groups of three or more joined by spaces or dashes, passing Luhn's check.
func (r *run) card(k, digits int, sep byte) bool {
	if digits < 13 || digits > 19 || r.d[0] < 2 || r.d[0] > 6 {
		return false
	}
	if k > 1 {
		if sep != ' ' && sep != '-' {
			return false
		}
		for g := 0; g < k; g++ {
			if r.glen[g] < 3 {
				return false
			}
		}
	}
	return luhn(r.d[:digits])
}

func luhn(d []byte) bool {
	sum := 0
	for i := len(d) - 1; i >= 0; i-- {
		v := int(d[i])
		if (len(d)-1-i)%2 == 1 {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
	}
	return sum%10 == 0
}

// myNumber: Japan's individual number, 12 digits in one group or 4-4-4,
// whose last digit is the check digit of the first eleven.
func (r *run) myNumber(k, digits int, sep byte) bool {
	if digits != 12 {
		return false
	}
	switch {
	case k == 1:
	case k == 3 && (sep == ' ' || sep == '-') && r.glen[0] == 4 && r.glen[1] == 4:
	default:
		return false
	}
	return myNumberCheck(r.d[:12])
}

// myNumberCheck is the official check digit: weights 6,5,4,3,2,7,6,5,4,3,2
// over the first eleven digits from the left; r = sum mod 11; the check
// digit is 0 when r <= 1, else 11 - r.
func myNumberCheck(d []byte) bool {
	weights := [11]int{6, 5, 4, 3, 2, 7, 6, 5, 4, 3, 2}
	sum := 0
	for i, w := range weights {
		sum += int(d[i]) * w
	}
	want := 0
	if rem := sum % 11; rem > 1 {
		want = 11 - rem
	}
	return int(d[11]) == want
}

// ssn: a US social security number, AAA-GG-SSSS (dashes or spaces), area
// not 000, 666 or 9xx, group not 00, serial not 0000.
func (r *run) ssn(k int, sep byte) bool {
	if k != 3 || (sep != '-' && sep != ' ') || r.glen[0] != 3 || r.glen[1] != 2 || r.glen[2] != 4 {
		return false
	}
	d := r.d[:9]
	area := int(d[0])*100 + int(d[1])*10 + int(d[2])
	if area == 0 || area == 666 || area >= 900 {
		return false
	}
	if d[3] == 0 && d[4] == 0 {
		return false
	}
	return d[5]|d[6]|d[7]|d[8] != 0
}

// phone: an international number (+, a country code not starting with 0,
// 8 to 15 digits in all: E.164), or a national one in the formats of Japan
// (0 and 10 digits in three groups ending in four, mobiles 0[5789]0 and
// 11 digits, 0120/0800 free dial), France (0 and five pairs), Germany (0,
// area code, number: 10 to 12 digits in two groups), the UK (020 7946 0958)
// or the US (NXX-NXX-XXXX).
func (r *run) phone(k, digits int, sep byte) bool {
	d := r.d[:digits]
	if r.plus {
		if digits < 8 || digits > 15 || d[0] == 0 {
			return false
		}
		if k == 1 {
			return digits >= 10 // +819012345678; a short bare "+1234567" is not enough
		}
		return sep != '/'
	}
	if r.paren {
		// (03) 1234-5678, (212) 555-0123
		if k < 2 || r.sep[0] != ')' {
			return false
		}
		if d[0] == 0 {
			return digits == 10 || digits == 11
		}
		return k == 3 && r.glen[0] == 3 && r.glen[1] == 3 && r.glen[2] == 4 && d[0] >= 2 && d[3] >= 2
	}
	if d[0] != 0 {
		// US: NXX-NXX-XXXX.
		return k == 3 && (sep == '-' || sep == '.') && r.glen[0] == 3 && r.glen[1] == 3 && r.glen[2] == 4 &&
			d[0] >= 2 && d[3] >= 2
	}
	mobile := digits == 11 && (d[1] == 5 || d[1] == 7 || d[1] == 8 || d[1] == 9) && d[2] == 0
	switch {
	case k == 1:
		return mobile
	case k == 3 && (sep == '-' || sep == ' '):
		g0, g1, g2 := r.glen[0], r.glen[1], r.glen[2]
		switch {
		case digits == 10 && g2 == 4 && g0 >= 2 && g0 <= 5:
			return true
		case digits == 10 && g0 == 4 && g1 == 3 && g2 == 3: // 0120-123-456
			return d[1] == 1 && d[2] == 2 && d[3] == 0
		case digits == 11 && g0 == 3 && g1 == 4 && g2 == 4: // 090-1234-5678, 020 7946 0958 (UK)
			return mobile || d[1] == 2
		case digits == 11 && g0 == 4 && g1 == 3 && g2 == 4 && d[1] == 1: // 0161 496 0000 (UK)
			return true
		case digits == 11 && g0 == 4 && g1 == 3 && g2 == 4: // 0800-123-4567
			return d[1] == 8 && d[2] == 0 && d[3] == 0
		}
		return false
	case k == 5 && (sep == ' ' || sep == '.' || sep == '-') && digits == 10 && d[1] != 0:
		// French 01 23 45 67 89.
		for g := 0; g < 5; g++ {
			if r.glen[g] != 2 {
				return false
			}
		}
		return true
	case k == 2 && (sep == ' ' || sep == '/' || sep == '-') && digits >= 10 && digits <= 12 && d[1] != 0:
		// German 030 12345678, 089/1234567.
		return r.glen[0] >= 3 && r.glen[0] <= 5 && r.glen[1] >= 5
	}
	return false
}

// isIPv4 reads a dotted quad at s[i]: four decimal octets of at most 255
// without leading zeros (as net/netip reads them), not followed by a fifth.
func isIPv4(s string, i int) bool {
	for part := 0; part < 4; part++ {
		j := i
		v := 0
		for j < len(s) && isDigit(s[j]) && j-i < 4 {
			v = v*10 + int(s[j]-'0')
			j++
		}
		l := j - i
		if l == 0 || l > 3 || v > 255 || (l > 1 && s[i] == '0') {
			return false
		}
		if part < 3 {
			if j+1 >= len(s) || s[j] != '.' || !isDigit(s[j+1]) {
				return false
			}
			i = j + 1
			continue
		}
		// A port may follow.
		return endOK(s, j) || s[j] == ':' && j+1 < len(s) && isDigit(s[j+1])
	}
	return false
}

// maxIPv6 is the longest IPv6 text (with an IPv4 tail).
const maxIPv6 = len("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255")

// isIPv6 reads the span of hex digits, ':' and '.' at s[i] and asks
// net/netip whether it is an IPv6 address; it returns where the span ends,
// which no other candidate starts before. A span needs two colons and
// three hex digits ("::" and "a::b" in code are not addresses), and the
// address must not be "::".
func isIPv6(s string, i int) (bool, int) {
	j, colons, hex := i, 0, 0
	for j < len(s) && (isHex(s[j]) || s[j] == ':' || s[j] == '.') {
		switch s[j] {
		case ':':
			colons++
		case '.':
		default:
			hex++
		}
		j++
	}
	end := j
	// A trailing sentence '.' or ':' is not the address's.
	for j > i && (s[j-1] == '.' || s[j-1] == ':' && (j-2 < i || s[j-2] != ':')) {
		j--
	}
	if colons < 2 || hex < 3 || j-i > maxIPv6 {
		return false, end
	}
	// A prefix length or a zone may follow an address.
	if j < len(s) && s[j] != '/' && s[j] != '%' && !endOK(s, j) {
		return false, end
	}
	a, err := netip.ParseAddr(s[i:j])
	if err != nil || !a.Is6() || a.IsUnspecified() {
		return false, end
	}
	return true, end
}

// isEmail says whether the '@' at s[at] joins a local part and a domain
// with a dot and an alphabetic top-level label of two or more letters.
// The scans stop at the line's previous and next '@', so every byte is
// read a bounded number of times.
func isEmail(s string, at int) bool {
	i := at
	for i > 0 && isLocal(s[i-1]) {
		i--
	}
	if i == at || s[i] == '.' || s[at-1] == '.' {
		return false
	}
	j, lastDot, labelLen := at+1, -1, 0
	for j < len(s) {
		c := s[j]
		switch {
		case isWord(c) && c != '_' || c == '-':
			labelLen++
		case c == '.' && labelLen > 0 && j+1 < len(s) && (isWord(s[j+1]) || s[j+1] == '-'):
			lastDot, labelLen = j, 0
		default:
			goto done
		}
		j++
	}
done:
	if lastDot < 0 || j-lastDot-1 < 2 {
		return false
	}
	for k := lastDot + 1; k < j; k++ {
		if !isUpper(s[k]) && !isLower(s[k]) {
			return false
		}
	}
	return j == len(s) || s[j] != '@'
}

func isLocal(c byte) bool {
	return isWord(c) || c == '.' || c == '%' || c == '+' || c == '-' || c == '\''
}

// ibanLen is each IBAN country's length (the SWIFT registry).
var ibanLen = map[[2]byte]uint8{
	{'A', 'D'}: 24, {'A', 'E'}: 23, {'A', 'L'}: 28, {'A', 'T'}: 20, {'A', 'Z'}: 28, {'B', 'A'}: 20, {'B', 'E'}: 16,
	{'B', 'G'}: 22, {'B', 'H'}: 22, {'B', 'R'}: 29, {'B', 'Y'}: 28, {'C', 'H'}: 21, {'C', 'R'}: 22, {'C', 'Y'}: 28,
	{'C', 'Z'}: 24, {'D', 'E'}: 22, {'D', 'K'}: 18, {'D', 'O'}: 28, {'E', 'E'}: 20, {'E', 'G'}: 29, {'E', 'S'}: 24,
	{'F', 'I'}: 18, {'F', 'O'}: 18, {'F', 'R'}: 27, {'G', 'B'}: 22, {'G', 'E'}: 22, {'G', 'I'}: 23, {'G', 'L'}: 18,
	{'G', 'R'}: 27, {'G', 'T'}: 28, {'H', 'R'}: 21, {'H', 'U'}: 28, {'I', 'E'}: 22, {'I', 'L'}: 23, {'I', 'Q'}: 23,
	{'I', 'S'}: 26, {'I', 'T'}: 27, {'J', 'O'}: 30, {'K', 'W'}: 30, {'K', 'Z'}: 20, {'L', 'B'}: 28, {'L', 'C'}: 32,
	{'L', 'I'}: 21, {'L', 'T'}: 20, {'L', 'U'}: 20, {'L', 'V'}: 21, {'M', 'C'}: 27, {'M', 'D'}: 24, {'M', 'E'}: 22,
	{'M', 'K'}: 19, {'M', 'R'}: 27, {'M', 'T'}: 31, {'M', 'U'}: 30, {'N', 'L'}: 18, {'N', 'O'}: 15, {'P', 'K'}: 24,
	{'P', 'L'}: 28, {'P', 'S'}: 29, {'P', 'T'}: 25, {'Q', 'A'}: 29, {'R', 'O'}: 24, {'R', 'S'}: 22, {'S', 'A'}: 24,
	{'S', 'C'}: 31, {'S', 'E'}: 24, {'S', 'I'}: 19, {'S', 'K'}: 24, {'S', 'M'}: 27, {'S', 'T'}: 25, {'S', 'V'}: 28,
	{'T', 'L'}: 23, {'T', 'N'}: 24, {'T', 'R'}: 26, {'U', 'A'}: 29, {'V', 'A'}: 22, {'V', 'G'}: 24, {'X', 'K'}: 20,
}

// isIBAN reads an IBAN at s[i]: a country's two letters, two check digits
// and the country's length of digits and capitals, whole or in groups of
// four separated by single spaces, whose mod-97 check (ISO 13616) is 1.
func isIBAN(s string, i int) bool {
	if i+4 > len(s) || !isDigit(s[i+2]) || !isDigit(s[i+3]) {
		return false
	}
	// All capitals, or all small letters (gb82west…).
	lower := isLower(s[i])
	letter := isUpper
	if lower {
		letter = isLower
	}
	if !letter(s[i+1]) {
		return false
	}
	want, ok := ibanLen[[2]byte{s[i] &^ 0x20, s[i+1] &^ 0x20}]
	if !ok {
		return false
	}
	var buf [34]byte
	n, j := 0, i
	spaced := false
	for j < len(s) && n < int(want) {
		c := s[j]
		if c == ' ' && n%4 == 0 && n > 0 && j+1 < len(s) && (isDigit(s[j+1]) || letter(s[j+1])) && (spaced || n == 4) {
			spaced = true
			j++
			continue
		}
		if !isDigit(c) && !letter(c) {
			break
		}
		if spaced && n%4 == 0 && n > 0 && s[j-1] != ' ' {
			return false // grouped, then not
		}
		buf[n] = c &^ 0x20 // digits keep their value: only the letters' bit 5 is cleared
		if isDigit(c) {
			buf[n] = c
		}
		n++
		j++
	}
	if n != int(want) || !endOK(s, j) {
		return false
	}
	// Rearranged: the BBAN, then the country and check digits; letters
	// count as 10 to 35.
	rem := 0
	for k := 0; k < n; k++ {
		c := buf[(k+4)%n]
		if isDigit(c) {
			rem = (rem*10 + int(c-'0')) % 97
		} else {
			rem = (rem*100 + int(c-'A') + 10) % 97
		}
	}
	return rem == 1
}
