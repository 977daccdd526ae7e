package openaiapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
)

func TestParseChatCompletionRequest(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		param string // "" and ok=true: accepted
		ok    bool
		check func(t *testing.T, r *ChatCompletionRequest)
	}{
		{name: "minimal", ok: true, body: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			check: func(t *testing.T, r *ChatCompletionRequest) {
				if *r.Messages[0].Content.Text != "hi" || r.OutputLimit() != 0 || !r.WantsGenerationPrompt() {
					t.Errorf("%+v", r)
				}
			}},
		{name: "parts and limits", ok: true,
			body: `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]}],"max_tokens":5,"max_completion_tokens":7,"stream":true,"stream_options":{"include_usage":true},"add_generation_prompt":false,"tools":[{"type":"function"}]}`,
			check: func(t *testing.T, r *ChatCompletionRequest) {
				if len(r.Messages[0].Content.Parts) != 2 || r.OutputLimit() != 7 || !r.StreamOptions.IncludeUsage || r.WantsGenerationPrompt() {
					t.Errorf("%+v", r)
				}
			}},
		{name: "null content for tool calls", ok: true, body: `{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"1"}]},{"role":"tool","content":"r","tool_call_id":"1"}]}`},
		{name: "empty body", body: ``},
		{name: "array body", body: `[]`},
		{name: "truncated", body: `{"messages":[`},
		{name: "no messages", body: `{"model":"m"}`, param: "messages"},
		{name: "empty messages", body: `{"messages":[]}`, param: "messages"},
		{name: "bad role", body: `{"messages":[{"role":"bot","content":"x"}]}`, param: "messages[0].role"},
		{name: "content number", body: `{"messages":[{"role":"user","content":5}]}`},
		{name: "part without type", body: `{"messages":[{"role":"user","content":[{"text":"x"}]}]}`, param: "messages[0].content[0].type"},
		{name: "text part without text", body: `{"messages":[{"role":"user","content":[{"type":"text"}]}]}`, param: "messages[0].content[0].text"},
		{name: "n zero", body: `{"messages":[{"role":"user","content":"x"}],"n":0}`, param: "n"},
		{name: "max_tokens zero", body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":0}`, param: "max_tokens"},
		{name: "max_completion_tokens negative", body: `{"messages":[{"role":"user","content":"x"}],"max_completion_tokens":-1}`, param: "max_completion_tokens"},
		{name: "stream options without stream", body: `{"messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true}}`, param: "stream_options"},
		{name: "stream not bool", body: `{"messages":[{"role":"user","content":"x"}],"stream":1}`, param: "stream"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseChatCompletionRequest([]byte(tc.body))
			if tc.ok {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				if tc.check != nil {
					tc.check(t, r)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if err.Status != 400 || err.Type != ErrTypeInvalidRequest || err.Param != tc.param {
				t.Errorf("error %+v, want 400 on %q", err, tc.param)
			}
		})
	}
}

func TestParseCompletionRequest(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		texts  []string
		ids    [][]uint32
		reject string // param of the expected error; "-" for none
	}{
		{name: "string", body: `{"prompt":"hi"}`, texts: []string{"hi"}},
		{name: "strings", body: `{"prompt":["a","b"]}`, texts: []string{"a", "b"}},
		{name: "ids", body: `{"prompt":[1,2,3]}`, ids: [][]uint32{{1, 2, 3}}},
		{name: "nested ids", body: `{"prompt":[[1],[2,3]]}`, ids: [][]uint32{{1}, {2, 3}}},
		{name: "missing", body: `{"max_tokens":3}`, reject: "prompt"},
		{name: "null", body: `{"prompt":null}`, reject: "prompt"},
		{name: "empty array", body: `{"prompt":[]}`, reject: "prompt"},
		{name: "mixed", body: `{"prompt":["a",1]}`, reject: "prompt"},
		{name: "negative id", body: `{"prompt":[1,-1]}`, reject: "prompt"},
		{name: "float id", body: `{"prompt":[1.5]}`, reject: "prompt"},
		{name: "huge id", body: `{"prompt":[4294967296]}`, reject: "prompt"},
		{name: "empty inner", body: `{"prompt":[[]]}`, reject: "prompt"},
		{name: "object", body: `{"prompt":{}}`, reject: "prompt"},
		{name: "n", body: `{"prompt":"x","n":0}`, reject: "n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseCompletionRequest([]byte(tc.body))
			if tc.reject != "" {
				if err == nil || err.Param != tc.reject {
					t.Fatalf("got %+v, want an error on %q", err, tc.reject)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.Prompt.Texts, tc.texts) || len(r.Prompt.TokenIDs) != len(tc.ids) {
				t.Errorf("prompt %+v", r.Prompt)
			}
			for i := range tc.ids {
				if !slices.Equal(r.Prompt.TokenIDs[i], tc.ids[i]) {
					t.Errorf("ids[%d] = %v", i, r.Prompt.TokenIDs[i])
				}
			}
			// Marshalling gives back an equivalent request.
			b, _ := json.Marshal(r)
			again, err := ParseCompletionRequest(b)
			if err != nil || !slices.Equal(again.Prompt.Texts, r.Prompt.Texts) || len(again.Prompt.TokenIDs) != len(r.Prompt.TokenIDs) {
				t.Errorf("round trip of %s: %+v %v", b, again, err)
			}
		})
	}
}

var fuzzSeeds = []string{
	``, `{}`, `null`, `[]`, `{"messages":[{"role":"user","content":"hi"}]}`,
	`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"stream":true,"stream_options":{"include_usage":true}}`,
	`{"messages":[{"role":"assistant","content":null}],"n":2,"max_tokens":3}`,
	`{"prompt":"x"}`, `{"prompt":["a","b"]}`, `{"prompt":[1,2]}`, `{"prompt":[[1],[2]]}`, `{"prompt":[-1]}`,
	`{"prompt":[1e99]}`, `{"messages":[{"role":"user","content":{"a":1}}]}`,
	// Shapes the chat fast path reads (chatfast.go).
	// The key rule: exact keys, the last of a repeated one.
	`{"model":"m","messages":[{"role":"user","content":"a"}],"Messages":[{"role":"user","content":"b"}],"model":"n"}`,
	`{"messages":[{"role":"user","content":"a","content":[{"type":"text","text":"b","text":null}]}],"stream":true,"stream_options":{"include_usage":true},"stream_options":{}}`,
	`{"prompt":"a","prompt":[1],"Prompt":"b","max_tokens":"x","max_tokens":2}`,
	`{"model":"m","messages":[{"role":"system","content":"a \"q\"\n\u00e9\ud83d\ude00 日本"},{"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{}"}}],"reasoning":"r"},{"role":"tool","content":"x","tool_call_id":"1"}],"tools":[{"type":"function","function":{"name":"f"}}],"temperature":0.5,"seed":7,"stream":true,"stream_options":{"include_usage":true},"chat_template_kwargs":{"enable_thinking":false},"extra":[1,{"b":null}]}`,
	`{"messages":[{"role":"user","content":"a"}],"reasoning_effort":"high","reasoning_effort":null,"Reasoning_effort":"low"}`,
}

func FuzzParseChatCompletionRequest(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseChatCompletionRequest(body)
		if (r == nil) == (err == nil) {
			t.Fatalf("request %v and error %v", r, err)
		}
		decodesAsPython[ChatCompletionRequest](t, body)
		fastDecodesAsGeneral(t, body)
		if err != nil {
			if err.Status != 400 || err.Message == "" {
				t.Fatalf("bad error %+v", err)
			}
			return
		}
		if len(r.Messages) == 0 || r.OutputLimit() < 0 {
			t.Fatalf("accepted invalid request %+v", r)
		}
		// What was accepted re-encodes to something accepted again.
		b, merr := json.Marshal(r)
		if merr != nil {
			t.Fatal(merr)
		}
		if _, err := ParseChatCompletionRequest(b); err != nil {
			t.Fatalf("re-encoded %s rejected: %v", b, err)
		}
	})
}

// decodesAsPython: decodeBody reads every body as vLLM does. The reference
// is what Python's json.loads makes of the body, which encoding/json can
// tell into a map (keys exact, a repeated key's last value), written out
// again and decoded with no repeated key left to resolve. Raw JSON fields
// are compared by meaning: the reference writes them out anew.
func decodesAsPython[T any](t *testing.T, body []byte) {
	t.Helper()
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return
	}
	var want, got T
	var werr error
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	var tree any
	if werr = dec.Decode(&tree); werr == nil && dec.InputOffset() != int64(len(trimmed)) {
		werr = errors.New("trailing data")
	}
	if werr == nil {
		canonical, err := json.Marshal(tree)
		if err != nil {
			t.Fatal(err)
		}
		werr = jsonv2.Unmarshal(canonical, &want, bodyOptions)
	}
	gerr := decodeBody(body, &got)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%q: reference error %v, decodeBody error %v", body, werr, gerr)
	}
	canonicalRaw(t, &want)
	canonicalRaw(t, &got)
	if werr == nil && !reflect.DeepEqual(want, got) {
		t.Fatalf("%q: reference read %+v, decodeBody %+v", body, want, got)
	}
}

// canonicalRaw rewrites every json.RawMessage in *v in one form per
// meaning: keys sorted, no spaces, no repeats.
func canonicalRaw(t *testing.T, v any) {
	t.Helper()
	var walk func(reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := range v.NumField() {
				walk(v.Field(i))
			}
		case reflect.Slice:
			if raw, ok := v.Addr().Interface().(*json.RawMessage); ok {
				if *raw != nil {
					var tree any
					dec := json.NewDecoder(bytes.NewReader(*raw))
					dec.UseNumber()
					if err := dec.Decode(&tree); err != nil {
						t.Fatalf("raw field %q: %v", *raw, err)
					}
					*raw, _ = json.Marshal(tree)
				}
				return
			}
			for i := range v.Len() {
				walk(v.Index(i))
			}
		}
	}
	walk(reflect.ValueOf(v))
}

func FuzzParseCompletionRequest(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseCompletionRequest(body)
		if (r == nil) == (err == nil) {
			t.Fatalf("request %v and error %v", r, err)
		}
		decodesAsPython[CompletionRequest](t, body)
		if err != nil {
			if err.Status != 400 || err.Message == "" {
				t.Fatalf("bad error %+v", err)
			}
			return
		}
		if r.Prompt.Len() == 0 || (r.Prompt.Texts != nil) == (r.Prompt.TokenIDs != nil) {
			t.Fatalf("accepted invalid prompt %+v", r.Prompt)
		}
		b, merr := json.Marshal(r)
		if merr != nil {
			t.Fatal(merr)
		}
		if _, err := ParseCompletionRequest(b); err != nil {
			t.Fatalf("re-encoded %s rejected: %v", b, err)
		}
	})
}

// TestMessageContentAgreesWithEncodingJSON: content read by UnmarshalJSON
// and, inside a body, by the fast path or decodeBody, is the string
// encoding/json reads.
func TestMessageContentAgreesWithEncodingJSON(t *testing.T) {
	for _, lit := range []string{
		`""`, `"plain text"`, `"日本語 ✓"`, `"esc\"aped"`, `"tab\there"`, `"\u00e9\ud83d\ude00"`,
		"\"bad \xff utf8\"", `"slash\/"`, `"line\nbreak"`,
	} {
		var got MessageContent
		if err := got.UnmarshalJSON([]byte(lit)); err != nil {
			t.Errorf("%s: %v", lit, err)
			continue
		}
		var want string
		if err := json.Unmarshal([]byte(lit), &want); err != nil {
			t.Fatalf("%s: %v", lit, err)
		}
		if got.Text == nil || *got.Text != want {
			t.Errorf("%s: got %v, want %q", lit, got.Text, want)
		}
		// The same literal inside a body, through decodeBody and through
		// the fast path (which leaves the invalid UTF-8 one to decodeBody).
		body := []byte(`{"messages":[{"role":"user","content":` + lit + `}]}`)
		decodesAsPython[ChatCompletionRequest](t, body)
		fastDecodesAsGeneral(t, body)
	}
	for _, content := range []string{`null`, `[]`, `[{"type":"text","text":"a\nb"}]`, `7`, `{}`, `true`, `[1]`} {
		decodesAsPython[ChatCompletionRequest](t, []byte(`{"messages":[{"role":"user","content":`+content+`}]}`))
	}
	for _, bad := range []string{`"`, `"unterminated`, "\"raw\ncontrol\""} {
		var c MessageContent
		if err := c.UnmarshalJSON([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// Parts are read with the key rule too, from encoding/json's callers.
	var c MessageContent
	if err := json.Unmarshal([]byte(`[{"TYPE":"x","type":"text","Text":"no","text":"yes"}]`), &c); err != nil || len(c.Parts) != 1 ||
		c.Parts[0].Type != "text" || *c.Parts[0].Text != "yes" {
		t.Errorf("parts %+v %v", c.Parts, err)
	}
}

// TestBodyErrorsSayWhere: a syntax error names its line, column and
// member; a type error its field.
func TestBodyErrorsSayWhere(t *testing.T) {
	for _, tc := range []struct{ body, param, msg string }{
		{"{\"model\":\"m\",\n\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},\n{\"role\":tru}]}", "",
			"line 3, column 12 (offset 69), in messages[1].role: invalid character '}' in literal true"},
		{`{"messages":[{"role":"user","content":"hi"}],"max_tokens":"5"}`, "max_tokens", "invalid type for max_tokens"},
	} {
		_, err := ParseChatCompletionRequest([]byte(tc.body))
		if err == nil || err.Param != tc.param || !strings.Contains(err.Message, tc.msg) {
			t.Errorf("%s: %+v, want %q on %q", tc.body, err, tc.msg, tc.param)
		}
	}
	_, err := ParseCompletionRequest([]byte(`{"prompt":[1,` + "\n" + `"x"]}`))
	if err == nil || err.Param != "prompt" {
		t.Errorf("completions: %+v", err)
	}
}

// BenchmarkParseChat8k reads an 8k-token chat body the way the router does
// on every request; real messages carry escapes (newlines, quotes), the
// "plain" variant none.
func BenchmarkParseChat8k(b *testing.B) {
	for _, v := range []struct{ name, line string }{
		{"escaped", "The harbour master wrote: \"tide at six\".\nShips waited.\n"},
		{"plain", "The harbour master wrote that the tide turns at six and ships waited. "},
	} {
		b.Run(v.name, func(b *testing.B) {
			body := []byte(`{"model":"m","messages":[`)
			for i := 0; len(body) < 36<<10; i++ {
				if i > 0 {
					body = append(body, ',')
				}
				role := "user"
				if i%2 == 1 {
					role = "assistant"
				}
				var content string
				for len(content) < 800 {
					content += v.line
				}
				q, _ := json.Marshal(content)
				body = append(body, `{"role":"`+role+`","content":`...)
				body = append(body, q...)
				body = append(body, '}')
			}
			body = append(body, "]}"...)
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := ParseChatCompletionRequest(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
