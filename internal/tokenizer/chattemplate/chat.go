// Package chattemplate renders Hugging Face chat templates: Jinja templates
// run the way transformers runs them (an immutable sandbox with
// trim_blocks, lstrip_blocks and loop controls, plus its tojson,
// raise_exception and strftime_now), so the prompt text is byte-for-byte
// what Python would produce — vLLM renders with transformers, and one
// differing character shifts every later token.
//
// The interpreter is written for chat templates, not as a general Jinja:
// template inheritance, includes, imports, call blocks and recursive loops
// are refused at compile time.
package chattemplate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// ErrNoTemplate means a model directory declares no chat template.
var ErrNoTemplate = errors.New("no chat template")

// Chat is a model's chat template with the special tokens transformers
// passes to it. It is safe for concurrent use.
type Chat struct {
	def     *Template
	toolUse *Template // the "tool_use" named template, when there is one
	special map[string]any
}

// Options are the arguments of transformers' apply_chat_template.
type Options struct {
	AddGenerationPrompt bool
	// Tools is the tools list (OpenAI function definitions) or nil, which
	// a template sees as None.
	Tools []any
	// Documents is the documents list for RAG templates, or nil.
	Documents []any
	// Kwargs are extra template variables (vLLM's chat_template_kwargs,
	// e.g. enable_thinking).
	Kwargs map[string]any
	// Now is the clock of strftime_now; nil means time.Now.
	Now func() time.Time
	// MaxBytes caps the rendered prompt: a render that outgrows it fails
	// with an error wrapping ErrTooLarge. 0: no cap.
	MaxBytes int
}

// New compiles a chat template. special holds the special-token variables
// (bos_token, eos_token, ...), as strings.
func New(template string, special map[string]any) (*Chat, error) {
	t, err := Compile(template)
	if err != nil {
		return nil, err
	}
	return &Chat{def: t, special: special}, nil
}

// LoadDir reads a model directory's chat template: chat_template.jinja when
// present (newer transformers save it there), else tokenizer_config.json's
// chat_template (a string, or a list of named templates). Special tokens
// come from tokenizer_config.json. It returns ErrNoTemplate when the
// directory has none.
func LoadDir(dir string) (*Chat, error) {
	var cfg struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	var raw map[string]json.RawMessage
	data, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read chat template: %w", err)
	default:
		if err := json.Unmarshal(data, &raw); err != nil {
			return nil, fmt.Errorf("parse tokenizer_config.json: %w", err)
		}
		cfg.ChatTemplate = raw["chat_template"]
	}
	special, err := specialTokens(raw)
	if err != nil {
		return nil, err
	}
	c := &Chat{special: special}
	if jinja, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja")); err == nil {
		if c.def, err = Compile(string(jinja)); err != nil {
			return nil, fmt.Errorf("compile chat_template.jinja: %w", err)
		}
		return c, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read chat template: %w", err)
	}
	if len(cfg.ChatTemplate) == 0 || string(cfg.ChatTemplate) == "null" {
		return nil, ErrNoTemplate
	}
	var single string
	if err := json.Unmarshal(cfg.ChatTemplate, &single); err == nil {
		if c.def, err = Compile(single); err != nil {
			return nil, fmt.Errorf("compile chat template: %w", err)
		}
		return c, nil
	}
	var named []struct{ Name, Template string }
	if err := json.Unmarshal(cfg.ChatTemplate, &named); err != nil {
		return nil, fmt.Errorf("parse chat_template: %w", err)
	}
	for _, n := range named {
		t, err := Compile(n.Template)
		if err != nil {
			return nil, fmt.Errorf("compile chat template %q: %w", n.Name, err)
		}
		switch n.Name {
		case "default":
			c.def = t
		case "tool_use":
			c.toolUse = t
		}
	}
	if c.def == nil {
		return nil, errors.New("chat_template: named templates without a \"default\"")
	}
	return c, nil
}

// specialTokens extracts what transformers' special_tokens_map holds: each
// special token as its string, when set.
func specialTokens(cfg map[string]json.RawMessage) (map[string]any, error) {
	out := map[string]any{}
	for _, name := range []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"} {
		raw, ok := cfg[name]
		if !ok {
			continue
		}
		s, ok, err := tokenString(raw)
		if err != nil {
			return nil, fmt.Errorf("tokenizer_config.json %s: %w", name, err)
		}
		if ok {
			out[name] = s
		}
	}
	if raw, ok := cfg["additional_special_tokens"]; ok {
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err == nil && len(list) > 0 {
			strs := make([]any, 0, len(list))
			for _, r := range list {
				if s, ok, err := tokenString(r); err == nil && ok {
					strs = append(strs, s)
				}
			}
			out["additional_special_tokens"] = strs
		}
	}
	return out, nil
}

// tokenString reads a special token written as a string or as an
// AddedToken object ({"content": ...}).
func tokenString(raw json.RawMessage) (string, bool, error) {
	if string(raw) == "null" {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, true, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", false, errors.New("neither a string nor a token object")
	}
	return *obj.Content, true, nil
}

// SpecialTokens returns the special-token variables the template sees.
func (c *Chat) SpecialTokens() map[string]any { return c.special }

// Render renders messages (a list of message dicts, as ParseJSON returns
// for an OpenAI messages array) into the prompt text.
func (c *Chat) Render(messages []any, o Options) (string, error) {
	return c.RenderContext(context.Background(), messages, o)
}

// RenderContext is Render under ctx: once ctx is done, the render stops
// (within some microseconds of work) with ctx's error.
func (c *Chat) RenderContext(ctx context.Context, messages []any, o Options) (string, error) {
	s, _, err := c.renderCounted(ctx, messages, o)
	return s, err
}

// renderCounted is RenderContext, also returning the render's steps.
func (c *Chat) renderCounted(ctx context.Context, messages []any, o Options) (string, int64, error) {
	vars := make(map[string]any, len(c.special)+len(o.Kwargs)+4)
	for k, v := range c.special {
		vars[k] = v
	}
	for k, v := range o.Kwargs {
		vars[k] = v
	}
	vars["messages"] = messages
	vars["add_generation_prompt"] = o.AddGenerationPrompt
	vars["tools"] = nil
	if o.Tools != nil {
		vars["tools"] = o.Tools
	}
	vars["documents"] = nil
	if o.Documents != nil {
		vars["documents"] = o.Documents
	}
	t := c.def
	if len(o.Tools) > 0 && c.toolUse != nil {
		t = c.toolUse
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	return t.renderCounted(ctx, vars, now, renderedSize(messages), o.MaxBytes)
}

// renderedSize guesses a prompt's length from its messages' text contents
// plus room for each message's template markup.
func renderedSize(messages []any) int {
	n := 256
	for _, m := range messages {
		n += 64
		if d, ok := m.(*Dict); ok {
			if c, ok := d.Get("content"); ok {
				if s, ok := c.(string); ok {
					n += len(s)
				}
			}
		}
	}
	return n
}
