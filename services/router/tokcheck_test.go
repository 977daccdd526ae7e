package router_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/sim"
	"github.com/switchyard-dev/switchyard/internal/tokcheck"
	"github.com/switchyard-dev/switchyard/internal/tokenizer/hf"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router"
)

// fixtureTokenizer is a `make testdata` tokenizer directory, or skips.
func fixtureTokenizer(t *testing.T, name string) string {
	t.Helper()
	dir, _ := filepath.Abs(filepath.Join("..", "..", "testdata-cache", "tokenizers", name))
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("fixture tokenizers missing: run make testdata (%v)", err)
		}
		t.Skipf("SKIP: fixture tokenizers missing, run `make testdata` (%v)", err)
	}
	return dir
}

// startCheckedRouter runs a router over one simulated worker (id a) with
// the given --tokenizers and fast tokenizer-check timings.
func startCheckedRouter(t *testing.T, simTokenizer, tokenizers string) (*testRouter, *sim.Fleet) {
	t.Helper()
	fleet := startSim(t, zerolog.Nop(), func(c *sim.Config) { c.Tokenizer = simTokenizer })
	tr := startRouter(t, func(cfg *router.Config) {
		cfg.Endpoints = "a=" + fleet.Workers()[0].URL
		cfg.Tokenizers = tokenizers
		cfg.TokenizerCheckRetry = 50 * time.Millisecond
		cfg.TokenizerCheckInterval = time.Minute
	})
	return tr, fleet
}

func (tr *testRouter) explainTokenizer(t *testing.T, model string) *routerv1.TokenizerStatus {
	t.Helper()
	resp, err := tr.client.Explain(context.Background(), &routerv1.RouteRequest{
		RequestId: "x", Tenant: "t", Model: model, Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS,
		Body: []byte(`{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetTokenizer()
}

// TestTokenizerMismatchGoesApproximate: the worker tokenizes with the
// simulator's Simple tokenizer while the router is configured with Qwen3.
// The check finds them differing at token 0 (Qwen3's <|im_start|> is
// 151644, Simple's 1), the model is routed in approximate mode (prompt
// counts no longer exact), the gauge and the checks counter say so, and
// Explain shows the verdict with the ids around the difference.
func TestTokenizerMismatchGoesApproximate(t *testing.T) {
	qwen := fixtureTokenizer(t, "qwen3")
	tr, _ := startCheckedRouter(t, "", "*=hf:"+qwen)
	model := sim.DefaultServedModelName
	series := `switchyard_router_tokenizer_mismatch{model="` + model + `"}`
	waitFor(t, "mismatch gauge", func() bool { return metricValue(tr.metricsText(t), series) == 1 })
	if v := metricValue(tr.metricsText(t), `switchyard_router_tokenizer_checks_total{model="`+model+`",result="mismatch"}`); v < 1 {
		t.Fatalf("checks_total mismatch = %v", v)
	}
	ts := tr.explainTokenizer(t, model)
	if ts.GetMode() != "approximate" || len(ts.GetChecks()) != 1 {
		t.Fatalf("explain tokenizer: %v", ts)
	}
	ck := ts.GetChecks()[0]
	if ck.GetEndpointId() != "a" || ck.GetStatus() != "mismatch" || ck.GetFirstDifference() != 0 ||
		!strings.Contains(ck.GetDetail(), `>>151644"<|im_start|>"`) || !strings.Contains(ck.GetDetail(), `>>1"<|im_start|>"`) ||
		!strings.Contains(ck.GetDetail(), "chat probe differs at token 0") || ck.GetCheckedAt() == nil {
		t.Fatalf("check: %v", ck)
	}
	body := []byte(`{"model":"` + model + `","messages":[{"role":"user","content":"Summarise the termination terms."}]}`)
	// REST Explain carries the same block.
	hr, err := http.Post("http://"+tr.srv.HTTPAddr()+"/v1/route:explain", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(hr.Body)
	hr.Body.Close()
	if hr.StatusCode != 200 || !bytes.Contains(rest, []byte(`"mode":"approximate"`)) || !bytes.Contains(rest, []byte(`"status":"mismatch"`)) {
		t.Fatalf("REST explain: %d %s", hr.StatusCode, rest)
	}
	if c := tr.count(t, model, body); c.GetDecision().GetPromptTokensExact() {
		t.Fatalf("count of a mismatched model is exact: %v", c)
	}
	// Routing still works, on the text index.
	resp, err := tr.client.Route(context.Background(), &routerv1.RouteRequest{
		RequestId: "after-mismatch", Tenant: "t", Model: model, Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: body,
	})
	if err != nil || resp.GetTarget().GetId() != "a" {
		t.Fatalf("route: %v %v", resp, err)
	}
}

// TestTokenizerMatchStaysPrecise: the router's tokenizer is the worker's
// (Simple on both; Qwen3 on both): the check matches, the model stays
// precise and the gauge 0.
func TestTokenizerMatchStaysPrecise(t *testing.T) {
	cases := []struct{ name, sim, router string }{{"simple", "", "*=simple"}}
	if _, err := os.Stat(filepath.Join("..", "..", "testdata-cache", "tokenizers", "qwen3", "tokenizer.json")); err == nil {
		q := fixtureTokenizer(t, "qwen3")
		cases = append(cases, struct{ name, sim, router string }{"qwen3", q, "*=hf:" + q})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr, _ := startCheckedRouter(t, tc.sim, tc.router)
			model := sim.DefaultServedModelName
			waitFor(t, "match", func() bool {
				return metricValue(tr.metricsText(t), `switchyard_router_tokenizer_checks_total{model="`+model+`",result="match"}`) >= 1
			})
			if v := metricValue(tr.metricsText(t), `switchyard_router_tokenizer_mismatch{model="`+model+`"}`); v != 0 {
				t.Fatalf("mismatch gauge %v", v)
			}
			ts := tr.explainTokenizer(t, model)
			if ts.GetMode() != "precise" || len(ts.GetChecks()) != 1 || ts.GetChecks()[0].GetStatus() != "match" || ts.GetChecks()[0].GetFirstDifference() != -1 {
				t.Fatalf("explain tokenizer: %v", ts)
			}
			body := []byte(`{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`)
			if c := tr.count(t, model, body); !c.GetDecision().GetPromptTokensExact() {
				t.Fatalf("count not exact: %v", c)
			}
		})
	}
}

// TestTokenizerUncheckedWithoutTokenize: a worker without /tokenize (404)
// is unchecked, not a mismatch: the model stays precise and the router is
// ready.
func TestTokenizerUncheckedWithoutTokenize(t *testing.T) {
	a := newFakeWorker(t, "m")
	tr := startRouter(t, func(cfg *router.Config) {
		cfg.TokenizerCheckRetry = 50 * time.Millisecond
	}, a)
	waitFor(t, "unchecked", func() bool {
		return metricValue(tr.metricsText(t), `switchyard_router_tokenizer_checks_total{model="m",result="unchecked"}`) >= 1
	})
	ts := tr.explainTokenizer(t, "m")
	if ts.GetMode() != "precise" || len(ts.GetChecks()) != 1 || ts.GetChecks()[0].GetStatus() != "unchecked" ||
		!strings.Contains(ts.GetChecks()[0].GetDetail(), "does not serve POST /tokenize") {
		t.Fatalf("explain tokenizer: %v", ts)
	}
	if v := metricValue(tr.metricsText(t), `switchyard_router_tokenizer_mismatch{model="m"}`); v != 0 {
		t.Fatalf("mismatch gauge %v", v)
	}
}

// TestPromptCountMismatch: completions whose worker-counted prompt tokens
// differ from the router's count (the field case: 6,294 against 3,512)
// are counted per model and shown by Explain; an equal count is not.
func TestPromptCountMismatch(t *testing.T) {
	ns, nc := startNATS(t)
	a := newFakeWorker(t, "m")
	tr := startRouter(t, func(cfg *router.Config) {
		slowScrapes(cfg)
		cfg.NATS.URL = ns.URL()
	}, a)
	warmUp(t, nc, tr)
	complete := func(id string, prompt int64) {
		data, _ := proto.Marshal(&eventsv1.RouteCompletion{RequestId: id, EndpointId: "a", CompletedAt: timestamppb.Now(),
			Success: true, TtftSeconds: 0.05, PromptTokens: prompt})
		if err := nc.Publish(bus.SubjectRouteCompleted, data); err != nil {
			t.Fatal(err)
		}
		_ = nc.Flush()
		waitFor(t, "completion applied", func() bool { return tr.endpoints(t, "")["a"].GetInFlight() == 0 })
	}
	series := `switchyard_router_prompt_token_count_mismatch_total{model="m"}`
	for i := range 3 {
		id := "count-" + strconv.Itoa(i)
		resp := tr.routeBody(t, id, chatBody(doc("count "+strconv.Itoa(i)), "q"))
		n := resp.GetDecision().GetPromptTokens()
		if i == 0 {
			complete(id, n) // agrees
			continue
		}
		complete(id, n+n/2+100)
	}
	waitFor(t, "count mismatches", func() bool { return metricValue(tr.metricsText(t), series) == 2 })
	if ts := tr.explainTokenizer(t, "m"); ts.GetPromptCountMismatches() != 2 {
		t.Fatalf("explain: %v", ts)
	}
}

// TestTokenizerMismatchPosition: a worker with Qwen3's vocabulary whose
// chat template ends the generation prompt with "\n\n" instead of "\n"
// differs from the router's Qwen3 at the probe's last token, and Explain
// says exactly there, with both sides' ids.
func TestTokenizerMismatchPosition(t *testing.T) {
	qwen := fixtureTokenizer(t, "qwen3")
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(qwen, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join(qwen, "tokenizer_config.json"))
	var tc map[string]any
	if err := json.Unmarshal(raw, &tc); err != nil {
		t.Fatal(err)
	}
	tmpl, _ := tc["chat_template"].(string)
	if strings.Count(tmpl, `'<|im_start|>assistant\n'`) != 1 {
		t.Fatal("the fixture's template changed: no single generation prompt")
	}
	tc["chat_template"] = strings.Replace(tmpl, `'<|im_start|>assistant\n'`, `'<|im_start|>assistant\n\n'`, 1)
	raw, _ = json.Marshal(tc)
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := hf.LoadDir(qwen)
	if err != nil {
		t.Fatal(err)
	}
	local, err := tokcheck.Local(context.Background(), tok, tokcheck.FormChat)
	if err != nil {
		t.Fatal(err)
	}

	tr, _ := startCheckedRouter(t, dir, "*=hf:"+qwen)
	model := sim.DefaultServedModelName
	waitFor(t, "mismatch gauge", func() bool {
		return metricValue(tr.metricsText(t), `switchyard_router_tokenizer_mismatch{model="`+model+`"}`) == 1
	})
	ck := tr.explainTokenizer(t, model).GetChecks()[0]
	if ck.GetFirstDifference() != int64(len(local)-1) || !strings.Contains(ck.GetDetail(), `>>198"\n"`) || !strings.Contains(ck.GetDetail(), `>>271"\n\n"`) {
		t.Fatalf("check %v, want the first difference at %d", ck, len(local)-1)
	}
}

// countingProxy fronts a worker and counts the /tokenize requests through it.
func countingProxy(t *testing.T, target string) (string, *atomic.Int64) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/tokenize" {
			n.Add(1)
		}
		rp.ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

// TestTokenizerChecksDoNotHammer: a matching worker is probed once (its
// two forms) until the recheck interval; a worker without /tokenize is
// retried with a doubling backoff, a handful of times a second at most
// even with a 20 ms first retry.
func TestTokenizerChecksDoNotHammer(t *testing.T) {
	fleet := startSim(t, zerolog.Nop(), func(*sim.Config) {})
	good, goodN := countingProxy(t, fleet.Workers()[0].URL)
	bad, badN := countingProxy(t, newFakeWorker(t, "m").URL())
	tr := startRouter(t, func(cfg *router.Config) {
		cfg.Endpoints = "a=" + good + ",b=" + bad
		cfg.TokenizerCheckRetry = 20 * time.Millisecond
		cfg.TokenizerCheckInterval = time.Hour
	})
	waitFor(t, "match", func() bool {
		return metricValue(tr.metricsText(t), `switchyard_router_tokenizer_checks_total{model="`+sim.DefaultServedModelName+`",result="match"}`) >= 1
	})
	if badN.Load() == 0 {
		waitFor(t, "a first try of the worker without /tokenize", func() bool { return badN.Load() > 0 })
	}
	start := badN.Load()
	time.Sleep(time.Second)
	if n := goodN.Load(); n != 2 {
		t.Errorf("matching worker got %d /tokenize requests, want 2 (chat and prompt forms, once)", n)
	}
	// 20 ms doubling: at most 20, 40, 80, 160, 320, 640 ms waits (jittered
	// down to half) fit a second: 10 is generous.
	if n := badN.Load() - start; n > 10 {
		t.Errorf("worker without /tokenize got %d requests in a second", n)
	}
}
