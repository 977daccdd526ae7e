package jsonscan

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestStrings: strings decode as encoding/json decodes them, across the
// 8-byte boundaries of the word-wise scan, in every reader.
func TestStrings(t *testing.T) {
	for _, v := range []string{
		"", "a", "abcdefg", "abcdefgh", "abcdefghi", `q"uote`, `back\slash`, "tab\tnl\n",
		"é", "日本語のテキスト", "😀😀😀😀", "\u007f\u0080", strings.Repeat("x", 17) + "\"" + strings.Repeat("y", 9),
		"\u2028\u2029", "<>&",
	} {
		lit, _ := json.Marshal(v)
		for pad := range 9 {
			body := []byte(strings.Repeat(" ", pad) + string(lit))
			d := NewDecoder(body)
			got, ok := d.Str()
			if !ok || got != v || d.Offset() != len(body) {
				t.Errorf("%q (pad %d): got %q %v at %d", lit, pad, got, ok, d.Offset())
			}
		}
		if got, ok := Unquote(lit); !ok || got != v {
			t.Errorf("Unquote(%s) = %q %v", lit, got, ok)
		}
		if got := AppendString(nil, v); mustUnquote(t, got) != v {
			t.Errorf("AppendString(%q) = %s", v, got)
		}
	}
	for _, lit := range []string{`"\ud83d\ude00"`, `"\ud83d"`, `"\ude00"`, `"\ud83dx"`, `"\ud83d\u0041"`, `"\uD83D\uDE00"`, `"\u0000"`} {
		var want string
		if err := json.Unmarshal([]byte(lit), &want); err != nil {
			t.Fatal(err)
		}
		d := NewDecoder([]byte(lit))
		if got, ok := d.Str(); !ok || got != want {
			t.Errorf("%s: got %q %v, want %q", lit, got, ok, want)
		}
	}
	for _, bad := range []string{`"`, `"abc`, `"\x"`, `"\u12"`, `"\u12g4"`, "\"a\x01\"", `"\`} {
		d := NewDecoder([]byte(bad))
		if _, ok := d.Str(); ok {
			t.Errorf("%q accepted", bad)
		}
		var se *SyntaxError
		if !errors.As(d.Err(), &se) {
			t.Errorf("%q: no syntax error (%v)", bad, d.Err())
		}
	}
	// Invalid UTF-8 is no syntax error, but the decoding readers leave it
	// to their caller's general decoder.
	d := NewDecoder([]byte("\"bad \xff\""))
	if _, ok := d.Str(); ok || d.Err() != nil {
		t.Errorf("invalid UTF-8: ok %v, err %v", ok, d.Err())
	}
}

func mustUnquote(t *testing.T, lit []byte) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(lit, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDecoderKinds: a typed reader meeting another kind gives up without
// a syntax error; one meeting broken JSON reports where.
func TestDecoderKinds(t *testing.T) {
	for _, tc := range []struct {
		doc    string
		read   func(d *Decoder) bool
		syntax bool
	}{
		{`"x"`, func(d *Decoder) bool { _, ok := d.Int(); return ok }, false},
		{`1.5`, func(d *Decoder) bool { _, ok := d.Int(); return ok }, false},
		{`99999999999999999999`, func(d *Decoder) bool { _, ok := d.Int(); return ok }, false},
		{`[]`, func(d *Decoder) bool { _, ok := d.Bool(); return ok }, false},
		{`nul`, func(d *Decoder) bool { return d.Null() }, true},
		{`tru`, func(d *Decoder) bool { _, ok := d.Bool(); return ok }, true},
		{`1.`, func(d *Decoder) bool { _, ok := d.Float(); return ok }, true},
		{`{"a" 1}`, func(d *Decoder) bool { return d.Object(func([]byte) bool { return d.Skip() }) }, true},
		{`[1 2]`, func(d *Decoder) bool { return d.Array(d.Skip) }, true},
		{`{"a":[}`, func(d *Decoder) bool { return d.Skip() }, true},
	} {
		d := NewDecoder([]byte(tc.doc))
		if tc.read(&d) {
			t.Errorf("%s: read", tc.doc)
		}
		if (d.Err() != nil) != tc.syntax {
			t.Errorf("%s: err %v, want a syntax error %v", tc.doc, d.Err(), tc.syntax)
		}
	}
	d := NewDecoder([]byte(` {"a":[1,{"b":null}],"c":"d"} `))
	var keys []string
	ok := d.Object(func(k []byte) bool {
		keys = append(keys, string(k))
		return d.Skip()
	}) && d.End()
	if !ok || strings.Join(keys, ",") != "a,c" {
		t.Errorf("object: %v %v", ok, keys)
	}
}

func TestSkipDepth(t *testing.T) {
	for _, depth := range []int{MaxDepth - 1, MaxDepth, MaxDepth + 1} {
		doc := `{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
		d := NewDecoder([]byte(doc))
		ok := d.Object(func([]byte) bool { return d.Skip() }) && d.End()
		if ok != json.Valid([]byte(doc)) {
			t.Errorf("depth %d: read %v, err %v", depth, ok, d.Err())
		}
	}
}
