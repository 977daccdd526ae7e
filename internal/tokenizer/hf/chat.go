package hf

import (
	"context"
	"errors"
	"fmt"

	"github.com/switchyard-dev/switchyard/internal/tokenizer"
	"github.com/switchyard-dev/switchyard/internal/tokenizer/chattemplate"
)

// ApplyChatTemplate implements tokenizer.Tokenizer with the directory's chat
// template (or the renderer WithChatRenderer set, which gets the chat as it
// is), handing the template what vLLM's OpenAI server hands transformers'
// apply_chat_template (vllm/entrypoints/chat_utils.py, parse_chat_messages
// and _postprocess_messages; the tools from ChatCompletionToolsParam's
// model_dump):
//   - each message as {role, content}, plus tool_calls and reasoning (also
//     as reasoning_content) for an assistant, tool_call_id for a tool
//     message, name when given, and tools = None for a developer message;
//   - an assistant's tool_calls with each function's arguments decoded from
//     its JSON string to an object: a string that is not a JSON object, or
//     an empty or missing value, becomes {}; an empty list is dropped;
//   - each tool as {type, function: {name, description, parameters, ...},
//     ...}: declared fields first, None when absent, extra fields after;
//   - chat_template_kwargs as extra template variables;
//   - documents as the template's documents, each an object of strings
//     (vLLM's list[dict[str, str]]).
func (t *Tokenizer) ApplyChatTemplate(c *tokenizer.Chat) (string, error) {
	return t.ApplyChatTemplateContext(context.Background(), c, 0)
}

// ApplyChatTemplateContext is ApplyChatTemplate under ctx and a cap on the
// rendered prompt (tokenizer.Tokenizer).
func (t *Tokenizer) ApplyChatTemplateContext(ctx context.Context, c *tokenizer.Chat, maxBytes int) (string, error) {
	if t.renderer != nil {
		return t.renderer.RenderChat(ctx, c, maxBytes)
	}
	if t.chat == nil {
		return "", errors.New("tokenizer has no chat template")
	}
	if c == nil || len(c.Messages) == 0 {
		return "", errors.New("no messages to render")
	}
	msgs := make([]any, len(c.Messages))
	for i, m := range c.Messages {
		d, err := templateMessage(m)
		if err != nil {
			return "", &tokenizer.InputError{Param: fmt.Sprintf("messages[%d].%s", i, err.param), Msg: err.msg}
		}
		msgs[i] = d
	}
	opts := chattemplate.Options{AddGenerationPrompt: c.AddGenerationPrompt, MaxBytes: maxBytes}
	if c.Tools != nil {
		tools, err := templateTools(c.Tools)
		if err != nil {
			return "", &tokenizer.InputError{Param: "tools" + err.param, Msg: err.msg}
		}
		opts.Tools = tools
	}
	if c.Documents != nil {
		docs, err := templateDocuments(c.Documents)
		if err != nil {
			return "", &tokenizer.InputError{Param: "documents" + err.param, Msg: err.msg}
		}
		opts.Documents = docs
	}
	if c.Kwargs != nil {
		v, err := chattemplate.ParseJSON(c.Kwargs)
		d, ok := v.(*chattemplate.Dict)
		if err != nil || !ok {
			return "", &tokenizer.InputError{Param: "chat_template_kwargs", Msg: "must be a JSON object"}
		}
		opts.Kwargs = make(map[string]any, d.Len())
		for _, k := range d.Keys() {
			name, ok := k.(string)
			if !ok {
				continue
			}
			opts.Kwargs[name], _ = d.Get(k)
		}
	}
	out, err := t.chat.RenderContext(ctx, msgs, opts)
	if errors.Is(err, chattemplate.ErrTooLarge) {
		return "", fmt.Errorf("%w: more than %d bytes", tokenizer.ErrTooLarge, maxBytes)
	}
	if err != nil || !c.ContinueFinalMessage {
		return out, err
	}
	return tokenizer.ContinueFinal(out, c.Messages)
}

type fieldError struct{ param, msg string }

func templateMessage(m tokenizer.Message) (*chattemplate.Dict, *fieldError) {
	d := chattemplate.NewDict()
	d.Set("role", m.Role)
	d.Set("content", m.Content)
	switch m.Role {
	case "assistant":
		if m.ToolCalls != nil {
			calls, err := templateToolCalls(m.ToolCalls)
			if err != nil {
				return nil, err
			}
			if calls != nil {
				d.Set("tool_calls", calls)
			}
		}
		if m.Reasoning != nil {
			d.Set("reasoning", *m.Reasoning)
			d.Set("reasoning_content", *m.Reasoning)
		}
	case "tool":
		if m.ToolCallID != "" {
			d.Set("tool_call_id", m.ToolCallID)
		}
	}
	if m.Name != "" {
		d.Set("name", m.Name)
	}
	if m.Role == "developer" {
		d.Set("tools", nil)
	}
	return d, nil
}

// templateToolCalls decodes an assistant's tool_calls; nil means none (an
// empty list, which vLLM drops so templates take the plain path).
func templateToolCalls(raw []byte) (any, *fieldError) {
	v, err := chattemplate.ParseJSON(raw)
	if err != nil {
		return nil, &fieldError{"tool_calls", "invalid JSON: " + err.Error()}
	}
	list, ok := v.([]any)
	if !ok {
		return v, nil // vLLM passes a non-list through untouched
	}
	if len(list) == 0 {
		return nil, nil
	}
	for j, item := range list {
		call, ok := item.(*chattemplate.Dict)
		if !ok {
			return nil, &fieldError{fmt.Sprintf("tool_calls[%d]", j), "a tool call must be an object"}
		}
		fn, _ := call.Get("function")
		fnd, ok := fn.(*chattemplate.Dict)
		typ, hasType := call.Get("type")
		if !ok || (hasType && typ != "function") {
			return nil, &fieldError{fmt.Sprintf("tool_calls[%d]", j), "only function tool calls are supported"}
		}
		fnd.Set("arguments", toolArguments(fnd))
	}
	return list, nil
}

// toolArguments is a tool call's arguments as a template sees them: an
// object, decoded from the JSON string the OpenAI API carries.
func toolArguments(fn *chattemplate.Dict) any {
	v, _ := fn.Get("arguments")
	if s, ok := v.(string); ok {
		parsed, err := chattemplate.ParseJSON([]byte(s))
		if err != nil {
			return chattemplate.NewDict()
		}
		v = parsed
	}
	if d, ok := v.(*chattemplate.Dict); ok {
		return d
	}
	return chattemplate.NewDict()
}

// templateTools is the request's tools as vLLM dumps its pydantic models.
func templateTools(raw []byte) ([]any, *fieldError) {
	list, err := jsonArray(raw, "tools must be an array")
	if err != nil {
		return nil, err
	}
	out := make([]any, len(list))
	for i, item := range list {
		tool, ok := item.(*chattemplate.Dict)
		var fnd *chattemplate.Dict
		if ok {
			fn, _ := tool.Get("function")
			fnd, ok = fn.(*chattemplate.Dict)
		}
		if !ok {
			return nil, &fieldError{fmt.Sprintf("[%d].function", i), "a tool needs a function object"}
		}
		if typ, has := tool.Get("type"); has && typ != "function" {
			return nil, &fieldError{fmt.Sprintf("[%d].type", i), "only function tools are supported"}
		}
		if name, _ := fnd.Get("name"); name == nil {
			return nil, &fieldError{fmt.Sprintf("[%d].function.name", i), "a function needs a name"}
		}
		f := withDeclared(fnd, "name", "description", "parameters")
		t := withDeclared(tool, "type", "function")
		t.Set("type", "function")
		t.Set("function", f)
		out[i] = t
	}
	return out, nil
}

// templateDocuments is the request's documents as vLLM validates them: a
// list of objects whose values are strings.
func templateDocuments(raw []byte) ([]any, *fieldError) {
	list, err := jsonArray(raw, "documents must be an array of objects")
	if err != nil {
		return nil, err
	}
	for i, item := range list {
		doc, ok := item.(*chattemplate.Dict)
		if !ok {
			return nil, &fieldError{fmt.Sprintf("[%d]", i), "a document must be an object of strings"}
		}
		for _, k := range doc.Keys() {
			if v, _ := doc.Get(k); !isString(v) {
				return nil, &fieldError{fmt.Sprintf("[%d].%v", i, k), "a document's values must be strings"}
			}
		}
	}
	return list, nil
}

// jsonArray parses a request field that must be a JSON array; notArray is
// the error for any other value.
func jsonArray(raw []byte, notArray string) ([]any, *fieldError) {
	v, err := chattemplate.ParseJSON(raw)
	if err != nil {
		return nil, &fieldError{"", "invalid JSON: " + err.Error()}
	}
	list, ok := v.([]any)
	if !ok {
		return nil, &fieldError{"", notArray}
	}
	return list, nil
}

func isString(v any) bool {
	_, ok := v.(string)
	return ok
}

// withDeclared is d in a pydantic model_dump's order: the declared fields
// first (None when absent), then the extra fields as they came.
func withDeclared(d *chattemplate.Dict, declared ...string) *chattemplate.Dict {
	out := chattemplate.NewDict()
	for _, k := range declared {
		v, _ := d.Get(k)
		out.Set(k, v)
	}
	for _, k := range d.Keys() {
		if _, done := out.Get(k); !done {
			v, _ := d.Get(k)
			out.Set(k, v)
		}
	}
	return out
}
