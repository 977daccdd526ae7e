package replica

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/natsembed"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
)

// tracker records what the events did.
type tracker struct {
	mu          sync.Mutex
	added       []string // request/endpoint
	complete    []string
	decisions   []PeerDecision
	completions []Completion
	changed     chan struct{}
}

func newTracker() *tracker { return &tracker{changed: make(chan struct{}, 100)} }

func (tr *tracker) AddInFlight(d PeerDecision) {
	tr.mu.Lock()
	tr.added = append(tr.added, d.RequestID+"/"+d.EndpointID)
	tr.decisions = append(tr.decisions, d)
	tr.mu.Unlock()
	tr.changed <- struct{}{}
}

func (tr *tracker) Complete(c Completion) bool {
	tr.mu.Lock()
	tr.complete = append(tr.complete, c.RequestID+"/"+c.EndpointID)
	tr.completions = append(tr.completions, c)
	tr.mu.Unlock()
	tr.changed <- struct{}{}
	return true
}

func (tr *tracker) snapshot() (added, complete []string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.added...), append([]string(nil), tr.complete...)
}

func marshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEventsOverRealNATS publishes the payloads a peer replica and the
// gateway send and checks what reaches the tracker, in order: a marker
// decision published last proves everything before it was handled.
func TestEventsOverRealNATS(t *testing.T) {
	ns, err := natsembed.Start(natsembed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	tr := newTracker()
	bad := make(chan string, 10)
	nc, err := nats.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	s, err := New(Config{
		Conn: nc, RouterID: "me", Tracker: tr, MaxAge: time.Minute, Log: zerolog.Nop(),
		OnBadMessage: func(subj string) { bad <- subj },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- s.Run(ctx) }()

	peer, err := nats.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	// Seeing our own decision arrive proves our subscriptions, sent earlier
	// on the same connection, are registered.
	own := make(chan *nats.Msg, 1)
	ownSub, _ := peer.ChanSubscribe(bus.SubjectRouteDecided, own)
	_ = peer.Flush()
	s.Publish(Decision{RequestID: "mine", EndpointID: "a", Model: "m", At: time.Now(), PromptTokens: 900, CachedTokens: 800})
	select {
	case m := <-own:
		var d eventsv1.RouteDecision
		if err := proto.Unmarshal(m.Data, &d); err != nil || d.GetRouterId() != "me" || d.GetRequestId() != "mine" ||
			d.GetPromptTokens() != 900 || d.GetPredictedCachedTokens() != 800 {
			t.Fatalf("published decision %v (%v)", &d, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("own decision not published")
	}
	_ = ownSub.Unsubscribe()

	now := timestamppb.Now()
	pub := func(subj string, data []byte) {
		if err := peer.Publish(subj, data); err != nil {
			t.Fatal(err)
		}
	}
	pub(bus.SubjectRouteDecided, []byte{0xff, 0xff, 0xff})
	pub(bus.SubjectRouteDecided, marshal(t, &eventsv1.RouteDecision{RequestId: "x", RouterId: "me", EndpointId: "a", DecidedAt: now}))
	pub(bus.SubjectRouteDecided, marshal(t, &eventsv1.RouteDecision{RequestId: "old", RouterId: "peer", EndpointId: "a",
		DecidedAt: timestamppb.New(time.Now().Add(-time.Hour))}))
	pub(bus.SubjectRouteDecided, marshal(t, &eventsv1.RouteDecision{RequestId: "", RouterId: "peer", EndpointId: "a"}))
	pub(bus.SubjectRouteDecided, marshal(t, &eventsv1.RouteDecision{RequestId: "p1", RouterId: "peer", EndpointId: "b", DecidedAt: now,
		PromptTokens: 1000, PredictedCachedTokens: 600}))
	pub(bus.SubjectRouteCompleted, marshal(t, &eventsv1.RouteCompletion{RequestId: "p1", EndpointId: "b", Success: true,
		TtftSeconds: 0.25, PromptTokens: 1000, CachedTokens: 512}))
	pub(bus.SubjectRouteCompleted, marshal(t, &eventsv1.RouteCompletion{}))
	pub(bus.SubjectRouteCompleted, marshal(t, &eventsv1.RouteCompletion{RequestId: "p2"}))
	// Each subject has its own delivery goroutine, so each gets a marker.
	pub(bus.SubjectRouteDecided, marshal(t, &eventsv1.RouteDecision{RequestId: "marker", RouterId: "peer", EndpointId: "z", DecidedAt: now}))
	pub(bus.SubjectRouteCompleted, marshal(t, &eventsv1.RouteCompletion{RequestId: "marker", EndpointId: "z"}))

	deadline := time.After(10 * time.Second)
	for {
		added, complete := tr.snapshot()
		if len(added) > 0 && added[len(added)-1] == "marker/z" && len(complete) > 0 && complete[len(complete)-1] == "marker/z" {
			break
		}
		select {
		case <-tr.changed:
		case <-deadline:
			t.Fatalf("marker not seen; added %v", added)
		}
	}
	added, complete := tr.snapshot()
	if want := []string{"p1/b", "marker/z"}; !equal(added, want) {
		t.Errorf("added %v, want %v (own, stale and id-less decisions ignored)", added, want)
	}
	if want := []string{"p1/b", "p2/", "marker/z"}; !equal(complete, want) {
		t.Errorf("completed %v, want %v", complete, want)
	}
	if n := len(bad); n != 3 {
		t.Errorf("%d malformed payloads reported, want 3", n)
	}
	tr.mu.Lock()
	d, c := tr.decisions[0], tr.completions[0]
	tr.mu.Unlock()
	if d.PromptTokens != 1000 || d.CachedTokens != 600 || d.At.IsZero() {
		t.Errorf("peer decision %+v", d)
	}
	if !c.Success || c.TTFTSeconds != 0.25 || c.PromptTokens != 1000 || c.CachedTokens != 512 {
		t.Errorf("completion %+v", c)
	}
	cancel()
	if err := <-runDone; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestPublishNeverBlocks(t *testing.T) {
	var dropped int
	s := &Sync{cfg: Config{OnDropped: func() { dropped++ }}, queue: make(chan Decision, 2)}
	for range 5 {
		s.Publish(Decision{RequestID: "r"})
	}
	if dropped != 3 {
		t.Fatalf("dropped %d, want 3", dropped)
	}
}

// FuzzEventPayloads feeds arbitrary bytes to both handlers: they must never
// panic, and whatever reaches the tracker carries ids.
func FuzzEventPayloads(f *testing.F) {
	f.Add(marshal(f, &eventsv1.RouteDecision{RequestId: "r", RouterId: "peer", EndpointId: "a", DecidedAt: timestamppb.Now()}))
	f.Add(marshal(f, &eventsv1.RouteCompletion{RequestId: "r", EndpointId: "a", Success: true}))
	f.Add([]byte{0x0a, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		tr := &checkTracker{t: t}
		s := &Sync{cfg: Config{RouterID: "me", Tracker: tr, MaxAge: time.Minute, Log: zerolog.Nop()}}
		s.onDecision(&nats.Msg{Subject: bus.SubjectRouteDecided, Data: data})
		s.onCompletion(&nats.Msg{Subject: bus.SubjectRouteCompleted, Data: data})
	})
}

type checkTracker struct{ t *testing.T }

func (c *checkTracker) AddInFlight(d PeerDecision) {
	if d.RequestID == "" || d.EndpointID == "" || d.PromptTokens < 0 || d.CachedTokens < 0 {
		c.t.Fatalf("bad decision reached the tracker: %+v", d)
	}
}

func (c *checkTracker) Complete(cp Completion) bool {
	if cp.RequestID == "" || cp.PromptTokens < 0 || cp.CachedTokens < 0 {
		c.t.Fatalf("bad completion reached the tracker: %+v", cp)
	}
	return false
}
