package harmony

import (
	"fmt"
	"strings"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	"github.com/switchyard-dev/switchyard/internal/tokenizer"
	"github.com/switchyard-dev/switchyard/internal/tokenizer/chattemplate"
)

// The request's messages become harmony messages as vLLM's
// parse_chat_input_to_harmony_message makes them. vLLM reads the request's
// message dicts as sent, not as it hands them to a chat template, so this
// reads tokenizer.Message.Source where there is one.

func inputError(i int, field, msg string) error {
	return &tokenizer.InputError{Param: fmt.Sprintf("messages[%d]%s", i, field), Msg: msg}
}

// flatten is vLLM's flatten_input_text_content: a string as it is, the
// "text" of every part that has one joined without a separator, nil (None)
// for null content or parts without text.
func flatten(m tokenizer.Message) *string {
	if m.Source == nil {
		return &m.Content
	}
	c := m.Source.Content
	switch {
	case c.Text != nil:
		return c.Text
	case c.Parts == nil:
		return nil
	}
	var b strings.Builder
	found := false
	for _, p := range c.Parts {
		if p.Text != nil {
			b.WriteString(*p.Text)
			found = true
		}
	}
	if !found {
		return nil
	}
	s := b.String()
	return &s
}

// singleText is the content of a user or assistant message: harmony gets
// one text content per part and tokenizes each part by itself, which text
// cannot stand for, so more than one part is refused. A part without text
// (a refusal) is empty, as vLLM's c.get("text", "").
func singleText(m tokenizer.Message, i int) (string, error) {
	if m.Source == nil {
		return m.Content, nil
	}
	c := m.Source.Content
	switch {
	case c.Text != nil:
		return *c.Text, nil
	case len(c.Parts) > 1:
		return "", inputError(i, ".content", "content in several parts is not supported for harmony (vLLM renders each part on its own): send one string")
	case len(c.Parts) == 1 && c.Parts[0].Text != nil:
		return *c.Parts[0].Text, nil
	}
	return "", nil
}

func reasoning(m tokenizer.Message) string {
	r := m.Reasoning
	if m.Source != nil {
		// vLLM's harmony path reads "reasoning" only, not
		// "reasoning_content".
		r = m.Source.Reasoning
	}
	if r == nil {
		return ""
	}
	return *r
}

// call is an assistant's tool call.
type call struct {
	id, name, arguments string
	hasID, hasName      bool
}

// toolCalls reads a message's tool_calls as vLLM's
// parse_chat_input_to_harmony_message does: a missing function, name or
// arguments is empty, null arguments are empty, a missing type is no
// matter. What Python would turn into other text (a null name prints as
// "None") or refuse (arguments that are not a string, a type other than
// "function") is refused.
func toolCalls(m tokenizer.Message, i int) ([]call, error) {
	raw := m.ToolCalls
	if m.Source != nil {
		raw = m.Source.ToolCalls
	}
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if m.Role != openaiapi.RoleAssistant {
		return nil, inputError(i, ".tool_calls", "only an assistant message has tool calls")
	}
	v, err := chattemplate.ParseJSON(raw)
	list, ok := v.([]any)
	if err != nil || !ok {
		return nil, inputError(i, ".tool_calls", "must be an array of tool calls")
	}
	out := make([]call, len(list))
	for j, item := range list {
		field := fmt.Sprintf(".tool_calls[%d]", j)
		if _, ok := item.(*chattemplate.Dict); !ok {
			return nil, inputError(i, field, "a tool call must be an object")
		}
		var c call
		idV, hasID := get(item, "id")
		if c.id, c.hasID = idV.(string); hasID && !c.hasID {
			return nil, inputError(i, field+".id", "must be a string")
		}
		if typ, has := get(item, "type"); has && typ != "function" {
			return nil, inputError(i, field+".type", `only "function" tool calls are supported`)
		}
		fn, hasFn := get(item, "function")
		if _, ok := fn.(*chattemplate.Dict); hasFn && !ok {
			return nil, inputError(i, field+".function", "must be an object")
		}
		nameV, hasName := get(fn, "name")
		if c.name, c.hasName = nameV.(string); hasName && !c.hasName {
			return nil, inputError(i, field+".function.name", "must be a string")
		}
		switch a, _ := get(fn, "arguments"); a := a.(type) {
		case nil:
		case string:
			c.arguments = a
		default:
			return nil, inputError(i, field+".function.arguments", "must be a string (the arguments as JSON)")
		}
		out[j] = c
	}
	return out, nil
}

// toolCallNames maps each tool call's id to its function's name, for the
// tool results that answer it: the last call with an id wins, as in vLLM's
// dict, and a call without a name maps its id to None, which Python
// prints as "None".
func toolCallNames(msgs []tokenizer.Message, first int) (map[string]string, error) {
	names := map[string]string{}
	for i, m := range msgs {
		calls, err := toolCalls(m, first+i)
		if err != nil {
			return nil, err
		}
		for _, c := range calls {
			switch {
			case !c.hasID:
				// Keyed None: no tool message's tool_call_id (a
				// string) finds it.
			case c.hasName:
				names[c.id] = c.name
			default:
				names[c.id] = "None"
			}
		}
	}
	return names, nil
}

func appendMessage(out []message, m tokenizer.Message, i int, names map[string]string) ([]message, error) {
	content := fmt.Sprintf("messages[%d].content", i)
	switch m.Role {
	case openaiapi.RoleAssistant:
		calls, err := toolCalls(m, i)
		if err != nil {
			return nil, err
		}
		thought := reasoning(m)
		if len(calls) > 0 {
			text := flatten(m)
			if text != nil && *text != "" {
				out = append(out, message{author: "assistant", channel: "commentary", text: *text, param: content})
			}
			if thought != "" {
				out = append(out, message{author: "assistant", channel: "analysis", text: thought, param: fmt.Sprintf("messages[%d].reasoning", i)})
			}
			for j, c := range calls {
				out = append(out, message{author: "assistant", recipient: "functions." + c.name, channel: "commentary", ctype: "json",
					text: c.arguments, param: fmt.Sprintf("messages[%d].tool_calls[%d]", i, j)})
			}
			return out, nil
		}
		if thought != "" {
			out = append(out, message{author: "assistant", channel: "analysis", text: thought, param: fmt.Sprintf("messages[%d].reasoning", i)})
		}
		text, err := singleText(m, i)
		if err != nil {
			return nil, err
		}
		if text != "" {
			out = append(out, message{author: "assistant", channel: "final", text: text, param: content})
		}
	case openaiapi.RoleTool:
		id := m.ToolCallID
		if m.Source != nil {
			id = m.Source.ToolCallID
		}
		if id == "" {
			return nil, inputError(i, ".tool_call_id", "a tool message needs the tool_call_id it answers")
		}
		text := flatten(m)
		t := ""
		if text != nil {
			t = *text
		}
		out = append(out, message{author: "functions." + names[id], recipient: "assistant", channel: "commentary", text: t, param: content})
	case openaiapi.RoleSystem, openaiapi.RoleDeveloper:
		text := flatten(m)
		if text != nil {
			out = append(out, message{author: "developer", text: developerText(text, nil), param: content})
		}
	case openaiapi.RoleUser:
		text, err := singleText(m, i)
		if err != nil {
			return nil, err
		}
		out = append(out, message{author: "user", text: text, param: content})
	default:
		return nil, inputError(i, ".role", fmt.Sprintf("role %q is not supported for harmony", m.Role))
	}
	return out, nil
}

// dropAnalysis is vLLM's auto_drop_analysis_messages: the reasoning before
// the last final answer goes. (harmony's own auto_drop_analysis, on by
// default, drops the analysis before the first final answer when the last
// assistant message is one: by then there is none left.)
func dropAnalysis(msgs []message) []message {
	last := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].author == "assistant" && msgs[i].channel == "final" {
			last = i
			break
		}
	}
	out := msgs[:0]
	for i, m := range msgs {
		if i < last && m.channel == "analysis" {
			continue
		}
		out = append(out, m)
	}
	return out
}
