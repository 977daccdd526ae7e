package router_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

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
	sets := []struct{ name, classifiers string }{
		{"tags-only", "header-tags,tenant-tags"},
		{"builtins", "header-tags,tenant-tags,pii,complexity,external"},
		{"builtins+pii-rules", "header-tags,tenant-tags,pii,pii-rules,complexity,external"},
	}
	q0, q1, g0 := newFakeWorker(b, "qwen-3.6-27b"), newFakeWorker(b, "qwen-3.6-27b"), newFakeWorker(b, "glm-5.3")
	pd := startPolicyd(b, devCatalog(b, q0, q1, g0))
	routers := make([]*testRouter, len(sets))
	for i, c := range sets {
		routers[i] = startRouter(b, func(cfg *router.Config) {
			slowScrapes(cfg)
			cfg.Endpoints = ""
			cfg.PolicydAddr = pd.GRPCAddr()
			cfg.GatewayBackend = "dev"
			cfg.Classifiers = c.classifiers
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
				b.Fatalf("%s: route: %v %v", sets[j].name, resp, err)
			}
		}
	}
	b.StopTimer()
	for j, c := range sets {
		l := lat[j]
		slices.Sort(l)
		pct := func(p float64) float64 { return float64(l[int(p*float64(len(l)-1))].Nanoseconds()) / 1e3 }
		b.ReportMetric(pct(0.50), c.name+"-p50-µs")
		b.ReportMetric(pct(0.99), c.name+"-p99-µs")
	}
}
