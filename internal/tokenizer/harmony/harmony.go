// Package harmony renders chat requests for gpt-oss models the way vLLM's
// OpenAI server does. For those models (model_type "gpt_oss") vLLM does not
// render the model's Jinja chat template on /v1/chat/completions: it turns
// the request into harmony messages and has the openai_harmony library
// render them to token ids (vllm/renderers/online_renderer.py,
// _make_request_with_harmony, and vllm/entrypoints/openai/parser/
// harmony_utils.py). A router that rendered the template instead would
// produce other ids, and KV-aware routing would find nothing cached.
//
// The renderer writes that prompt as text, so the tokenizer turns it into
// the worker's ids: harmony's formatting tokens (<|start|>, <|message|>,
// ...) are special tokens, and the text between them is what harmony
// tokenizes as ordinary text. That holds because harmony encodes each text
// piece on its own and every boundary between two pieces is either a
// special token or a space no pre-token spans; it does not hold for text
// that itself spells a special token (harmony tokenizes it as plain text,
// the tokenizer as the special token), so such requests are refused, as is
// everything else whose ids the router cannot reproduce for sure.
//
// What it follows, from the sources named above and openai/harmony
// (src/encoding.rs, python/openai_harmony/__init__.py, docs/format.md):
//   - a system message of harmony's defaults: the model identity,
//     "Knowledge cutoff: 2024-06", "Current date: " and the date (vLLM's
//     VLLM_SYSTEM_START_DATE, else today), "Reasoning: " and the request's
//     reasoning_effort (medium when absent), the valid channels, and the
//     commentary-channel line when there are function tools;
//   - a developer message with the leading system or developer message's
//     text as "# Instructions" and the tools as a TypeScript-like
//     "functions" namespace;
//   - user messages as they are; later system or developer messages as
//     developer instructions; an assistant's reasoning on the analysis
//     channel, its text on the final channel (commentary when it calls
//     tools), each tool call to functions.NAME as JSON ending in <|call|>;
//     a tool result from functions.NAME to the assistant;
//   - analysis messages before the last final answer dropped;
//   - always the generation prompt, <|start|>assistant: vLLM's harmony
//     path ignores add_generation_prompt, continue_final_message,
//     chat_template_kwargs and documents.
//
// That is vLLM's harmony path since it moved the leading system message
// into the developer instructions (extract_instructions_from_messages and
// build_harmony_preamble); older releases built other prompts (system
// messages as they came, assistant turns without channels), which the
// router's prompt-count check reports as mismatches.
//
// The tests hold the prompts, text and ids, to what openai/harmony itself
// renders (testdata/goldens.json, written by testdata/gen/gen.sh).
package harmony

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	"github.com/switchyard-dev/switchyard/internal/tokenizer"
	"github.com/switchyard-dev/switchyard/internal/tokenizer/chattemplate"
)

// StartDateEnv is the variable vLLM pins the system message's date with;
// the router reads the same one, so both can be pinned alike.
const StartDateEnv = "VLLM_SYSTEM_START_DATE"

// SystemInstructionsEnv is vLLM's switch that moves the instructions from
// the developer message into the system message. New refuses to run with
// it set: that prompt is not implemented.
const SystemInstructionsEnv = "VLLM_GPT_OSS_HARMONY_SYSTEM_INSTRUCTIONS"

// Renderer renders chats in harmony's format. It is safe for concurrent
// use.
type Renderer struct {
	special   func(string) bool
	startDate string
	now       func() time.Time
}

var _ tokenizer.ChatRenderer = (*Renderer)(nil)

// New returns a Renderer. special reports whether the tokenizer would read
// text as a special or added token (hf.Tokenizer.HasAddedToken). The date
// is $VLLM_SYSTEM_START_DATE when set, as on the worker, else today's in
// the process's time zone (vLLM's datetime.now()). The environment is read
// as vLLM reads it, so the router runs with the workers' variables.
func New(special func(string) bool) (*Renderer, error) {
	if v := os.Getenv(SystemInstructionsEnv); v != "" && v != "0" {
		return nil, fmt.Errorf("harmony: %s=%s (instructions in the system message) is not supported", SystemInstructionsEnv, v)
	}
	return &Renderer{special: special, startDate: os.Getenv(StartDateEnv), now: time.Now}, nil
}

// WithClock returns a copy of r dated by now instead of the environment
// and the system clock, for tests.
func (r *Renderer) WithClock(now func() time.Time) *Renderer {
	c := *r
	c.startDate, c.now = "", now
	return &c
}

// The formatting tokens harmony writes.
const (
	tokStart   = "<|start|>"
	tokMessage = "<|message|>"
	tokEnd     = "<|end|>"
	tokCall    = "<|call|>"
	tokChannel = "<|channel|>"
)

// message is one harmony message.
type message struct {
	author    string // the role, or for a tool message the tool's name
	recipient string
	channel   string
	ctype     string // content type
	text      string
	param     string // the request field the text came from, for errors
}

// RenderChat implements tokenizer.ChatRenderer.
func (r *Renderer) RenderChat(ctx context.Context, c *tokenizer.Chat, maxBytes int) (string, error) {
	pieces, err := r.render(ctx, c)
	if err != nil {
		return "", err
	}
	n := 0
	for _, p := range pieces {
		n += len(p.text)
	}
	if maxBytes > 0 && n > maxBytes {
		return "", fmt.Errorf("%w: more than %d bytes", tokenizer.ErrTooLarge, maxBytes)
	}
	var b strings.Builder
	b.Grow(n)
	for _, p := range pieces {
		b.WriteString(p.text)
	}
	return b.String(), nil
}

// piece is a span of the prompt: a formatting token, or text harmony
// tokenizes by itself.
type piece struct {
	text    string
	special bool
}

// ctxCheckEvery is how many messages go by between two looks at the
// context: rendering a message is copying its text.
const ctxCheckEvery = 256

func (r *Renderer) render(ctx context.Context, c *tokenizer.Chat) ([]piece, error) {
	if c == nil || len(c.Messages) == 0 {
		return nil, errors.New("no messages to render")
	}
	effort := "medium"
	if c.ReasoningEffort != nil {
		switch e := *c.ReasoningEffort; e {
		case "low", "medium", "high":
			effort = e
		default:
			return nil, &tokenizer.InputError{Param: "reasoning_effort", Msg: fmt.Sprintf("%q is not supported by harmony (low, medium or high)", e)}
		}
	}
	tools, err := functionTools(c.Tools)
	if err != nil {
		return nil, err
	}
	msgs := c.Messages
	var instructions *string
	if role := msgs[0].Role; role == openaiapi.RoleSystem || role == openaiapi.RoleDeveloper {
		instructions = flatten(msgs[0])
		msgs = msgs[1:]
		if instructions != nil && r.special(*instructions) {
			return nil, &tokenizer.InputError{Param: "messages[0].content", Msg: errSpecial}
		}
	}
	date := r.startDate
	if date == "" {
		date = r.now().Format("2006-01-02")
	}
	out := []message{{author: "system", text: systemText(effort, date, len(tools) > 0), param: "reasoning_effort"}}
	if (instructions != nil && *instructions != "") || len(tools) > 0 {
		out = append(out, message{author: "developer", text: developerText(instructions, tools), param: "tools"})
	}
	first := len(c.Messages) - len(msgs)
	names, err := toolCallNames(msgs, first)
	if err != nil {
		return nil, err
	}
	for i, m := range msgs {
		if i%ctxCheckEvery == ctxCheckEvery-1 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if out, err = appendMessage(out, m, first+i, names); err != nil {
			return nil, err
		}
	}
	out = dropAnalysis(out)
	pieces := make([]piece, 0, 8*len(out)+2)
	for _, m := range out {
		if pieces, err = r.appendPieces(pieces, m); err != nil {
			return nil, err
		}
	}
	return append(pieces, piece{tokStart, true}, piece{"assistant", false}), nil
}

// appendPieces renders m as harmony's Render<Message> does: the header
// (role or tool name, " to=" recipient, <|channel|> channel, " " content
// type), <|message|>, the text, and <|call|> for an assistant's tool call,
// else <|end|>.
func (r *Renderer) appendPieces(dst []piece, m message) ([]piece, error) {
	dst = append(dst, piece{tokStart, true})
	texts := []string{m.author}
	dst = append(dst, piece{m.author, false})
	if m.recipient != "" {
		t := " to=" + m.recipient
		texts = append(texts, t)
		dst = append(dst, piece{t, false})
	}
	if m.channel != "" {
		texts = append(texts, m.channel)
		dst = append(dst, piece{tokChannel, true}, piece{m.channel, false})
	}
	if m.ctype != "" {
		t := " " + m.ctype
		texts = append(texts, t)
		dst = append(dst, piece{t, false})
	}
	dst = append(dst, piece{tokMessage, true})
	if m.text != "" {
		texts = append(texts, m.text)
		dst = append(dst, piece{m.text, false})
	}
	end := tokEnd
	if m.author == "assistant" && m.recipient != "" {
		end = tokCall
	}
	for _, t := range texts {
		if r.special(t) {
			return nil, &tokenizer.InputError{Param: m.param, Msg: errSpecial}
		}
	}
	return append(dst, piece{end, true}), nil
}

const errSpecial = "text that spells a special token (such as <|end|>): harmony tokenizes it as plain text, which the router cannot reproduce"

const (
	modelIdentity   = "You are ChatGPT, a large language model trained by OpenAI."
	knowledgeCutoff = "2024-06"
)

// systemText is the system message vLLM builds: harmony's SystemContent
// defaults with the reasoning effort and the date.
func systemText(effort, date string, functions bool) string {
	channels := "# Valid channels: analysis, commentary, final. Channel must be included for every message."
	if functions {
		channels += "\nCalls to these tools must go to the commentary channel: 'functions'."
	}
	return modelIdentity + "\nKnowledge cutoff: " + knowledgeCutoff + "\nCurrent date: " + date +
		"\n\nReasoning: " + effort + "\n\n" + channels
}

// developerText is harmony's DeveloperContent: the instructions (when not
// None, even empty), then the function tools.
func developerText(instructions *string, tools []tool) string {
	var sections []string
	if instructions != nil {
		sections = append(sections, "# Instructions", *instructions)
	}
	if len(tools) > 0 {
		sections = append(sections, toolsSection(tools))
	}
	return strings.Join(sections, "\n\n")
}

// tool is a function tool as harmony's ToolDescription holds it, its
// parameters already written as a type (empty: none).
type tool struct {
	name, description, params string
}

func toolsSection(tools []tool) string {
	lines := []string{"## functions\n", "namespace functions {\n"}
	for _, t := range tools {
		for _, l := range rustLines(t.description) {
			lines = append(lines, "// "+l)
		}
		if t.params != "" {
			lines = append(lines, "type "+t.name+" = (_: "+t.params+") => any;\n")
		} else {
			lines = append(lines, "type "+t.name+" = () => any;\n")
		}
	}
	lines = append(lines, "} // namespace functions")
	return "# Tools\n\n" + strings.Join(lines, "\n")
}

// rustLines is Rust's str::lines: split at "\n", a "\r" before it dropped
// (a bare "\r" at the end stays), no empty line after a final "\n".
func rustLines(s string) []string {
	var lines []string
	for s != "" {
		line, rest, found := strings.Cut(s, "\n")
		if found {
			line = strings.TrimSuffix(line, "\r")
		}
		lines = append(lines, line)
		s = rest
	}
	return lines
}

// functionTools reads the request's tools as vLLM's ChatCompletionToolsParam
// validates them and create_tool_definition passes them on: a function's
// name, its description ("" when absent) and its parameters (an object,
// or none).
func functionTools(raw []byte) ([]tool, error) {
	if raw == nil {
		return nil, nil
	}
	v, err := chattemplate.ParseJSON(raw)
	list, ok := v.([]any)
	if err != nil || !ok {
		return nil, &tokenizer.InputError{Param: "tools", Msg: "tools must be an array"}
	}
	out := make([]tool, len(list))
	for i, item := range list {
		param := fmt.Sprintf("tools[%d]", i)
		if typ, has := get(item, "type"); has && typ != "function" {
			return nil, &tokenizer.InputError{Param: param + ".type", Msg: "only function tools are supported"}
		}
		fn, _ := get(item, "function")
		name, ok := getString(fn, "name")
		if !ok {
			return nil, &tokenizer.InputError{Param: param + ".function.name", Msg: "a function needs a name"}
		}
		desc, _ := get(fn, "description")
		if _, isStr := desc.(string); desc != nil && !isStr {
			return nil, &tokenizer.InputError{Param: param + ".function.description", Msg: "must be a string"}
		}
		ds, _ := desc.(string)
		t := tool{name: name, description: ds}
		if params, _ := get(fn, "parameters"); params != nil {
			if _, ok := params.(*chattemplate.Dict); !ok {
				return nil, &tokenizer.InputError{Param: param + ".function.parameters", Msg: "must be an object"}
			}
			if depth(params) > maxSchemaDepth {
				return nil, &tokenizer.InputError{Param: param + ".function.parameters", Msg: fmt.Sprintf("nested more than %d deep", maxSchemaDepth)}
			}
			if hasNull(params) {
				// Python drops None values on the way to harmony
				// (model_dump(exclude_none=True)), or keeps them:
				// not a bet to make on every request.
				return nil, &tokenizer.InputError{Param: param + ".function.parameters", Msg: "null values in a tool's parameters are not supported for harmony"}
			}
			if t.params, err = typeScript(params, ""); err != nil {
				return nil, &tokenizer.InputError{Param: param + ".function.parameters", Msg: err.Error() + " in the schema is not supported for harmony"}
			}
		}
		out[i] = t
	}
	return out, nil
}

// maxSchemaDepth bounds a tool's parameters: each level of a nested
// object indents its lines further, so the text grows with the square of
// the depth. vLLM's harmony hands the schema to serde_json, which refuses
// JSON nested 128 deep with the conversation around it.
const maxSchemaDepth = 64

// depth is how deeply v's arrays and objects nest.
func depth(v any) int {
	d := 0
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			d = max(d, depth(e))
		}
	case *chattemplate.Dict:
		for _, k := range x.Keys() {
			e, _ := x.Get(k)
			d = max(d, depth(e))
		}
	default:
		return 0
	}
	return d + 1
}

func hasNull(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case []any:
		for _, e := range x {
			if hasNull(e) {
				return true
			}
		}
	case *chattemplate.Dict:
		for _, k := range x.Keys() {
			if e, _ := x.Get(k); hasNull(e) {
				return true
			}
		}
	}
	return false
}
