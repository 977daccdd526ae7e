package apibody

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	tests := []struct {
		name    string
		api     API
		body    string
		want    Request
		param   string // "" with wantMsg set: error without param
		wantMsg string // substring of the error message; "" means success
	}{
		{name: "chat minimal", api: Chat, body: `{"model":"m",` + msgs + `}`, want: Request{Model: "m"}},
		{name: "chat stream with usage", api: Chat, body: `{"model":"m","stream":true,"stream_options":{"include_usage":true},` + msgs + `}`,
			want: Request{Model: "m", Stream: true, IncludeUsage: true}},
		{name: "nulls mean absent", api: Chat, body: `{"model":"m","stream":null,"stream_options":null,` + msgs + `}`, want: Request{Model: "m"}},
		{name: "include_usage null", api: Chat, body: `{"model":"m","stream":true,"stream_options":{"include_usage":null},` + msgs + `}`,
			want: Request{Model: "m", Stream: true}},
		{name: "last duplicate wins", api: Chat, body: `{"model":"a","stream":true,"model":"b","stream":false,` + msgs + `}`, want: Request{Model: "b"}},
		{name: "escaped model", api: Chat, body: `{"model":"llama\u002d3",` + msgs + `}`, want: Request{Model: "llama-3"}},
		{name: "key match is case-sensitive", api: Chat, body: `{"Model":"m",` + msgs + `}`, param: "model", wantMsg: "must provide a model"},
		{name: "completions string prompt", api: Completions, body: `{"model":"m","prompt":"once"}`, want: Request{Model: "m"}},
		{name: "completions token prompt", api: Completions, body: `{"model":"m","prompt":[[1,2],[3]],"stream":true}`, want: Request{Model: "m", Stream: true}},

		{name: "empty body", api: Chat, body: ``, wantMsg: "empty"},
		{name: "malformed names position", api: Chat, body: "{\"model\":\"m\",\n \"stream\": tru}", wantMsg: "line 2, column 15 (offset 28)"},
		{name: "truncated", api: Chat, body: `{"model":"m"`, wantMsg: "unexpected end"},
		{name: "not an object", api: Chat, body: `[1]`, wantMsg: "must be a JSON object, but got an array"},
		{name: "missing model", api: Chat, body: `{` + msgs + `}`, param: "model", wantMsg: "must provide a model"},
		{name: "null model", api: Chat, body: `{"model":null,` + msgs + `}`, param: "model", wantMsg: "must provide a model"},
		{name: "empty model", api: Chat, body: `{"model":"",` + msgs + `}`, param: "model", wantMsg: "must provide a model"},
		{name: "model wrong type", api: Chat, body: `{"model":7,` + msgs + `}`, param: "model", wantMsg: "expected a string, but got a number"},
		{name: "model too long", api: Chat, body: `{"model":"` + strings.Repeat("x", MaxModelLen+1) + `",` + msgs + `}`, param: "model", wantMsg: "too long"},
		{name: "stream wrong type", api: Chat, body: `{"model":"m","stream":"yes",` + msgs + `}`, param: "stream", wantMsg: "expected a boolean, but got a string"},
		{name: "stream_options wrong type", api: Chat, body: `{"model":"m","stream_options":[],` + msgs + `}`, param: "stream_options", wantMsg: "expected an object, but got an array"},
		{name: "include_usage wrong type", api: Chat, body: `{"model":"m","stream_options":{"include_usage":1},` + msgs + `}`,
			param: "stream_options.include_usage", wantMsg: "expected a boolean, but got a number"},
		{name: "missing messages", api: Chat, body: `{"model":"m"}`, param: "messages", wantMsg: "missing required parameter: 'messages'"},
		{name: "messages wrong type", api: Chat, body: `{"model":"m","messages":{}}`, param: "messages", wantMsg: "expected an array, but got an object"},
		{name: "messages empty", api: Chat, body: `{"model":"m","messages":[ ]}`, param: "messages", wantMsg: "at least one"},
		{name: "chat body on completions", api: Completions, body: `{"model":"m",` + msgs + `}`, param: "prompt", wantMsg: "missing required parameter: 'prompt'"},
		{name: "prompt wrong type", api: Completions, body: `{"model":"m","prompt":5}`, param: "prompt", wantMsg: "expected a string or an array, but got a number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, apiErr := Parse(tc.api, []byte(tc.body))
			if tc.wantMsg == "" {
				if apiErr != nil {
					t.Fatalf("unexpected error: %v", apiErr)
				}
				if fields(got) != fields(tc.want) {
					t.Errorf("got %+v, want %+v", got, tc.want)
				}
				return
			}
			if apiErr == nil {
				t.Fatalf("no error, got %+v", got)
			}
			if apiErr.Status != http.StatusBadRequest || apiErr.Type != "invalid_request_error" {
				t.Errorf("status/type = %d %q", apiErr.Status, apiErr.Type)
			}
			if apiErr.Param != tc.param {
				t.Errorf("param = %q, want %q", apiErr.Param, tc.param)
			}
			if !strings.Contains(apiErr.Message, tc.wantMsg) {
				t.Errorf("message = %q, want it to contain %q", apiErr.Message, tc.wantMsg)
			}
		})
	}
}

// view is what a test compares of a Request: what it says, not where.
type view struct {
	Model                string
	Stream, IncludeUsage bool
}

func fields(r Request) view { return view{r.Model, r.Stream, r.IncludeUsage} }

func TestForwardIncludeUsage(t *testing.T) {
	const m = `"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]`
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"absent", `{` + m + `}`, `{` + m + `,"stream_options":{"include_usage":true}}`},
		{"absent with trailing space", `{` + m + ` }` + "\n", `{` + m + ` ,"stream_options":{"include_usage":true}}` + "\n"},
		{"null options", `{"stream_options":null,` + m + `}`, `{"stream_options":{"include_usage":true},` + m + `}`},
		{"empty options", `{"stream_options":{ },` + m + `}`, `{"stream_options":{"include_usage":true },` + m + `}`},
		{"other options kept", `{"stream_options":{"continuous_usage_stats":false},` + m + `}`,
			`{"stream_options":{"include_usage":true,"continuous_usage_stats":false},` + m + `}`},
		{"false flipped", `{"stream_options":{"include_usage": false},` + m + `}`, `{"stream_options":{"include_usage": true},` + m + `}`},
		{"null flipped", `{"stream_options":{"include_usage":null},` + m + `}`, `{"stream_options":{"include_usage":true},` + m + `}`},
		{"already true unchanged", `{"stream_options":{"include_usage":true},` + m + `}`, `{"stream_options":{"include_usage":true},` + m + `}`},
		{"last duplicate edited", `{"stream_options":{"include_usage":true},` + m + `,"stream_options":{}}`,
			`{"stream_options":{"include_usage":true},` + m + `,"stream_options":{"include_usage":true}}`},
		{"last include_usage edited", `{"stream_options":{"include_usage":false,"include_usage":null},` + m + `}`,
			`{"stream_options":{"include_usage":false,"include_usage":true},` + m + `}`},
		{"not streamed: unchanged", `{"model":"m","messages":[]}`, `{"model":"m","messages":[]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.in)
			req, apiErr := Parse(Chat, in)
			if apiErr != nil && tc.name != "not streamed: unchanged" {
				t.Fatal(apiErr)
			}
			got := req.Forward(in, "")
			if string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			if string(in) != tc.in {
				t.Errorf("input was modified")
			}
			if !json.Valid(got) {
				t.Errorf("result is not valid JSON")
			}
		})
	}
}

// TestForwardModel: the served name replaces the value of the model member
// that counts, and nothing else; with the usage splice in the same copy.
func TestForwardModel(t *testing.T) {
	tests := []struct {
		name, in, served, want string
	}{
		{"renamed", `{"model":"standard-model","messages":[{"role":"user","content":"model"}]}`, "glm-5.3",
			`{"model":"glm-5.3","messages":[{"role":"user","content":"model"}]}`},
		{"spaces kept", "{ \"stream\": false,\n  \"model\" : \"a\" ,\"messages\":[{}]}", "x",
			"{ \"stream\": false,\n  \"model\" : \"x\" ,\"messages\":[{}]}"},
		{"nested model untouched", `{"metadata":{"model":"inner"},"model":"a","messages":[{}]}`, "b",
			`{"metadata":{"model":"inner"},"model":"b","messages":[{}]}`},
		{"last duplicate renamed", `{"model":"x","messages":[{}],"model":"a"}`, "b", `{"model":"x","messages":[{}],"model":"b"}`},
		{"escaped", `{"model":"a","messages":[{}]}`, `zai.glm-5-3-v1:0"\`, `{"model":"zai.glm-5-3-v1:0\"\\","messages":[{}]}`},
		{"same name: same bytes", `{"model":"a","messages":[{}]}`, "a", `{"model":"a","messages":[{}]}`},
		{"no name: same bytes", `{"model":"a","messages":[{}]}`, "", `{"model":"a","messages":[{}]}`},
		{"with usage", `{"stream":true,"model":"a","messages":[{}]}`, "b",
			`{"stream":true,"model":"b","messages":[{}],"stream_options":{"include_usage":true}}`},
		{"with usage before model", `{"stream":true,"stream_options":null,"model":"a","messages":[{}]}`, "bb",
			`{"stream":true,"stream_options":{"include_usage":true},"model":"bb","messages":[{}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, apiErr := Parse(Chat, []byte(tc.in))
			if apiErr != nil {
				t.Fatal(apiErr)
			}
			if got := req.Forward([]byte(tc.in), tc.served); string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestInspectChunk(t *testing.T) {
	tests := []struct {
		name string
		data string
		want Chunk
	}{
		{"done", "[DONE]", Chunk{Done: true}},
		{"token chunk", `{"id":"c","choices":[{"index":0,"delta":{"content":"hi"}}]}`, Chunk{}},
		{"usage only", `{"id":"c","choices":[],"usage":{"prompt_tokens":12,"total_tokens":20,"completion_tokens":8,"prompt_tokens_details":{"cached_tokens":4}}}`,
			Chunk{HasUsage: true, UsageOnly: true, Usage: Usage{PromptTokens: 12, CompletionTokens: 8, CachedTokens: 4}}},
		{"continuous usage on token chunk", `{"choices":[{"delta":{"content":"x"}}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`,
			Chunk{HasUsage: true, Usage: Usage{PromptTokens: 3, CompletionTokens: 1}}},
		{"null usage", `{"choices":[],"usage":null}`, Chunk{}},
		{"usage word in content only", `{"choices":[{"delta":{"content":"\"usage\""}}]}`, Chunk{}},
		{"malformed", `{"usage":{"prompt_tokens":1}`, Chunk{}},
		{"negative clamped", `{"choices":[],"usage":{"prompt_tokens":-5,"completion_tokens":2}}`, Chunk{HasUsage: true, UsageOnly: true, Usage: Usage{CompletionTokens: 2}}},
		{"reasoning tokens", `{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":9,"completion_tokens_details":{"reasoning_tokens":6}}}`,
			Chunk{HasUsage: true, UsageOnly: true, Usage: Usage{PromptTokens: 5, CompletionTokens: 9, ReasoningTokens: 6}}},
		{"reasoning tokens bounded by completion tokens", `{"choices":[],"usage":{"completion_tokens":2,"completion_tokens_details":{"reasoning_tokens":60}}}`,
			Chunk{HasUsage: true, UsageOnly: true, Usage: Usage{CompletionTokens: 2, ReasoningTokens: 2}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := InspectChunk([]byte(tc.data)); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	u, ok := BodyUsage([]byte(`{"id":"x","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":5,"completion_tokens":2}}`))
	if !ok || u != (Usage{PromptTokens: 5, CompletionTokens: 2}) {
		t.Errorf("BodyUsage = %+v, %v", u, ok)
	}
}

// FuzzParseRequest feeds arbitrary bodies to Parse for both APIs. It must
// never panic; an accepted body must be valid JSON, and forwarding it under
// another model name with include_usage set must keep it valid and parse
// back the same with those two changed.
func FuzzParseRequest(f *testing.F) {
	seeds := []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`,
		`{"model":"m","prompt":"hi","stream":true,"stream_options":{"include_usage":false}}`,
		`{"model":"m","prompt":[1,2,3],"stream_options":null,"stream":true}`,
		`{"mod\u0065l":"m","messages":[{}],"stream":true,"stream_options":{}}`,
		`{"model":"m","messages":[],"stream":"x"}`,
		`{"model":1}`, `[]`, ``, `{`, `{"model":"\ud800"}`,
	}
	for _, s := range seeds {
		f.Add(uint8(Chat), []byte(s))
		f.Add(uint8(Completions), []byte(s))
	}
	f.Fuzz(func(t *testing.T, apiByte uint8, body []byte) {
		api := Chat
		if apiByte%2 == 1 {
			api = Completions
		}
		req, apiErr := Parse(api, body)
		if apiErr != nil {
			if apiErr.Status != http.StatusBadRequest || apiErr.Message == "" {
				t.Fatalf("bad error %+v", apiErr)
			}
			return
		}
		if !json.Valid(body) || req.Model == "" {
			t.Fatalf("accepted %q as %+v", body, req)
		}
		// Forwarded under another name, with usage asked for: the body
		// reads back the same but for those two.
		const served = "served/näme \"q\""
		req.Stream = true
		fwd := req.Forward(body, served)
		again, apiErr := Parse(api, fwd)
		if apiErr != nil {
			t.Fatalf("forwarded body %q rejected: %v", fwd, apiErr)
		}
		want := fields(req)
		want.Model, want.IncludeUsage = served, true
		if again.Stream = true; fields(again) != want {
			t.Fatalf("after Forward got %+v, want %+v (body %q)", fields(again), want, fwd)
		}
	})
}

// FuzzInspectChunk feeds arbitrary upstream chunks: never a panic, never a
// negative token count, and a usage-only verdict only with usage.
func FuzzInspectChunk(f *testing.F) {
	f.Add([]byte(`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":1}}}`))
	f.Add([]byte(`[DONE]`))
	f.Add([]byte(`{"usage":{"prompt_tokens":1e3}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := InspectChunk(data)
		if c.Usage.PromptTokens < 0 || c.Usage.CompletionTokens < 0 || c.Usage.CachedTokens < 0 {
			t.Fatalf("negative usage %+v", c.Usage)
		}
		if c.UsageOnly && !c.HasUsage {
			t.Fatalf("usage-only without usage")
		}
	})
}

func TestMaxTokens(t *testing.T) {
	for body, want := range map[string]int64{
		`{"model":"m","messages":[{"role":"user","content":"x"}]}`:                                             0,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":100}`:                            100,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":100,"max_completion_tokens":7}`:  7,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"max_completion_tokens":null,"max_tokens":9}`: 9,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":-1}`:                             0,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":"5"}`:                            0,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":1e3}`:                            0,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":99999999999999999999}`:           0,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":1,"max_tokens":2}`:               2,
	} {
		req, err := Parse(Chat, []byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if req.MaxTokens != want {
			t.Errorf("%s: MaxTokens %d, want %d", body, req.MaxTokens, want)
		}
	}
}
