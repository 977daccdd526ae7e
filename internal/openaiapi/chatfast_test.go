package openaiapi

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// fastDecodesAsGeneral: whatever the fast path accepts, the general
// decoder accepts and reads the same way (raw JSON fields by their meaning:
// the general decoder sees them with repeated keys resolved).
func fastDecodesAsGeneral(t *testing.T, body []byte) bool {
	t.Helper()
	var got ChatCompletionRequest
	if !decodeChatFast(body, &got) {
		return false
	}
	var want ChatCompletionRequest
	if err := decodeBody(body, &want); err != nil {
		t.Fatalf("fast path accepted %q, the general decoder: %v", body, err)
	}
	canonicalRaw(t, &got)
	canonicalRaw(t, &want)
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("%q: general decoder read %+v, fast path %+v", body, want, got)
	}
	return true
}

// TestChatFastPathTaken: the bodies clients send take the fast path (a
// fast path that always gave up would pass every other test), and so do
// the bodies whose reading turns on the key rule.
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
		// The key rule: exact keys, the last of a repeated one.
		`{"Model":"m","messages":[{"role":"user","content":"hi"}],"Messages":[{"role":"user","content":"long"}]}`,
		`{"model":"m","messages":[{"ROLE":"user","role":"user","Content":"x","content":"hi"}],"maxtokens":3,"Max_Tokens":4}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"model":"n","model":null}`,
		`{"messages":[{"role":"user","content":"hi","content":[{"type":"text","text":"a","text":"b"}]}]}`,
		`{"messages":[{"role":"user","content":"x"}],"messages":[{"role":"user","content":"y"}],"stream_options":{"include_usage":true},"stream_options":{"continuous_usage_stats":true}}`,
		"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"x\":\"bad \xff utf8 in a skipped field\"}",
	} {
		if !fastDecodesAsGeneral(t, []byte(body)) {
			t.Errorf("fast path gave up on %s", body)
		}
		decodesAsPython[ChatCompletionRequest](t, []byte(body))
	}
}

// TestChatFastPathGivesUp: bodies whose reading needs the general decoder's
// finer rules (or its error messages) go to it, and ParseChatCompletionRequest
// still reads them as vLLM does.
func TestChatFastPathGivesUp(t *testing.T) {
	for _, body := range []string{
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
		// The earlier value of a repeated key is never read: vLLM accepts
		// this body, and so does the general decoder.
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":"x","max_tokens":5}`,
	} {
		if fastDecodesAsGeneral(t, []byte(body)) {
			t.Errorf("fast path read %s", body)
		}
		decodesAsPython[ChatCompletionRequest](t, []byte(body))
	}
	r, apiErr := ParseChatCompletionRequest([]byte(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":"x","max_tokens":5}`))
	if apiErr != nil || *r.MaxTokens != 5 {
		t.Errorf("repeated key: %+v %v", r, apiErr)
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
