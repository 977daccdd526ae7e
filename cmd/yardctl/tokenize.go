package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/switchyard-dev/switchyard/internal/tokenizer/chattemplate"
	"github.com/switchyard-dev/switchyard/internal/tokenizer/hf"
)

// maxTokenizeInput bounds what tokenize reads from stdin.
const maxTokenizeInput = 256 << 20

// runTokenize prints the token ids of a prompt read on stdin, exactly as
// vLLM would compute them: a plain prompt is tokenized like a completions
// prompt (with the tokenizer's special tokens, e.g. Llama 3's BOS); with
// --chat, stdin holds an OpenAI messages array (or a chat request object
// with "messages", and optionally "tools", "add_generation_prompt" and
// "chat_template_kwargs"), which is rendered with the model's chat template
// and tokenized without adding special tokens, as vLLM does for chat.
func runTokenize(_ context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("yardctl tokenize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("tokenizer", "", "Hugging Face model directory holding tokenizer.json and tokenizer_config.json (required)")
	chat := fs.Bool("chat", false, "stdin is an OpenAI messages JSON array (or chat request object): render the chat template, then tokenize")
	addGen := fs.Bool("add-generation-prompt", true, "with --chat: end the prompt with the assistant turn opener (overridden by the request's add_generation_prompt)")
	render := fs.Bool("render", false, "with --chat: print the rendered prompt text instead of token ids")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("--tokenizer is required")
	}
	tok, err := hf.LoadDir(*dir)
	if err != nil {
		return err
	}
	in, err := io.ReadAll(io.LimitReader(stdin, maxTokenizeInput+1))
	if err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	if len(in) > maxTokenizeInput {
		return fmt.Errorf("stdin is larger than %d bytes", maxTokenizeInput)
	}
	var ids []uint32
	if !*chat {
		ids = tok.EncodeWithSpecialTokens(string(in))
	} else {
		if tok.Chat() == nil {
			return fmt.Errorf("%s has no chat template", *dir)
		}
		msgs, opts, err := chatInput(in, *addGen)
		if err != nil {
			return err
		}
		text, err := tok.Chat().Render(msgs, opts)
		if err != nil {
			return err
		}
		if *render {
			_, err := io.WriteString(stdout, text)
			return err
		}
		ids = tok.Encode(text)
	}
	if ids == nil {
		ids = []uint32{}
	}
	out, err := json.Marshal(ids)
	if err != nil {
		return err
	}
	_, err = stdout.Write(append(out, '\n'))
	return err
}

// chatInput reads a messages array or a chat request object.
func chatInput(in []byte, addGen bool) ([]any, chattemplate.Options, error) {
	opts := chattemplate.Options{AddGenerationPrompt: addGen}
	v, err := chattemplate.ParseJSON(in)
	if err != nil {
		return nil, opts, fmt.Errorf("parse stdin: %w", err)
	}
	switch x := v.(type) {
	case []any:
		return x, opts, nil
	case *chattemplate.Dict:
		m, _ := x.Get("messages")
		msgs, ok := m.([]any)
		if !ok {
			return nil, opts, errors.New("stdin: the request object has no messages array")
		}
		if t, ok := x.Get("tools"); ok && t != nil {
			if opts.Tools, ok = t.([]any); !ok {
				return nil, opts, errors.New("stdin: tools is not an array")
			}
		}
		if g, ok := x.Get("add_generation_prompt"); ok {
			b, isBool := g.(bool)
			if !isBool {
				return nil, opts, errors.New("stdin: add_generation_prompt is not a boolean")
			}
			opts.AddGenerationPrompt = b
		}
		if k, ok := x.Get("chat_template_kwargs"); ok && k != nil {
			kw, isDict := k.(*chattemplate.Dict)
			if !isDict {
				return nil, opts, errors.New("stdin: chat_template_kwargs is not an object")
			}
			opts.Kwargs = map[string]any{}
			for _, key := range kw.Keys() {
				name, _ := key.(string)
				opts.Kwargs[name], _ = kw.Get(key)
			}
		}
		return msgs, opts, nil
	}
	return nil, opts, errors.New("stdin: expected a JSON array of messages or a chat request object")
}
