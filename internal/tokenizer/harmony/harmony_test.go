package harmony

// The goldens below are not the output of this package: each expected
// prompt is written from the sources it cites, which are what vLLM runs for
// a gpt-oss chat request (no Python harmony library can be installed here to
// generate them):
//   - [format.md]: openai/harmony docs/format.md, whose rendered examples
//     (system message, developer message with the functions namespace, tool
//     results) harmony's renderer reproduces;
//   - [encoding.rs]: openai/harmony src/encoding.rs — Render<Message> (the
//     header: role or tool name, " to=" recipient, <|channel|> channel, " "
//     content type; <|call|> after an assistant's message to a recipient),
//     Render<SystemContent>, Render<DeveloperContent>,
//     template_tools_section, json_schema_to_typescript;
//   - [__init__.py]: openai/harmony python/openai_harmony/__init__.py —
//     SystemContent's defaults (identity, knowledge cutoff 2024-06,
//     reasoning medium, channels analysis, commentary, final),
//     with_function_tools' "functions" namespace;
//   - [vllm]: vllm-project/vllm vllm/renderers/online_renderer.py
//     (_make_request_with_harmony: the leading system/developer message as
//     developer instructions, build_harmony_preamble,
//     render_for_completion) and vllm/entrypoints/openai/parser/
//     harmony_utils.py (parse_chat_input_to_harmony_message,
//     auto_drop_analysis_messages, get_system_or_developer_message).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	"github.com/switchyard-dev/switchyard/internal/tokcheck"
	"github.com/switchyard-dev/switchyard/internal/tokenizer"
	"github.com/switchyard-dev/switchyard/internal/tokenizer/hf"
)

var (
	loadOnce sync.Once
	loaded   *hf.Tokenizer
	loadErr  error
)

// gptoss is the gpt-oss fixture tokenizer (scripts/testdata.sh), skipping
// the test when it has not been fetched (failing it in CI).
func gptoss(tb testing.TB) *hf.Tokenizer {
	tb.Helper()
	cache := os.Getenv("TESTDATA_CACHE")
	if cache == "" {
		cache = filepath.Join("..", "..", "..", "testdata-cache")
	}
	dir := filepath.Join(cache, "tokenizers", "gptoss")
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("fixture tokenizer gptoss missing in CI: run `make testdata` first: %v", err)
		}
		tb.Skipf("SKIP: fixture tokenizer gptoss not fetched; run `make testdata`")
	}
	loadOnce.Do(func() { loaded, loadErr = hf.LoadDir(dir) })
	if loadErr != nil {
		tb.Fatal(loadErr)
	}
	return loaded
}

// renderer is a harmony Tokenizer over the fixture, dated as the goldens.
func renderer(tb testing.TB, date string) (*hf.Tokenizer, *Renderer) {
	tok := gptoss(tb)
	d, err := time.Parse("2006-01-02", date)
	if err != nil {
		tb.Fatal(err)
	}
	r, err := New(tok.HasAddedToken)
	if err != nil {
		tb.Fatal(err)
	}
	r = r.WithClock(func() time.Time { return d })
	return tok.WithChatRenderer(r), r
}

func system(date, effort string, functions bool) string {
	s := "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: " + date +
		"\n\nReasoning: " + effort + "\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message."
	if functions {
		s += "\nCalls to these tools must go to the commentary channel: 'functions'."
	}
	return s + "<|end|>"
}

const weatherTools = `[
 {"type":"function","function":{"name":"get_location","description":"Gets the location of the user."}},
 {"type":"function","function":{"name":"get_current_weather","description":"Gets the current weather in the provided location.",
  "parameters":{"type":"object","properties":{"location":{"type":"string","description":"The city and state, e.g. San Francisco, CA"},
   "format":{"type":"string","enum":["celsius","fahrenheit"],"default":"celsius"}},"required":["location"]}}},
 {"type":"function","function":{"name":"get_multiple_weathers","description":"Gets the current weather in the provided list of locations.",
  "parameters":{"type":"object","properties":{"locations":{"type":"array","items":{"type":"string"},"description":"List of city and state, e.g. [\"San Francisco, CA\", \"New York, NY\"]"},
   "format":{"type":"string","enum":["celsius","fahrenheit"],"default":"celsius"}},"required":["locations"]}}}]`

// formatMDDeveloper is format.md's developer message for weatherTools with
// the instructions "Use a friendly tone.".
const formatMDDeveloper = `<|start|>developer<|message|># Instructions

Use a friendly tone.

# Tools

## functions

namespace functions {

// Gets the location of the user.
type get_location = () => any;

// Gets the current weather in the provided location.
type get_current_weather = (_: {
// The city and state, e.g. San Francisco, CA
location: string,
format?: "celsius" | "fahrenheit", // default: celsius
}) => any;

// Gets the current weather in the provided list of locations.
type get_multiple_weathers = (_: {
// List of city and state, e.g. ["San Francisco, CA", "New York, NY"]
locations: string[],
format?: "celsius" | "fahrenheit", // default: celsius
}) => any;

} // namespace functions<|end|>`

var goldens = []struct {
	name, source, date, body, want string
}{
	{
		name:   "format_md_tools",
		source: "[format.md] 'Defining available tools', the complete input example, byte for byte; [vllm] the system message's text as the developer instructions",
		date:   "2025-06-28",
		body: `{"model":"m","reasoning_effort":"high","tools":` + weatherTools + `,"messages":[
			{"role":"system","content":"Use a friendly tone."},
			{"role":"user","content":"What is the weather like in SF?"}]}`,
		want: system("2025-06-28", "high", true) + formatMDDeveloper +
			"<|start|>user<|message|>What is the weather like in SF?<|end|><|start|>assistant",
	},
	{
		name: "format_md_tool_call_and_result",
		source: "[format.md] 'Handling tool calls', the complete input, except the call's header, which [encoding.rs] Render<Message> writes as " +
			"role, recipient, channel, content type (as in openai/harmony test-data/test_multi_turn_auto_drop_analysis.txt: " +
			"<|start|>assistant to=functions.python<|channel|>commentary), and [vllm] gives the content type \"json\" (not " +
			"<|constrain|>json); the reasoning of a message with tool calls comes before the calls [vllm]",
		date: "2025-06-28",
		body: `{"model":"m","reasoning_effort":"high","tools":` + weatherTools + `,"messages":[
			{"role":"system","content":"Use a friendly tone."},
			{"role":"user","content":"What is the weather like in SF?"},
			{"role":"assistant","content":null,"reasoning":"Need to use function get_weather.","tool_calls":[
				{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"San Francisco\"}"}}]},
			{"role":"tool","tool_call_id":"c1","content":"{\"sunny\": true, \"temperature\": 20}"}]}`,
		want: system("2025-06-28", "high", true) + formatMDDeveloper +
			"<|start|>user<|message|>What is the weather like in SF?<|end|>" +
			"<|start|>assistant<|channel|>analysis<|message|>Need to use function get_weather.<|end|>" +
			`<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"location":"San Francisco"}<|call|>` +
			`<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{"sunny": true, "temperature": 20}<|end|>` +
			"<|start|>assistant",
	},
	{
		name: "format_md_multi_turn",
		source: "[format.md] 'Handling reasoning output in subsequent sampling': the earlier turn's chain of thought dropped, its answer " +
			"ending in <|end|> ('Implementation note'); [vllm] the system message always, no developer message without instructions or " +
			"tools; [__init__.py] reasoning medium by default",
		date: "2026-12-03",
		body: `{"model":"m","messages":[
			{"role":"user","content":"What is 2 + 2?"},
			{"role":"assistant","reasoning":"User asks: \"What is 2 + 2?\" Simple arithmetic. Provide answer.","content":"2 + 2 = 4."},
			{"role":"user","content":"What about 9 / 2?"}]}`,
		want: system("2026-12-03", "medium", false) +
			"<|start|>user<|message|>What is 2 + 2?<|end|><|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|end|>" +
			"<|start|>user<|message|>What about 9 / 2?<|end|><|start|>assistant",
	},
	{
		name: "reasoning_kept_after_last_answer",
		source: "[vllm] auto_drop_analysis_messages drops analysis only before the last final message; reasoning_content is not read " +
			"(only reasoning); an assistant message without text adds nothing; the generation prompt is written whatever " +
			"add_generation_prompt says",
		date: "2026-01-02",
		body: `{"model":"m","reasoning_effort":"low","add_generation_prompt":false,"messages":[
			{"role":"user","content":"a"},
			{"role":"assistant","reasoning":"think 1","content":"A"},
			{"role":"user","content":"b"},
			{"role":"assistant","reasoning":"think 2","content":""},
			{"role":"assistant","reasoning_content":"ignored","content":"B"},
			{"role":"user","content":"c"},
			{"role":"assistant","reasoning":"think 3","content":null}]}`,
		want: system("2026-01-02", "low", false) +
			"<|start|>user<|message|>a<|end|><|start|>assistant<|channel|>final<|message|>A<|end|>" +
			"<|start|>user<|message|>b<|end|><|start|>assistant<|channel|>final<|message|>B<|end|>" +
			"<|start|>user<|message|>c<|end|><|start|>assistant<|channel|>analysis<|message|>think 3<|end|><|start|>assistant",
	},
	{
		name: "developer_roles_and_parts",
		source: "[vllm] a leading developer message is the instructions, its parts' text joined without a separator " +
			"(flatten_input_text_content); a later system message becomes a developer message of instructions " +
			"(get_system_or_developer_message); a single part is a message's text, a refusal part is empty; " +
			"[encoding.rs] Render<DeveloperContent>",
		date: "2026-01-02",
		body: `{"model":"m","messages":[
			{"role":"developer","content":[{"type":"text","text":"Be "},{"type":"text","text":"brief."}]},
			{"role":"user","content":[{"type":"text","text":"Hi"}]},
			{"role":"system","content":"Now in French."},
			{"role":"assistant","content":[{"type":"refusal","refusal":"no"}]},
			{"role":"user","content":"Salut"}]}`,
		want: system("2026-01-02", "medium", false) +
			"<|start|>developer<|message|># Instructions\n\nBe brief.<|end|>" +
			"<|start|>user<|message|>Hi<|end|>" +
			"<|start|>developer<|message|># Instructions\n\nNow in French.<|end|>" +
			"<|start|>user<|message|>Salut<|end|><|start|>assistant",
	},
	{
		name: "preamble_tool_calls_and_empty_instructions",
		source: "[vllm] an empty leading system message's instructions are kept beside tools (instructions is not None), an " +
			"assistant's text beside tool calls goes to the commentary channel before its reasoning and the calls, a tool " +
			"result names the function of the call it answers (functions. and nothing for an unknown id), missing arguments " +
			"are empty; [encoding.rs] a tool without parameters is () => any, one with {} is (_: any) => any, no description " +
			"no comment, multi-line descriptions one comment per line",
		date: "2026-01-02",
		body: `{"model":"m","tools":[{"type":"function","function":{"name":"a","description":"line 1\n\nline 3\n"}},
			{"type":"function","function":{"name":"b","parameters":{}}}],"messages":[
			{"role":"system","content":""},
			{"role":"user","content":"go"},
			{"role":"assistant","content":"Calling both.","tool_calls":[
				{"id":"x","type":"function","function":{"name":"a","arguments":""}},
				{"id":"y","type":"function","function":{"name":"b","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"x","content":[{"type":"text","text":"r"},{"type":"text","text":"a"}]},
			{"role":"tool","tool_call_id":"zz","content":null}]}`,
		want: system("2026-01-02", "medium", true) +
			"<|start|>developer<|message|># Instructions\n\n\n\n# Tools\n\n## functions\n\nnamespace functions {\n\n" +
			"// line 1\n// \n// line 3\ntype a = () => any;\n\ntype b = (_: any) => any;\n\n} // namespace functions<|end|>" +
			"<|start|>user<|message|>go<|end|>" +
			"<|start|>assistant<|channel|>commentary<|message|>Calling both.<|end|>" +
			"<|start|>assistant to=functions.a<|channel|>commentary json<|message|><|call|>" +
			"<|start|>assistant to=functions.b<|channel|>commentary json<|message|>{}<|call|>" +
			"<|start|>functions.a to=assistant<|channel|>commentary<|message|>ra<|end|>" +
			"<|start|>functions. to=assistant<|channel|>commentary<|message|><|end|>" +
			"<|start|>assistant",
	},
	{
		name: "lenient_tool_calls",
		source: "[vllm] parse_chat_input_to_harmony_message reads a tool call's function.get(\"name\", \"\") and " +
			"function.get(\"arguments\", \"\") or \"\" without looking at its type (vLLM's own tests: " +
			"tests/entrypoints/openai/parser/test_harmony_utils.py, test_tool_call_with_missing_function_fields, " +
			"test_assistant_message_with_empty_tool_call_arguments); the tool result of a call without a name is " +
			"functions.None (the id maps to None, which the f-string prints)",
		date: "2026-01-02",
		body: `{"model":"m","messages":[
			{"role":"user","content":"go"},
			{"role":"assistant","tool_calls":[{"id":"a","function":{}},{"id":"b","function":{"name":"g","arguments":null}}]},
			{"role":"tool","tool_call_id":"a","content":"1"},
			{"role":"tool","tool_call_id":"b","content":"2"}]}`,
		want: system("2026-01-02", "medium", false) +
			"<|start|>user<|message|>go<|end|>" +
			"<|start|>assistant to=functions.<|channel|>commentary json<|message|><|call|>" +
			"<|start|>assistant to=functions.g<|channel|>commentary json<|message|><|call|>" +
			"<|start|>functions.None to=assistant<|channel|>commentary<|message|>1<|end|>" +
			"<|start|>functions.g to=assistant<|channel|>commentary<|message|>2<|end|>" +
			"<|start|>assistant",
	},
	{
		name: "schema_features",
		source: "[encoding.rs] json_schema_to_typescript: an object's description above it, titles with an empty comment line, " +
			"examples, nested objects indented by four spaces (their closing brace too), type arrays, integer as number, " +
			"arrays, Array<any>, nullable, defaults (quoted strings, serde_json for the rest), a property's oneOf on lines of " +
			"its own (its description left out when the first variant's is the same), unknown types as any; keys in the request's order (serde_json preserve_order)",
		date: "2026-01-02",
		body: `{"model":"m","tools":[{"type":"function","function":{"name":"f","description":"F.","parameters":{
			"type":"object","description":"Args.","required":["q","n"],"properties":{
			"q":{"type":"string","title":"Query","description":"What to find.","examples":["cats","dogs"]},
			"n":{"type":"integer","default":5},
			"ratio":{"type":"number","default":0.5},
			"flag":{"type":"boolean","default":false},
			"tags":{"type":"array","items":{"type":"string","enum":["a","b"]}},
			"any":{"type":"array"},
			"either":{"type":["string","integer"]},
			"maybe":{"type":"string","nullable":true,"default":"x"},
			"opts":{"type":"object","properties":{"deep":{"type":"boolean"}},"required":["deep"]},
			"choice":{"description":"One of.","oneOf":[{"type":"string","description":"One of."},{"type":"integer","description":"A number.","default":1}]},
			"blob":{"default":{"k":[1,"two\n"]}}}}}}],
			"messages":[{"role":"user","content":"x"}]}`,
		want: system("2026-01-02", "medium", true) +
			"<|start|>developer<|message|># Tools\n\n## functions\n\nnamespace functions {\n\n// F.\ntype f = (_: // Args.\n{\n" +
			"// Query\n//\n// What to find.\n// Examples:\n// - \"cats\"\n// - \"dogs\"\nq: string,\n" +
			"n: number, // default: 5\n" +
			"ratio?: number, // default: 0.5\n" +
			"flag?: boolean, // default: false\n" +
			"tags?: \"a\" | \"b\"[],\n" +
			"any?: Array<any>,\n" +
			"either?: string | number,\n" +
			"maybe?: string | null, // default: \"x\"\n" +
			"opts?: {\n    deep: boolean,\n    },\n" +
			"choice?:\n | string\n | number // A number. default: 1\n,\n" +
			"blob?: any, // default: {\"k\":[1,\"two\\n\"]}\n" +
			"}) => any;\n\n} // namespace functions<|end|>" +
			"<|start|>user<|message|>x<|end|><|start|>assistant",
	},
}

func TestGoldens(t *testing.T) {
	for _, g := range goldens {
		t.Run(g.name, func(t *testing.T) {
			tok, _ := renderer(t, g.date)
			req, apiErr := openaiapi.ParseChatCompletionRequest([]byte(g.body))
			if apiErr != nil {
				t.Fatal(apiErr.Message)
			}
			got, err := tokenizer.ChatText(tok, req)
			if err != nil {
				t.Fatal(err)
			}
			if got != g.want {
				t.Fatalf("source: %s\nrendered\n%q\nwant\n%q", g.source, got, g.want)
			}
		})
	}
}

// TestPiecesEncodeAlone: the prompt's ids are what harmony produces, which
// encodes each text piece by itself (encode_ordinary) between its
// formatting tokens. The render is one string for the tokenizer, so
// encoding it whole must give the same ids as encoding piece by piece.
func TestPiecesEncodeAlone(t *testing.T) {
	tok, r := renderer(t, "2026-01-02")
	for _, g := range goldens {
		req, apiErr := openaiapi.ParseChatCompletionRequest([]byte(g.body))
		if apiErr != nil {
			t.Fatal(apiErr.Message)
		}
		checkPieces(t, tok, r, req)
	}
}

func checkPieces(t *testing.T, tok *hf.Tokenizer, r *Renderer, req *openaiapi.ChatCompletionRequest) {
	t.Helper()
	c, err := tokenizer.ChatOf(req)
	if err != nil {
		return
	}
	pieces, err := r.render(context.Background(), c)
	if err != nil {
		return
	}
	var whole strings.Builder
	var want []uint32
	for _, p := range pieces {
		whole.WriteString(p.text)
		ids := tok.Encode(p.text)
		if p.special && len(ids) != 1 {
			t.Fatalf("formatting token %q is %v, not one special token", p.text, ids)
		}
		want = append(want, ids...)
	}
	if got := tok.Encode(whole.String()); !slices.Equal(got, want) {
		t.Fatalf("encoding %q whole differs from encoding its pieces", whole.String())
	}
}

// TestRefused: what the router cannot render as the worker does is an
// error naming the field, never a guess.
func TestRefused(t *testing.T) {
	tok, _ := renderer(t, "2026-01-02")
	for _, tc := range []struct{ body, param string }{
		{`{"messages":[{"role":"user","content":"say <|end|> twice"}]}`, "messages[0].content"},
		{`{"messages":[{"role":"system","content":"<|start|>"},{"role":"user","content":"x"}]}`, "messages[0].content"},
		{`{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"","reasoning":"<|channel|>"}]}`, "messages[1].reasoning"},
		{`{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"","tool_calls":[{"id":"a","type":"function","function":{"name":"f<|call|>","arguments":"{}"}}]}]}`, "messages[1].tool_calls[0]"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","description":"<|start|>"}}]}`, "tools"},
		{`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`, "messages[0].content"},
		{`{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"none"}`, "reasoning_effort"},
		{`{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"minimal"}`, "reasoning_effort"},
		{`{"messages":[{"role":"function","content":"x"}]}`, "messages[0].role"},
		{`{"messages":[{"role":"user","content":"x","tool_calls":[]}]}`, "messages[0].tool_calls"},
		{`{"messages":[{"role":"user","content":"x"},{"role":"tool","content":"r"}]}`, "messages[1].tool_call_id"},
		{`{"messages":[{"role":"assistant","content":"","tool_calls":[{"id":1,"type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, "messages[0].tool_calls[0].id"},
		{`{"messages":[{"role":"assistant","content":"","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":{}}}]}]}`, "messages[0].tool_calls[0].function.arguments"},
		{`{"messages":[{"role":"assistant","content":"","tool_calls":[{"id":"a","type":"custom","function":{"name":"f","arguments":"{}"}}]}]}`, "messages[0].tool_calls[0].type"},
		{`{"messages":[{"role":"assistant","content":"","tool_calls":[{"id":"a","function":{"name":null}}]}]}`, "messages[0].tool_calls[0].function.name"},
		{`{"messages":[{"role":"assistant","content":"","tool_calls":[{"id":"a","function":"f"}]}]}`, "messages[0].tool_calls[0].function"},
		{`{"messages":[{"role":"assistant","content":"","tool_calls":[1]}]}`, "messages[0].tool_calls[0]"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"default":null}}}}}]}`, "tools[0].function.parameters"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"default":1e20}}}}}]}`, "tools[0].function.parameters"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":[]}}]}`, "tools[0].function.parameters"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{}}]}`, "tools[0].function.name"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"custom","function":{"name":"f"}}]}`, "tools[0].type"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":{}}`, "tools"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":` +
			strings.Repeat(`{"a":`, maxSchemaDepth+1) + "1" + strings.Repeat("}", maxSchemaDepth+1) + `}}]}`, "tools[0].function.parameters"},
	} {
		req, apiErr := openaiapi.ParseChatCompletionRequest([]byte(tc.body))
		if apiErr != nil {
			t.Fatalf("%s: %s", tc.body, apiErr.Message)
		}
		_, err := tokenizer.ChatText(tok, req)
		var ie *tokenizer.InputError
		if !errors.As(err, &ie) || ie.Param != tc.param {
			t.Errorf("%s: error %v, want one for %s", tc.body, err, tc.param)
		}
	}
}

// TestRustLines: descriptions split into comment lines as Rust's
// str::lines splits them [encoding.rs].
func TestRustLines(t *testing.T) {
	for in, want := range map[string][]string{
		"": nil, "a": {"a"}, "a\n": {"a"}, "a\n\n": {"a", ""}, "\n": {""},
		"a\r\nb": {"a", "b"}, "a\rb": {"a\rb"}, "a\r": {"a\r"},
	} {
		if got := rustLines(in); !slices.Equal(got, want) {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// TestStartDate: the date comes from VLLM_SYSTEM_START_DATE when set, as on
// the worker; the byte cap holds; VLLM_GPT_OSS_HARMONY_SYSTEM_INSTRUCTIONS,
// whose prompt is not implemented, is refused.
func TestStartDate(t *testing.T) {
	tok := gptoss(t)
	t.Setenv(StartDateEnv, "2031-02-03")
	c := &tokenizer.Chat{Messages: []tokenizer.Message{{Role: "user", Content: "hi"}}}
	r, err := New(tok.HasAddedToken)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.RenderChat(context.Background(), c, 0)
	if err != nil || !strings.Contains(got, "\nCurrent date: 2031-02-03\n") {
		t.Fatalf("rendered %q (%v)", got, err)
	}
	if _, err := r.RenderChat(context.Background(), c, 100); !errors.Is(err, tokenizer.ErrTooLarge) {
		t.Fatalf("a 100-byte cap: %v, want ErrTooLarge", err)
	}
	t.Setenv(SystemInstructionsEnv, "1")
	if _, err := New(tok.HasAddedToken); err == nil {
		t.Fatalf("%s=1 accepted", SystemInstructionsEnv)
	}
}

// FuzzRender: any request either is refused or renders to a prompt whose
// whole encoding is its pieces' — tools, tool calls and content are
// arbitrary client JSON.
func FuzzRender(f *testing.F) {
	for _, g := range goldens {
		f.Add([]byte(g.body))
	}
	f.Add([]byte(`{"messages":[{"role":"tool","tool_call_id":"a","content":"x"},{"role":"assistant","content":"","tool_calls":[{"id":"a","type":"function","function":{"name":"n ","arguments":" {"}}]}]}`))
	tok, r := renderer(f, "2026-01-02")
	f.Fuzz(func(t *testing.T, body []byte) {
		req, apiErr := openaiapi.ParseChatCompletionRequest(body)
		if apiErr != nil {
			return
		}
		checkPieces(t, tok, r, req)
	})
}

// TestHarmonyTokenIDs: the fixture tokenizer reads a harmony text as
// harmony's own encoding does — [format.md]'s streaming-parser example,
// its ids as that document lists them (formatting tokens 200002–200008,
// "assistant" 173781, "analysis" 35644, "final" 17196).
func TestHarmonyTokenIDs(t *testing.T) {
	tok := gptoss(t)
	text := `<|channel|>analysis<|message|>User asks: "What is 2 + 2?" Simple arithmetic. Provide answer.<|end|>` +
		`<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>`
	want := []uint32{200005, 35644, 200008, 1844, 31064, 25, 392, 4827, 382, 220, 17, 659, 220, 17, 16842, 12295, 81645, 13, 51441,
		6052, 13, 200007, 200006, 173781, 200005, 17196, 200008, 17, 659, 220, 17, 314, 220, 19, 13, 200002}
	if got := tok.Encode(text); !slices.Equal(got, want) {
		t.Fatalf("ids %v\nwant %v", got, want)
	}
	if got := tok.Encode("<|call|>"); !slices.Equal(got, []uint32{200012}) {
		t.Fatalf("<|call|> is %v, want [200012]", got)
	}
}

// TestCheckPromptFormOnly: vLLM's /tokenize renders the chat form with the
// model's Jinja template, not harmony, so a harmony tokenizer is checked
// against a worker in the completion form only — a worker whose chat form
// differs (as gpt-oss's template does from harmony) still matches.
func TestCheckPromptFormOnly(t *testing.T) {
	tok, _ := renderer(t, "2026-01-02")
	prompt := tok.EncodeWithSpecialTokens(tokcheck.ProbePrompt())
	var chatAsked bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req tokcheck.Request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ids := prompt
		if req.Prompt == nil {
			chatAsked, ids = true, []uint32{1, 2, 3}
		}
		_ = json.NewEncoder(w).Encode(tokcheck.Response{Count: len(ids), Tokens: ids})
	}))
	defer srv.Close()
	if res := tokcheck.Check(context.Background(), srv.Client(), srv.URL, "gpt-oss", tok); res.Status != tokcheck.Match || chatAsked {
		t.Fatalf("check: %s (chat form asked: %v)", res.Describe(tok), chatAsked)
	}
	if res := tokcheck.Check(context.Background(), srv.Client(), srv.URL, "gpt-oss", gptoss(t)); res.Status != tokcheck.Unchecked && res.Status != tokcheck.Mismatch {
		t.Fatalf("a template tokenizer skipped the chat form: %s", res.Describe(tok))
	}
}

// FuzzRenderFields: arbitrary text in every field that becomes part of a
// header or a message — tool names sit beside " to=" in headers — encodes
// whole as harmony encodes it piece by piece.
func FuzzRenderFields(f *testing.F) {
	f.Add("hi", "get_weather", `{"city":"Oslo"}`, "thinking", "desc")
	f.Add("a\n", "n \t", " {", "", "x\r\ny")
	f.Add("  ", "f\n", "", "😀", "")
	tok, r := renderer(f, "2026-01-02")
	f.Fuzz(func(t *testing.T, text, name, args, thought, desc string) {
		body, err := json.Marshal(map[string]any{
			"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": name, "description": desc,
				"parameters": map[string]any{"type": "object", "properties": map[string]any{name: map[string]any{"type": "string", "description": desc, "default": text}}}}}},
			"messages": []any{
				map[string]any{"role": "system", "content": desc},
				map[string]any{"role": "user", "content": text},
				map[string]any{"role": "assistant", "content": text, "reasoning": thought,
					"tool_calls": []any{map[string]any{"id": "c", "type": "function", "function": map[string]any{"name": name, "arguments": args}}}},
				map[string]any{"role": "tool", "tool_call_id": "c", "content": args},
				map[string]any{"role": "assistant", "content": thought},
			},
		})
		if err != nil {
			return
		}
		req, apiErr := openaiapi.ParseChatCompletionRequest(body)
		if apiErr != nil {
			return
		}
		checkPieces(t, tok, r, req)
	})
}

// BenchmarkRenderChat is a 40-turn chat of some 8k tokens rendered and
// tokenized, what the router does per request for a harmony model (after
// the first round, with the tokenizer's segment cache holding the
// messages, as for a conversation's history).
func BenchmarkRenderChat(b *testing.B) {
	tok, _ := renderer(b, "2026-01-02")
	msgs := []any{map[string]any{"role": "system", "content": "You are a careful assistant."}}
	para := strings.Repeat("The quick brown fox jumps over the lazy dog, again and again. ", 12)
	for i := range 40 {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, map[string]any{"role": role, "content": fmt.Sprintf("%d: %s", i, para)})
	}
	body, err := json.Marshal(map[string]any{"model": "m", "messages": msgs, "tools": json.RawMessage(weatherTools)})
	if err != nil {
		b.Fatal(err)
	}
	req, apiErr := openaiapi.ParseChatCompletionRequest(body)
	if apiErr != nil {
		b.Fatal(apiErr.Message)
	}
	ids, err := tokenizer.ChatPrompt(tok, req)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := tokenizer.ChatPrompt(tok, req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(ids)), "tokens")
}
