package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	"github.com/switchyard-dev/switchyard/internal/tokcheck"
	"github.com/switchyard-dev/switchyard/internal/tokenizer"
	"github.com/switchyard-dev/switchyard/internal/tokenizer/harmony"
	"github.com/switchyard-dev/switchyard/internal/tokenizer/hf"
)

// maxTokenizeInput bounds what tokenize reads from stdin.
const maxTokenizeInput = 256 << 20

// runTokenize prints the token ids of a prompt read on stdin, exactly as
// vLLM would compute them: a plain prompt is tokenized like a completions
// prompt (with the tokenizer's special tokens, e.g. Llama 3's BOS); with
// --chat, stdin holds an OpenAI messages array or a whole chat request,
// which goes through the same request handling as the router and the
// simulator (internal/tokenizer: tools, tool calls, chat_template_kwargs as
// vLLM passes them), is rendered with the model's chat template (with
// --harmony, in gpt-oss's harmony format) and tokenized without adding
// special tokens, as vLLM does for chat.
func runTokenize(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("yardctl tokenize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("tokenizer", "", "Hugging Face model directory holding tokenizer.json and tokenizer_config.json (required)")
	chat := fs.Bool("chat", false, "stdin is an OpenAI messages JSON array (or chat request object): render the chat template, then tokenize")
	addGen := fs.Bool("add-generation-prompt", true, "with --chat: end the prompt with the assistant turn opener (overridden by the request's add_generation_prompt)")
	render := fs.Bool("render", false, "with --chat: print the rendered prompt text instead of token ids")
	against := fs.String("check-against", "", "a vLLM worker's base URL (http://worker:8000): tokenize the fixed probe here and through its POST /tokenize, print match or the first differing position, exit nonzero unless they match; without --tokenizer, the simulator's simple tokenizer")
	model := fs.String("model", "", "with --check-against: the model to ask the worker for (default: its only or first model)")
	timeout := fs.Duration("timeout", 10*time.Second, "with --check-against: deadline of the check")
	useHarmony := fs.Bool("harmony", false, "render chats in the harmony format vLLM prompts gpt-oss with, instead of the directory's chat template (the router's harmony:DIR)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *against != "" {
		return checkAgainst(ctx, stdout, *against, *model, *dir, *useHarmony, *timeout)
	}
	if *dir == "" {
		return errors.New("--tokenizer is required")
	}
	tok, err := loadHF(*dir, *useHarmony)
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
		req, err := chatRequest(in, *addGen)
		if err != nil {
			return err
		}
		text, err := tokenizer.ChatText(tok, req)
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

// chatRequest reads a messages array or a chat request object; addGen
// applies when the request does not say.
func chatRequest(in []byte, addGen bool) (*openaiapi.ChatCompletionRequest, error) {
	if t := bytes.TrimSpace(in); len(t) > 0 && t[0] == '[' {
		in = append(append([]byte(`{"messages":`), t...), '}')
	}
	req, apiErr := openaiapi.ParseChatCompletionRequest(in)
	if apiErr != nil {
		if apiErr.Param != "" {
			return nil, fmt.Errorf("stdin: %s: %s", apiErr.Param, apiErr.Message)
		}
		return nil, fmt.Errorf("stdin: %s", apiErr.Message)
	}
	if req.AddGenerationPrompt == nil {
		req.AddGenerationPrompt = &addGen
	}
	return req, nil
}

// loadHF loads a model directory's tokenizer, with harmony rendering its
// chats when asked, as the router's hf: and harmony: kinds do.
func loadHF(dir string, useHarmony bool) (*hf.Tokenizer, error) {
	h, err := hf.LoadDir(dir)
	if err != nil || !useHarmony {
		return h, err
	}
	r, err := harmony.New(h.HasAddedToken)
	if err != nil {
		return nil, err
	}
	return h.WithChatRenderer(r), nil
}

// errMismatch is a --check-against whose worker tokenizes the probe
// differently.
var errMismatch = errors.New("the worker's tokenizer differs from this one")

// checkAgainst runs the router's tokenizer check (internal/tokcheck) by
// hand: the probe tokenized with dir's tokenizer (the simple one when
// empty) and by the worker at base.
func checkAgainst(ctx context.Context, stdout io.Writer, base, model, dir string, useHarmony bool, timeout time.Duration) error {
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--check-against %q: want the worker's base URL, http://host:port", base)
	}
	var tok tokenizer.Tokenizer = tokenizer.NewSimple()
	name, forms := "simple", "chat and prompt forms"
	if dir != "" {
		h, err := loadHF(dir, useHarmony)
		if err != nil {
			return err
		}
		tok, name = h, dir
		if useHarmony {
			// vLLM's /tokenize renders chats with the template, not
			// harmony (internal/tokcheck).
			forms = "prompt form; the worker's /tokenize does not render harmony chats"
		}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res := tokcheck.Check(ctx, &http.Client{}, base, model, tok)
	switch res.Status {
	case tokcheck.Match:
		fmt.Fprintf(stdout, "match: %s tokenizes the probe (%s) exactly as %s\n", name, forms, base)
		return nil
	case tokcheck.Mismatch:
		fmt.Fprintf(stdout, "mismatch: %s\n", res.Describe(tok))
		return errMismatch
	}
	return fmt.Errorf("could not check against %s: %w", base, res.Err)
}
