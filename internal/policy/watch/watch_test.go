package watch

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"

	"github.com/switchyard-dev/switchyard/internal/policy"
	policyv1 "github.com/switchyard-dev/switchyard/proto/switchyard/policy/v1"
)

// fakeClient serves scripted streams: each Watch call pops the next list
// of responses, sends them, then ends the stream with io.EOF (policyd
// going away).
type fakeClient struct {
	mu      sync.Mutex
	streams [][]*policyv1.WatchResponse
	afters  []int64
	calls   chan struct{}
}

func (f *fakeClient) Watch(ctx context.Context, in *policyv1.WatchRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[policyv1.WatchResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.afters = append(f.afters, in.GetAfterRevision())
	select {
	case f.calls <- struct{}{}:
	default:
	}
	if len(f.streams) == 0 {
		return nil, errors.New("connection refused")
	}
	s := &fakeStream{ctx: ctx, msgs: f.streams[0]}
	f.streams = f.streams[1:]
	return s, nil
}

type fakeStream struct {
	grpc.ClientStream
	ctx  context.Context
	msgs []*policyv1.WatchResponse
}

func (s *fakeStream) Recv() (*policyv1.WatchResponse, error) {
	if len(s.msgs) == 0 {
		return nil, io.EOF
	}
	m := s.msgs[0]
	s.msgs = s.msgs[1:]
	return m, nil
}

func snapshot(t *testing.T, rev int64, rejectOnEmpty bool) *policyv1.WatchResponse {
	t.Helper()
	onEmpty := policy.Fallback
	if rejectOnEmpty {
		onEmpty = policy.Reject
	}
	s := &policy.Snapshot{Policies: []*policy.Policy{{Name: "p", Rules: []*policy.Rule{{Name: "r", OnEmpty: onEmpty}}}}}
	return &policyv1.WatchResponse{Snapshot: policy.ToProto(mustBuild(t, s), rev)}
}

func mustBuild(t *testing.T, s *policy.Snapshot) *policy.Snapshot {
	t.Helper()
	out, err := policy.FromProto(policy.ToProto(s, 0))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestWatcherKeepsLastGoodAndResumes(t *testing.T) {
	bad := &policyv1.WatchResponse{Snapshot: &policyv1.Snapshot{Revision: 3, Programs: []*policyv1.Program{{Name: "gw", Policies: []*policyv1.PolicyRef{{Name: "missing"}}}}}}
	fc := &fakeClient{calls: make(chan struct{}, 16), streams: [][]*policyv1.WatchResponse{
		{snapshot(t, 1, false), snapshot(t, 2, true)},
		{bad, snapshot(t, 2, true)}, // undecodable, then a stale repeat
		{snapshot(t, 4, false)},
	}}
	var mu sync.Mutex
	var got []int64
	w := New(fc, zerolog.Nop(), Options{MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, OnUpdate: func(c Current) {
		mu.Lock()
		got = append(got, c.Revision)
		mu.Unlock()
	}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	for range 4 { // three streams, then a failed dial
		select {
		case <-fc.calls:
		case <-time.After(10 * time.Second):
			t.Fatal("watcher did not reconnect")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 4 {
		t.Errorf("updates %v, want [1 2 4]", got)
	}
	if c := w.Current(); c == nil || c.Revision != 4 {
		t.Errorf("current %+v", c)
	}
	if w.Rejected() != 1 {
		t.Errorf("rejected %d, want 1", w.Rejected())
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if want := []int64{0, 2, 2, 4}; len(fc.afters) < 4 || fc.afters[0] != want[0] || fc.afters[1] != want[1] || fc.afters[2] != want[2] || fc.afters[3] != want[3] {
		t.Errorf("after_revision per call %v, want %v", fc.afters, want)
	}
}
