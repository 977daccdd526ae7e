package router_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	"github.com/switchyard-dev/switchyard/internal/tokenizer"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router"
)

// postExplain sends body to the router's REST explain and returns the
// status and the response body.
func postExplain(t testing.TB, tr *testRouter, query, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post("http://"+tr.srv.HTTPAddr()+"/v1/route:explain"+query, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

// TestRESTExplainClientBody: REST explain reads a chat or completions body
// as a client sends it, and explains it as gRPC Explain explains the
// RouteRequest a gateway would build from it; the RouteRequest mapping
// still works, and bad input gets a 400 saying what is wrong.
func TestRESTExplainClientBody(t *testing.T) {
	ns, nc := startNATS(t)
	a, b := newFakeWorker(t, "m"), newFakeWorker(t, "m")
	tr := startRouter(t, func(cfg *router.Config) { cfg.NATS.URL = ns.URL() }, a, b)
	pub := newKVPublisher(t, nc)
	system := doc("contracts")
	pub.store("b", workerBlocks(t, chatBody(system, "What is clause 4 about?")))
	chat := chatBody(system, "Summarise the termination terms.")
	waitFor(t, "index has b's blocks", func() bool { return cachedOn(tr.explain(t, chat), "b") > 7000 })

	// The prompt the worker will see, independently of the router.
	parsed, apiErr := openaiapi.ParseChatCompletionRequest(chat)
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	toks, err := tokenizer.ChatPrompt(tokenizer.NewSimple(), parsed)
	if err != nil {
		t.Fatal(err)
	}
	completions, _ := json.Marshal(map[string]any{"model": "m", "prompt": system + " Summarise."})
	routeReq, _ := protojson.Marshal(&routerv1.RouteRequest{Model: "m", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: chat})

	ok := []struct {
		name, query, body string
		// same is the gRPC request the REST one stands for.
		same         *routerv1.RouteRequest
		promptTokens int64 // 0: only that it is read
		cachedOnB    bool
	}{
		{name: "chat body with tenant and tags", query: "?tenant=team-a&tags=x,y&tags=z", body: string(chat),
			same:         &routerv1.RouteRequest{Tenant: "team-a", Model: "m", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Tags: []string{"x", "y", "z"}, Body: chat},
			promptTokens: int64(len(toks)), cachedOnB: true},
		{name: "completions body", body: string(completions),
			same: &routerv1.RouteRequest{Model: "m", Api: routerv1.ApiKind_API_KIND_COMPLETIONS, Body: completions}},
		{name: "RouteRequest mapping", body: string(routeReq),
			same:         &routerv1.RouteRequest{Model: "m", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: chat},
			promptTokens: int64(len(toks)), cachedOnB: true},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			code, body := postExplain(t, tr, tc.query, tc.body)
			if code != http.StatusOK {
				t.Fatalf("status %d: %s", code, body)
			}
			var got routerv1.ExplainResponse
			if err := protojson.Unmarshal(body, &got); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			want, err := tr.client.Explain(context.Background(), tc.same)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got.GetResult(), want.GetResult()) {
				t.Errorf("REST result %v\ngRPC result %v", got.GetResult(), want.GetResult())
			}
			d := got.GetResult().GetDecision()
			if d.GetPromptTokens() == 0 || (tc.promptTokens != 0 && d.GetPromptTokens() != tc.promptTokens) {
				t.Errorf("prompt tokens %d, want %d (non-zero)", d.GetPromptTokens(), tc.promptTokens)
			}
			if cached := cachedOn(&got, "b"); tc.cachedOnB != (cached > 7000) || cached != cachedOn(want, "b") {
				t.Errorf("cached on b %d (gRPC %d), want over 7000: %v", cached, cachedOn(want, "b"), tc.cachedOnB)
			}
			if tc.cachedOnB && (got.GetResult().GetTarget().GetId() != "b" || d.GetCachedTokens() != cachedOn(&got, "b")) {
				t.Errorf("routed to %s with %d cached, want b with its cache", got.GetResult().GetTarget().GetId(), d.GetCachedTokens())
			}
		})
	}

	bad := []struct {
		name, query, body string
		wantStatus        int
		want              string
	}{
		{"invalid JSON", "", `{"model":"m","messages":[`, 400, "body is not valid JSON: line 1, column 26 (offset 25), in messages[0]: unexpected end of JSON input"},
		{"not an object", "", `["m"]`, 400, "body must be a JSON object"},
		{"empty body", "", "", 400, "empty body"},
		{"chat body with a bad message", "", `{"model":"m","messages":[{"role":"bot","content":"hi"}]}`, 400, `messages[0].role: unsupported role \"bot\"`},
		{"chat body without model", "", `{"messages":[{"role":"user","content":"hi"}]}`, 400, "model: required in a chat or completions body"},
		{"chat body with a non-string model", "", `{"model":7,"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid type for model: expected string"},
		{"completions body without prompt text", "", `{"model":"m","prompt":[]}`, 400, "prompt"},
		{"unknown query parameter", "?tenant=t&teant=u", string(chat), 400, "?teant: unknown query parameter: want tenant or tags"},
		{"tenant twice", "?tenant=t&tenant=u", string(chat), 400, "?tenant: given more than once"},
		{"query with a RouteRequest", "?tenant=t", `{"model":"m"}`, 400, "?tenant: query parameters go with a chat or completions body"},
		{"RouteRequest with an unknown field", "", `{"model":"m","max_tokens":5}`, 400, `read as a RouteRequest (the body has neither messages nor prompt)`},
		{"RouteRequest without model", "", `{"tenant":"t"}`, 400, "model is required"},
		{"body over the limit", "", `{"model":"m","prompt":"` + strings.Repeat("x", 16<<20) + `"}`, 413, "body larger than 16777216 bytes"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			code, body := postExplain(t, tr, tc.query, tc.body)
			var st struct {
				Code    int
				Message string
			}
			if err := json.Unmarshal(body, &st); err != nil {
				t.Fatalf("error body %q: %v", body, err)
			}
			if code != tc.wantStatus || st.Code != 3 || !strings.Contains(st.Message, strings.ReplaceAll(tc.want, `\"`, `"`)) {
				t.Errorf("status %d %s, want %d and a message with %q", code, body, tc.wantStatus, tc.want)
			}
		})
	}
}

// TestExplainCandidatesCarryTheEndpoint: each Explain candidate's endpoint
// is the one ListEndpoints shows, scrape time and error included.
func TestExplainCandidatesCarryTheEndpoint(t *testing.T) {
	a, b := newFakeWorker(t, "m"), newFakeWorker(t, "m")
	tr := startRouter(t, nil, a, b)
	b.mode.Store(modeStatus500)
	waitFor(t, "b unhealthy", func() bool { return !tr.endpoints(t, "")["b"].GetHealthy() })
	// b stays unhealthy and a's load is fixed: only a's scrape time moves
	// between the two calls.
	ex := tr.explain(t, nil)
	eps := tr.endpoints(t, "")
	for _, c := range ex.GetCandidates() {
		got, list := c.GetEndpoint(), eps[c.GetEndpoint().GetId()]
		if got.GetLastScrape() == nil || got.GetLastScrape().AsTime().After(list.GetLastScrape().AsTime()) {
			t.Errorf("%s: explain last_scrape %v, ListEndpoints a moment later %v", got.GetId(), got.GetLastScrape(), list.GetLastScrape())
		}
		got.LastScrape, list.LastScrape = nil, nil
		if !proto.Equal(got, list) {
			t.Errorf("explain endpoint %v\nListEndpoints   %v", got, list)
		}
	}
	if len(ex.GetCandidates()) != 2 {
		t.Fatalf("%d candidates", len(ex.GetCandidates()))
	}
}
