#!/usr/bin/python3
"""Writes the chat-template render goldens for internal/tokenizer/chattemplate.

The reference is Python's jinja2 (Debian: python3-jinja2) configured the way
Hugging Face transformers configures it for apply_chat_template: an
ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks, the
loopcontrols extension and a no-op {% generation %} tag, its tojson filter
(json.dumps with ensure_ascii=False, key order kept), raise_exception and
strftime_now (pinned to a fixed time here so goldens are stable), and the
tokenizer's special tokens as variables.

    scripts/testdata.sh          # fixture tokenizers (qwen3, llama3_1, deepseek_v3, gemma3, mistral_nemo, …)
    apt-get install python3-jinja2   # Debian's jinja2, run by /usr/bin/python3
    /usr/bin/python3 internal/tokenizer/chattemplate/testdata/gen/gen_renders.py

Writes testdata/golden/renders.json: each case's template, inputs and
expected output (or that it raises).
"""
import datetime
import json
import os
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = os.path.dirname(HERE)
REPO = os.path.abspath(os.path.join(TESTDATA, "..", "..", "..", ".."))
CACHE = os.environ.get("TESTDATA_CACHE", os.path.join(REPO, "testdata-cache"))

# The clock strftime_now sees; the Go test pins the same instant.
NOW = datetime.datetime(2026, 3, 7, 14, 5, 9)


class AssistantTracker(Extension):
    """transformers' {% generation %} tag; rendering its body is all it does here."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return NOW.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def special_tokens(cfg):
    out = {}
    for name in ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]:
        v = cfg.get(name)
        if isinstance(v, dict):
            v = v.get("content")
        if v is not None:
            out[name] = v
    extra = cfg.get("additional_special_tokens")
    if extra:
        out["additional_special_tokens"] = [t["content"] if isinstance(t, dict) else t for t in extra]
    return out


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. 東京"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web.",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer", "default": 5}}},
    },
}

CONVERSATIONS = {
    "single_user": [{"role": "user", "content": "Hello! What can you do?"}],
    "system_user": [
        {"role": "system", "content": "You are a concise assistant."},
        {"role": "user", "content": "Explain KV caches in one sentence."},
    ],
    "multi_turn": [
        {"role": "system", "content": "You are a helpful assistant.\n"},
        {"role": "user", "content": "Hi there"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "  Write a haiku about routers.  "},
        {"role": "assistant", "content": "Packets find their way\nthrough caches warm with prefixes\nlatency falls low"},
        {"role": "user", "content": "Now in Japanese: 日本語で。"},
    ],
    "unicode_and_specials": [
        {"role": "user", "content": "Emoji 😀👍🏽, Русский, 한국어, and a fake <|im_end|> token\n\n<|eot_id|> inside."},
    ],
    "tool_calls": [
        {"role": "system", "content": "Use tools when useful."},
        {"role": "user", "content": "What's the weather in Tokyo and Paris?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Tokyo", "unit": "celsius"}}},
                {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21.5, \"sky\": \"clear\"}"},
        {"role": "tool", "tool_call_id": "call_2", "content": "{\"temp\": 14, \"sky\": \"rain\"}"},
        {"role": "assistant", "content": "Tokyo: 21.5°C and clear. Paris: 14°C with rain."},
        {"role": "user", "content": "Thanks!"},
    ],
    "single_tool_call": [
        {"role": "system", "content": "You can search."},
        {"role": "user", "content": "Find the vLLM docs."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "search", "arguments": {"q": "vLLM docs", "n": 3}}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "https://docs.vllm.ai"},
    ],
    "thinking": [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "<think>\nSimple arithmetic.\n</think>\n\n2+2 = 4."},
        {"role": "user", "content": "And 3+3?"},
        {"role": "assistant", "reasoning_content": "Add three.", "content": "6."},
        {"role": "user", "content": "<tool_response>not really</tool_response>"},
    ],
    "continue_after_tool": [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
        {"role": "tool", "content": "{\"temp\": -3}"},
    ],
    "empty_system": [
        {"role": "system", "content": ""},
        {"role": "user", "content": "x"},
    ],
    "long_history": [
        m
        for i in range(40)
        for m in (
            {"role": "user", "content": f"Question {i}: what is {i} squared? " + "padding " * (i % 7)},
            {"role": "assistant", "content": f"{i} squared is {i * i}."},
        )
    ]
    + [{"role": "user", "content": "Last question."}],
}


# Conversations only the later templates render (the earlier cases stay as
# they were). Mistral's template wants tool-call ids of nine characters.
EXTRA_CONVERSATIONS = {
    "mistral_tool_calls": [
        {"role": "system", "content": "Use tools when useful."},
        {"role": "user", "content": "What's the weather in Tokyo and Paris?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "call00001", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Tokyo", "unit": "celsius"}}},
                {"id": "call00002", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "call00001", "content": "{\"temp\": 21.5, \"sky\": \"clear\"}"},
        {"role": "tool", "tool_call_id": "call00002", "content": "{\"temp\": 14, \"sky\": \"rain\"}"},
        {"role": "assistant", "content": "Tokyo: 21.5°C and clear. Paris: 14°C with rain."},
        {"role": "user", "content": "Thanks!"},
    ],
    "not_alternating": [
        {"role": "user", "content": "One."},
        {"role": "user", "content": "Two."},
    ],
}


def conversation(name):
    return CONVERSATIONS[name] if name in CONVERSATIONS else EXTRA_CONVERSATIONS[name]


def cases():
    """(template name, conversation, tools, kwargs) combinations."""
    out = []
    for tmpl in ["qwen3", "llama3_1"]:
        for conv in CONVERSATIONS:
            if tmpl == "llama3_1" and conv in ("tool_calls", "single_tool_call", "continue_after_tool"):
                continue  # that template has no tool messages
            out.append((tmpl, conv, None, {}))
        out.append(("qwen3", "tool_calls", [WEATHER_TOOL, SEARCH_TOOL], {}))
        out.append(("qwen3", "single_tool_call", [SEARCH_TOOL], {}))
        out.append(("qwen3", "system_user", [WEATHER_TOOL], {}))
        out.append(("qwen3", "single_user", [], {}))
        out.append(("qwen3", "thinking", None, {"enable_thinking": False}))
    for tmpl in ["deepseek_v3", "gemma3"]:
        for conv in CONVERSATIONS:
            if conv not in ("tool_calls", "single_tool_call", "continue_after_tool"):
                out.append((tmpl, conv, None, {}))
    for conv in ["multi_turn", "tool_calls", "single_user", "unicode_and_specials"]:
        out.append(("features", conv, None, {}))
    out.append(("features", "tool_calls", [WEATHER_TOOL, SEARCH_TOOL], {}))
    out.append(("llamaish_tools", "single_tool_call", [SEARCH_TOOL], {}))
    out.append(("llamaish_tools", "single_tool_call", [SEARCH_TOOL], {"tools_in_user_message": False, "date_string": "26 Jul 2024"}))
    out.append(("llamaish_tools", "multi_turn", None, {}))
    out.append(("llamaish_tools", "tool_calls", [WEATHER_TOOL], {}))  # raises: two tool calls
    out.append(("llamaish_tools", "continue_after_tool", [WEATHER_TOOL], {}))
    # Mistral Nemo: every conversation (those with tool calls raise: their
    # ids are not nine characters), and tools.
    for conv in CONVERSATIONS:
        out.append(("mistral_nemo", conv, None, {}))
    out.append(("mistral_nemo", "mistral_tool_calls", None, {}))
    out.append(("mistral_nemo", "mistral_tool_calls", [WEATHER_TOOL, SEARCH_TOOL], {}))
    out.append(("mistral_nemo", "system_user", [WEATHER_TOOL], {}))
    out.append(("mistral_nemo", "not_alternating", None, {}))
    for conv in ["single_user", "system_user", "multi_turn", "unicode_and_specials", "long_history"]:
        out.append(("internlm2", conv, None, {}))
    return out


def load_templates():
    env = make_env()
    templates = {}
    for name in ["features", "llamaish_tools"]:
        with open(os.path.join(TESTDATA, "templates", name + ".jinja"), encoding="utf-8") as f:
            src = f.read()
        templates[name] = (env.from_string(src), {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"})
    for name in ["qwen3", "llama3_1", "deepseek_v3", "gemma3", "mistral_nemo", "internlm2"]:
        path = os.path.join(CACHE, "tokenizers", name, "tokenizer_config.json")
        if not os.path.exists(path):
            sys.exit(f"missing {path}: run scripts/testdata.sh first")
        with open(path, encoding="utf-8") as f:
            cfg = json.load(f)
        templates[name] = (env.from_string(cfg["chat_template"]), special_tokens(cfg))
    return templates


def main():
    templates = load_templates()
    out = []
    for tmpl, conv, tools, kwargs in cases():
        for add_gen in (False, True):
            template, special = templates[tmpl]
            messages = json.loads(json.dumps(conversation(conv)))  # fresh copies
            case = {
                "template": tmpl,
                "conversation": conv,
                "add_generation_prompt": add_gen,
                "messages": messages,
                "tools": tools,
                "kwargs": kwargs,
            }
            try:
                case["output"] = template.render(
                    messages=messages, tools=tools, documents=None, add_generation_prompt=add_gen, **special, **kwargs
                )
            except Exception as e:  # TemplateError, or a TypeError Python raises
                case["error"] = f"{type(e).__name__}: {e}"
            out.append(case)
    os.makedirs(os.path.join(TESTDATA, "golden"), exist_ok=True)
    path = os.path.join(TESTDATA, "golden", "renders.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"reference": f"jinja2 {jinja2.__version__}", "now": NOW.isoformat(), "cases": out}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {path}: {len(out)} cases")


if __name__ == "__main__":
    main()
