package hf

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	"github.com/switchyard-dev/switchyard/internal/tokenizer"
	"github.com/switchyard-dev/switchyard/internal/tokenizer/chattemplate"
)

// TestRequestGoldens: an OpenAI chat request renders to the prompt vLLM
// renders for it — tool definitions dumped the way vLLM's pydantic models
// dump them, tool-call arguments decoded from their JSON strings (bad ones
// become {}), reasoning, content parts, chat_template_kwargs. The goldens
// come from testdata/gen/gen_requests.py (vLLM's request handling + jinja2).
func TestRequestGoldens(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "golden", "requests.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []struct {
			Template, Name string
			Body           json.RawMessage
			Output         string
		}
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range file.Cases {
		t.Run(c.Template+"/"+c.Name, func(t *testing.T) {
			tok := fixture(t, c.Template)
			req, apiErr := openaiapi.ParseChatCompletionRequest(c.Body)
			if apiErr != nil {
				t.Fatal(apiErr)
			}
			got, err := tokenizer.ChatText(tok, req)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.Output {
				t.Fatalf("rendered\n%s\nwant\n%s", got, c.Output)
			}
			ids, err := tokenizer.ChatPrompt(tok, req)
			if err != nil || !slices.Equal(ids, tok.Encode(c.Output)) {
				t.Fatalf("ChatPrompt ids differ from the golden text's (%v)", err)
			}
		})
	}
}

// TestRequestErrors: requests vLLM would refuse, or whose prompt the
// router cannot reproduce, fail with the offending field.
func TestRequestErrors(t *testing.T) {
	tok := fixture(t, "qwen3")
	for _, tc := range []struct{ body, param string }{
		{`{"messages":[{"role":"user","content":"x"}],"tools":{"a":1}}`, "tools"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]}`, "tools[0].function"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"description":"d"}}]}`, "tools[0].function.name"},
		{`{"messages":[{"role":"assistant","content":"","tool_calls":[1]}]}`, "messages[0].tool_calls[0]"},
		{`{"messages":[{"role":"assistant","content":"","tool_calls":[{"type":"custom","function":{"name":"f"}}]}]}`, "messages[0].tool_calls[0]"},
		{`{"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":[1]}`, "chat_template_kwargs"},
		{`{"messages":[{"role":"user","content":"x"}],"chat_template":"{{ 1 }}"}`, "chat_template"},
		{`{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y"}],"continue_final_message":true}`, "continue_final_message"},
		// Qwen3's template moves a <think> block out of the content, so
		// the final message's text is not in the render to continue.
		{`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"<think>x</think>"}],"continue_final_message":true,"add_generation_prompt":false}`, "continue_final_message"},
	} {
		req, apiErr := openaiapi.ParseChatCompletionRequest([]byte(tc.body))
		if apiErr != nil {
			t.Fatalf("%s: %v", tc.body, apiErr)
		}
		_, err := tokenizer.ChatText(tok, req)
		var ie *tokenizer.InputError
		if !errors.As(err, &ie) || ie.Param != tc.param {
			t.Errorf("%s: error %v, want one for %s", tc.body, err, tc.param)
		}
	}
}

// FuzzChatRequest: any chat request body either fails with an error or
// renders to a prompt, never panics — tools and tool calls are arbitrary
// client JSON handed to the chat template.
func FuzzChatRequest(f *testing.F) {
	data, err := os.ReadFile(filepath.Join("testdata", "golden", "requests.json"))
	if err != nil {
		f.Fatal(err)
	}
	var file struct {
		Cases []struct{ Body json.RawMessage }
	}
	if err := json.Unmarshal(data, &file); err != nil {
		f.Fatal(err)
	}
	for _, c := range file.Cases {
		f.Add([]byte(c.Body))
	}
	f.Add([]byte(`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"f","arguments":"{\"a\":[1,{\"b\":null}]}"}}]}],"tools":[{"function":{"name":"f","parameters":{"x":1.5e300}}}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":"q"}],"documents":[{"title":"A","text":"alpha"}]}`))
	tok := fixture(f, "qwen3")
	f.Fuzz(func(t *testing.T, body []byte) {
		req, apiErr := openaiapi.ParseChatCompletionRequest(body)
		if apiErr != nil {
			return
		}
		text, err := tokenizer.ChatText(tok, req)
		if err != nil {
			return
		}
		for _, f := range tok.normForms {
			if !f.IsNormalString(text) {
				return // the normalizer changes it; FuzzRoundTrip covers that
			}
		}
		if got := tok.Decode(tok.Encode(text)); got != text {
			t.Fatalf("prompt does not survive encode/decode: %q", text)
		}
	})
}

// TestDocuments: a request's documents reach the chat template as vLLM
// hands them to transformers (the `documents` variable of RAG templates
// such as Command R's and Granite's), and documents vLLM's schema refuses
// are refused with their field.
func TestDocuments(t *testing.T) {
	tok := *fixture(t, "qwen3")
	chat, err := chattemplate.New(`{% if documents %}{% for d in documents %}<doc {{ loop.index }}: {{ d.title }}>{{ d.text }}</doc>{% endfor %}{% endif %}`+
		"{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}", nil)
	if err != nil {
		t.Fatal(err)
	}
	tok.chat = chat
	for _, tc := range []struct{ body, want, param string }{
		{body: `{"messages":[{"role":"user","content":"q"}],"documents":[{"title":"A","text":"alpha"},{"text":"beta","title":"B"}]}`,
			want: "<doc 1: A>alpha</doc><doc 2: B>beta</doc><|im_start|>user\nq<|im_end|>\n"},
		{body: `{"messages":[{"role":"user","content":"q"}],"documents":null}`, want: "<|im_start|>user\nq<|im_end|>\n"},
		{body: `{"messages":[{"role":"user","content":"q"}]}`, want: "<|im_start|>user\nq<|im_end|>\n"},
		{body: `{"messages":[{"role":"user","content":"q"}],"documents":{"title":"A"}}`, param: "documents"},
		{body: `{"messages":[{"role":"user","content":"q"}],"documents":["A"]}`, param: "documents[0]"},
		{body: `{"messages":[{"role":"user","content":"q"}],"documents":[{"title":"A"},{"title":"B","page":3}]}`, param: "documents[1].page"},
	} {
		req, apiErr := openaiapi.ParseChatCompletionRequest([]byte(tc.body))
		if apiErr != nil {
			t.Fatalf("%s: %v", tc.body, apiErr)
		}
		got, err := tokenizer.ChatText(&tok, req)
		if tc.param != "" {
			var ie *tokenizer.InputError
			if !errors.As(err, &ie) || ie.Param != tc.param {
				t.Errorf("%s: error %v, want one for %s", tc.body, err, tc.param)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: rendered %q (%v), want %q", tc.body, got, err, tc.want)
		}
	}
}
