package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	"github.com/switchyard-dev/switchyard/internal/sim"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/gateway/internal/apibody"
	"github.com/switchyard-dev/switchyard/services/router"
)

// FuzzKeyRule holds the three readers of a chat body to the members vLLM
// reads (internal/jsonscan's key rule: exact keys, the last of a repeated
// key): the gateway's (apibody.Parse, and the body it forwards), the
// router's (the prompt tokens a real router decides on, over gRPC) and the
// simulated worker's (the prompt tokens it counts of the forwarded body,
// over HTTP). The reference is what Python's json.loads makes of the body.
// Whatever the gateway accepts, all three must read the same model,
// stream flags and messages, and the router and the worker the same
// number of prompt tokens.
func FuzzKeyRule(f *testing.F) {
	const m = `[{"role":"user","content":"short one"}]`
	for _, s := range []string{
		`{"model":"m","messages":` + m + `}`,
		`{"model":"m","messages":` + m + `,"Messages":[{"role":"user","content":"a longer text the worker never reads"}]}`,
		`{"model":"m","Messages":` + m + `,"messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}]}`,
		`{"model":"x","messages":[{"role":"user","content":"first"}],"messages":` + m + `,"model":"m"}`,
		`{"MODEL":"x","m\u006fdel":"m","me\u0073sages":` + m + `}`,
		`{"model":"m","messages":[{"role":"user","Role":"system","content":"a","Content":"b","content":"c"}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a","TEXT":"b","text":"c"}]}]}`,
		`{"model":"m","messages":` + m + `,"stream":true,"Stream":false,"stream_options":{"include_usage":true},"stream_options":{"include_usage":false}}`,
		`{"model":"m","messages":` + m + `,"stream":true,"stream_options":{"include_usage":false,"Include_Usage":true}}`,
		`{"model":"m","messages":` + m + `,"max_tokens":"many","max_tokens":3}`,
		`{"model":"m","messages":` + m + `,"tools":[{"type":"function","function":{"name":"f","name":"g"}}]}`,
	} {
		f.Add([]byte(s))
	}
	k := startKeyRuleStack(f)
	f.Fuzz(func(t *testing.T, body []byte) { k.check(t, body) })
}

// keyRuleStack is a simulated worker and a router routing to it.
type keyRuleStack struct {
	router routerv1.RouterClient
	worker string
}

func startKeyRuleStack(f *testing.F) *keyRuleStack {
	ctx, cancel := context.WithCancel(context.Background())
	f.Cleanup(cancel)
	sc := sim.DefaultConfig()
	sc.Port = 0
	sc.Workers = 1
	sc.ShutdownTimeout = 5 * time.Second
	fleet, err := sim.StartFleet(ctx, sc, zerolog.Nop())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = fleet.Close() })
	rc := router.DefaultConfig()
	rc.GRPCAddr, rc.HTTPAddr, rc.NATS.URL = "127.0.0.1:0", "127.0.0.1:0", ""
	rc.Endpoints = "sim-0=" + fleet.Workers()[0].URL
	rc.ScrapeInterval = 50 * time.Millisecond
	rc.ShutdownTimeout = 5 * time.Second
	srv, err := router.New(rc, zerolog.Nop())
	if err != nil {
		f.Fatal(err)
	}
	testkit.Serve(f, srv.Serve)
	conn, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = conn.Close() })
	k := &keyRuleStack{router: routerv1.NewRouterClient(conn), worker: fleet.Workers()[0].URL}
	testkit.Eventually(f, 10*time.Second, "the router to route prompts to the worker", func() bool {
		return k.routedTokens(f, []byte(`{"messages":[{"role":"user","content":"ready?"}]}`)) > 0
	})
	return k
}

// routedTokens is the number of prompt tokens the router decides on for
// body, addressed to the worker's model.
func (k *keyRuleStack) routedTokens(t testing.TB, body []byte) int64 {
	t.Helper()
	resp, err := k.router.Explain(context.Background(), &routerv1.RouteRequest{
		RequestId: "fuzz", Model: sim.DefaultServedModelName, Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: body,
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetResult().GetDecision().GetPromptTokens()
}

// servedTokens is what the worker makes of body: its prompt tokens, or its
// error.
func (k *keyRuleStack) servedTokens(t *testing.T, body []byte) (int64, *openaiapi.ErrorDetail) {
	t.Helper()
	resp, err := http.Post(k.worker+"/sim/v1/estimate", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		var e openaiapi.ErrorBody
		if err := json.Unmarshal(data, &e); err != nil || resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("worker answered %d %s", resp.StatusCode, data)
		}
		return 0, &e.Error
	}
	var est sim.EstimateResponse
	if err := json.Unmarshal(data, &est); err != nil {
		t.Fatal(err)
	}
	return int64(est.PromptTokens), nil
}

func (k *keyRuleStack) check(t *testing.T, body []byte) {
	gw, apiErr := apibody.Parse(apibody.Chat, body)
	if apiErr != nil {
		return // never forwarded, never routed
	}
	ref := pythonObject(t, body)

	// The gateway reads the members json.loads keeps.
	so, _ := ref["stream_options"].(map[string]any)
	if gw.Model != ref["model"] || gw.Stream != (ref["stream"] == true) || gw.IncludeUsage != (so["include_usage"] == true) {
		t.Fatalf("%q: the gateway read %+v", body, gw)
	}

	// The request reader the router and the worker share reads them too.
	req, reqErr := openaiapi.ParseChatCompletionRequest(body)
	if reqErr == nil {
		if req.Model != gw.Model || req.Stream != gw.Stream || (req.StreamOptions != nil && req.StreamOptions.IncludeUsage) != gw.IncludeUsage {
			t.Fatalf("%q: the gateway read %+v, the request reader %+v", body, gw, req)
		}
		sameMessages(t, body, ref["messages"], req.Messages)
	}

	// The worker reads the body the gateway forwards: the same messages,
	// the served name, usage asked for on a stream.
	fwd := gw.Forward(body, sim.DefaultServedModelName)
	got, fwdErr := openaiapi.ParseChatCompletionRequest(fwd)
	if (reqErr == nil) != (fwdErr == nil) {
		t.Fatalf("%q: read with error %v, forwarded as %q with error %v", body, reqErr, fwd, fwdErr)
	}
	if fwdErr == nil {
		if got.Model != sim.DefaultServedModelName || got.Stream != gw.Stream || (gw.Stream && !got.StreamOptions.IncludeUsage) {
			t.Fatalf("forwarded %q read as %+v", fwd, got)
		}
		sameMessages(t, fwd, ref["messages"], got.Messages)
	}

	// The router decides on the prompt tokens the worker counts.
	routed := k.routedTokens(t, body)
	served, werr := k.servedTokens(t, fwd)
	switch {
	case werr == nil && routed != served:
		t.Fatalf("%q: the router counted %d prompt tokens, the worker %d of %q", body, routed, served, fwd)
	case werr != nil && routed > 0 && !lengthRule(werr):
		t.Fatalf("%q: the router counted %d prompt tokens, the worker refused %q: %+v", body, routed, fwd, werr)
	}
}

// lengthRule tells a worker's refusal for its output limits, which the
// router does not apply, from one for a body it could not read.
func lengthRule(e *openaiapi.ErrorDetail) bool {
	p := ""
	if e.Param != nil {
		p = *e.Param
	}
	return p == "n" || p == "max_tokens" || p == "max_completion_tokens" || strings.Contains(e.Message, "maximum context length")
}

// pythonObject is what json.loads makes of a body, as far as encoding/json
// decoding into a map can tell: keys exact, a repeated key's last value.
func pythonObject(t *testing.T, body []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil || obj == nil {
		t.Fatalf("%q accepted by the gateway: %v", body, err)
	}
	return obj
}

// sameMessages compares the messages a reader read with json.loads's: the
// role and the text of each.
func sameMessages(t *testing.T, body []byte, ref any, got []openaiapi.ChatMessage) {
	t.Helper()
	list, _ := ref.([]any)
	if len(list) != len(got) {
		t.Fatalf("%q: %d messages read, json.loads has %d", body, len(got), len(list))
	}
	for i, r := range list {
		m, _ := r.(map[string]any)
		if m["role"] != got[i].Role {
			t.Fatalf("%q: messages[%d].role %q, json.loads has %v", body, i, got[i].Role, m["role"])
		}
		switch c := m["content"].(type) {
		case string:
			if got[i].Content.Text == nil || *got[i].Content.Text != c {
				t.Fatalf("%q: messages[%d].content %+v, json.loads has %q", body, i, got[i].Content, c)
			}
		case []any:
			if len(c) != len(got[i].Content.Parts) {
				t.Fatalf("%q: messages[%d] has %d parts, json.loads %d", body, i, len(got[i].Content.Parts), len(c))
			}
			for j, p := range c {
				pm, _ := p.(map[string]any)
				part := got[i].Content.Parts[j]
				if text, ok := pm["text"].(string); pm["type"] != part.Type || ok != (part.Text != nil) || ok && text != *part.Text {
					t.Fatalf("%q: messages[%d].content[%d] %+v, json.loads has %v", body, i, j, part, pm)
				}
			}
		default:
			if got[i].Content.Text != nil || got[i].Content.Parts != nil {
				t.Fatalf("%q: messages[%d].content %+v, json.loads has %v", body, i, got[i].Content, c)
			}
		}
	}
}
