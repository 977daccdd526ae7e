package router_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testkit"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router"
)

// BenchmarkRoute8kClassifiers is Route over real gRPC with an 8k-token
// chat under deploy/examples' policies (served by a real policyd), whose
// pii-stays-local guard reads pii-detected and smart-semantic-routing
// complexity-low: with the content classifiers on, both read the prompt
// on every request; "tags-only" runs the header and tenant tags alone,
// and the last set adds pii-rules over the example GatewayBackend's own
// kinds (spec.pii). One router per set, over the same workers and
// policyd, called turn about so the machine's noise falls on each alike:
// the difference of their p50 and p99 is what classification adds to
// Route (BenchmarkClassify8k is the classify step alone).
func BenchmarkRoute8kClassifiers(b *testing.B) {
	sets := router.ClassifierSets
	q0, q1, g0 := newFakeWorker(b, "qwen-3.6-27b"), newFakeWorker(b, "qwen-3.6-27b"), newFakeWorker(b, "glm-5.3")
	pd := startPolicyd(b, devCatalog(b, q0, q1, g0))
	routers := make([]*testRouter, len(sets))
	for i, c := range sets {
		routers[i] = startRouter(b, func(cfg *router.Config) {
			slowScrapes(cfg)
			cfg.Endpoints = ""
			cfg.PolicydAddr = pd.GRPCAddr()
			cfg.GatewayBackend = "dev"
			cfg.Classifiers = c.Classifiers
		})
		waitFor(b, "workers known", func() bool { return len(routers[i].endpoints(b, "qwen-3.6-27b")) >= 2 })
	}
	body := chatBodyFor("qwen-3.6-27b", doc("bench"), "Summarise the document for me, please.")
	req := &routerv1.RouteRequest{Tenant: "team-a", Model: "qwen-3.6-27b", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: body}
	ctx := context.Background()
	lat := make([][]time.Duration, len(sets))
	for i := 0; b.Loop(); i++ {
		req.RequestId = "cls-" + strconv.Itoa(i)
		for k := range sets {
			j := (i + k) % len(sets) // each set first in turn
			start := time.Now()
			resp, err := routers[j].client.Route(ctx, req)
			lat[j] = append(lat[j], time.Since(start))
			if err != nil || resp.GetTarget() == nil {
				b.Fatalf("%s: route: %v %v", sets[j].Name, resp, err)
			}
		}
	}
	b.StopTimer()
	for j, c := range sets {
		testkit.ReportPercentiles(b, c.Name+"-", lat[j])
	}
}
