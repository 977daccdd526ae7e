package tokcheck

import (
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/tokenizer"
)

func TestDiff(t *testing.T) {
	for _, c := range []struct {
		a, b []uint32
		want int
	}{
		{nil, nil, -1},
		{[]uint32{1, 2, 3}, []uint32{1, 2, 3}, -1},
		{[]uint32{1, 2, 3}, []uint32{1, 9, 3}, 1},
		{[]uint32{1, 2}, []uint32{1, 2, 3}, 2},
		{[]uint32{5}, []uint32{1}, 0},
	} {
		if got := Diff(c.a, c.b); got != c.want {
			t.Errorf("Diff(%v, %v) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestDecodeResponse(t *testing.T) {
	r, err := DecodeResponse([]byte(`{"count":2,"max_model_len":8192,"tokens":[1,4294967295],"token_strs":null}`))
	if err != nil || r.Count != 2 || r.Tokens[1] != 4294967295 || r.TokenStrs != nil || r.MaxModelLen != 8192 {
		t.Fatalf("%+v %v", r, err)
	}
	for _, bad := range []string{
		`{"count":3,"max_model_len":1,"tokens":[1,2]}`,
		`{"count":1,"max_model_len":1,"tokens":[-1]}`,
		`{"count":1,"max_model_len":1,"tokens":[4294967296]}`,
		`{"count":1,"max_model_len":1,"tokens":[1],"token_strs":["a","b"]}`,
		`{"count":0,"max_model_len":1}`,
		`[1,2]`,
		`{"tokens":[` + strings.Repeat("1,", MaxTokens) + `1]}`,
	} {
		if _, err := DecodeResponse([]byte(bad)); err == nil {
			t.Errorf("DecodeResponse(%.60s) accepted", bad)
		}
	}
}

func TestDescribe(t *testing.T) {
	tok := tokenizer.NewSimple()
	r := Result{Status: Mismatch, Form: FormChat, Position: 1, Local: []uint32{1, 2, 3}, Remote: []uint32{1, 7}, RemoteStrs: []string{"<|im_start|>", "x"}}
	d := r.Describe(tok)
	if !strings.Contains(d, "token 1") || !strings.Contains(d, `>>2`) || !strings.Contains(d, `>>7"x"`) {
		t.Fatal(d)
	}
}

// FuzzDecodeResponse: any body yields a response within the bounds or an
// error, never a panic.
func FuzzDecodeResponse(f *testing.F) {
	f.Add([]byte(`{"count":2,"max_model_len":8192,"tokens":[1,2],"token_strs":["a","b"]}`))
	f.Add([]byte(`{"count":0,"max_model_len":0,"tokens":[]}`))
	f.Add([]byte(`{"tokens":[1e3, -0, 1.5]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeResponse(data)
		if err != nil {
			return
		}
		if len(r.Tokens) > MaxTokens || r.Count != len(r.Tokens) || (r.TokenStrs != nil && len(r.TokenStrs) != len(r.Tokens)) {
			t.Fatalf("out of bounds: %+v", r)
		}
	})
}
