#!/usr/bin/python3
"""Writes the request goldens for internal/tokenizer/hf: OpenAI chat request
bodies and the prompt text vLLM renders for them.

vLLM does not hand a request's JSON to the chat template as is. Its OpenAI
server (vllm/entrypoints/chat_utils.py: _parse_chat_message_content,
_postprocess_messages; serving_chat: tools via model_dump) first
- flattens each message's content to a string (text parts joined with "\\n"),
- keeps an assistant's tool_calls (an empty list is dropped) and decodes each
  function's arguments from their JSON string; a string that is not valid
  JSON, a value that is not an object, or an empty/missing value becomes {},
- copies reasoning (or reasoning_content) to both keys on an assistant,
  tool_call_id on a tool message, a string name on any message,
- dumps each tool through its pydantic model: {"type", "function": {"name",
  "description", "parameters", extra fields...}, extra fields...} with None
  for absent declared fields,
- passes chat_template_kwargs as extra template variables.
vllm_inputs() below is that transformation written from vLLM's source; the
render is jinja2 configured as transformers configures it (shared with
chattemplate's generator).

    scripts/testdata.sh                     # fixture tokenizers (qwen3, llama3_1, mistral_nemo)
    /usr/bin/python3 internal/tokenizer/hf/testdata/gen/gen_requests.py

Writes testdata/golden/requests.json.
"""
import copy
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(TESTDATA, "..", "..", "chattemplate", "testdata", "gen"))
import gen_renders  # noqa: E402  (make_env, special_tokens, fixture paths)


def flatten(content):
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for part in content:
        t = part.get("type")
        if t in ("text", "input_text", "output_text"):
            if part.get("text") is not None:
                texts.append(part["text"])
        elif t == "refusal":
            if part.get("refusal") is not None:
                texts.append(part["refusal"])
        else:
            raise ValueError(f"unsupported part {t}")
    return "\n".join(texts)


def decode_arguments(value):
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return {}
    return value if isinstance(value, dict) else {}


def dump_model(obj, declared):
    out = {k: obj.get(k) for k in declared}
    for k, v in obj.items():
        if k not in out:
            out[k] = v
    return out


def vllm_inputs(body):
    conversation = []
    for m in copy.deepcopy(body["messages"]):
        msg = {"role": m["role"], "content": flatten(m.get("content"))}
        if m["role"] == "assistant":
            if m.get("tool_calls") is not None:
                msg["tool_calls"] = list(m["tool_calls"])
            reasoning = m.get("reasoning")
            if reasoning is None:
                reasoning = m.get("reasoning_content")
            if reasoning is not None:
                msg["reasoning"] = reasoning
                msg["reasoning_content"] = reasoning
        elif m["role"] == "tool":
            if "tool_call_id" in m:
                msg["tool_call_id"] = m["tool_call_id"]
        if isinstance(m.get("name"), str):
            msg["name"] = m["name"]
        if m["role"] == "developer":
            msg["tools"] = m.get("tools")
        conversation.append(msg)
    for msg in conversation:
        calls = msg.get("tool_calls")
        if msg["role"] != "assistant" or not isinstance(calls, list):
            continue
        if not calls:
            del msg["tool_calls"]
            continue
        for item in calls:
            item["function"]["arguments"] = decode_arguments(item["function"].get("arguments"))
    tools = body.get("tools")
    if tools is not None:
        tools = [
            dict(dump_model(t, ["type", "function"]), type="function", function=dump_model(t["function"], ["name", "description", "parameters"]))
            for t in tools
        ]
    kwargs = dict(body.get("chat_template_kwargs") or {})
    return conversation, tools, body.get("add_generation_prompt", True), kwargs


def continue_final(rendered, conversation):
    """transformers' apply_chat_template with continue_final_message=True
    (vLLM passes the flag through): cut the render after the final message."""
    final = conversation[-1]["content"]
    if final.strip() not in rendered:
        raise ValueError("final message not in the render")
    loc = rendered.rindex(final.strip())
    if rendered[loc : loc + len(final.lstrip())] == final:
        return rendered[: loc + len(final.lstrip())]
    return rendered[: loc + len(final.strip())]


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]},
        "strict": True,
    },
}
BARE = {"type": "function", "function": {"name": "now"}}

BODIES = {
    "tool_use": {
        "tools": [WEATHER, BARE],
        "messages": [
            {"role": "system", "content": "Use tools."},
            {"role": "user", "content": "Weather in Oslo and Lima?", "name": "ana"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"unit\": \"c\"}"}},
                {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Lima\"}"}},
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "-3"},
            {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "19"}, {"type": "text", "text": "sunny"}]},
            {"role": "assistant", "content": "Oslo -3, Lima 19 and sunny."},
            {"role": "user", "content": "And now?"},
        ],
    },
    "bad_arguments": {
        "tools": [BARE],
        "messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "now", "arguments": "not json"}},
                {"id": "b", "type": "function", "function": {"name": "now", "arguments": ""}},
                {"id": "c", "type": "function", "function": {"name": "now", "arguments": "[1, 2]"}},
                {"id": "d", "type": "function", "function": {"name": "now"}},
            ]},
            {"role": "assistant", "content": "plain", "tool_calls": []},
            {"role": "user", "content": "y"},
        ],
    },
    "reasoning_and_parts": {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "part one"}, {"type": "input_text", "text": "part two"}]},
            {"role": "assistant", "content": "four", "reasoning_content": "2+2"},
            {"role": "user", "content": "again"},
            {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}], "reasoning": "policy"},
            {"role": "user", "content": "last"},
        ],
    },
    "reasoning_after_query": {
        "tools": [BARE],
        "messages": [
            {"role": "user", "content": "What time is it?"},
            {"role": "assistant", "content": "", "reasoning": "Ask the clock.", "tool_calls": [{"id": "t", "type": "function", "function": {"name": "now", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "t", "content": "12:00"},
            {"role": "assistant", "content": "Noon.", "reasoning_content": "Read it out."},
        ],
    },
    "thinking_off": {
        "chat_template_kwargs": {"enable_thinking": False},
        "messages": [{"role": "user", "content": "Hi"}],
    },
    "no_generation_prompt": {
        "add_generation_prompt": False,
        "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}, {"role": "assistant", "content": "A"}],
    },
    "continue_final": {
        "add_generation_prompt": False,
        "continue_final_message": True,
        "messages": [{"role": "user", "content": "Write a haiku about rain."}, {"role": "assistant", "content": "Soft rain on the roof,"}],
    },
    "continue_trailing_space": {
        "add_generation_prompt": False,
        "continue_final_message": True,
        "messages": [{"role": "user", "content": "Tell a story."}, {"role": "assistant", "content": "Once upon a time, "}],
    },
    "continue_leading_space": {
        "add_generation_prompt": False,
        "continue_final_message": True,
        "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Go on."}, {"role": "assistant", "content": "\n  indented start"}],
    },
    "llama_tool": {
        "tools": [WEATHER, BARE],
        "messages": [
            {"role": "system", "content": "Be exact."},
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "{\"temp\": -3}"},
        ],
    },
    "mistral_tool": {
        "tools": [WEATHER, BARE],
        "messages": [
            {"role": "system", "content": "Be exact."},
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c00000001", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
            {"role": "tool", "tool_call_id": "c00000001", "content": "{\"temp\": -3}"},
            {"role": "assistant", "content": "It is -3."},
            {"role": "user", "content": "And now?"},
        ],
    },
}

CASES = [
    ("qwen3", "tool_use"), ("qwen3", "bad_arguments"), ("qwen3", "reasoning_and_parts"),
    ("qwen3", "reasoning_after_query"), ("qwen3", "thinking_off"), ("qwen3", "no_generation_prompt"),
    ("llama3_1", "llama_tool"), ("llama3_1", "reasoning_and_parts"), ("llama3_1", "no_generation_prompt"),
    ("qwen3", "continue_final"), ("qwen3", "continue_trailing_space"), ("qwen3", "continue_leading_space"),
    ("llama3_1", "continue_final"), ("llama3_1", "continue_trailing_space"), ("llama3_1", "continue_leading_space"),
    ("mistral_nemo", "mistral_tool"), ("mistral_nemo", "reasoning_and_parts"), ("mistral_nemo", "no_generation_prompt"),
    ("mistral_nemo", "continue_final"), ("mistral_nemo", "continue_trailing_space"),
]


def main():
    templates = gen_renders.load_templates()
    out = []
    for tmpl, name in CASES:
        body = dict(BODIES[name], model="m")
        template, special = templates[tmpl]
        messages, tools, add_gen, kwargs = vllm_inputs(body)
        case = {"template": tmpl, "name": name, "body": body}
        case["output"] = template.render(
            messages=messages, tools=tools, documents=None, add_generation_prompt=add_gen, **{**special, **kwargs}
        )
        if body.get("continue_final_message"):
            case["output"] = continue_final(case["output"], messages)
        out.append(case)
    path = os.path.join(TESTDATA, "golden", "requests.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"reference": "vLLM request handling + jinja2 " + gen_renders.jinja2.__version__, "cases": out}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {path}: {len(out)} cases")


if __name__ == "__main__":
    main()
