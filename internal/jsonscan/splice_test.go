package jsonscan

import (
	"encoding/json"
	"testing"
)

func TestSplice(t *testing.T) {
	doc := []byte(`{"model":"a","stream":true}`)
	m, _, closeBrace := Last(doc, "model")
	got := Splice(doc,
		Edit{From: closeBrace, To: closeBrace, Text: []byte(`,"x":1`)},
		Edit{From: m.Offset, To: m.End(), Text: AppendString(nil, `b"c`)},
	)
	if want := `{"model":"b\"c","stream":true,"x":1}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if string(doc) != `{"model":"a","stream":true}` {
		t.Error("doc modified")
	}
	if got := Splice(doc); string(got) != string(doc) {
		t.Errorf("no edits: %s", got)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "q\"b\\s/", "\x00\x1f\x7f", "日本 😀", "bad \xff\xfe", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lit := AppendString(nil, s)
		var want string
		if err := json.Unmarshal(lit, &want); err != nil {
			t.Fatalf("%q -> %s: %v", s, lit, err)
		}
		got, ok := Unquote(lit)
		if !ok || got != want {
			t.Fatalf("%q -> %s: Unquote %q %v, encoding/json %q", s, lit, got, ok, want)
		}
		if enc, _ := json.Marshal(s); string(mustDecode(t, enc)) != want {
			t.Fatalf("%q: encoding/json round trip %s, ours %q", s, enc, want)
		}
	})
}

func mustDecode(t *testing.T, lit []byte) string {
	var s string
	if err := json.Unmarshal(lit, &s); err != nil {
		t.Fatal(err)
	}
	return s
}
