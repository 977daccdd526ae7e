package jsonscan

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestKeyRuleIsVLLMs pins the key rule to what vLLM does with a body.
//
// vLLM's /v1/chat/completions takes `request: ChatCompletionRequest` as its
// body (vllm/entrypoints/openai/chat_completion/api_router.py). FastAPI
// reads such a body with `json_body = await request.json()`
// (fastapi/routing.py), which is Starlette's `json.loads(body)`, and
// validates the resulting dict with Pydantic. json.loads keeps the last
// value of a repeated key, at the key's first position; Pydantic matches
// field names exactly, so "Messages" is an extra field, which vLLM's
// OpenAIBaseModel (model_config = ConfigDict(extra="allow"), in
// vllm/entrypoints/openai/engine/protocol.py) keeps unread and logs as
// "present in the request but ignored".
func TestKeyRuleIsVLLMs(t *testing.T) {
	body := []byte(`{"model":"a","messages":[{"role":"user","content":"short"}],` +
		`"Messages":[{"role":"user","content":"long"}],"model":"b",` +
		`"stream_options":{"include_usage":true},"stream_options":{"continuous_usage_stats":true}}`)

	// Members and Last: the last "model", and "Messages" is not "messages".
	m, found, _ := Last(body, "model")
	if !found || string(m.Value) != `"b"` {
		t.Errorf("model: %s", m.Value)
	}
	m, _, _ = Last(body, "messages")
	if !bytes.Contains(m.Value, []byte("short")) {
		t.Errorf("messages: %s", m.Value)
	}

	// LastWins: what json.loads builds — "model" once, at its first
	// position, with its last value; the second stream_options replaces the
	// first whole (no merging of the two objects).
	got, err := LastWins(body)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"b","messages":[{"role":"user","content":"short"}],` +
		`"Messages":[{"role":"user","content":"long"}],"stream_options":{"continuous_usage_stats":true}}`
	if string(got) != want {
		t.Errorf("LastWins:\n got %s\nwant %s", got, want)
	}

	// The Decoder reports every member, case kept, for its caller to apply
	// the rule to.
	d := NewDecoder(body)
	var keys []string
	if !d.Object(func(k []byte) bool { keys = append(keys, string(k)); return d.Skip() }) {
		t.Fatal(d.Err())
	}
	if strings.Join(keys, " ") != "model messages Messages model stream_options stream_options" {
		t.Errorf("keys %v", keys)
	}
}

func TestLastWins(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{}`, `{}`},
		{` {"a":1, "b" : [1,2] } `, ` {"a":1, "b" : [1,2] } `},
		{`{"a":1,"a":2}`, `{"a":2}`},
		{`{"a":1,"b":2,"a":3}`, `{"a":3,"b":2}`},
		{`{"a":1,"a":2,"a":{"x":1,"x":[{"y":1,"y":null}]}}`, `{"a":{"x":[{"y":null}]}}`},
		{`[{"k":1,"k":2},{"k":3}]`, `[{"k":2},{"k":3}]`},
		{`{"a\u0062":1,"ab":2}`, `{"a\u0062":2}`},
		{`{"A":1,"a":2}`, `{"A":1,"a":2}`},
		{`{"o":{"p":1,"p":2},"o":{"q":3}}`, `{"o":{"q":3}}`},
		{`{"o":{"q":3},"o":{"p":1,"p":2}}`, `{"o":{"p":2}}`},
		{`"x"`, `"x"`},
	} {
		got, err := LastWins([]byte(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("LastWins(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	// No repeat, no copy.
	in := []byte(`{"a":[{"b":1}],"c":"d"}`)
	if got, _ := LastWins(in); &got[0] != &in[0] {
		t.Error("copied a body without repeated keys")
	}
	// Many members switch to a map; the answer is the same.
	var b strings.Builder
	b.WriteString("{")
	for i := range 100 {
		b.WriteString(`"k` + strconv.Itoa(i%40) + `":` + strconv.Itoa(i) + ",")
	}
	b.WriteString(`"end":0}`)
	assertPythonView(t, []byte(b.String()))
	if _, err := LastWins([]byte(`{"a":1,}`)); err == nil {
		t.Error("invalid JSON accepted")
	}
}

// pythonView is what json.loads makes of doc, as far as a Go decoder into
// any can tell: encoding/json decodes an object into a map, so a repeated
// key keeps its last value and keys are exact.
func pythonView(doc []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// assertPythonView: LastWins keeps the document's meaning (json.loads's)
// and leaves no key repeated.
func assertPythonView(t *testing.T, doc []byte) {
	t.Helper()
	out, err := LastWins(doc)
	if json.Valid(doc) != (err == nil) {
		t.Fatalf("json.Valid = %v, LastWins err = %v for %q", json.Valid(doc), err, doc)
	}
	if err != nil {
		return
	}
	want, err := pythonView(doc)
	if err != nil {
		t.Fatalf("%q: %v", doc, err)
	}
	got, err := pythonView(out)
	if err != nil {
		t.Fatalf("LastWins(%q) = %q: %v", doc, out, err)
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("LastWins(%q) = %q: reads %v, want %v", doc, out, got, want)
	}
	if again, _ := LastWins(out); !bytes.Equal(again, out) {
		t.Fatalf("LastWins(%q) = %q still has repeated keys: %q", doc, out, again)
	}
}

func FuzzLastWins(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"a":2}`, `{"a":{"x":1,"x":2},"b":[{"c":1,"c":{"d":1,"d":2}}],"a":3}`,
		`{"model":"a","Model":"b","model":"c"}`, `[{"k":1,"k":2}]`, `{"a\u0062":1,"ab":2}`,
		`{"a":1,}`, `{"a":"\ud800"}`, ` 1 `, "{\"a\":\"\xff\",\"a\":1}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(assertPythonView)
}
