// Package jsonscan is the one JSON scanner Switchyard reads client request
// bodies with. The gateway, the router and the simulated worker all read a
// body through it, so all three see exactly the members the vLLM worker
// behind them sees, and nothing a worker ignores can steer a routing
// decision.
//
// # The key rule
//
// vLLM's OpenAI server is FastAPI: a route takes its body as a Pydantic
// model (`request: ChatCompletionRequest`), which FastAPI builds by reading
// the body with Starlette's `await request.json()` — Python's json.loads —
// and validating the resulting dict (fastapi/routing.py). Two rules follow,
// and this package applies them everywhere:
//
//   - Keys are compared exactly, after their escapes are decoded: Pydantic
//     matches field names byte for byte, so "Messages" is not "messages". It
//     is an extra field, which vLLM's OpenAIBaseModel (extra="allow") keeps
//     unused and logs as "present in the request but ignored"
//     (vllm/entrypoints/openai/engine/protocol.py). encoding/json, by
//     contrast, matches keys case-insensitively, which is why no reader here
//     decodes a body with it.
//   - Within one object, the last of several members with the same key is
//     the one that counts, and the earlier ones are as if absent: json.loads
//     stores the members in a dict one after the other. The key keeps the
//     position of its first occurrence (a dict's insertion order), which only
//     a template that iterates a free-form object (tools, documents) can see.
//
// The grammar is RFC 8259's, with encoding/json's nesting limit (MaxDepth).
// Python's extensions to it (NaN, Infinity) are not accepted, and invalid
// UTF-8 inside strings is accepted as encoding/json accepts it; no client
// sends either.
//
// # Three ways to read
//
//   - Members reports the top-level members of a document with the byte
//     spans of their values, without decoding them: the gateway reads the few
//     fields it needs from a body of megabytes this way, and splices a change
//     into it (Splice) instead of re-encoding it.
//   - Decoder is a typed, single-pass reader for hot paths (the router's chat
//     fast path): strings are scanned 8 bytes at a time and decoded in the
//     same pass. It gives up (returns false) on anything its caller does not
//     expect, and the caller then reads the body with a general decoder.
//   - LastWins rewrites a document so that no object has a repeated key,
//     following the rule above, so a general decoder that cannot be told the
//     rule (go-json-experiment's) reads the members vLLM reads.
//
// All three stop at the first syntax error with a *SyntaxError that says
// where: line, column, byte offset, and the path of the member it is in
// (messages[2].content). The scanner keeps its nesting in a bit stack, not
// in recursion, so a hostile body costs a bit per level (only LastWins's
// rewrite of an object recurses, through the objects it rewrites); every
// operation is linear in the size of the document.
package jsonscan
