package router_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router"
)

// TestBurstSeesRoutedRequests: the burst policy (deploy/examples) drops
// local workers with more than 2 queued prompts. What counts as queued is
// the router's instant view — the scraped waiting requests plus those it
// routed there since the scrape and believes not yet scheduled — not the
// scrape alone, which lags by up to an interval: a burst of 24 requests
// arriving between two scrapes of idle workers puts 3 on each of the two
// local workers and sends the rest to the provider, instead of queueing
// all 24 locally.
func TestBurstSeesRoutedRequests(t *testing.T) {
	q0 := newFakeWorker(t, "qwen-3.6-27b")
	q1 := newFakeWorker(t, "qwen-3.6-27b")
	g0 := newFakeWorker(t, "glm-5.3")
	pd := startPolicyd(t, devCatalog(t, q0, q1, g0))
	tr := startRouter(t, func(c *router.Config) {
		slowScrapes(c)
		c.Endpoints = ""
		c.PolicydAddr = pd.GRPCAddr()
		c.GatewayBackend = "dev"
	})
	waitFor(t, "workers scraped", func() bool {
		eps := tr.endpoints(t, "qwen-3.6-27b")
		return eps["sim-0"].GetHealthy() && eps["sim-1"].GetHealthy()
	})
	// A long prompt: each request's prefill keeps it pending (not yet
	// scheduled) well past the burst, however slowly this machine runs.
	prompt := fmt.Sprintf("%0128000d", 0)
	var (
		mu     sync.Mutex
		counts = map[string]int{}
		wg     sync.WaitGroup
	)
	for i := range 24 {
		wg.Go(func() {
			body := fmt.Sprintf(`{"model":"qwen-3.6-27b","messages":[{"role":"user","content":"%d %s"}]}`, i, prompt)
			resp, err := tr.client.Route(context.Background(), &routerv1.RouteRequest{
				RequestId: fmt.Sprintf("burst-%d", i), Tenant: "team-a", Model: "qwen-3.6-27b",
				Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: []byte(body),
			})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			counts[resp.GetTarget().GetId()]++
			mu.Unlock()
		})
	}
	wg.Wait()
	t.Logf("24 requests between two scrapes: %v", counts)
	for _, w := range []string{"sim-0", "sim-1"} {
		if counts[w] > 3 {
			t.Errorf("%s got %d: the burst rule let it queue past 2 (%v)", w, counts[w], counts)
		}
	}
	if counts["provider/bedrock"] < 18 {
		t.Errorf("the provider got %d of 24, want the overflow (%v)", counts["provider/bedrock"], counts)
	}
}
