package sim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/switchyard-dev/switchyard/internal/jsonscan"
	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	"github.com/switchyard-dev/switchyard/internal/sim/engine"
	"github.com/switchyard-dev/switchyard/internal/tokenizer"
)

// maxBodyBytes bounds a request body; the longest prompt the default
// max_model_len admits is well under a megabyte of text.
const maxBodyBytes = 16 << 20

// API kinds.
const (
	apiChat        = "chat"
	apiCompletions = "completions"
)

// prepared is a validated request reduced to what the engine needs.
type prepared struct {
	api          string
	model        string
	prompt       []uint32
	maxTokens    int
	stream       bool
	includeUsage bool
	seed         uint64
}

// SimTiming is the simulator's own account of a request, in model seconds,
// added to the final response or chunk as "sim_timing". It is not part of
// the OpenAI or vLLM API: clients ignore it; benchmarks read it to get
// timings free of wall-clock noise.
type SimTiming struct {
	TTFT         float64 `json:"ttft_seconds"`
	E2E          float64 `json:"e2e_seconds"`
	QueueTime    float64 `json:"queue_seconds"`
	CachedTokens int     `json:"cached_tokens"`
	Preemptions  int     `json:"preemptions"`
	// Worker is the serving worker's index in its `switchyard sim` (it
	// listens on port+Worker): benchmarks see where a router sent each
	// request.
	Worker int `json:"worker"`
}

func (w *worker) timing(r engine.RequestStats) *SimTiming {
	return &SimTiming{TTFT: r.TTFT, E2E: r.E2E, QueueTime: r.QueueTime, CachedTokens: r.CachedTokens, Preemptions: r.Preemptions, Worker: w.id}
}

// EstimateResponse is the body of POST /sim/v1/estimate.
type EstimateResponse struct {
	TTFTSeconds  float64 `json:"ttft_seconds"`
	CachedTokens int     `json:"cached_tokens"`
	PromptTokens int     `json:"prompt_tokens"`
}

func readBody(rw http.ResponseWriter, r *http.Request) ([]byte, *openaiapi.APIError) {
	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, maxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &openaiapi.APIError{Status: http.StatusRequestEntityTooLarge, Type: openaiapi.ErrTypeInvalidRequest,
				Message: fmt.Sprintf("request body exceeds %d bytes", maxBodyBytes)}
		}
		return nil, openaiapi.InvalidRequest("", "read request body: "+err.Error())
	}
	return body, nil
}

func (w *worker) prepareChat(body []byte) (*prepared, *openaiapi.APIError) {
	req, apiErr := openaiapi.ParseChatCompletionRequest(body)
	if apiErr != nil {
		return nil, apiErr
	}
	if !w.serves(req.Model) {
		return nil, openaiapi.ModelNotFound(req.Model)
	}
	if apiErr := checkN(req.N); apiErr != nil {
		return nil, apiErr
	}
	prompt, err := tokenizer.ChatPrompt(w.tok, req)
	if err != nil {
		return nil, inputError(err, "messages")
	}
	limitParam := "max_tokens"
	if req.MaxCompletionTokens != nil {
		limitParam = "max_completion_tokens"
	}
	maxTokens, apiErr := w.outputLimit(len(prompt), req.OutputLimit(), "messages", limitParam)
	if apiErr != nil {
		return nil, apiErr
	}
	return &prepared{
		api: apiChat, model: w.responseModel(req.Model), prompt: prompt, maxTokens: maxTokens,
		stream: req.Stream, includeUsage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage,
		seed: seedOf(req.Seed),
	}, nil
}

func (w *worker) prepareCompletion(body []byte) (*prepared, *openaiapi.APIError) {
	req, apiErr := openaiapi.ParseCompletionRequest(body)
	if apiErr != nil {
		return nil, apiErr
	}
	if !w.serves(req.Model) {
		return nil, openaiapi.ModelNotFound(req.Model)
	}
	if apiErr := checkN(req.N); apiErr != nil {
		return nil, apiErr
	}
	if req.Prompt.Len() > 1 {
		return nil, openaiapi.InvalidRequest("prompt", "batched prompts are not supported by the simulator: send one prompt per request")
	}
	prompts, err := tokenizer.CompletionPrompts(w.tok, req)
	if err != nil {
		return nil, inputError(err, "prompt")
	}
	if len(prompts[0]) == 0 {
		return nil, openaiapi.InvalidRequest("prompt", "prompt must not be empty")
	}
	maxTokens, apiErr := w.outputLimit(len(prompts[0]), req.OutputLimit(), "prompt", "max_tokens")
	if apiErr != nil {
		return nil, apiErr
	}
	return &prepared{
		api: apiCompletions, model: w.responseModel(req.Model), prompt: prompts[0], maxTokens: maxTokens,
		stream: req.Stream, includeUsage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage,
		seed: seedOf(req.Seed),
	}, nil
}

func checkN(n *int) *openaiapi.APIError {
	if n != nil && *n != 1 {
		return openaiapi.InvalidRequest("n", fmt.Sprintf("n=%d is not supported by the simulator: only n=1", *n))
	}
	return nil
}

func seedOf(s *int64) uint64 {
	if s == nil {
		return 0
	}
	return uint64(*s)
}

func inputError(err error, param string) *openaiapi.APIError {
	var ie *tokenizer.InputError
	if errors.As(err, &ie) {
		return openaiapi.InvalidRequest(ie.Param, ie.Msg)
	}
	return openaiapi.InvalidRequest(param, err.Error())
}

// responseModel is the model name a response carries: the requested one,
// or the default when the request named none (vLLM does the same).
func (w *worker) responseModel(requested string) string {
	if requested == "" {
		return w.models[0]
	}
	return requested
}

// outputLimit applies vLLM's length rules: the prompt must leave room for
// at least one token, an explicit limit must fit max_model_len, and no
// limit means the default, cut to what fits.
func (w *worker) outputLimit(promptLen, requested int, promptParam, limitParam string) (int, *openaiapi.APIError) {
	maxLen := w.cfg.MaxModelLen
	if promptLen >= maxLen {
		return 0, openaiapi.InvalidRequest(promptParam, fmt.Sprintf(
			"This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input.",
			maxLen, promptLen))
	}
	if requested == 0 {
		return min(w.cfg.DefaultMaxTokens, maxLen-promptLen), nil
	}
	if promptLen+requested > maxLen {
		return 0, openaiapi.InvalidRequest(limitParam, fmt.Sprintf(
			"This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the input, %d in the completion). Please reduce the length of the input or completion.",
			maxLen, promptLen+requested, promptLen, requested))
	}
	return requested, nil
}

func (w *worker) handleChat(rw http.ResponseWriter, r *http.Request) {
	w.serve(rw, r, w.prepareChat)
}

func (w *worker) handleCompletions(rw http.ResponseWriter, r *http.Request) {
	w.serve(rw, r, w.prepareCompletion)
}

func (w *worker) serve(rw http.ResponseWriter, r *http.Request, prepare func([]byte) (*prepared, *openaiapi.APIError)) {
	body, apiErr := readBody(rw, r)
	if apiErr != nil {
		openaiapi.WriteError(rw, apiErr)
		return
	}
	p, apiErr := prepare(body)
	if apiErr != nil {
		openaiapi.WriteError(rw, apiErr)
		return
	}
	h, err := w.eng.Submit(engine.Request{Prompt: p.prompt, MaxTokens: p.maxTokens, Seed: p.seed})
	if err != nil {
		openaiapi.WriteError(rw, submitError(err))
		return
	}
	id := requestID(r)
	if p.api == apiChat {
		id = "chatcmpl-" + id
	} else {
		id = "cmpl-" + id
	}
	out := response{w: w, p: p, h: h, id: id, created: time.Now().Unix()}
	if p.stream {
		out.stream(r.Context(), rw)
	} else {
		out.whole(r.Context(), rw)
	}
}

func submitError(err error) *openaiapi.APIError {
	if errors.Is(err, engine.ErrClosed) {
		return &openaiapi.APIError{Status: http.StatusServiceUnavailable, Type: openaiapi.ErrTypeUnavailable, Message: "the worker is shutting down"}
	}
	return openaiapi.InvalidRequest("", err.Error())
}

// requestID is vLLM's: the X-Request-Id header when given, else random.
func requestID(r *http.Request) string {
	if id := r.Header.Get("X-Request-Id"); id != "" {
		return id
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// response writes one request's answer.
type response struct {
	w       *worker
	p       *prepared
	h       *engine.Handle
	id      string
	created int64
}

func (o *response) usage(res engine.RequestStats) *openaiapi.Usage {
	u := &openaiapi.Usage{
		PromptTokens:     res.PromptTokens,
		CompletionTokens: res.CompletionTokens,
		TotalTokens:      res.PromptTokens + res.CompletionTokens,
	}
	if o.w.cfg.EnablePromptTokensDetails {
		u.PromptTokensDetails = &openaiapi.PromptTokensDetails{CachedTokens: res.CachedTokens}
	}
	return u
}

var (
	finishLength = openaiapi.FinishLength
	nullJSON     = json.RawMessage("null")
)

// Response shapes with the simulator's timing extension.
type (
	chatCompletionOut struct {
		openaiapi.ChatCompletion
		SimTiming *SimTiming `json:"sim_timing,omitempty"`
	}
	chatChunkOut struct {
		openaiapi.ChatCompletionChunk
		SimTiming *SimTiming `json:"sim_timing,omitempty"`
	}
	completionOut struct {
		openaiapi.Completion
		SimTiming *SimTiming `json:"sim_timing,omitempty"`
	}
)

// whole waits for the request to finish and writes one JSON response.
func (o *response) whole(ctx context.Context, rw http.ResponseWriter) {
	var toks []uint32
	for {
		more, done, err := o.h.Next(ctx, len(toks))
		if err != nil {
			o.h.Cancel() // the client went away
			return
		}
		toks = append(toks, more...)
		if done {
			break
		}
	}
	res := o.h.Result()
	if res.FinishReason != openaiapi.FinishLength {
		openaiapi.WriteError(rw, &openaiapi.APIError{Status: http.StatusServiceUnavailable, Type: openaiapi.ErrTypeUnavailable,
			Message: "the request was aborted: the worker is shutting down"})
		return
	}
	text := o.w.tok.Decode(toks)
	var body any
	if o.p.api == apiChat {
		body = chatCompletionOut{ChatCompletion: openaiapi.ChatCompletion{
			ID: o.id, Object: openaiapi.ObjectChatCompletion, Created: o.created, Model: o.p.model,
			Choices: []openaiapi.ChatChoice{{
				Message:  openaiapi.ChatResponseMessage{Role: openaiapi.RoleAssistant, Content: &text},
				Logprobs: nullJSON, FinishReason: &finishLength,
			}},
			Usage: o.usage(res),
		}, SimTiming: o.w.timing(res)}
	} else {
		body = completionOut{Completion: openaiapi.Completion{
			ID: o.id, Object: openaiapi.ObjectTextCompletion, Created: o.created, Model: o.p.model,
			Choices: []openaiapi.CompletionChoice{{Text: text, Logprobs: nullJSON, FinishReason: &finishLength}},
			Usage:   o.usage(res),
		}, SimTiming: o.w.timing(res)}
	}
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(body)
}

// stream writes server-sent events: one chunk per token as the engine
// produces it (a chat stream opens with the assistant role), the last
// token's chunk with finish_reason, the usage chunk when asked for, then
// [DONE].
func (o *response) stream(ctx context.Context, rw http.ResponseWriter) {
	rw.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	rw.Header().Set("Cache-Control", "no-cache")
	rw.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(rw)
	buf := make([]byte, 0, 512)
	write := func(v any) bool {
		b, err := json.Marshal(v)
		if err != nil {
			return false
		}
		buf = append(append(append(buf[:0], "data: "...), b...), "\n\n"...)
		_, err = rw.Write(buf)
		return err == nil
	}
	sent := 0
	for {
		toks, done, err := o.h.Next(ctx, sent)
		if err != nil {
			o.h.Cancel()
			return
		}
		var res engine.RequestStats
		if done {
			res = o.h.Result()
		}
		for i, tok := range toks {
			if sent == 0 && o.p.api == apiChat && !write(o.chatChunk(openaiapi.ChatDelta{Role: openaiapi.RoleAssistant, Content: new(string)}, nil, nil)) {
				o.h.Cancel()
				return
			}
			sent++
			last := done && i == len(toks)-1 && res.FinishReason == openaiapi.FinishLength
			var finish *string
			var st *SimTiming
			if last {
				finish, st = &finishLength, o.w.timing(res)
			}
			text := o.w.tok.Decode([]uint32{tok})
			var ok bool
			if o.p.api == apiChat {
				ok = write(o.chatChunk(openaiapi.ChatDelta{Content: &text}, finish, st))
			} else {
				ok = write(completionOut{Completion: openaiapi.Completion{
					ID: o.id, Object: openaiapi.ObjectTextCompletion, Created: o.created, Model: o.p.model,
					Choices: []openaiapi.CompletionChoice{{Text: text, Logprobs: nullJSON, FinishReason: finish}},
				}, SimTiming: st})
			}
			if !ok {
				o.h.Cancel()
				return
			}
		}
		if err := rc.Flush(); err != nil {
			o.h.Cancel()
			return
		}
		if !done {
			continue
		}
		if res.FinishReason != openaiapi.FinishLength {
			write(openaiapi.ErrorBody{Error: openaiapi.ErrorDetail{
				Message: "the request was aborted: the worker is shutting down", Type: openaiapi.ErrTypeUnavailable}})
		} else if o.p.includeUsage {
			if o.p.api == apiChat {
				write(openaiapi.ChatCompletionChunk{ID: o.id, Object: openaiapi.ObjectChatCompletionChunk, Created: o.created,
					Model: o.p.model, Choices: []openaiapi.ChatChunkChoice{}, Usage: o.usage(res)})
			} else {
				write(openaiapi.Completion{ID: o.id, Object: openaiapi.ObjectTextCompletion, Created: o.created,
					Model: o.p.model, Choices: []openaiapi.CompletionChoice{}, Usage: o.usage(res)})
			}
		}
		_, _ = rw.Write([]byte("data: [DONE]\n\n"))
		_ = rc.Flush()
		return
	}
}

func (o *response) chatChunk(d openaiapi.ChatDelta, finish *string, st *SimTiming) chatChunkOut {
	return chatChunkOut{ChatCompletionChunk: openaiapi.ChatCompletionChunk{
		ID: o.id, Object: openaiapi.ObjectChatCompletionChunk, Created: o.created, Model: o.p.model,
		Choices: []openaiapi.ChatChunkChoice{{Delta: d, Logprobs: nullJSON, FinishReason: finish}},
	}, SimTiming: st}
}

// handleEstimate is POST /sim/v1/estimate, a simulator-only endpoint: the
// body is a chat or completions request (field "api" says which; without
// it, "messages" means chat and "prompt" completions), the answer the TTFT
// this worker would give it if it arrived now and nothing else did.
func (w *worker) handleEstimate(rw http.ResponseWriter, r *http.Request) {
	body, apiErr := readBody(rw, r)
	if apiErr != nil {
		openaiapi.WriteError(rw, apiErr)
		return
	}
	// By vLLM's key rule, as the worker reads the body (internal/jsonscan).
	var api string
	var messages, prompt bool
	_, _, _ = jsonscan.Members(body, func(m jsonscan.Member) {
		switch {
		case m.KeyIs("api"):
			api, _ = jsonscan.Unquote(m.Value)
		case m.KeyIs("messages"):
			messages = true
		case m.KeyIs("prompt"):
			prompt = true
		}
	})
	if api == "" {
		switch {
		case messages:
			api = apiChat
		case prompt:
			api = apiCompletions
		}
	}
	var p *prepared
	switch api {
	case apiChat:
		p, apiErr = w.prepareChat(body)
	case apiCompletions:
		p, apiErr = w.prepareCompletion(body)
	default:
		apiErr = openaiapi.InvalidRequest("api", `api must be "chat" or "completions" (or send messages or prompt)`)
	}
	if apiErr != nil {
		openaiapi.WriteError(rw, apiErr)
		return
	}
	est, err := w.eng.Estimate(p.prompt, p.maxTokens)
	if err != nil {
		openaiapi.WriteError(rw, submitError(err))
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(EstimateResponse{TTFTSeconds: est.TTFT, CachedTokens: est.CachedTokens, PromptTokens: est.PromptTokens})
}

func (w *worker) handleModels(rw http.ResponseWriter, _ *http.Request) {
	list := openaiapi.ModelList{Object: openaiapi.ObjectList, Data: make([]openaiapi.Model, len(w.models))}
	for i, m := range w.models {
		list.Data[i] = openaiapi.Model{
			ID: m, Object: openaiapi.ObjectModel, Created: w.created, OwnedBy: "vllm",
			Root: m, MaxModelLen: w.cfg.MaxModelLen,
		}
	}
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(list)
}

// handleHealth is vLLM's /health: 200 with an empty body while serving,
// 503 once shutdown began.
func (w *worker) handleHealth(rw http.ResponseWriter, _ *http.Request) {
	if !w.ready.Load() {
		rw.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	rw.WriteHeader(http.StatusOK)
}

// handleResetPrefixCache is vLLM's POST /reset_prefix_cache. vLLM answers
// 200 even when the reset is refused because requests hold blocks (it only
// logs it); the simulator says so with a 409, so a benchmark that resets
// between phases knows whether it worked.
func (w *worker) handleResetPrefixCache(rw http.ResponseWriter, _ *http.Request) {
	if !w.eng.ResetPrefixCache() {
		w.log.Warn().Msg("prefix cache reset refused: requests hold blocks")
		openaiapi.WriteError(rw, &openaiapi.APIError{Status: http.StatusConflict, Type: openaiapi.ErrTypeInvalidRequest,
			Message: "prefix cache not reset: running requests hold KV blocks; retry when idle"})
		return
	}
	rw.WriteHeader(http.StatusOK)
}

// tokenizeRequest is what handleTokenize reads besides the chat fields
// (vLLM's TokenizeCompletionRequest and TokenizeChatRequest).
type tokenizeRequest struct {
	Model            string          `json:"model"`
	Prompt           *string         `json:"prompt"`
	Messages         json.RawMessage `json:"messages"`
	AddSpecialTokens *bool           `json:"add_special_tokens"`
	ReturnTokenStrs  bool            `json:"return_token_strs"`
}

// tokenizeResponse is vLLM's TokenizeResponse; token_strs is null unless
// return_token_strs was asked for.
type tokenizeResponse struct {
	Count       int      `json:"count"`
	MaxModelLen int      `json:"max_model_len"`
	Tokens      []uint32 `json:"tokens"`
	TokenStrs   []string `json:"token_strs"`
}

// handleTokenize is vLLM's POST /tokenize with the worker's own tokenizer
// and chat template: a completion form ({prompt, add_special_tokens}, special
// tokens added by default) or a chat form ({messages,
// add_generation_prompt, continue_final_message, chat_template_kwargs,
// tools, add_special_tokens}, rendered with the chat template, no special
// tokens added by default).
func (w *worker) handleTokenize(rw http.ResponseWriter, r *http.Request) {
	body, apiErr := readBody(rw, r)
	if apiErr != nil {
		openaiapi.WriteError(rw, apiErr)
		return
	}
	var req tokenizeRequest
	if err := json.Unmarshal(body, &req); err != nil {
		openaiapi.WriteError(rw, openaiapi.InvalidRequest("", "invalid JSON body: "+err.Error()))
		return
	}
	if !w.serves(req.Model) {
		openaiapi.WriteError(rw, openaiapi.ModelNotFound(req.Model))
		return
	}
	var ids []uint32
	switch {
	case len(req.Messages) > 0:
		chat, apiErr := openaiapi.ParseChatCompletionRequest(body)
		if apiErr != nil {
			openaiapi.WriteError(rw, apiErr)
			return
		}
		text, err := tokenizer.ChatText(w.tok, chat)
		if err != nil {
			openaiapi.WriteError(rw, inputError(err, "messages"))
			return
		}
		ids = encode(w.tok, text, req.AddSpecialTokens != nil && *req.AddSpecialTokens)
	case req.Prompt != nil:
		ids = encode(w.tok, *req.Prompt, req.AddSpecialTokens == nil || *req.AddSpecialTokens)
	default:
		openaiapi.WriteError(rw, openaiapi.InvalidRequest("prompt", "either prompt or messages is required"))
		return
	}
	if ids == nil {
		ids = []uint32{}
	}
	resp := tokenizeResponse{Count: len(ids), MaxModelLen: w.cfg.MaxModelLen, Tokens: ids}
	if req.ReturnTokenStrs {
		resp.TokenStrs = make([]string, len(ids))
		for i := range ids {
			resp.TokenStrs[i] = w.tok.Decode(ids[i : i+1])
		}
	}
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(resp)
}

// encode tokenizes text, with the tokenizer's special tokens (a BOS) when
// special is set and the tokenizer has any.
func encode(tok tokenizer.Tokenizer, text string, special bool) []uint32 {
	if st, ok := tok.(tokenizer.SpecialTokensEncoder); ok && special {
		return st.EncodeWithSpecialTokens(text)
	}
	return tok.Encode(text)
}
