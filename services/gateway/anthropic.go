package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard-dev/switchyard/internal/anthropicapi"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/gateway/internal/apibody"
	"github.com/switchyard-dev/switchyard/services/gateway/internal/sse"
)

// anthropicInbound is Anthropic's Messages API, served by translation.
//
// A request's body is read and checked here (anthropicapi.Parse), turned
// into a chat completions body (ToChat) and handed to the chat path, which
// routes it with that body: the router tokenizes the chat messages exactly
// as the worker's chat template renders them, so the KV-aware pick is as
// precise as for an OpenAI client. The answer comes back through
// anthropicWriter, which translates a completion into a message, a chat
// stream into Messages events, and any OpenAI-shaped error (the gateway's
// own or a worker's) into Anthropic's. A stream that breaks after its 200
// ends with an error event, as the chat path ends its own.
//
// Workers are always sent chat completions, even where their vLLM serves
// /v1/messages itself: every vLLM version and the simulator speak chat
// completions, and vLLM's own Messages endpoint converts to a chat request
// and renders it with the same template.
//
// A provider of type Anthropic is sent the client's request natively (its
// adapter is an upstream.Native for /v1/messages): the client's body as it
// is but for the served model name, with the client's anthropic-beta
// header and the provider's key, so cache_control, metadata and every
// member the translation drops reach it; its message, event stream or error
// comes back as Anthropic sent it, metered from its usage (cache reads and
// writes included). The request is still checked and translated first: the
// router routes the chat body, and a failed attempt may be retried on a
// target that takes the translation, so a request must be one the
// translation can carry (extended thinking and server tools stay refused
// until the router can be asked for native targets only).
type anthropicInbound struct{}

func (anthropicInbound) register(g *Gateway, mux *http.ServeMux) {
	chat := g.completions(apibody.Chat, "/v1/chat/completions")
	mux.Handle("POST /v1/messages", g.messages(chat))
	mux.HandleFunc("POST /v1/messages/count_tokens", g.countTokens)
	mux.HandleFunc("/v1/messages", methodNotAllowed)
	mux.HandleFunc("/v1/messages/count_tokens", methodNotAllowed)
}

// maxTranslatedBody bounds a non-streamed answer held for translation.
const maxTranslatedBody = 16 << 20

// readAnthropic reads and parses a Messages body, returning it with the
// body as read; errors are written, and recorded as c's end.
func (g *Gateway) readAnthropic(w http.ResponseWriter, r *http.Request, countOnly bool, c *call) (*anthropicapi.MessagesRequest, []byte, bool) {
	limit := g.cfg.MaxBodyBytes
	fail := func(e *anthropicapi.APIError) (*anthropicapi.MessagesRequest, []byte, bool) {
		c.status, c.errType = e.Status, string(e.Type)
		anthropicapi.WriteError(w, e)
		c.ended()
		return nil, nil, false
	}
	tooBig := &anthropicapi.APIError{Status: http.StatusRequestEntityTooLarge, Type: anthropicapi.ErrTypeRequestTooLarge,
		Message: fmt.Sprintf("the request body is larger than the limit of %d bytes", limit)}
	body, fault, err := readClientBody(w, r, limit, g.cfg.BodyReadTimeout)
	switch fault {
	case bodyRead:
	case bodyTooLarge:
		return fail(tooBig)
	case bodySlow:
		e := bodyTimeout(g.cfg.BodyReadTimeout)
		return fail(&anthropicapi.APIError{Status: e.Status, Type: anthropicapi.ErrTypeInvalidRequest, Message: e.Message})
	case bodyClientGone:
		c.status, c.errType = statusClientClosed, errClientClosed.Type
		c.ended()
		return nil, nil, false
	default:
		return fail(anthropicapi.InvalidRequest("could not read the request body: " + err.Error()))
	}
	req, apiErr := anthropicapi.Parse(body, countOnly)
	if apiErr != nil {
		return fail(apiErr)
	}
	return req, body, true
}

// messagesAPI is the Messages API as a native API (native.go).
type messagesAPI struct{}

func (messagesAPI) path() string { return "/v1/messages" }

func (messagesAPI) forward(body []byte, served string) []byte {
	return anthropicapi.WithModel(body, served)
}

func (messagesAPI) meter() usageMeter { return &messagesMeter{} }

// messagesMeter reads a Messages answer's usage: the prompt is the three
// input counts (not cached, read from the cache, written to it), the
// cached tokens the cache reads.
type messagesMeter struct{ m anthropicapi.Meter }

func (m *messagesMeter) event(data []byte) (done, tokens bool) { return m.m.Event(data) }

func (m *messagesMeter) failed() bool { return m.m.Failed() }

func (m *messagesMeter) body(b []byte) { m.m.Message(b) }

func (m *messagesMeter) usage() (apibody.Usage, bool) {
	u, ok := m.m.Usage()
	return apibody.Usage{
		PromptTokens:     u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
		CachedTokens:     u.CacheReadInputTokens,
		CompletionTokens: u.OutputTokens,
	}, ok
}

func (g *Gateway) messages(chat http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := g.inboundCall(w, "messages")
		tenant, ok := g.admitInbound(w, r, c)
		if !ok {
			return
		}
		req, raw, ok := g.readAnthropic(w, r, false, c)
		if !ok {
			return
		}
		body := req.ToChat(req.Model)
		tw := &anthropicWriter{w: w, req: req}
		native := &nativeRequest{api: messagesAPI{}, body: raw, passThrough: tw.native}
		if v := r.Header.Values("Anthropic-Beta"); len(v) > 0 {
			native.header = http.Header{"Anthropic-Beta": v}
		}
		r2 := r.Clone(withAdmitted(withInbound(r.Context(), c, native), tenant))
		r2.URL.Path = "/v1/chat/completions"
		r2.Body, r2.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		r2.Header.Del("Content-Length")
		chat.ServeHTTP(tw, r2)
		tw.finish()
	})
}

// anthropicWriter translates what the chat path writes into the Messages
// API. It decides at WriteHeader: a 2xx event stream is translated event
// by event as it is written (flushes pass through); a 2xx JSON body and an
// error are held and translated at finish. An answer that came natively
// (native was called before its header) is in the Messages API already and
// passes through; in its stream, only an event of the chat path's own (an
// unnamed data event: the error that ends a broken stream) is translated.
type anthropicWriter struct {
	w     http.ResponseWriter
	req   *anthropicapi.MessagesRequest
	pass  bool // the answer came natively
	mode  int  // 0 no header yet, then one of the modes below
	code  int
	buf   []byte
	over  bool
	sp    sse.Splitter
	st    *anthropicapi.Stream
	ended bool // a native stream's message_stop or error event went by
	out   []byte
}

const (
	modeStream = iota + 1
	modeBody
	modeError
	modeNativeStream
	modeNative
)

// native makes the answer about to be written pass through untranslated.
func (a *anthropicWriter) native() {
	if a.mode == 0 {
		a.pass = true
	}
}

func (a *anthropicWriter) Header() http.Header { return a.w.Header() }

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (a *anthropicWriter) Unwrap() http.ResponseWriter { return a.w }

func (a *anthropicWriter) WriteHeader(code int) {
	if a.mode != 0 {
		return
	}
	a.code = code
	switch {
	case a.pass && code < 300 && isEventStream(a.w.Header()):
		a.mode = modeNativeStream
		a.st = a.req.NewStream(a.req.Model)
		a.w.Header().Del("Content-Length")
		a.w.WriteHeader(code)
	case a.pass:
		a.mode = modeNative
		a.w.WriteHeader(code)
	case code < 300 && isEventStream(a.w.Header()):
		a.mode = modeStream
		a.st = a.req.NewStream(a.req.Model)
		a.w.Header().Del("Content-Length")
		a.w.WriteHeader(code)
	case code < 300:
		a.mode = modeBody
	default:
		a.mode = modeError
	}
}

func (a *anthropicWriter) Write(p []byte) (int, error) {
	if a.mode == 0 {
		a.WriteHeader(http.StatusOK)
	}
	switch a.mode {
	case modeNative:
		return a.w.Write(p)
	case modeNativeStream:
		return a.writeNative(p)
	}
	if a.mode != modeStream {
		if !a.over {
			if len(a.buf)+len(p) > maxTranslatedBody {
				a.over, a.buf = true, nil
			} else {
				a.buf = append(a.buf, p...)
			}
		}
		return len(p), nil
	}
	a.sp.Feed(p)
	a.out = a.out[:0]
	for {
		ev, ok := a.sp.Next()
		if !ok {
			break
		}
		if data, ok := sse.Data(ev); ok {
			a.out = a.st.Chunk(a.out, data)
		}
	}
	if len(a.out) > 0 {
		if _, err := a.w.Write(a.out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// writeNative passes a native stream's events through as they are
// complete, and translates the chat path's own.
func (a *anthropicWriter) writeNative(p []byte) (int, error) {
	a.sp.Feed(p)
	a.out = a.out[:0]
	for {
		ev, ok := a.sp.Next()
		if !ok {
			break
		}
		name, named := sse.Name(ev)
		if !named {
			// After the provider's own error event, the chat path's adds
			// nothing.
			if data, ok := sse.Data(ev); ok && !a.ended {
				a.out = a.st.Chunk(a.out, data)
				a.ended = a.ended || a.st.Stopped()
			}
			continue
		}
		a.out = append(a.out, ev...)
		a.ended = a.ended || string(name) == "message_stop" || string(name) == "error"
	}
	if len(a.out) > 0 {
		if _, err := a.w.Write(a.out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// FlushError flushes a translated stream; a held body has nothing to send.
func (a *anthropicWriter) FlushError() error {
	if a.mode != modeStream && a.mode != modeNativeStream && a.mode != modeNative {
		return nil
	}
	return http.NewResponseController(a.w).Flush()
}

// finish writes what was held, or ends a stream that stopped without its
// end (the upstream closed it early).
func (a *anthropicWriter) finish() {
	h := a.w.Header()
	switch a.mode {
	case modeStream:
		if !a.st.Stopped() {
			out := a.st.Error(nil, &anthropicapi.APIError{Type: anthropicapi.ErrTypeAPI,
				Message: "the model server ended the stream before the answer was complete, please retry"})
			_, _ = a.w.Write(out)
			_ = http.NewResponseController(a.w).Flush()
		}
	case modeNativeStream:
		if rest := a.sp.Rest(); len(rest) > 0 {
			_, _ = a.w.Write(rest)
		}
		if !a.ended {
			out := a.st.Error(nil, &anthropicapi.APIError{Type: anthropicapi.ErrTypeAPI,
				Message: "the provider ended the stream before the answer was complete, please retry"})
			_, _ = a.w.Write(out)
			_ = http.NewResponseController(a.w).Flush()
		}
	case modeBody:
		h.Del("Content-Length")
		if a.over {
			anthropicapi.WriteError(a.w, &anthropicapi.APIError{Status: http.StatusBadGateway, Type: anthropicapi.ErrTypeAPI, Message: "the model server's answer is too large to translate"})
			return
		}
		out, apiErr := a.req.FromChat(a.buf, a.req.Model)
		if apiErr != nil {
			anthropicapi.WriteError(a.w, apiErr)
			return
		}
		h.Set("Content-Type", "application/json")
		a.w.WriteHeader(a.code)
		_, _ = a.w.Write(out)
	case modeError:
		h.Del("Content-Length")
		anthropicapi.WriteError(a.w, anthropicapi.FromOpenAIError(a.code, a.buf))
	}
}

// countTokens answers POST /v1/messages/count_tokens with the router's
// count of the prompt the worker would render: the request translated as
// for /v1/messages and tokenized by the router with the model's tokenizer
// and chat template. A model the router has no tokenizer for is refused
// rather than estimated.
func (g *Gateway) countTokens(w http.ResponseWriter, r *http.Request) {
	g.inflight.Add(1)
	defer g.inflight.Add(-1)
	model := unknownModel
	fail := func(e *anthropicapi.APIError) {
		g.metrics.requests.WithLabelValues(model, statusLabel(e.Status)).Inc()
		anthropicapi.WriteError(w, e)
	}
	c := g.inboundCall(w, "")
	tenant, ok := g.admitInbound(w, r, c)
	if !ok {
		return
	}
	req, _, ok := g.readAnthropic(w, r, true, c)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), g.cfg.RouteTimeout)
	defer cancel()
	id := rand.Text()
	resp, err := g.router.Route(ctx, &routerv1.RouteRequest{
		RequestId: id,
		Tenant:    tenant,
		Model:     req.Model,
		Api:       routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS,
		Body:      req.ToChat(req.Model),
		CountOnly: true,
	})
	if err != nil {
		if r.Context().Err() != nil {
			return
		}
		if status.Code(err) == codes.InvalidArgument {
			fail(anthropicapi.InvalidRequest("the request could not be read: " + status.Convert(err).Message()))
			return
		}
		g.log.Warn().Err(err).Msg("count route call failed")
		fail(anthropicapi.StatusError(errRouterUnavailable.Status, errRouterUnavailable.Message))
		return
	}
	if t := resp.GetTarget(); t != nil {
		// A router that predates count_only routed the request: give its
		// slot back, and do not trust the count's provenance.
		g.sink.RouteCompleted(&eventsv1.RouteCompletion{RequestId: id, EndpointId: t.GetId(), CompletedAt: timestamppb.Now()})
		fail(anthropicapi.StatusError(http.StatusNotImplemented, "the routing service is too old to count tokens; upgrade the router"))
		return
	}
	if rej := resp.GetRejection(); rej != nil {
		e := rejectionError(req.Model, rej)
		fail(anthropicapi.StatusError(e.Status, e.Message))
		return
	}
	model = req.Model
	if !resp.GetDecision().GetPromptTokensExact() {
		fail(anthropicapi.InvalidRequest("tokens of model `" + req.Model + "` cannot be counted: the router has no tokenizer for it (set the model's tokenizer in its fleet configuration)"))
		return
	}
	g.metrics.requests.WithLabelValues(model, statusLabel(http.StatusOK)).Inc()
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprintf(w, "{\"input_tokens\":%d}\n", resp.GetDecision().GetPromptTokens())
}
