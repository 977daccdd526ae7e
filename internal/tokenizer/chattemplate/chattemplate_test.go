package chattemplate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var goldenNow = time.Date(2026, 3, 7, 14, 5, 9, 0, time.UTC)

func fixtureDir(tb testing.TB, name string) string {
	tb.Helper()
	cache := os.Getenv("TESTDATA_CACHE")
	if cache == "" {
		cache = filepath.Join("..", "..", "..", "testdata-cache")
	}
	dir := filepath.Join(cache, "tokenizers", name)
	if _, err := os.Stat(filepath.Join(dir, "tokenizer_config.json")); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("fixture tokenizer %s missing in CI: run `make testdata` (scripts/testdata.sh) first: %v", name, err)
		}
		tb.Skipf("SKIP: fixture tokenizer %s not fetched; run `make testdata` (scripts/testdata.sh) to test the real chat templates", name)
	}
	return dir
}

func loadChat(tb testing.TB, name string) *Chat {
	tb.Helper()
	switch name {
	case "qwen3", "llama3_1", "deepseek_v3", "gemma3", "mistral_nemo", "internlm2":
		c, err := LoadDir(fixtureDir(tb, name))
		if err != nil {
			tb.Fatal(err)
		}
		return c
	}
	src, err := os.ReadFile(filepath.Join("testdata", "templates", name+".jinja"))
	if err != nil {
		tb.Fatal(err)
	}
	c, err := New(string(src), map[string]any{"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// TestGoldenRenders compares with Python's jinja2 configured as
// transformers configures it (testdata/gen/gen_renders.py).
func TestGoldenRenders(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "golden", "renders.json"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := ParseJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	casesV, _ := g.(*Dict).Get("cases")
	cases := casesV.([]any)
	if len(cases) < 50 {
		t.Fatalf("only %d golden cases", len(cases))
	}
	chats := map[string]*Chat{}
	for _, cv := range cases {
		c := cv.(*Dict)
		get := func(k string) any { v, _ := c.Get(k); return v }
		name := get("template").(string)
		label := name + "/" + get("conversation").(string)
		t.Run(label, func(t *testing.T) {
			chat, ok := chats[name]
			if !ok {
				chat = loadChat(t, name)
				chats[name] = chat
			}
			opts := Options{AddGenerationPrompt: get("add_generation_prompt").(bool), Now: func() time.Time { return goldenNow }}
			if tools, ok := get("tools").([]any); ok {
				opts.Tools = tools
			}
			if kw, ok := get("kwargs").(*Dict); ok && kw.Len() > 0 {
				opts.Kwargs = map[string]any{}
				for i, k := range kw.keys {
					opts.Kwargs[k.(string)] = kw.vals[i]
				}
			}
			got, err := chat.Render(get("messages").([]any), opts)
			if want, ok := get("error").(string); ok {
				if err == nil {
					t.Fatalf("rendered, want error %q", want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if want := get("output").(string); got != want {
				t.Errorf("render differs from jinja2 (gen=%v)\n%s", opts.AddGenerationPrompt, firstDiff(got, want))
			}
		})
	}
}

// firstDiff shows where two renders part.
func firstDiff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(0, i-80)
	return "at byte " + itoa(i) + "\n got: " + quote(got[from:min(len(got), i+80)]) + "\nwant: " + quote(want[from:min(len(want), i+80)])
}

func itoa(i int) string { return strings.TrimSpace(str(int64(i))) }
func quote(s string) string {
	var b strings.Builder
	writeStrRepr(&b, s)
	return b.String()
}

func TestRender(t *testing.T) {
	tests := []struct {
		name, src string
		vars      map[string]any
		want      string
	}{
		{"trim_blocks", "{% if true %}\nyes\n{% endif %}\n", nil, "yes\n"},
		{"lstrip_blocks", "a\n    {% if true %}\n    b\n    {% endif %}\nc", nil, "a\n    b\nc"},
		{"lstrip_plus", "a\n  {%+ if true %}b{% endif %}", nil, "a\n  b"},
		{"trim_plus", "{% if true +%}\nb{% endif %}", nil, "\nb"},
		{"dash", "a   {{- 'b' -}}   c", nil, "abc"},
		{"crlf", "a\r\nb\r\n", nil, "a\nb"},
		{"loop_scope", "{% set c = 0 %}{% for i in range(3) %}{% set c = c + 1 %}{{ c }}{% endfor %}{{ c }}", nil, "1110"},
		{"namespace", "{% set ns = namespace(c=0) %}{% for i in range(3) %}{% set ns.c = ns.c + i %}{% endfor %}{{ ns.c }}", nil, "3"},
		{"if_scope", "{% if true %}{% set x = 1 %}{% endif %}{{ x }}", nil, "1"},
		{"filter_precedence", "{{ [1,2,3]|length - 1 }} {{ -3|abs }}", nil, "2 3"},
		{"not_in", "{{ 'a' not in 'bcd' }} {{ not 'a' in 'abc' }}", nil, "True False"},
		{"cond_no_else", "[{{ 'x' if false }}]", nil, "[]"},
		{"string_escapes", `{{ '\x41\u00e9\n\'' }}`, nil, "Aé\n'"},
		{"undefined_prints_empty", "[{{ nothing }}]", nil, "[]"},
		{"none_attr_undefined", "{{ none.x is defined }}", nil, "False"},
		{"float_repr", "{{ 1/3 }} {{ 2.0 }} {{ 1e16 }} {{ 12345678.9 }}", nil, "0.3333333333333333 2.0 1e+16 12345678.9"},
		{"tojson_unicode", `{{ {'k': 'é"\\n\x01', 'n': [1, 2.5, none, true]} | tojson }}`, nil, `{"k": "é\"\\n\u0001", "n": [1, 2.5, null, true]}`},
		{"dict_order", "{{ d | tojson }}", map[string]any{"d": mustJSON(`{"z": 1, "a": {"y": 2, "b": 3}}`)}, `{"z": 1, "a": {"y": 2, "b": 3}}`},
		{"macro_kwargs", "{% macro m(a, b=2) %}{{ a }}{{ b }}{{ kwargs }}{% endmacro %}{{ m(1) }}|{{ m(1, b=3, c=4) }}", nil, "12{}|13{'c': 4}"},
		{"slices", "{{ 'hello'[1:4] }} {{ [1,2,3,4][::2] }} {{ 'abc'[-1] }} {{ 'αβγ'[1] }}", nil, "ell [1, 3] c β"},
		// Chains of + are evaluated as a whole (see evalPlus): they must
		// still mean what pairwise Python + means.
		{"plus_chain_strings", "{{ 'a' + x + 'c' + 'd' }}|{% set y = 'a' + x + 'c' %}{{ y }}", map[string]any{"x": "b"}, "abcd|abc"},
		{"plus_chain_lists", "{{ [1] + [2] + [3] }} {{ (1,) + (2,) }}", nil, "[1, 2, 3] (1, 2)"},
		{"plus_chain_numbers", "{{ 1 + 2 + 3.5 }} {{ 'a' + ('b' + 'c') }} {{ (1 + 2) ~ 'x' }}", nil, "6.5 abc 3x"},
		{"tuple_repr", "{{ (1,) }} {{ (1, 'a') }} {{ {'a': 1}.items() | list }}", nil, "(1,) (1, 'a') [('a', 1)]"},
		// Jinja's getitem turns Python's TypeError into Undefined.
		{"unhashable_item", "[{{ {'a': 1}[[1]] }}]{{ {'a': 1}[x] is defined }}", map[string]any{"x": []any{"a"}}, "[]False"},
		// Past dictLinear keys a Dict indexes them: lookups, updates and
		// order must not change.
		{"big_dict", "{% set d = {'k0': 0, 'k1': 1, 'k2': 2, 'k3': 3, 'k4': 4, 'k5': 5, 'k6': 6, 'k7': 7, 'k8': 8, 'k9': 9, 1: 'one', true: 'yes'} %}" +
			"{{ d.k0 }}{{ d['k8'] }}{{ d.k9 }}{{ d[1] }}{{ d[1.0] }}{{ 'k5' in d }}{{ 'k10' in d }}{{ d | length }}{{ d.get('k7') }}{{ d.keys() | list | last }}",
			nil, "089yesyesTrueFalse1171"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, err := Compile(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl.Render(tc.vars)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func mustJSON(s string) any {
	v, err := ParseJSON([]byte(s))
	if err != nil {
		panic(err)
	}
	return v
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name, src string
		syntax    bool
		raised    bool
	}{
		{"raise_exception", "{{ raise_exception('nope') }}", false, true},
		{"undefined_attr", "{{ missing.attr }}", false, false},
		{"str_plus_int", "{{ 'a' + 1 }}", false, false},
		{"str_chain_plus_int", "{{ 'a' + 'b' + 1 + 'c' }}", false, false},
		{"none_plus_str", "{{ none + 'a' + 'b' }}", false, false},
		{"undefined_plus_str", "{% set s = missing + 'a' %}", false, false},
		{"list_plus_str", "{{ [1] + [2] + 'a' }}", false, false},
		{"unsafe_append", "{% set l = [] %}{{ l.append(1) }}", false, false},
		{"unknown_filter", "{{ 1 | nosuchfilter }}", true, false},
		{"unclosed_if", "{% if true %}x", true, false},
		{"include", "{% include 'x' %}", true, false},
		{"bad_char", "{{ 1 ? 2 }}", true, false},
		{"unterminated_string", "{{ 'abc }}", true, false},
		{"huge_range", "{% for i in range(1000000) %}{% endfor %}", false, false},
		{"macro_recursion", "{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", false, false},
		// Python's TypeError; a Go map keyed by a list panics.
		{"unhashable_dict_key", "{{ {[1]: 2} }}", false, false},
		{"unhashable_in", "{{ [1] in {'a': 1} }}", false, false},
		{"unhashable_get", "{{ {'a': 1}.get({}) }}", false, false},
		{"unhashable_func_key", "{{ {range: 1} }}", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, err := Compile(tc.src)
			if err == nil {
				_, err = tmpl.Render(nil)
			}
			var se *SyntaxError
			var re *RenderError
			switch {
			case err == nil:
				t.Fatal("no error")
			case tc.syntax && !errors.As(err, &se):
				t.Fatalf("err = %v, want a SyntaxError", err)
			case !tc.syntax && !errors.As(err, &re):
				t.Fatalf("err = %v, want a RenderError", err)
			case tc.raised && !re.Raised:
				t.Fatalf("err = %v, want Raised", err)
			}
		})
	}
}

func TestLoadDir(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadDir(dir); !errors.Is(err, ErrNoTemplate) {
		t.Fatalf("empty dir: err = %v, want ErrNoTemplate", err)
	}
	cfg := `{"bos_token": {"content": "<s>", "__type": "AddedToken"}, "eos_token": "</s>", "unk_token": null,
	 "chat_template": [{"name": "default", "template": "{{ bos_token }}D"}, {"name": "tool_use", "template": "T{{ eos_token }}"}]}`
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Render(nil, Options{}); got != "<s>D" {
		t.Errorf("default template: %q", got)
	}
	if got, _ := c.Render(nil, Options{Tools: []any{"x"}}); got != "T</s>" {
		t.Errorf("tool_use template: %q", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "chat_template.jinja"), []byte("J\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err = LoadDir(dir); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Render(nil, Options{}); got != "J" {
		t.Errorf("chat_template.jinja: %q", got)
	}
}

// FuzzCompileRender feeds arbitrary templates: compile and render must
// return (an error is fine) and never panic.
func FuzzCompileRender(f *testing.F) {
	for _, s := range []string{
		"{{ x }}", "{% for m in messages %}{{ m.role }}{% endfor %}", "{%- if a -%}b{%+ else +%}c{% endif %}",
		"{{ 'a' ~ 1 | string }}", "{% set ns = namespace(a=1) %}{% set ns.a = 2 %}{{ ns.a }}", "{{ [1,2][::-1] | tojson }}",
		"{% raw %}{{{% endraw %}", "{# c #}{{ {'a': (1, 2)} }}", "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(m) }}",
		"{{ {'a': 1}[messages] }}{{ {x: 1} }}",
	} {
		f.Add(s)
	}
	msgs := mustJSON(`[{"role": "user", "content": "hi"}, {"role": "assistant", "content": null}]`)
	f.Fuzz(func(t *testing.T, src string) {
		tmpl, err := Compile(src)
		if err != nil {
			return
		}
		_, _ = tmpl.Render(map[string]any{"messages": msgs, "x": int64(1)})
	})
}

// FuzzParseJSON checks the ordered JSON reader against arbitrary input:
// no panics, and what it accepts tojson writes back parseably.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{`[]`, `{"a": [1, 2.5, "x", null, true]}`, `"\u00e9"`, `{"a":1,"a":2}`, `1e400`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseJSON(data)
		if err != nil {
			return
		}
		var b strings.Builder
		if err := writeJSON(&b, v, jsonOptions{itemSep: ", ", keySep: ": "}, 0); err != nil {
			t.Fatalf("writeJSON: %v", err)
		}
		if _, err := ParseJSON([]byte(b.String())); err != nil && !strings.Contains(b.String(), "Infinity") {
			t.Fatalf("re-parse %q: %v", b.String(), err)
		}
	})
}
