package router_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/tokenizer"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify"
)

// gate stands for a step of Route that takes long: armed, it holds the
// request until the request's context is done, as a slow tokenization or
// classification would when the caller's deadline passes in the middle of
// it. The step then carries on as if it had not noticed — what comes after
// it must.
type gate struct {
	armed   atomic.Bool
	entered chan struct{}
	left    chan struct{}
}

func newGate() *gate { return &gate{entered: make(chan struct{}, 1), left: make(chan struct{}, 1)} }

func (g *gate) hold(ctx context.Context) {
	if !g.armed.CompareAndSwap(true, false) {
		return
	}
	g.entered <- struct{}{}
	<-ctx.Done()
	g.left <- struct{}{}
}

// reset drops what an earlier request left in the gate's channels.
func (g *gate) reset() {
	g.armed.Store(false)
	for {
		select {
		case <-g.entered:
		case <-g.left:
		default:
			return
		}
	}
}

// gatedTokenizer is the simple tokenizer with its chat rendering gated.
type gatedTokenizer struct {
	*tokenizer.Simple
	g *gate
}

func (t gatedTokenizer) ApplyChatTemplateContext(ctx context.Context, c *tokenizer.Chat, maxBytes int) (string, error) {
	t.g.hold(ctx)
	return t.Simple.ApplyChatTemplateContext(ctx, c, maxBytes)
}

// gatedClassifier tags nothing, after the gate.
type gatedClassifier struct{ g *gate }

func (c gatedClassifier) Classify(ctx context.Context, _ *classify.Request, tags []string) ([]string, error) {
	c.g.hold(ctx)
	return tags, nil
}

var tokenizerGate, classifierGate = newGate(), newGate()

func init() {
	router.RegisterTestTokenizer("gated", gatedTokenizer{tokenizer.NewSimple(), tokenizerGate})
	router.RegisterTestClassifier("gated", gatedClassifier{classifierGate})
}

// TestCanceledRouteLeavesNoRecords: a Route whose caller gives up (its
// deadline passes, or it cancels) while the router is still reading the
// prompt or classifying answers with the caller's code and leaves nothing
// behind — no in-flight entry on its own replica or the other, no decision
// on NATS — where it used to finish the decision for nobody and leave an
// entry counting against the worker for --inflight-ttl. The next request
// routes as usual.
func TestCanceledRouteLeavesNoRecords(t *testing.T) {
	for _, stage := range []struct {
		name string
		g    *gate
	}{{"tokenizer", tokenizerGate}, {"classifier", classifierGate}} {
		for _, how := range []string{"deadline", "cancel"} {
			t.Run(stage.name+"/"+how, func(t *testing.T) {
				stage.g.reset()
				ns, nc := startNATS(t)
				a, b := newFakeWorker(t, "m"), newFakeWorker(t, "m")
				replica := func(id string) *testRouter {
					return startRouter(t, func(c *router.Config) {
						slowScrapes(c)
						c.NATS.URL = ns.URL()
						c.RouterID = id
						c.Tokenizers = "*=gated"
						c.Classifiers = "gated"
					}, a, b)
				}
				r1, r2 := replica("r1"), replica("r2")
				warmUp(t, nc, r1, r2)
				decided := make(chan *nats.Msg, 16)
				sub, err := nc.ChanSubscribe(bus.SubjectRouteDecided, decided)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = sub.Unsubscribe() }()
				if err := nc.Flush(); err != nil {
					t.Fatal(err)
				}
				routed := metricValue(r1.metricsText(t), "switchyard_router_route_duration_seconds_count")

				stage.g.armed.Store(true)
				ctx, cancel := context.WithCancel(context.Background())
				want := codes.Canceled
				if how == "deadline" {
					ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
					want = codes.DeadlineExceeded
				} else {
					go func() { <-stage.g.entered; cancel() }()
				}
				defer cancel()
				_, err = r1.client.Route(ctx, &routerv1.RouteRequest{RequestId: "abandoned", Tenant: "team-a", Model: "m",
					Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: chatBody(doc("abandoned"), "q")})
				if status.Code(err) != want {
					t.Fatalf("Route: %v, want %s", err, want)
				}
				select {
				case <-stage.g.left:
				case <-time.After(10 * time.Second):
					t.Fatal("the router's request context was not done after the caller gave up")
				}
				// Route has returned on the router too: its duration is observed
				// after everything it does.
				waitFor(t, "the abandoned Route to return", func() bool {
					return metricValue(r1.metricsText(t), "switchyard_router_route_duration_seconds_count") == routed+1
				})

				// The next request is routed and published; anything the
				// abandoned one had published would have come first.
				after, err := chosen(r1.routeBody(t, "after", chatBody(doc("after"), "q")))
				if err != nil {
					t.Fatal(err)
				}
				select {
				case m := <-decided:
					var d eventsv1.RouteDecision
					if err := proto.Unmarshal(m.Data, &d); err != nil || d.GetRequestId() != "after" {
						t.Fatalf("published %v (%v), want only the decision for \"after\"", &d, err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("the decision for \"after\" was not published")
				}
				waitFor(t, "replica 2 to see \"after\"", func() bool { return r2.endpoints(t, "")[after].GetInFlight() == 1 })
				for name, r := range map[string]*testRouter{"r1": r1, "r2": r2} {
					total := int64(0)
					for _, e := range r.endpoints(t, "") {
						total += e.GetInFlight()
					}
					if total != 1 {
						t.Errorf("%s holds %d requests in flight, want 1 (\"after\" alone)", name, total)
					}
				}
				if stage.name == "tokenizer" && !strings.Contains(r1.metricsText(t), `switchyard_router_prompt_reads_total{result="canceled"} 1`) {
					t.Error("the abandoned prompt read is not counted as canceled")
				}
			})
		}
	}
}
