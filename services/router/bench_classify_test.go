package router_test

import (
	"context"
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
// on every request; "tags-only" runs the header and tenant tags alone.
// The difference is what classification adds to Route. The last adds
// pii-rules over the example GatewayBackend's own kinds (spec.pii).
func BenchmarkRoute8kClassifiers(b *testing.B) {
	for _, c := range []struct{ name, classifiers string }{
		{"tags-only", "header-tags,tenant-tags"},
		{"builtins", "header-tags,tenant-tags,pii,complexity,external"},
		// The default: the example backend's spec.pii (a pattern, two
		// terms) scanned too.
		{"builtins+pii-rules", "header-tags,tenant-tags,pii,pii-rules,complexity,external"},
	} {
		b.Run(c.name, func(b *testing.B) {
			q0, q1, g0 := newFakeWorker(b, "qwen-3.6-27b"), newFakeWorker(b, "qwen-3.6-27b"), newFakeWorker(b, "glm-5.3")
			pd := startPolicyd(b, devCatalog(b, q0, q1, g0))
			tr := startRouter(b, func(cfg *router.Config) {
				slowScrapes(cfg)
				cfg.Endpoints = ""
				cfg.PolicydAddr = pd.GRPCAddr()
				cfg.GatewayBackend = "dev"
				cfg.Classifiers = c.classifiers
			})
			waitFor(b, "workers known", func() bool { return len(tr.endpoints(b, "qwen-3.6-27b")) >= 2 })
			body := chatBodyFor("qwen-3.6-27b", doc("bench"), "Summarise the document for me, please.")
			req := &routerv1.RouteRequest{Tenant: "team-a", Model: "qwen-3.6-27b", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: body}
			ctx := context.Background()
			lat := make([]time.Duration, 0, 1<<16)
			for i := 0; b.Loop(); i++ {
				req.RequestId = "cls-" + strconv.Itoa(i)
				start := time.Now()
				resp, err := tr.client.Route(ctx, req)
				lat = append(lat, time.Since(start))
				if err != nil || resp.GetTarget() == nil {
					b.Fatalf("route: %v %v", resp, err)
				}
			}
			b.StopTimer()
			reportPercentiles(b, lat)
		})
	}
}
