package hf

import "unicode/utf8"

// The Digits pre-tokenizer cuts text around its numeric characters —
// Unicode's Nd, Nl and No as Rust's char::is_numeric reads them (Unicode
// 17, a version beyond the split patterns' \p{N}) — keeping a run of them
// as one piece, or with individual_digits each alone. The rest stays as
// it was, a run of other characters being one piece.
type digitsMode uint8

const (
	digitsNone digitsMode = iota
	digitsRuns            // individual_digits: false
	digitsEach            // individual_digits: true
)

func isNumberAt(s string, i int) (bool, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return c >= '0' && c <= '9' || asciiClass[c] == clsNumber, 1
	}
	p, n := propsAt(s, i)
	return p&propNumeric != 0, n
}

// nextDigitsPiece returns the end of the piece starting at s[i].
func (d digitsMode) next(s string, i int) int {
	num, n := isNumberAt(s, i)
	j := i + n
	if num && d == digitsEach {
		return j
	}
	for j < len(s) {
		c, m := isNumberAt(s, j)
		if c != num {
			break
		}
		j += m
	}
	return j
}

// encodeWord is the model's encodeWord for one pre-token, which a Digits
// step after the others (or over a vocabulary of characters) cuts first.
func (t *Tokenizer) encodeWord(dst []uint32, word string, front *wordFront, steps *int) []uint32 {
	if t.digits == digitsNone {
		return t.model.encodeWord(dst, word, front, steps)
	}
	*steps += len(word)
	for i := 0; i < len(word); {
		end := t.digits.next(word, i)
		dst = t.model.encodeWord(dst, word[i:end], front, steps)
		i = end
	}
	return dst
}
