package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testkit"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

const chatBody = `{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`

func chatStreamBody(includeUsage bool) string {
	if includeUsage {
		return `{"model":"test-model","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`
	}
	return `{"model":"test-model","messages":[{"role":"user","content":"hi"}],"stream":true}`
}

func TestStreamingPassThrough(t *testing.T) {
	tests := []struct {
		name         string
		path         string
		body         string
		clientUsage  bool // the client asked for the usage chunk
		firstContent string
	}{
		{name: "chat without usage", path: "/v1/chat/completions", body: chatStreamBody(false), firstContent: `"role":"assistant"`},
		{name: "chat with usage", path: "/v1/chat/completions", body: chatStreamBody(true), clientUsage: true, firstContent: `"role":"assistant"`},
		{name: "completions", path: "/v1/completions", body: `{"model":"test-model","prompt":"once upon","stream":true}`, firstContent: `"text":"Hello"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOpts{})
			up := newVLLM(t, modeGateAfter1)
			e.router.setTargets(testModel, up.target("w0"))

			resp := e.post(t, tc.path, tc.body, map[string]string{RequestIDHeader: "client-chosen-1"})
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			id := resp.Header.Get(RequestIDHeader)
			if id == "" || id == "client-chosen-1" {
				t.Errorf("X-Request-Id = %q, want the gateway's own id", id)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
				t.Errorf("Content-Type = %q", ct)
			}
			br := bufio.NewReader(resp.Body)
			// The upstream is blocked on its gate after chunk 1: reading
			// chunk 1 now proves the gateway does not buffer.
			first, err := readEvent(br)
			if err != nil {
				t.Fatalf("first event: %v", err)
			}
			if !strings.Contains(first, tc.firstContent) {
				t.Errorf("first event %q lacks %s", first, tc.firstContent)
			}
			close(up.gate)
			rest, err := io.ReadAll(br)
			if err != nil {
				t.Fatalf("rest of stream: %v", err)
			}
			all := first + string(rest)
			if !strings.HasSuffix(all, "data: [DONE]\n\n") {
				t.Errorf("stream does not end with [DONE]: %q", all)
			}
			if got := strings.Contains(all, `"usage"`); got != tc.clientUsage {
				t.Errorf("client saw usage chunk = %v, want %v:\n%s", got, tc.clientUsage, all)
			}
			var sent upstreamReq
			if err := json.Unmarshal(up.lastBody(), &sent); err != nil {
				t.Fatal(err)
			}
			if sent.StreamOptions == nil || !sent.StreamOptions.IncludeUsage {
				t.Errorf("upstream was not asked for usage: %s", up.lastBody())
			}

			ev := e.usageEvent(t, id)
			if ev.GetPromptTokens() != promptTokens || ev.GetCompletionTokens() != completionTokens || ev.GetCachedPromptTokens() != cachedTokens {
				t.Errorf("usage tokens = %d/%d/%d, want %d/%d/%d", ev.GetPromptTokens(), ev.GetCachedPromptTokens(), ev.GetCompletionTokens(),
					promptTokens, cachedTokens, completionTokens)
			}
			if ev.GetTenant() != DefaultTenant || ev.GetModel() != testModel || ev.GetEndpointId() != "w0" || !ev.GetStream() ||
				ev.GetStatusCode() != 200 || ev.GetAttempts() != 1 || ev.GetTargetKind() != "local" {
				t.Errorf("usage event = %v", ev)
			}
			if ev.GetTtftSeconds() <= 0 || ev.GetE2ESeconds() < ev.GetTtftSeconds() || ev.GetItlMeanSeconds() <= 0 {
				t.Errorf("timings ttft=%v e2e=%v itl=%v", ev.GetTtftSeconds(), ev.GetE2ESeconds(), ev.GetItlMeanSeconds())
			}
			comps := e.completions(t, id, 1)
			if c := comps[0]; c.GetEndpointId() != "w0" || !c.GetSuccess() || c.GetTtftSeconds() <= 0 || c.GetCompletionTokens() != completionTokens {
				t.Errorf("route completion = %v", c)
			}
		})
	}
}

func TestNonStreaming(t *testing.T) {
	e := newEnv(t, envOpts{})
	up := newVLLM(t, modeOK)
	e.router.setTargets(testModel, up.target("w0"))

	resp := e.post(t, "/v1/chat/completions", chatBody, nil)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if want := nonStreamBody(testModel, true); string(body) != want {
		t.Errorf("body changed in transit:\n got %s\nwant %s", body, want)
	}
	if string(up.lastBody()) != chatBody {
		t.Errorf("upstream got %s, want the client's body untouched", up.lastBody())
	}
	id := resp.Header.Get(RequestIDHeader)
	if len(id) < 16 {
		t.Fatalf("generated request id %q", id)
	}
	ev := e.usageEvent(t, id)
	if ev.GetPromptTokens() != promptTokens || ev.GetCompletionTokens() != completionTokens || ev.GetStream() || ev.GetApi() != "chat.completions" {
		t.Errorf("usage event = %v", ev)
	}
	if c := e.completions(t, id, 1)[0]; !c.GetSuccess() || c.GetPromptTokens() != promptTokens {
		t.Errorf("route completion = %v", c)
	}
}

// TestServedModelSpliced: a target serving the model under another name
// gets the client's body with that name in its model member, spliced by the
// gateway (the router sends no body back), include_usage added in the same
// copy; the retry on a target that serves the requested name gets the
// client's model back.
func TestServedModelSpliced(t *testing.T) {
	e := newEnv(t, envOpts{})
	renamed, plain := newVLLM(t, modeFail500), newVLLM(t, modeOK)
	tgt := renamed.target("w0")
	tgt.ServedModel = "real-model"
	e.router.setTargets(testModel, tgt, plain.target("w1"))

	resp := e.post(t, "/v1/chat/completions", chatStreamBody(false), nil)
	id := resp.Header.Get(RequestIDHeader)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var sent upstreamReq
	if err := json.Unmarshal(renamed.lastBody(), &sent); err != nil || sent.Model != "real-model" || sent.StreamOptions == nil || !sent.StreamOptions.IncludeUsage {
		t.Errorf("renaming upstream got %s", renamed.lastBody())
	}
	want := strings.Replace(chatStreamBody(false), `"model":"`+testModel+`"`, `"model":"real-model"`, 1)
	if got := string(renamed.lastBody()); !strings.HasPrefix(got, strings.TrimSuffix(want, "}")) {
		t.Errorf("the body was re-encoded, not spliced:\n got %s\nfrom %s", got, chatStreamBody(false))
	}
	if err := json.Unmarshal(plain.lastBody(), &sent); err != nil || sent.Model != testModel {
		t.Errorf("retry upstream got %s", plain.lastBody())
	}
	if ev := e.usageEvent(t, id); ev.GetServedModel() != testModel || ev.GetModel() != testModel {
		t.Errorf("usage event models %q/%q", ev.GetModel(), ev.GetServedModel())
	}
}

func TestRetryBeforeFirstByte(t *testing.T) {
	tests := []struct {
		name   string
		first  func(t *testing.T) *routerv1.Target
		stream bool
	}{
		{name: "connection refused", first: func(t *testing.T) *routerv1.Target {
			return &routerv1.Target{Id: "dead", Url: "http://" + closedAddr(t), Kind: routerv1.TargetKind_TARGET_KIND_LOCAL, Type: "vLLM"}
		}},
		{name: "500 streaming", stream: true, first: func(t *testing.T) *routerv1.Target { return newVLLM(t, modeFail500).target("dead") }},
		{name: "500 non-streaming", first: func(t *testing.T) *routerv1.Target { return newVLLM(t, modeFail500).target("dead") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOpts{})
			good := newVLLM(t, modeOK)
			e.router.setTargets(testModel, tc.first(t), good.target("good"))
			body := chatBody
			if tc.stream {
				body = chatStreamBody(false)
			}
			resp := e.post(t, "/v1/chat/completions", body, nil)
			id := resp.Header.Get(RequestIDHeader)
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, out)
			}
			calls := e.router.calls()
			if len(calls) != 2 {
				t.Fatalf("router saw %d Route calls, want 2", len(calls))
			}
			if len(calls[0].GetExcludeEndpoints()) != 0 || !slices.Equal(calls[1].GetExcludeEndpoints(), []string{"dead"}) {
				t.Errorf("exclusions = %v then %v, want none then [dead]", calls[0].GetExcludeEndpoints(), calls[1].GetExcludeEndpoints())
			}
			if good.hits.Load() != 1 {
				t.Errorf("good upstream hit %d times", good.hits.Load())
			}
			ev := e.usageEvent(t, id)
			if ev.GetAttempts() != 2 || ev.GetEndpointId() != "good" || ev.GetStatusCode() != 200 {
				t.Errorf("usage event = %v", ev)
			}
			comps := e.completions(t, id, 2)
			byEndpoint := map[string]bool{}
			for _, c := range comps {
				byEndpoint[c.GetEndpointId()] = c.GetSuccess()
			}
			if ok, seen := byEndpoint["dead"]; !seen || ok {
				t.Errorf("no failed completion for dead: %v", comps)
			}
			if !byEndpoint["good"] {
				t.Errorf("no successful completion for good: %v", comps)
			}
		})
	}
}

// TestDecisionHeaders: with --decision-headers an answer names the target
// that served it and the router's predicted TTFT (a retry's, when the
// first attempt failed); without, neither.
func TestDecisionHeaders(t *testing.T) {
	for _, on := range []bool{true, false} {
		e := newEnv(t, envOpts{cfg: func(c *Config) { c.DecisionHeaders = on }})
		e.router.setTargets(testModel, newVLLM(t, modeFail500).target("dead"), newVLLM(t, modeOK).target("good"))
		for _, body := range []string{chatBody, chatStreamBody(false)} {
			resp := e.post(t, "/v1/chat/completions", body, nil)
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, out)
			}
			target, predicted := resp.Header.Get(TargetHeader), resp.Header.Get(PredictedTTFTHeader)
			if on && (target != "good" || predicted != "0.2500") || !on && (target != "" || predicted != "") {
				t.Errorf("decision headers %v: target %q, predicted TTFT %q", on, target, predicted)
			}
		}
	}
}

func TestRetryExhausted(t *testing.T) {
	tests := []struct {
		name       string
		targets    func(t *testing.T) []*routerv1.Target
		wantStatus int
		wantInBody string
		wantRoutes int // the first call, then one per retry (the last may find nothing)
	}{
		{
			wantRoutes: 2,
			name:       "only endpoint 500s: upstream error passed through",
			targets:    func(t *testing.T) []*routerv1.Target { return []*routerv1.Target{newVLLM(t, modeFail500).target("a")} },
			wantStatus: http.StatusInternalServerError,
			wantInBody: "engine dead",
		},
		{
			name:       "both 500",
			wantRoutes: 3,
			targets: func(t *testing.T) []*routerv1.Target {
				return []*routerv1.Target{newVLLM(t, modeFail500).target("a"), newVLLM(t, modeFail500).target("b")}
			},
			wantStatus: http.StatusInternalServerError,
			wantInBody: "engine dead",
		},
		{
			name:       "three unreachable: --max-attempts (3) ends it",
			wantRoutes: 3,
			targets: func(t *testing.T) []*routerv1.Target {
				return []*routerv1.Target{
					{Id: "a", Url: "http://" + closedAddr(t)},
					{Id: "b", Url: "http://" + closedAddr(t)},
					{Id: "c", Url: "http://" + closedAddr(t)},
				}
			},
			wantStatus: http.StatusBadGateway,
			wantInBody: "upstream_unreachable",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOpts{noNATS: true})
			e.router.setTargets(testModel, tc.targets(t)...)
			resp := e.post(t, "/v1/chat/completions", chatBody, nil)
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus || !strings.Contains(string(out), tc.wantInBody) {
				t.Errorf("got %d %s, want %d containing %q", resp.StatusCode, out, tc.wantStatus, tc.wantInBody)
			}
			if n := len(e.router.calls()); n != tc.wantRoutes {
				t.Errorf("router saw %d Route calls, want %d", n, tc.wantRoutes)
			}
		})
	}
}

func TestNoRetryAfterBytesSent(t *testing.T) {
	e := newEnv(t, envOpts{})
	broken := newVLLM(t, modeAbortAfter1)
	spare := newVLLM(t, modeOK)
	e.router.setTargets(testModel, broken.target("broken"), spare.target("spare"))

	resp := e.post(t, "/v1/chat/completions", chatStreamBody(false), nil)
	brokenID := resp.Header.Get(RequestIDHeader)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	if first, err := readEvent(br); err != nil || !strings.Contains(first, `"role":"assistant"`) {
		t.Fatalf("first event %q, %v", first, err)
	}
	_, err := io.ReadAll(br)
	if !isEOFLike(err) {
		t.Errorf("client read after break: err = %v, want the stream to end in an error", err)
	}
	if n := len(e.router.calls()); n != 1 {
		t.Errorf("router saw %d Route calls, want 1", n)
	}
	if spare.hits.Load() != 0 {
		t.Errorf("spare upstream was tried after bytes were sent")
	}
	ev := e.usageEvent(t, brokenID)
	if ev.GetErrorType() == "" || ev.GetAttempts() != 1 {
		t.Errorf("usage event of broken stream = %v", ev)
	}
	if c := e.completions(t, brokenID, 1)[0]; c.GetSuccess() {
		t.Errorf("broken stream completion marked successful")
	}
}

func TestClientCancelReachesUpstream(t *testing.T) {
	for _, stream := range []bool{true, false} {
		name := map[bool]string{true: "stream", false: "non-stream"}[stream]
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, envOpts{})
			mode := modeHoldAfter1
			if !stream {
				mode = modeHoldBeforeHeaders
			}
			up := newVLLM(t, mode)
			e.router.setTargets(testModel, up.target("w0"))
			body := chatBody
			if stream {
				body = chatStreamBody(false)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/v1/chat/completions", strings.NewReader(body))
			done := make(chan struct{})
			go func() {
				defer close(done)
				resp, err := e.client.Do(req)
				if err != nil {
					return
				}
				defer resp.Body.Close()
				_, _ = readEvent(bufio.NewReader(resp.Body))
				cancel()
				_, _ = io.Copy(io.Discard, resp.Body)
			}()
			if !stream {
				select {
				case <-up.arrived:
				case <-time.After(waitLong):
					t.Fatal("request never reached the upstream")
				}
				cancel()
			}
			select {
			case <-up.canceled:
			case <-time.After(waitLong):
				t.Fatal("upstream never saw its request cancelled")
			}
			<-done
			calls := e.router.calls()
			cancelID := calls[len(calls)-1].GetRequestId()
			ev := e.usageEvent(t, cancelID)
			if ev.GetStatusCode() != statusClientClosed {
				t.Errorf("usage status = %d, want %d", ev.GetStatusCode(), statusClientClosed)
			}
			if c := e.completions(t, cancelID, 1)[0]; c.GetSuccess() {
				t.Errorf("cancelled request completion marked successful")
			}
		})
	}
}

func TestErrors(t *testing.T) {
	up := newVLLM(t, modeOK)
	e := newEnv(t, envOpts{noNATS: true, cfg: func(c *Config) { c.MaxBodyBytes = 1 << 10 }})
	e.router.setTargets(testModel, up.target("w0"))
	e.router.setTargets("sick-model")
	e.router.reject = map[string]*routerv1.Rejection{
		"secret-model": {Code: routerv1.RejectCode_REJECT_CODE_POLICY, Message: "tenant may not use secret-model"},
	}
	down := newEnv(t, envOpts{noNATS: true, routerAddr: closedAddr(t), cfg: func(c *Config) { c.RouteTimeout = 500 * time.Millisecond }})

	tests := []struct {
		name    string
		env     *env
		method  string
		path    string
		body    string
		status  int
		typ     string
		param   string
		code    string
		message string
	}{
		{name: "oversized body", path: "/v1/chat/completions", body: `{"model":"test-model","messages":[{"role":"user","content":"` + strings.Repeat("x", 2<<10) + `"}]}`,
			status: 413, typ: "invalid_request_error", code: "request_too_large"},
		{name: "malformed JSON", path: "/v1/chat/completions", body: "{\"model\": \"test-model\",\n \"messages\": [}", status: 400, typ: "invalid_request_error",
			message: "line 2, column 15 (offset 38)"},
		{name: "missing model", path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":"hi"}]}`, status: 400, param: "model"},
		{name: "wrong type", path: "/v1/chat/completions", body: `{"model":"test-model","messages":[{}],"stream_options":{"include_usage":"yes"}}`,
			status: 400, param: "stream_options.include_usage"},
		{name: "completions without prompt", path: "/v1/completions", body: `{"model":"test-model"}`, status: 400, param: "prompt"},
		{name: "unknown model", path: "/v1/chat/completions", body: `{"model":"nope","messages":[{}]}`, status: 404, typ: "invalid_request_error",
			param: "model", code: "model_not_found"},
		{name: "no healthy endpoint", path: "/v1/chat/completions", body: `{"model":"sick-model","messages":[{}]}`, status: 503, code: "no_healthy_endpoint"},
		{name: "policy rejection", path: "/v1/chat/completions", body: `{"model":"secret-model","messages":[{}]}`, status: 403, code: "policy_rejected",
			message: "tenant may not use secret-model"},
		{name: "router down", env: down, path: "/v1/chat/completions", body: chatBody, status: 503, typ: "service_unavailable_error", code: "router_unavailable"},
		{name: "models with router down", env: down, method: http.MethodGet, path: "/v1/models", status: 503, code: "router_unavailable"},
		{name: "model with router down", env: down, method: http.MethodGet, path: "/v1/models/test-model", status: 503, code: "router_unavailable"},
		{name: "unknown model retrieved", method: http.MethodGet, path: "/v1/models/nope", status: 404, typ: "invalid_request_error",
			code: "model_not_found", message: "`nope`"},
		{name: "wrong method on a model", method: http.MethodDelete, path: "/v1/models/test-model", status: 405},
		{name: "wrong method", method: http.MethodGet, path: "/v1/chat/completions", status: 405},
		{name: "unknown path", method: http.MethodGet, path: "/v1/embeddings", status: 404, code: "unknown_url"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := e
			if tc.env != nil {
				env = tc.env
			}
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			req, _ := http.NewRequest(method, env.url+tc.path, strings.NewReader(tc.body))
			resp, err := env.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status {
				t.Errorf("status = %d, want %d", resp.StatusCode, tc.status)
			}
			if resp.Header.Get(RequestIDHeader) == "" && strings.Contains(tc.path, "completions") && method == http.MethodPost {
				t.Errorf("no request id on an error response")
			}
			d := decodeError(t, resp)
			if tc.typ != "" && d.Type != tc.typ {
				t.Errorf("type = %q, want %q", d.Type, tc.typ)
			}
			if tc.param != "" && (d.Param == nil || *d.Param != tc.param) {
				t.Errorf("param = %v, want %q", d.Param, tc.param)
			}
			if tc.code != "" && (d.Code == nil || *d.Code != tc.code) {
				t.Errorf("code = %v, want %q", d.Code, tc.code)
			}
			if !strings.Contains(d.Message, tc.message) {
				t.Errorf("message = %q, want it to contain %q", d.Message, tc.message)
			}
		})
	}
	if up.hits.Load() != 0 {
		t.Errorf("an invalid request reached the upstream")
	}
}

func TestTagsHeader(t *testing.T) {
	tests := []struct {
		name   string
		allow  bool
		header string
		status int
		want   []string
	}{
		{name: "ignored when not allowed", header: "pii-detected", status: 200},
		{name: "accepted", allow: true, header: " batch , team:a,batch,", status: 200, want: []string{"batch", "team:a"}},
		{name: "invalid tag", allow: true, header: "ok, bad tag!", status: 400},
		{name: "too many", allow: true, header: "t1,t2,t3,t4,t5,t6,t7,t8,t9,t10,t11,t12,t13,t14,t15,t16,t17", status: 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOpts{noNATS: true, cfg: func(c *Config) { c.AllowTagsHeader = tc.allow }})
			up := newVLLM(t, modeOK)
			e.router.setTargets(testModel, up.target("w0"))
			resp := e.post(t, "/v1/chat/completions", chatBody, map[string]string{TagsHeader: tc.header})
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.status != 200 {
				return
			}
			if got := e.router.calls()[0].GetTags(); !slices.Equal(got, tc.want) {
				t.Errorf("router got tags %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRequestID(t *testing.T) {
	e := newEnv(t, envOpts{noNATS: true})
	up := newVLLM(t, modeOK)
	e.router.setTargets(testModel, up.target("w0"))
	// The gateway's id is always its own, whatever the client sends: it is
	// the usage event's de-duplication key, and a client reusing an id must
	// not lose a later request's usage.
	tests := []struct{ name, sent string }{
		{"uuid", "3f2c1a9e-7b4d-4c1e-9a2b-8d7e6f5a4b3c"},
		{"dots and colons", "client:abc.123_x"},
		{"spaces", "has space"},
		{"too long", strings.Repeat("a", maxRequestIDLen+1)},
		{"absent", ""},
	}
	seen := map[string]bool{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tc.sent != "" {
				hdr[RequestIDHeader] = tc.sent
			}
			resp := e.post(t, "/v1/chat/completions", chatBody, hdr)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			got := resp.Header.Get(RequestIDHeader)
			if got == tc.sent || !saneRequestID(got) || seen[got] {
				t.Errorf("sent %q, got %q: want a fresh gateway id", tc.sent, got)
			}
			seen[got] = true
			calls := e.router.calls()
			if last := calls[len(calls)-1]; last.GetRequestId() != got {
				t.Errorf("router saw id %q, client got %q", last.GetRequestId(), got)
			}
		})
	}
}

func TestModelsHealthMetrics(t *testing.T) {
	e := newEnv(t, envOpts{noNATS: true})
	up := newVLLM(t, modeOK)
	e.router.setTargets("b-model", up.target("w0"), up.target("w1"))
	e.router.setTargets(testModel, up.target("w2"))

	resp, err := e.client.Get(e.url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var list modelList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
		if m.Object != "model" {
			t.Errorf("model object = %q", m.Object)
		}
	}
	if list.Object != "list" || !slices.Equal(ids, []string{"b-model", testModel}) {
		t.Errorf("models = %s %v", list.Object, ids)
	}

	e.eventually(t, "readyz 200", func() bool {
		resp, err := e.client.Get(e.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	down := newEnv(t, envOpts{noNATS: true, routerAddr: closedAddr(t)})
	resp, err = down.client.Get(down.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("readyz with router down = %d", resp.StatusCode)
	}

	r := e.post(t, "/v1/chat/completions", chatStreamBody(false), nil)
	_, _ = io.Copy(io.Discard, r.Body)
	r.Body.Close()
	r = e.post(t, "/v1/chat/completions", `{"model":"client-invented","messages":[{}]}`, nil)
	r.Body.Close()
	// Metrics are served on their own port, not the public one.
	if code := testkit.HTTPStatus(t, e.url+"/metrics"); code != http.StatusNotFound {
		t.Errorf("public port /metrics = %d, want 404", code)
	}
	text := []byte(scrape(t, e.metricsURL))
	for _, want := range []string{
		`switchyard_gateway_requests_total{code="200",model="test-model"} 1`,
		`switchyard_gateway_requests_total{code="404",model="_unknown"} 1`,
		`switchyard_gateway_ttft_seconds_count{model="test-model"} 1`,
		`switchyard_gateway_e2e_seconds_count{model="test-model"} 1`,
		`switchyard_gateway_itl_seconds_bucket{model="test-model"`,
		`switchyard_gateway_upstream_attempts_total{endpoint="w2",outcome="ok"} 1`,
		`switchyard_gateway_route_call_seconds_count 2`,
	} {
		if !bytes.Contains(text, []byte(want)) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if bytes.Contains(text, []byte("client-invented")) {
		t.Errorf("a client-chosen model name became a metric label")
	}
}

func TestGracefulShutdownDrainsStream(t *testing.T) {
	e := newEnv(t, envOpts{})
	up := newVLLM(t, modeGateAfter1)
	e.router.setTargets(testModel, up.target("w0"))

	resp := e.post(t, "/v1/chat/completions", chatStreamBody(false), nil)
	drainID := resp.Header.Get(RequestIDHeader)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := readEvent(br); err != nil {
		t.Fatal(err)
	}
	e.cancel()
	// New connections are refused once shutdown starts...
	e.eventually(t, "listener closed", func() bool {
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		r, err := c.Get(e.url + "/healthz")
		if err == nil {
			r.Body.Close()
		}
		return err != nil
	})
	select {
	case err := <-e.served:
		t.Fatalf("Serve returned (%v) while a stream was in flight", err)
	default:
	}
	// ...while the in-flight stream runs to its end.
	close(up.gate)
	rest, err := io.ReadAll(br)
	if err != nil || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Fatalf("stream cut by shutdown: %q, %v", rest, err)
	}
	select {
	case err := <-e.served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
		e.served <- nil // for the cleanup
	case <-time.After(waitLong):
		t.Fatal("Serve did not return after the stream ended")
	}
	// The usage event was flushed before NATS was drained.
	if ev := e.usageEvent(t, drainID); ev.GetCompletionTokens() != completionTokens {
		t.Errorf("usage after drain = %v", ev)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		bad    string
	}{
		{name: "defaults", mutate: func(*Config) {}},
		{name: "nats disabled", mutate: func(c *Config) { c.NATS.URL = "" }},
		{name: "nats cluster list", mutate: func(c *Config) { c.NATS.URL = "nats://a:4222, nats://b:4222" }},
		{name: "bad addr", mutate: func(c *Config) { c.Addr = "8080" }, bad: "addr"},
		{name: "empty router", mutate: func(c *Config) { c.RouterAddr = "" }, bad: "router-addr"},
		{name: "bad nats scheme hides token", mutate: func(c *Config) { c.NATS.URL = "http://s3cret@nats:4222" }, bad: "REDACTED"},
		{name: "zero body", mutate: func(c *Config) { c.MaxBodyBytes = 0 }, bad: "max-body-bytes"},
		{name: "negative timeout", mutate: func(c *Config) { c.RouteTimeout = -time.Second }, bad: "route-timeout"},
		{name: "no response timeout", mutate: func(c *Config) { c.UpstreamResponseTimeout = 0 }},
		{name: "negative response timeout", mutate: func(c *Config) { c.UpstreamResponseTimeout = -time.Second }, bad: "upstream-response-timeout"},
		{name: "zero shutdown", mutate: func(c *Config) { c.ShutdownTimeout = 0 }, bad: "shutdown-timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mutate(&c)
			err := c.Validate()
			if tc.bad == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.bad) {
				t.Fatalf("err = %v, want mention of %q", err, tc.bad)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error leaks a credential: %v", err)
			}
		})
	}
}

// TestReusedClientRequestIDKeepsUsage: two requests carrying the same
// client X-Request-Id are two requests; JetStream's de-duplication must not
// drop the second one's usage.
func TestReusedClientRequestIDKeepsUsage(t *testing.T) {
	e := newEnv(t, envOpts{})
	up := newVLLM(t, modeOK)
	e.router.setTargets(testModel, up.target("w0"))
	var ids []string
	for range 2 {
		resp := e.post(t, "/v1/chat/completions", chatBody, map[string]string{RequestIDHeader: "same-id"})
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		ids = append(ids, resp.Header.Get(RequestIDHeader))
	}
	if ids[0] == ids[1] {
		t.Fatalf("both requests got id %q", ids[0])
	}
	for _, id := range ids {
		if ev := e.usageEvent(t, id); ev.GetCompletionTokens() != completionTokens {
			t.Errorf("usage event %s = %v", id, ev)
		}
	}
}
