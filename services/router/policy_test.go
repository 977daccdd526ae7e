package router_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/switchyard-dev/switchyard/internal/policy"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/policyd"
	"github.com/switchyard-dev/switchyard/services/router"
)

// startPolicyd runs a real policyd in files mode on dir.
func startPolicyd(t testing.TB, dir string) *policyd.Server {
	t.Helper()
	cfg := policyd.DefaultConfig()
	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Paths = []string{dir}
	cfg.ShutdownTimeout = 5e9
	pd, err := policyd.New(cfg, zerolog.Nop())
	if err != nil {
		t.Fatalf("policyd.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pd.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("policyd Serve: %v", err)
		}
	})
	return pd
}

// devCatalog writes deploy/examples' policies, providers and gateway
// backend into a temp dir, with worker sets pointing at the fake workers:
// sim-0 and sim-1 serve qwen-3.6-27b, sim-2 glm-5.3.
func devCatalog(t testing.TB, qwen0, qwen1, glm *fakeWorker) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join("..", "..", "deploy", "examples")
	copyFile := func(from, to string) {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(filepath.Join(src, "providers.yaml"), filepath.Join(dir, "providers.yaml"))
	copyFile(filepath.Join(src, "gateway-backend.yaml"), filepath.Join(dir, "gateway-backend.yaml"))
	pols, err := filepath.Glob(filepath.Join(src, "policies", "*.yaml"))
	if err != nil || len(pols) == 0 {
		t.Fatalf("example policies: %v (%d)", err, len(pols))
	}
	for _, p := range pols {
		copyFile(p, filepath.Join(dir, filepath.Base(p)))
	}
	workers := fmt.Sprintf(`apiVersion: switchyard.dev/v1alpha1
kind: InferencePool
metadata: {name: sim-gpus, namespace: inference}
spec: {}
---
apiVersion: switchyard.dev/v1alpha1
kind: InferenceWorkerSet
metadata: {name: qwen-workers, namespace: inference}
spec:
  model: qwen-3.6-27b
  pool: sim-gpus
  static:
  - {id: sim-0, url: %q}
  - {id: sim-1, url: %q}
---
apiVersion: switchyard.dev/v1alpha1
kind: InferenceWorkerSet
metadata: {name: glm-workers, namespace: inference}
spec:
  model: glm-5.3
  pool: sim-gpus
  static:
  - {id: sim-2, url: %q}
`, qwen0.URL(), qwen1.URL(), glm.URL())
	if err := os.WriteFile(filepath.Join(dir, "workers.yaml"), []byte(workers), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestRouteWithPolicyd(t *testing.T) {
	q0 := newFakeWorker(t, "qwen-3.6-27b")
	q1 := newFakeWorker(t, "qwen-3.6-27b")
	g0 := newFakeWorker(t, "glm-5.3")
	dir := devCatalog(t, q0, q1, g0)
	pd := startPolicyd(t, dir)
	tr := startRouter(t, func(c *router.Config) {
		c.Endpoints = ""
		c.PolicydAddr = pd.GRPCAddr()
		c.GatewayBackend = "dev"
	})
	// The example's bedrock provider, whatever type and URL it has: the
	// router hands them to the gateway as they are.
	snap, diags, err := policy.Load(dir)
	if err != nil || snap == nil || snap.Provider("bedrock") == nil {
		t.Fatalf("the dev catalog: %v %s", err, diags.Error())
	}
	bedrock := snap.Provider("bedrock")
	waitLoads := func(q0w, q1w, gw int64) {
		t.Helper()
		q0.setLoad(q0w, 0)
		q1.setLoad(q1w, 0)
		g0.setLoad(gw, 0)
		waitFor(t, "scraped loads", func() bool {
			eps := tr.endpoints(t, "")
			for id, w := range map[string]int64{"sim-0": q0w, "sim-1": q1w, "sim-2": gw} {
				if e := eps[id]; e == nil || !e.GetHealthy() || e.GetWaiting() != w {
					return false
				}
			}
			return true
		})
	}

	type want struct {
		target, served, provider, policy string
		reject                           routerv1.RejectCode
	}
	tests := []struct {
		name       string
		loads      [3]int64 // waiting on sim-0, sim-1, sim-2
		model      string
		tenant     string
		tags       []string
		prompt     string // the user message; "hi" when empty
		want       want
		wantTarget []string // any of these (near-ties between equal workers)
	}{
		{name: "idle: local by the burst rule", loads: [3]int64{0, 0, 0}, model: "qwen-3.6-27b",
			wantTarget: []string{"sim-0", "sim-1"}, want: want{served: "qwen-3.6-27b", policy: "burst-policy"}},
		{name: "one queue over 2: the other local", loads: [3]int64{3, 0, 0}, model: "qwen-3.6-27b",
			want: want{target: "sim-1", served: "qwen-3.6-27b", policy: "burst-policy"}},
		{name: "local queues over 2: bedrock first in order", loads: [3]int64{3, 4, 0}, model: "qwen-3.6-27b",
			want: want{target: "provider/bedrock", served: "qwen.qwen3-6-27b-v1:0", provider: "bedrock", policy: "burst-policy"}},
		// (The complexity classifier scores the prompt: a hard one stays
		// with glm-5.3, a simple one may go to the idle qwen-3.6-27b.)
		{name: "burst, glm: bedrock serves it", loads: [3]int64{0, 0, 5}, model: "glm-5.3",
			prompt: "Prove that the square root of 2 is irrational, step by step.",
			want:   want{target: "provider/bedrock", served: "zai.glm-5-3-v1:0", provider: "bedrock", policy: "burst-policy"}},
		{name: "burst, glm, a simple prompt: the idle qwen", loads: [3]int64{0, 0, 5}, model: "glm-5.3",
			wantTarget: []string{"sim-0", "sim-1"}, want: want{served: "qwen-3.6-27b", policy: "smart-semantic-routing"}},
		// The burst rule finds nothing (locals too busy, providers out by
		// the guard) and falls back to default routing, guard applied:
		// the busy cluster, never a provider.
		{name: "pii under burst: stays local", loads: [3]int64{3, 4, 0}, model: "qwen-3.6-27b",
			tags: []string{"pii-detected"}, wantTarget: []string{"sim-0", "sim-1"}, want: want{served: "qwen-3.6-27b"}},
		{name: "tenant default tag pii: stays local too", loads: [3]int64{3, 4, 0}, model: "qwen-3.6-27b",
			tenant: "payroll", wantTarget: []string{"sim-0", "sim-1"}, want: want{served: "qwen-3.6-27b"}},
		{name: "pii with room locally: local", loads: [3]int64{3, 0, 0}, model: "qwen-3.6-27b",
			tags: []string{"pii-detected"}, want: want{target: "sim-1", served: "qwen-3.6-27b", policy: "burst-policy"}},
		{name: "disallowed tag is ignored", loads: [3]int64{3, 4, 0}, model: "qwen-3.6-27b",
			tags: []string{"vip"}, want: want{target: "provider/bedrock", served: "qwen.qwen3-6-27b-v1:0", provider: "bedrock", policy: "burst-policy"}},
		{name: "alias: the faster model, under its own name", loads: [3]int64{2, 2, 0}, model: "standard-model",
			want: want{target: "sim-2", served: "glm-5.3", policy: "standard-model-alias"}},
		{name: "alias: qwen when glm is busier", loads: [3]int64{0, 2, 2}, model: "standard-model",
			want: want{target: "sim-0", served: "qwen-3.6-27b", policy: "standard-model-alias"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			waitLoads(tt.loads[0], tt.loads[1], tt.loads[2])
			tenant := tt.tenant
			if tenant == "" {
				tenant = "team-a"
			}
			prompt := tt.prompt
			if prompt == "" {
				prompt = "hi"
			}
			body := fmt.Sprintf(`{"model": %q, "messages":[{"role":"user","content":%q}],"stream":false}`, tt.model, prompt)
			resp, err := tr.client.Route(context.Background(), &routerv1.RouteRequest{
				RequestId: fmt.Sprintf("req-%d", i), Tenant: tenant, Model: tt.model, Tags: tt.tags,
				Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: []byte(body),
			})
			if err != nil {
				t.Fatalf("Route: %v", err)
			}
			d := resp.GetDecision()
			if d.GetPolicy() != tt.want.policy {
				t.Errorf("decided by policy %q rule %q, want %q (reason: %s)", d.GetPolicy(), d.GetRule(), tt.want.policy, d.GetReason())
			}
			if tt.want.reject != routerv1.RejectCode_REJECT_CODE_UNSPECIFIED {
				if resp.GetRejection().GetCode() != tt.want.reject || resp.GetTarget() != nil {
					t.Fatalf("got %v / target %v, want rejection %v", resp.GetRejection(), resp.GetTarget(), tt.want.reject)
				}
				return
			}
			tg := resp.GetTarget()
			if tg == nil {
				t.Fatalf("rejected: %v (reason: %s)", resp.GetRejection(), d.GetReason())
			}
			okTarget := tg.GetId() == tt.want.target
			for _, w := range tt.wantTarget {
				okTarget = okTarget || tg.GetId() == w
			}
			if !okTarget {
				t.Fatalf("routed to %s, want %s%v (reason: %s)", tg.GetId(), tt.want.target, tt.wantTarget, d.GetReason())
			}
			if tg.GetServedModel() != tt.want.served || tg.GetProvider() != tt.want.provider {
				t.Errorf("served %q by provider %q, want %q by %q", tg.GetServedModel(), tg.GetProvider(), tt.want.served, tt.want.provider)
			}
			wantKind, wantType := routerv1.TargetKind_TARGET_KIND_LOCAL, "vLLM"
			if tt.want.provider != "" {
				wantKind, wantType = routerv1.TargetKind_TARGET_KIND_PROVIDER, bedrock.Type
				if tg.GetUrl() != bedrock.BaseURL {
					t.Errorf("provider url %q, want %q", tg.GetUrl(), bedrock.BaseURL)
				}
			}
			if tg.GetType() != wantType {
				t.Errorf("target type %q, want %q: the gateway picks its upstream adapter by it", tg.GetType(), wantType)
			}
			if tg.GetKind() != wantKind {
				t.Errorf("kind %v, want %v", tg.GetKind(), wantKind)
			}
		})
	}

	t.Run("no local worker: pii rejects, the rest bursts", func(t *testing.T) {
		waitLoads(0, 0, 0)
		q0.mode.Store(modeStatus500)
		q1.mode.Store(modeStatus500)
		defer q0.mode.Store(modeOK)
		defer q1.mode.Store(modeOK)
		waitFor(t, "qwen workers unhealthy", func() bool {
			eps := tr.endpoints(t, "qwen-3.6-27b")
			return !eps["sim-0"].GetHealthy() && !eps["sim-1"].GetHealthy()
		})
		for _, tc := range []struct {
			tags       []string
			wantReject bool
		}{{[]string{"pii-detected"}, true}, {nil, false}} {
			resp, err := tr.client.Route(context.Background(), &routerv1.RouteRequest{
				RequestId: fmt.Sprintf("down-%v", tc.wantReject), Tenant: "team-a", Model: "qwen-3.6-27b", Tags: tc.tags,
				Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: []byte(`{"model":"qwen-3.6-27b","prompt":"x"}`),
			})
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantReject {
				rej := resp.GetRejection()
				if rej.GetCode() != routerv1.RejectCode_REJECT_CODE_POLICY || resp.GetDecision().GetPolicy() != "pii-stays-local" ||
					rej.GetMessage() != "rejected by policy pii-stays-local rule serve: no allowed backend can serve the request" {
					t.Errorf("pii: got %v target %v decision %v, want a pii-stays-local rejection", rej, resp.GetTarget(), resp.GetDecision())
				}
				continue
			}
			if resp.GetTarget().GetId() != "provider/bedrock" {
				t.Errorf("no tag: got %v %v, want provider/bedrock", resp.GetTarget(), resp.GetRejection())
			}
		}
	})

	t.Run("explain shows the policy verdicts", func(t *testing.T) {
		waitLoads(3, 4, 0)
		resp, err := tr.client.Explain(context.Background(), &routerv1.RouteRequest{
			RequestId: "explain", Tenant: "team-a", Model: "qwen-3.6-27b", Tags: []string{"pii-detected"},
			Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS,
		})
		if err != nil {
			t.Fatal(err)
		}
		if id := resp.GetResult().GetTarget().GetId(); id != "sim-0" && id != "sim-1" {
			t.Fatalf("result %v, want default routing to a local worker", resp.GetResult())
		}
		reasons := map[string]string{}
		for _, c := range resp.GetCandidates() {
			id := c.GetEndpoint().GetId()
			reasons[id] = c.GetExcludedReason()
			local := c.GetEndpoint().GetKind() == routerv1.TargetKind_TARGET_KIND_LOCAL
			if want := local && id != "sim-2"; c.GetEligible() != want {
				t.Errorf("%s eligible %v, want %v", id, c.GetEligible(), want)
			}
			// Workers are scraped, providers are not.
			if scraped := c.GetEndpoint().GetLastScrape() != nil; scraped != local {
				t.Errorf("%s last_scrape %v, want one: %v", c.GetEndpoint().GetId(), c.GetEndpoint().GetLastScrape(), local)
			}
		}
		// The trace is default routing's: locals eligible, providers out
		// by the guard; the worker of another model is listed too.
		for id, want := range map[string]string{
			"sim-0":               "",
			"sim-2":               `does not serve model "qwen-3.6-27b"`,
			"provider/bedrock":    "dropped by pii-stays-local/serve/pii-never-leaves-cluster (guard)",
			"provider/databricks": "dropped by pii-stays-local/serve/pii-never-leaves-cluster (guard)",
		} {
			if reasons[id] != want {
				t.Errorf("%s: excluded %q, want %q", id, reasons[id], want)
			}
		}
	})

	t.Run("REST explain of a chat body takes tenant and tags from the query", func(t *testing.T) {
		waitLoads(3, 4, 0)
		chat := `{"model":"qwen-3.6-27b","messages":[{"role":"user","content":"hi"}]}`
		for _, tc := range []struct{ query, target, bedrock string }{
			{"?tenant=team-a&tags=pii-detected", "sim-", "dropped by pii-stays-local/serve/pii-never-leaves-cluster (guard)"},
			{"?tenant=payroll", "sim-", "dropped by pii-stays-local/serve/pii-never-leaves-cluster (guard)"},
			{"?tenant=team-a", "provider/bedrock", ""},
		} {
			code, body := postExplain(t, tr, tc.query, chat)
			var resp routerv1.ExplainResponse
			if err := protojson.Unmarshal(body, &resp); code != 200 || err != nil {
				t.Fatalf("%s: status %d %v: %s", tc.query, code, err, body)
			}
			if id := resp.GetResult().GetTarget().GetId(); !strings.HasPrefix(id, tc.target) {
				t.Errorf("%s: target %s, want %s", tc.query, id, tc.target)
			}
			for _, c := range resp.GetCandidates() {
				if c.GetEndpoint().GetId() == "provider/bedrock" && c.GetExcludedReason() != tc.bedrock {
					t.Errorf("%s: bedrock excluded %q, want %q", tc.query, c.GetExcludedReason(), tc.bedrock)
				}
			}
		}
	})
}
