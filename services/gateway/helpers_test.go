package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/natsembed"
	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

const (
	testModel        = "test-model"
	promptTokens     = 7
	cachedTokens     = 4
	completionTokens = 3
	waitLong         = 10 * time.Second
)

// testRouter is a routerv1.RouterServer with fixed targets per model: Route
// picks the first target not excluded.
type testRouter struct {
	routerv1.UnimplementedRouterServer
	mu       sync.Mutex
	targets  map[string][]*routerv1.Target
	reject   map[string]*routerv1.Rejection
	requests []*routerv1.RouteRequest
	// unhealthy endpoints are reported so by ListEndpoints.
	unhealthy map[string]bool
	// Flow control: with capacity set, a request asking with a queue
	// threshold is routed while free > 0 (taking one) and held
	// otherwise, and one asking to be held is held; routed lists the
	// routed requests' tenants in order.
	// decisionPolicy and decisionRule name the policy and rule in routed
	// decisions.
	decisionPolicy, decisionRule string
	capacity                     bool
	free                         int
	routed                       []string
}

// setFree makes the router hold requests asking with a queue threshold
// until n more are routed.
func (tr *testRouter) setFree(n int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.capacity, tr.free = true, n
}

func (tr *testRouter) routedTenants() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.routed)
}

// testPredictedTTFT is the TTFT testRouter's decisions predict.
const testPredictedTTFT = 0.25

func (tr *testRouter) Route(_ context.Context, req *routerv1.RouteRequest) (*routerv1.RouteResponse, error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.requests = append(tr.requests, proto.Clone(req).(*routerv1.RouteRequest))
	if rej, ok := tr.reject[req.GetModel()]; ok {
		return &routerv1.RouteResponse{Rejection: rej}, nil
	}
	targets, ok := tr.targets[req.GetModel()]
	if !ok {
		return &routerv1.RouteResponse{Rejection: &routerv1.Rejection{Code: routerv1.RejectCode_REJECT_CODE_MODEL_NOT_FOUND}}, nil
	}
	if tr.capacity && (req.GetHold() || (req.GetQueueThreshold() > 0 && tr.free == 0)) {
		return &routerv1.RouteResponse{Held: true, Decision: &routerv1.Decision{PromptTokens: promptTokens, CachedTokens: 2}}, nil
	}
	if tr.capacity && req.GetQueueThreshold() > 0 {
		tr.free--
	}
	tr.routed = append(tr.routed, req.GetTenant())
	for _, t := range targets {
		if !slices.Contains(req.GetExcludeEndpoints(), t.GetId()) {
			return &routerv1.RouteResponse{
				Target: t,
				Decision: &routerv1.Decision{Strategy: "first", PromptTokens: promptTokens, CachedTokens: 2, Policy: tr.decisionPolicy, Rule: tr.decisionRule,
					PredictedTtftSeconds: testPredictedTTFT},
			}, nil
		}
	}
	return &routerv1.RouteResponse{Rejection: &routerv1.Rejection{Code: routerv1.RejectCode_REJECT_CODE_NO_HEALTHY_ENDPOINT}}, nil
}

func (tr *testRouter) ListEndpoints(context.Context, *routerv1.ListEndpointsRequest) (*routerv1.ListEndpointsResponse, error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var out routerv1.ListEndpointsResponse
	for model, ts := range tr.targets {
		for _, t := range ts {
			out.Endpoints = append(out.Endpoints, &routerv1.Endpoint{Id: t.GetId(), Url: t.GetUrl(), Models: []string{model}, Healthy: !tr.unhealthy[t.GetId()]})
		}
	}
	return &out, nil
}

func (tr *testRouter) setTargets(model string, targets ...*routerv1.Target) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.targets == nil {
		tr.targets = map[string][]*routerv1.Target{}
	}
	tr.targets[model] = targets
}

func (tr *testRouter) setUnhealthy(id string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.unhealthy == nil {
		tr.unhealthy = map[string]bool{}
	}
	tr.unhealthy[id] = true
}

// lastTenant is the tenant of the last Route call, "" before any.
func (tr *testRouter) lastTenant() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.requests) == 0 {
		return ""
	}
	return tr.requests[len(tr.requests)-1].GetTenant()
}

func (tr *testRouter) calls() []*routerv1.RouteRequest {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.requests)
}

// serveRouter serves tr over real gRPC on a loopback port.
func serveRouter(t testing.TB, tr *testRouter) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	routerv1.RegisterRouterServer(s, tr)
	hs := health.NewServer()
	hs.SetServingStatus(routerv1.Router_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s, hs)
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	return ln.Addr().String()
}

type upstreamMode int

const (
	modeOK                upstreamMode = iota
	modeFail500                        // answers 500 with an OpenAI error
	modeAbortAfter1                    // streams one event, then breaks the connection
	modeHoldAfter1                     // streams one event, then waits for the client to go away
	modeGateAfter1                     // streams one event, then waits on gate
	modeHoldBeforeHeaders              // answers nothing until the client goes away
)

// vllm is an httptest upstream speaking vLLM's OpenAI API.
type vllm struct {
	srv      *httptest.Server
	mode     upstreamMode
	gate     chan struct{}
	canceled chan struct{}
	arrived  chan struct{} // closed by the first request in modeHoldBeforeHeaders
	hits     atomic.Int32
	mu       sync.Mutex
	bodies   [][]byte
}

func newVLLM(t testing.TB, mode upstreamMode) *vllm {
	v := &vllm{mode: mode, gate: make(chan struct{}), canceled: make(chan struct{}), arrived: make(chan struct{})}
	v.srv = httptest.NewServer(http.HandlerFunc(v.serve))
	t.Cleanup(v.srv.Close)
	return v
}

func (v *vllm) target(id string) *routerv1.Target {
	return &routerv1.Target{Id: id, Url: v.srv.URL, Kind: routerv1.TargetKind_TARGET_KIND_LOCAL, ServedModel: testModel, Type: "vLLM"}
}

func (v *vllm) lastBody() []byte {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.bodies) == 0 {
		return nil
	}
	return v.bodies[len(v.bodies)-1]
}

type upstreamReq struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

func (v *vllm) serve(w http.ResponseWriter, r *http.Request) {
	v.hits.Add(1)
	body, _ := io.ReadAll(r.Body)
	v.mu.Lock()
	v.bodies = append(v.bodies, body)
	v.mu.Unlock()
	if v.mode == modeHoldBeforeHeaders {
		close(v.arrived)
		<-r.Context().Done()
		close(v.canceled)
		return
	}
	if v.mode == modeFail500 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error":{"message":"engine dead","type":"InternalServerError","param":null,"code":500}}`))
		return
	}
	var req upstreamReq
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	chat := r.URL.Path == "/v1/chat/completions"
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(nonStreamBody(req.Model, chat)))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	fl := w.(http.Flusher)
	events := streamEvents(req.Model, chat, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
	for i, ev := range events {
		_, _ = io.WriteString(w, ev)
		fl.Flush()
		if i > 0 {
			continue
		}
		switch v.mode {
		case modeAbortAfter1:
			panic(http.ErrAbortHandler)
		case modeHoldAfter1:
			<-r.Context().Done()
			close(v.canceled)
			return
		case modeGateAfter1:
			select {
			case <-v.gate:
			case <-r.Context().Done():
				return
			}
		}
	}
}

func nonStreamBody(model string, chat bool) string {
	usage := fmt.Sprintf(`"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}`,
		promptTokens, promptTokens+completionTokens, completionTokens, cachedTokens)
	if chat {
		return `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"` + model +
			`","choices":[{"index":0,"message":{"role":"assistant","content":"Hello world!"},"finish_reason":"stop"}],` + usage + `}`
	}
	return `{"id":"cmpl-1","object":"text_completion","created":1,"model":"` + model +
		`","choices":[{"index":0,"text":"Hello world!","finish_reason":"stop"}],` + usage + `}`
}

// streamEvents is a vLLM-shaped stream: a role chunk, tokens, a finish
// chunk, the usage chunk when asked, then [DONE].
func streamEvents(model string, chat, usage bool) []string {
	chunk := func(choice string) string {
		if chat {
			return `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"` + model + `","choices":[` + choice + `]}` + "\n\n"
		}
		return `data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"` + model + `","choices":[` + choice + `]}` + "\n\n"
	}
	delta := func(content string) string {
		if chat {
			return `{"index":0,"delta":{"content":"` + content + `"},"logprobs":null,"finish_reason":null}`
		}
		return `{"index":0,"text":"` + content + `","logprobs":null,"finish_reason":null}`
	}
	var evs []string
	if chat {
		evs = append(evs, chunk(`{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}`))
	}
	evs = append(evs, chunk(delta("Hello")), chunk(delta(" world")), chunk(delta("!")))
	if usage {
		u := fmt.Sprintf(`{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}`,
			promptTokens, promptTokens+completionTokens, completionTokens, cachedTokens)
		if chat {
			evs = append(evs, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"`+model+`","choices":[],"usage":`+u+"}\n\n")
		} else {
			evs = append(evs, `data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"`+model+`","choices":[],"usage":`+u+"}\n\n")
		}
	}
	return append(evs, "data: [DONE]\n\n")
}

// env is a gateway wired to a test router and an embedded NATS server.
type env struct {
	router *testRouter
	nats   *natsembed.Server
	nc     *nats.Conn
	js     jetstream.JetStream
	gw     *Gateway
	url    string
	// metricsURL is the gateway's /metrics, on its own port.
	metricsURL string
	client     *http.Client
	cancel     context.CancelFunc
	served     chan error
	compsMu    sync.Mutex
	comps      []*eventsv1.RouteCompletion
}

type envOpts struct {
	routerAddr string // empty: serve env.router
	noNATS     bool
	cfg        func(*Config)
}

func newEnv(t testing.TB, o envOpts) *env {
	t.Helper()
	e := &env{router: &testRouter{}, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	t.Cleanup(e.client.CloseIdleConnections)
	routerAddr := o.routerAddr
	if routerAddr == "" {
		routerAddr = serveRouter(t, e.router)
	}
	cfg := DefaultConfig()
	cfg.Addr, cfg.MetricsAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.RouterAddr = routerAddr
	cfg.NATS.URL = ""
	cfg.ShutdownTimeout = 5 * time.Second
	if !o.noNATS {
		ns, err := natsembed.Start(natsembed.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ns.Shutdown)
		e.nats = ns
		cfg.NATS.URL = ns.URL()
		e.nc, err = nats.Connect(ns.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.nc.Close)
		e.js, err = jetstream.New(e.nc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.nc.Subscribe(bus.SubjectRouteCompleted, func(m *nats.Msg) {
			var c eventsv1.RouteCompletion
			if err := proto.Unmarshal(m.Data, &c); err == nil {
				e.compsMu.Lock()
				e.comps = append(e.comps, &c)
				e.compsMu.Unlock()
			}
		}); err != nil {
			t.Fatal(err)
		}
		if err := e.nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	level := zerolog.WarnLevel
	if testing.Verbose() {
		level = zerolog.DebugLevel
	}
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(level)
	if _, ok := t.(*testing.B); ok {
		log = zerolog.Nop()
	}
	gw, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	e.gw = gw
	e.url = "http://" + gw.Addr()
	e.metricsURL = "http://" + gw.MetricsAddr() + "/metrics"
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.served = make(chan error, 1)
	go func() { e.served <- gw.Serve(ctx) }()
	t.Cleanup(func() {
		e.cancel()
		select {
		case err := <-e.served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(waitLong + cfg.ShutdownTimeout):
			t.Errorf("Serve did not return after cancel")
		}
	})
	// Serve connects NATS before serving; wait until HTTP answers.
	e.eventually(t, "gateway serving", func() bool {
		resp, err := e.client.Get(e.url + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return e
}

// chat sends one chat completion with the official OpenAI client, cred as
// its API key (sent as Authorization: Bearer), without retries.
func (e *env) chat(cred string, opts ...option.RequestOption) error {
	client := openai.NewClient(append([]option.RequestOption{option.WithBaseURL(e.url + "/v1"), option.WithAPIKey(cred), option.WithMaxRetries(0)}, opts...)...)
	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    testModel,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	return err
}

func (e *env) eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *env) post(t testing.TB, path, body string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// usageEvent waits for the usage event with Nats-Msg-Id id in JetStream.
func (e *env) usageEvent(t testing.TB, id string) *eventsv1.UsageEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	var found *eventsv1.UsageEvent
	e.eventually(t, "usage event "+id, func() bool {
		s, err := e.js.Stream(ctx, bus.StreamUsage)
		if err != nil {
			return false
		}
		info, err := s.Info(ctx)
		if err != nil {
			return false
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
			m, err := s.GetMsg(ctx, seq)
			if err != nil {
				continue
			}
			if m.Header.Get(jetstream.MsgIDHeader) != id {
				continue
			}
			var ev eventsv1.UsageEvent
			if err := proto.Unmarshal(m.Data, &ev); err != nil {
				t.Fatalf("usage event payload: %v", err)
			}
			if m.Subject != bus.UsageSubject(ev.GetTenant()) {
				t.Errorf("usage event of tenant %q on %q, want %q", ev.GetTenant(), m.Subject, bus.UsageSubject(ev.GetTenant()))
			}
			found = &ev
			return true
		}
		return false
	})
	return found
}

// completions waits for n route completions of request id.
func (e *env) completions(t testing.TB, id string, n int) []*eventsv1.RouteCompletion {
	t.Helper()
	var out []*eventsv1.RouteCompletion
	e.eventually(t, fmt.Sprintf("%d route completions", n), func() bool {
		e.compsMu.Lock()
		defer e.compsMu.Unlock()
		out = out[:0]
		for _, c := range e.comps {
			if c.GetRequestId() == id {
				out = append(out, c)
			}
		}
		return len(out) >= n
	})
	return out
}

// readEvent reads one SSE event (through its blank line).
func readEvent(r *bufio.Reader) (string, error) {
	var b strings.Builder
	for {
		line, err := r.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			return b.String(), err
		}
		if line == "\n" {
			return b.String(), nil
		}
	}
}

func decodeError(t testing.TB, resp *http.Response) openaiapi.ErrorDetail {
	t.Helper()
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("error Content-Type = %q", ct)
	}
	var body openaiapi.ErrorBody
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("error body %q: %v", raw, err)
	}
	if body.Error.Message == "" || body.Error.Type == "" {
		t.Errorf("error body lacks message or type: %s", raw)
	}
	return body.Error
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func isEOFLike(err error) bool {
	return err != nil && (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || strings.Contains(err.Error(), "connection reset"))
}

// scrape returns the text exposition at url.
func scrape(t testing.TB, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(b)
}

// grepLines keeps the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
