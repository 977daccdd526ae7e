package jsonscan

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestMembers(t *testing.T) {
	type member struct {
		key   string
		value string
		kind  Kind
	}
	tests := []struct {
		name    string
		doc     string
		kind    Kind
		members []member
		wantErr string // substring of the error; "" means valid
		line    int
		col     int
	}{
		{name: "empty object", doc: `{}`, kind: Object},
		{name: "spaces", doc: " \t\r\n{ } \n", kind: Object},
		{
			name: "members in order with duplicates",
			doc:  `{"model":"m","stream":true,"x":[1,{"a":null}],"model":"n"}`,
			kind: Object,
			members: []member{
				{"model", `"m"`, String}, {"stream", `true`, Bool},
				{"x", `[1,{"a":null}]`, Array}, {"model", `"n"`, String},
			},
		},
		{
			name:    "escaped key decodes",
			doc:     `{"mod\u0065l": -1.5e+3}`,
			kind:    Object,
			members: []member{{"model", `-1.5e+3`, Number}},
		},
		{name: "top-level array", doc: `[1, 2, "3"]`, kind: Array},
		{name: "top-level string", doc: `"hi"`, kind: String},
		{name: "top-level number", doc: `0`, kind: Number},
		{name: "top-level null", doc: ` null `, kind: Null},
		{name: "empty input", doc: ``, wantErr: "unexpected end", line: 1, col: 1},
		{name: "only spaces", doc: "  \n ", wantErr: "unexpected end", line: 2, col: 2},
		{name: "truncated object", doc: `{"model": "m"`, wantErr: "unexpected end", line: 1, col: 14},
		{name: "trailing comma", doc: `{"a":1,}`, wantErr: "object key", line: 1, col: 8},
		{name: "bad literal on line 3", doc: "{\n\"a\":\n tru }", wantErr: "literal true", line: 3, col: 5},
		{name: "single quotes", doc: `{'a':1}`, wantErr: `'\''`, line: 1, col: 2},
		{name: "two values", doc: `{} {}`, wantErr: "after top-level value", line: 1, col: 4},
		{name: "leading zero", doc: `[01]`, wantErr: "after array element"},
		{name: "control char in string", doc: "{\"a\":\"x\ty\"}", wantErr: "in string literal"},
		{name: "bad escape", doc: `{"a":"\x"}`, wantErr: "escape"},
		{name: "bad unicode escape", doc: `{"a":"\u12g4"}`, wantErr: "hexadecimal"},
		{name: "missing colon", doc: `{"a" 1}`, wantErr: "after object key"},
		{name: "nested unclosed", doc: `{"a":[{"b":1}`, wantErr: "unexpected end"},
		{name: "mismatched closer", doc: `{"a":[1}`, wantErr: "after array element"},
		{name: "bare minus", doc: `-`, wantErr: "numeric literal"},
		{name: "dot without digits", doc: `1.`, wantErr: "decimal point"},
		{name: "exponent without digits", doc: `1e+`, wantErr: "exponent"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []member
			kind, closeBrace, err := Members([]byte(tc.doc), func(m Member) {
				got = append(got, member{strings.Trim(string(m.quotedKey), `"`), string(m.Value), m.Kind})
				if tc.doc[m.Offset:m.Offset+len(m.Value)] != string(m.Value) {
					t.Errorf("offset %d does not locate value %q", m.Offset, m.Value)
				}
			})
			if valid := json.Valid([]byte(tc.doc)); valid != (err == nil) {
				t.Errorf("json.Valid = %v but err = %v", valid, err)
			}
			if tc.wantErr != "" {
				var se *SyntaxError
				if !errors.As(err, &se) {
					t.Fatalf("err = %v, want a *SyntaxError", err)
				}
				if !strings.Contains(se.Msg, tc.wantErr) {
					t.Errorf("err = %q, want it to contain %q", se.Msg, tc.wantErr)
				}
				if tc.line != 0 && (se.Line != tc.line || se.Column != tc.col) {
					t.Errorf("position = %d:%d, want %d:%d", se.Line, se.Column, tc.line, tc.col)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if kind != tc.kind {
				t.Errorf("kind = %v, want %v", kind, tc.kind)
			}
			if kind == Object && tc.doc[closeBrace] != '}' {
				t.Errorf("closeBrace %d is %q", closeBrace, tc.doc[closeBrace])
			}
			if len(tc.members) > 0 {
				if len(got) != len(tc.members) {
					t.Fatalf("members = %v, want %v", got, tc.members)
				}
				for i := range got {
					m := tc.members[i]
					if got[i].value != m.value || got[i].kind != m.kind {
						t.Errorf("member %d = %+v, want %+v", i, got[i], m)
					}
				}
			}
		})
	}
}

// TestSyntaxErrorPath: an error names the member it is in, as a client
// names it, besides its line and column.
func TestSyntaxErrorPath(t *testing.T) {
	for _, tc := range []struct{ doc, path, msg string }{
		{`{"model":"m","messages":[{"role":"user","content":"hi},{}]`, "messages[0].content", "unexpected end of JSON input in string literal"},
		{`{"messages":[{"role":"user"},{"role":tru}]}`, "messages[1].role", "in literal true"},
		{`{"a":{"b\u0022c":[1,2,}}`, `a.b"c[2]`, "looking for beginning of value"},
		{`{"a":1,}`, "", "looking for beginning of object key string"},
		{`[1,[2,{"x":-}]]`, "[1][1].x", "in numeric literal"},
	} {
		_, _, err := Members([]byte(tc.doc), nil)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Fatalf("%s: err = %v", tc.doc, err)
		}
		if se.Path != tc.path || !strings.Contains(se.Msg, tc.msg) {
			t.Errorf("%s: path %q msg %q, want %q and %q", tc.doc, se.Path, se.Msg, tc.path, tc.msg)
		}
		if tc.path != "" && !strings.Contains(se.Error(), "in "+tc.path+":") {
			t.Errorf("%s: %q does not name the path", tc.doc, se.Error())
		}
	}
}

func TestKeyIs(t *testing.T) {
	var ms []Member
	if _, _, err := Members([]byte(`{"model":1,"Model":2,"mod\u0065l":3,"str\"eam":4}`), func(m Member) { ms = append(ms, m) }); err != nil {
		t.Fatal(err)
	}
	want := []bool{true, false, true, false}
	for i, m := range ms {
		if got := m.KeyIs("model"); got != want[i] {
			t.Errorf("member %d (%s): KeyIs(model) = %v, want %v", i, m.quotedKey, got, want[i])
		}
	}
	if !ms[3].KeyIs(`str"eam`) {
		t.Errorf("escaped quote key did not match")
	}
}

func TestDepthLimitMatchesEncodingJSON(t *testing.T) {
	for _, depth := range []int{MaxDepth - 1, MaxDepth, MaxDepth + 1} {
		for _, wrap := range []bool{false, true} {
			doc := strings.Repeat("[", depth) + strings.Repeat("]", depth)
			if wrap {
				// The top-level object counts as one level.
				doc = `{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
			}
			_, _, err := Members([]byte(doc), nil)
			if json.Valid([]byte(doc)) != (err == nil) {
				t.Errorf("depth %d wrap %v: json.Valid disagrees with err=%v", depth, wrap, err)
			}
		}
	}
}

// FuzzMembers checks the scanner against encoding/json: same verdict on
// validity, and every reported member is a valid value at its offset.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`,
		`{"a":{"b":[1,2.5e-3,-0,true,false,null,"\u00e9\n"]}}`,
		`[]`, `"x"`, `{"a":1,}`, "{\"a\":\"\xff\"}", ` 1 `, `{"a" :[ ] , "b":{ }}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		kind, closeBrace, err := Members(doc, func(m Member) {
			if !json.Valid(m.Value) {
				t.Fatalf("member value %q is not valid JSON", m.Value)
			}
			if string(doc[m.Offset:m.Offset+len(m.Value)]) != string(m.Value) {
				t.Fatalf("offset mismatch")
			}
		})
		if json.Valid(doc) != (err == nil) {
			t.Fatalf("json.Valid = %v, Members err = %v for %q", json.Valid(doc), err, doc)
		}
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(doc) || se.Line < 1 || se.Column < 1 {
				t.Fatalf("bad error %#v", err)
			}
			return
		}
		if kind == Object && (closeBrace < 0 || doc[closeBrace] != '}') {
			t.Fatalf("closeBrace %d wrong", closeBrace)
		}
	})
}
