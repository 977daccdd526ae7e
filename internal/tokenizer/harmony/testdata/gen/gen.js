// Renders every case of ../cases.json with the real harmony renderer and
// writes ../goldens.json: per case the token ids and their decoded text.
// Run through gen.sh, which installs the renderer (npm openai-harmony, the
// openai/harmony Rust crate compiled to WebAssembly) into testdata-cache/.
//
// A case is an OpenAI chat request. The renderer takes harmony messages, so
// this file first turns the request into them as vLLM's gpt-oss path does
// (vllm/entrypoints/openai/parser/harmony_utils.py: extract_instructions_
// from_messages, build_harmony_preamble, parse_chat_input_to_harmony_message,
// auto_drop_analysis_messages, render_for_completion; and
// python/openai_harmony/__init__.py, whose to_dict builds the JSON the Rust
// side reads). Each step names the Python it follows; the library decides
// everything from the harmony messages on.
//
// The harmony encoding needs o200k_base.tiktoken, which the library fetches
// from base_url and checks against its published sha256. The file is the
// gpt-oss fixture's byte-level BPE vocabulary written out in rank order, so
// it is rebuilt here from testdata-cache/tokenizers/gptoss/tokenizer.json,
// checked against the same hash, and served from a loopback HTTP server.

import crypto from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const testdata = path.join(here, "..");
const cache = process.env.TESTDATA_CACHE || path.join(here, "../../../../../testdata-cache");
const modules = process.env.HARMONY_NODE_MODULES || path.join(cache, "harmony-node/node_modules");

const O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d";

// o200kBase writes the fixture's vocabulary as a .tiktoken file: each token's
// bytes in base64, a space, its rank. The vocabulary is byte-level BPE, its
// tokens spelled in GPT-2's byte-to-unicode alphabet.
function o200kBase() {
  const tok = JSON.parse(fs.readFileSync(path.join(cache, "tokenizers/gptoss/tokenizer.json"), "utf8"));
  const bs = [];
  for (let b = 0x21; b <= 0x7e; b++) bs.push(b);
  for (let b = 0xa1; b <= 0xac; b++) bs.push(b);
  for (let b = 0xae; b <= 0xff; b++) bs.push(b);
  const cs = [...bs];
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n++);
    }
  }
  const byteOf = new Map(cs.map((c, i) => [String.fromCodePoint(c), bs[i]]));
  const entries = Object.entries(tok.model.vocab).sort((a, b) => a[1] - b[1]);
  const lines = entries.map(([t, rank], i) => {
    if (rank !== i) throw new Error(`vocabulary has no rank ${i}`);
    const bytes = Buffer.from([...t].map((ch) => {
      const b = byteOf.get(ch);
      if (b === undefined) throw new Error(`token ${JSON.stringify(t)} is not byte-level`);
      return b;
    }));
    return `${bytes.toString("base64")} ${rank}\n`;
  });
  const file = Buffer.from(lines.join(""));
  const sum = crypto.createHash("sha256").update(file).digest("hex");
  if (sum !== O200K_SHA256) throw new Error(`o200k_base.tiktoken from the fixture has sha256 ${sum}, want ${O200K_SHA256}`);
  return file;
}

// The package's glue fetches its .wasm from a file: URL, which Node's fetch
// does not read: serve those from disk.
const realFetch = globalThis.fetch;
globalThis.fetch = async (input, init) => {
  const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
  if (url.startsWith("file:")) {
    return new Response(fs.readFileSync(fileURLToPath(url)), { headers: { "content-type": "application/wasm" } });
  }
  return realFetch(input, init);
};

// ---- vLLM's request → harmony messages ----

const EFFORT = { low: "Low", medium: "Medium", high: "High" };

// flatten_input_text_content: a string or null as it is; of a list, the
// strings and each dict's "text" (when not None) joined; None when none.
function flattenInput(content) {
  if (content === null || content === undefined || typeof content === "string") return content ?? null;
  if (!Array.isArray(content)) return null;
  const texts = [];
  for (const item of content) {
    if (typeof item === "string") texts.push(item);
    else if (item && typeof item === "object" && item.text !== undefined && item.text !== null) texts.push(item.text);
  }
  return texts.length ? texts.join("") : null;
}

const text = (t) => ({ type: "text", text: t });

// Message.to_dict: the author's model_dump (name None included), the
// contents, and channel, recipient, content_type when set.
function message(role, contents, { name = null, channel, recipient, contentType } = {}) {
  const m = { role, name, content: contents };
  if (channel !== undefined) m.channel = channel;
  if (recipient !== undefined) m.recipient = recipient;
  if (contentType !== undefined) m.content_type = contentType;
  return m;
}

// get_system_message with reasoning_effort and the start date (vLLM's
// VLLM_SYSTEM_START_DATE, the case's date here): SystemContent.new()'s
// defaults, to_dict dropping None fields.
function systemMessage(effort, date) {
  const c = {
    model_identity: "You are ChatGPT, a large language model trained by OpenAI.",
    reasoning_effort: "Medium",
    conversation_start_date: date,
    knowledge_cutoff: "2024-06",
    channel_config: { valid_channels: ["analysis", "commentary", "final"], channel_required: true },
    type: "system_content",
  };
  if (effort !== undefined && effort !== null) {
    if (!(effort in EFFORT)) throw new Error(`reasoning_effort ${effort} is not supported by Harmony`);
    c.reasoning_effort = EFFORT[effort];
  }
  return message("system", [c]);
}

// pydantic's model_dump(exclude_none=True), through which the tools reach
// the Rust side (DeveloperContent.to_dict).
function dropNone(v) {
  if (Array.isArray(v)) return v.map(dropNone);
  if (v && typeof v === "object") {
    const o = {};
    for (const [k, e] of Object.entries(v)) if (e !== null && e !== undefined) o[k] = dropNone(e);
    return o;
  }
  return v;
}

// get_developer_message: the instructions when not None, the function tools
// (create_tool_definition: name, description or "", parameters) as the
// "functions" namespace when there are any.
function developerMessage(instructions, tools) {
  const c = { type: "developer_content" };
  if (instructions !== null && instructions !== undefined) c.instructions = instructions;
  const fns = (tools || []).map((t) => {
    if (t.type !== "function") throw new Error(`tool type ${t.type} not supported`);
    return { name: t.function.name, description: t.function.description || "", parameters: t.function.parameters ?? null };
  });
  if (fns.length) c.tools = { functions: { name: "functions", description: null, tools: fns } };
  return message("developer", [dropNone(c)]);
}

// parse_chat_input_to_harmony_message.
function parseMessage(m, toolIdNames) {
  const role = m.role;
  const out = [];
  const toolCalls = m.tool_calls ?? [];
  if (role === "assistant" && toolCalls.length) {
    const content = flattenInput(m.content);
    if (content) out.push(message("assistant", [text(content)], { channel: "commentary" }));
    if (m.reasoning) out.push(message("assistant", [text(m.reasoning)], { channel: "analysis" }));
    for (const call of toolCalls) {
      const fn = call.function ?? {};
      const name = fn.name ?? "";
      // Python's f"functions.{name}": a None name (only via an explicit null) prints None.
      const nameText = fn.name === null ? "None" : name;
      out.push(message("assistant", [text(fn.arguments || "")], { channel: "commentary", recipient: `functions.${nameText}`, contentType: "json" }));
    }
    return out;
  }
  if (role === "tool") {
    const id = m.tool_call_id ?? "";
    const name = id in toolIdNames ? toolIdNames[id] : "";
    const content = flattenInput(m.content) || "";
    return [message("tool", [text(content)], { name: `functions.${name}`, channel: "commentary", recipient: "assistant" })];
  }
  if (role === "assistant" && m.reasoning) out.push(message("assistant", [text(m.reasoning)], { channel: "analysis" }));
  const content = m.content || "";
  // A list's parts are one TextContent each, c.get("text", "") (a refusal part is empty).
  const contents = typeof content === "string" ? [text(content)] : content.map((c) => text(c.text ?? ""));
  if (role === "assistant" && contents.length && contents[0].text) {
    out.push(message("assistant", contents, { channel: "final" }));
  } else if (role === "system" || role === "developer") {
    // get_system_or_developer_message without
    // VLLM_GPT_OSS_HARMONY_SYSTEM_INSTRUCTIONS: a developer message.
    const instructions = flattenInput(m.content);
    if (instructions !== null) out.push(developerMessage(instructions, null));
  } else if (role !== "assistant") {
    if (!["user", "system", "developer", "tool"].includes(role)) throw new Error(`Unknown role: ${role}`);
    out.push(message(role, contents));
  }
  return out;
}

// auto_drop_analysis_messages: analysis messages before the last assistant
// message on the final channel go.
function autoDropAnalysis(msgs) {
  let last = -1;
  for (let i = msgs.length - 1; i >= 0; i--) {
    if (msgs[i].role === "assistant" && msgs[i].channel === "final") {
      last = i;
      break;
    }
  }
  return msgs.filter((m, i) => !(i < last && m.channel === "analysis"));
}

// The chat path of vLLM's _make_request_with_harmony: the leading system or
// developer message peeled off as the developer instructions, the preamble
// (a developer message only when the instructions are non-empty or there
// are tools), the other messages, the analysis drop.
function conversation(req, date) {
  let msgs = req.messages;
  let instructions = null;
  if (msgs.length && (msgs[0].role === "system" || msgs[0].role === "developer")) {
    instructions = flattenInput(msgs[0].content);
    msgs = msgs.slice(1);
  }
  const out = [systemMessage(req.reasoning_effort, date)];
  if (instructions || (req.tools && req.tools.length)) out.push(developerMessage(instructions, req.tools));
  const toolIdNames = {};
  for (const m of msgs) {
    for (const call of m.tool_calls ?? []) {
      // tool_id_names[tool_call.get("id")] = function.get("name"): a
      // missing name maps to None, which the f-string prints as "None".
      if (call.id === undefined) continue; // keyed None: no tool_call_id finds it
      const fn = call.function ?? {};
      toolIdNames[call.id] = fn.name === undefined || fn.name === null ? "None" : fn.name;
    }
  }
  for (const m of msgs) out.push(...parseMessage(m, toolIdNames));
  return { messages: autoDropAnalysis(out) };
}

// JSON.parse orders integer-like keys first, Python and serde_json
// (preserve_order) keep the request's order: such keys would render
// otherwise here than on the worker.
function checkKeys(v, where) {
  if (Array.isArray(v)) v.forEach((e) => checkKeys(e, where));
  else if (v && typeof v === "object") {
    for (const [k, e] of Object.entries(v)) {
      if (/^(0|[1-9][0-9]*)$/.test(k)) throw new Error(`${where}: integer-like key ${k} would be reordered by JSON.parse`);
      checkKeys(e, where);
    }
  }
}

// JSON.parse reads 5.0 and 5 as one number, Python as a float and an int,
// which serde_json prints as 5.0 and 5; exponent forms likewise. A case
// holding such a number would be rendered otherwise here than on the worker.
function checkNumbers(raw) {
  const m = raw.match(/(?<![\d.])-?\d+(?:\.0+(?!\d)|(?:\.\d+)?[eE][-+]?\d+)/);
  if (m) throw new Error(`cases.json: the number ${m[0]} reads otherwise in JavaScript than in Python: write it another way`);
}

async function main() {
  const vocab = o200kBase();
  const srv = http.createServer((req, res) => {
    if (req.url === "/o200k_base.tiktoken") res.end(vocab);
    else {
      res.statusCode = 404;
      res.end();
    }
  });
  await new Promise((resolve) => srv.listen(0, "127.0.0.1", resolve));
  try {
    const harmony = await import(pathToFileURL(path.join(modules, "openai-harmony/dist/openai_harmony.js")).href);
    const enc = await harmony.load_harmony_encoding("HarmonyGptOss", `http://127.0.0.1:${srv.address().port}/`);
    const raw = fs.readFileSync(path.join(testdata, "cases.json"), "utf8");
    checkNumbers(raw.replace(/"(?:[^"\\]|\\.)*"/g, '""'));
    const cases = JSON.parse(raw);
    const goldens = {};
    for (const c of cases) {
      checkKeys(c.body, c.name);
      const conv = conversation(c.body, c.date);
      // render_for_completion: next turn assistant, the library's own
      // analysis drop off (vLLM dropped already).
      const ids = Array.from(enc.renderConversationForCompletion(conv, "assistant", { auto_drop_analysis: false }));
      goldens[c.name] = { ids, text: enc.decodeUtf8(Uint32Array.from(ids)) };
    }
    const lines = Object.entries(goldens).map(([name, g]) => `  ${JSON.stringify(name)}: {\n    "text": ${JSON.stringify(g.text)},\n    "ids": ${JSON.stringify(g.ids)}\n  }`);
    fs.writeFileSync(path.join(testdata, "goldens.json"), `{\n${lines.join(",\n")}\n}\n`);
    console.log(`gen: ${cases.length} goldens written with openai-harmony (${enc.name})`);
  } finally {
    srv.close();
  }
}

await main();
