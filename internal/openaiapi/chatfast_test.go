package openaiapi

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// fastDecodesAsEncodingJSON: whatever the fast path accepts, encoding/json
// accepts and reads the same way.
func fastDecodesAsEncodingJSON(t *testing.T, body []byte) bool {
	t.Helper()
	var got ChatCompletionRequest
	if !decodeChatFast(body, &got) {
		return false
	}
	var want ChatCompletionRequest
	if err := json.Unmarshal(body, &want); err != nil {
		t.Fatalf("fast path accepted %q, encoding/json: %v", body, err)
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("%q: encoding/json read %+v, fast path %+v", body, want, got)
	}
	return true
}

// TestChatFastPathTaken: the bodies clients send take the fast path (a
// fast path that always gave up would pass every other test).
func TestChatFastPathTaken(t *testing.T) {
	long := strings.Repeat("The harbour master wrote: \"tide at six\".\nShips waited. 日本語 ✓ 😀 ", 40)
	q, _ := json.Marshal(long)
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		` { "model" : "m" , "messages" : [ { "role" : "system" , "content" : "s" } , { "role" : "user" , "content" : ` + string(q) + ` } ] } `,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x","detail":"low"}}]}],"max_tokens":5,"max_completion_tokens":7,"stream":true,"stream_options":{"include_usage":true},"add_generation_prompt":false,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{}}}}]}`,
		`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","content":"r","tool_call_id":"1","name":"f"}]}`,
		`{"model":"m","messages":[{"role":"assistant","content":"x","reasoning":"r","reasoning_content":null}],"temperature":0.7,"top_p":1,"seed":-3,"n":1,"user":"u","frequency_penalty":0,"logit_bias":{"1":-100},"stop":["\n"],"chat_template_kwargs":{"enable_thinking":false},"continue_final_message":false,"chat_template":null}`,
		`{"messages":[{"role":"user","content":"\u00e9\ud83d\ude00 \ud800 \udc00x \/ \b\f\r\t"}],"metadata":{"a":[true,false,null,1.5e-3,{"b":"c"}]}}`,
		`{"messages":[{"role":"user","content":[]}],"stream":null,"max_tokens":null}`,
		`{"messages":[]}`, `{"messages":null,"model":null}`, `{}`,
		`{"messages":[{"role":"user","content":"q"}],"documents":[{"title":"A","text":"alpha"}]}`,
	} {
		if !fastDecodesAsEncodingJSON(t, []byte(body)) {
			t.Errorf("fast path gave up on %s", body)
		}
	}
}

// TestChatFastPathGivesUp: bodies whose reading needs encoding/json's
// finer rules (or its error messages) go to the general decoder, and
// ParseChatCompletionRequest still reads them as encoding/json does.
func TestChatFastPathGivesUp(t *testing.T) {
	for _, body := range []string{
		`{"Model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"ROLE":"user","content":"hi"}]}`,
		`{"model":"m","maxtokens":3,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"model":"n"}`,
		`{"messages":[{"role":"user","content":"hi","content":"again"}]}`,
		"{\"messages\":[{\"role\":\"user\",\"content\":\"bad \xff utf8\"}]}",
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":1.0}`,
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":99999999999999999999}`,
		`{"messages":[{"role":"user","content":"hi"}],"tools":null}`,
		`{"messages":[{"role":"user","content":5}]}`,
		`{"messages":[null]}`,
		`{"messages":[{"role":"user","content":"hi"}]} x`,
		`{"messages":[{"role":"user","content":"hi"}],}`,
		`{"messages":[{"role":"user","content":"unterminated}]}`,
		"{\"messages\":[{\"role\":\"user\",\"content\":\"raw\ncontrol\"}]}",
		`{"messages":[{"role":"user","content":"hi"}],"x":` + strings.Repeat("[", maxDepth+2) + strings.Repeat("]", maxDepth+2) + `}`,
	} {
		if fastDecodesAsEncodingJSON(t, []byte(body)) {
			t.Errorf("fast path read %s", body)
		}
		decodesAsEncodingJSON[ChatCompletionRequest](t, []byte(body))
	}
}

// TestScannerStrings: strings decode as encoding/json decodes them,
// across the 8-byte boundaries of the word-wise scan.
func TestScannerStrings(t *testing.T) {
	for _, v := range []string{
		"", "a", "abcdefg", "abcdefgh", "abcdefghi", `q"uote`, `back\slash`, "tab\tnl\n",
		"é", "日本語のテキスト", "😀😀😀😀", "\u007f\u0080", strings.Repeat("x", 17) + "\"" + strings.Repeat("y", 9),
		"\u2028\u2029", "<>&",
	} {
		lit, _ := json.Marshal(v)
		for pad := range 9 {
			body := []byte(strings.Repeat(" ", pad) + string(lit))
			s := scanner{b: body, i: pad}
			got, ok := s.str()
			if !ok || got != v || s.i != len(body) {
				t.Errorf("%q (pad %d): got %q %v at %d", lit, pad, got, ok, s.i)
			}
		}
	}
	for _, lit := range []string{`"\ud83d\ude00"`, `"\ud83d"`, `"\ude00"`, `"\ud83dx"`, `"\ud83d\u0041"`, `"\uD83D\uDE00"`, `"\u0000"`} {
		var want string
		if err := json.Unmarshal([]byte(lit), &want); err != nil {
			t.Fatal(err)
		}
		s := scanner{b: []byte(lit)}
		if got, ok := s.str(); !ok || got != want {
			t.Errorf("%s: got %q %v, want %q", lit, got, ok, want)
		}
	}
	for _, bad := range []string{`"`, `"abc`, `"\x"`, `"\u12"`, `"\u12g4"`, "\"a\x01\"", `"\`} {
		s := scanner{b: []byte(bad)}
		if _, ok := s.str(); ok {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestChatFastKnowsEveryField: a field added to a request type must be
// read by the fast path too, which would otherwise skip it as unknown and
// drop it without a word.
func TestChatFastKnowsEveryField(t *testing.T) {
	for _, c := range []struct {
		typ   reflect.Type
		known []string
	}{
		{reflect.TypeFor[ChatCompletionRequest](), chatRequestFields},
		{reflect.TypeFor[ChatMessage](), chatMessageFields},
		{reflect.TypeFor[ContentPart](), contentPartFields},
		{reflect.TypeFor[StreamOptions](), streamOptionsFields},
	} {
		for i := range c.typ.NumField() {
			name, _, _ := strings.Cut(c.typ.Field(i).Tag.Get("json"), ",")
			if !slices.Contains(c.known, name) {
				t.Errorf("%s.%s (%q) is not read by the chat fast path (chatfast.go)", c.typ.Name(), c.typ.Field(i).Name, name)
			}
		}
		if len(c.known) != c.typ.NumField() {
			t.Errorf("%s: the fast path lists %d fields, the type has %d", c.typ.Name(), len(c.known), c.typ.NumField())
		}
	}
}
