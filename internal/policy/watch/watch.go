// Package watch keeps a router's copy of policyd's snapshot: it follows
// PolicyService.Watch, decodes each revision, and when policyd is away
// (restarting, unreachable) it keeps the last snapshot and reconnects with
// backoff, asking only for revisions newer than the one it has.
//
// A router wires it as:
//
//	conn, _ := grpc.NewClient(cfg.PolicydAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
//	w := watch.New(policyv1.NewPolicyServiceClient(conn), log, watch.Options{OnUpdate: func(c watch.Current) {
//		// swap the routing program (c.Snapshot.Program(name)) and the
//		// endpoint set (c.Snapshot.WorkerSets) in
//	}})
//	go w.Run(ctx)
//
// and reads w.Current() per request (an atomic load).
package watch

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchyard-dev/switchyard/internal/policy"
	policyv1 "github.com/switchyard-dev/switchyard/proto/switchyard/policy/v1"
)

// Client is the part of policyv1.PolicyServiceClient the watcher uses.
type Client interface {
	Watch(ctx context.Context, in *policyv1.WatchRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[policyv1.WatchResponse], error)
}

// Current is a decoded snapshot and its revision.
type Current struct {
	Revision int64
	Snapshot *policy.Snapshot
	// Received is when this revision arrived.
	Received time.Time
}

// Options tune a Watcher; the zero value works.
type Options struct {
	// OnUpdate is called (from Run's goroutine) with every new revision.
	OnUpdate func(Current)
	// MinBackoff and MaxBackoff bound the wait between reconnections
	// (defaults 100ms and 5s); each wait is jittered.
	MinBackoff, MaxBackoff time.Duration
}

// Watcher follows policyd. Current and Connected are safe from any
// goroutine.
type Watcher struct {
	client    Client
	log       zerolog.Logger
	opts      Options
	cur       atomic.Pointer[Current]
	connected atomic.Bool
	// bad counts snapshots that failed to decode (kept out, the previous
	// one stays).
	bad atomic.Int64
}

// New returns a watcher; call Run to start it.
func New(client Client, log zerolog.Logger, opts Options) *Watcher {
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(5*time.Second, opts.MinBackoff)
	}
	return &Watcher{client: client, log: log.With().Str("component", "policy-watch").Logger(), opts: opts}
}

// Current returns the last snapshot received, nil before the first.
func (w *Watcher) Current() *Current { return w.cur.Load() }

// Connected reports whether a Watch stream is open now.
func (w *Watcher) Connected() bool { return w.connected.Load() }

// Rejected counts snapshots that could not be decoded and were ignored.
func (w *Watcher) Rejected() int64 { return w.bad.Load() }

// Run follows policyd until ctx ends, reconnecting as needed. It returns
// nil when ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	backoff := w.opts.MinBackoff
	for {
		got, err := w.stream(ctx)
		w.connected.Store(false)
		if ctx.Err() != nil {
			return nil
		}
		if got {
			backoff = w.opts.MinBackoff
		}
		var have int64
		if c := w.cur.Load(); c != nil {
			have = c.Revision
		}
		w.log.Warn().Err(err).Int64("revision", have).Dur("retry_in", backoff).Msg("policyd watch interrupted, keeping the last snapshot")
		wait := backoff/2 + rand.N(backoff/2+1)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(backoff*2, w.opts.MaxBackoff)
	}
}

// stream runs one Watch call; it reports whether any snapshot arrived.
func (w *Watcher) stream(ctx context.Context) (bool, error) {
	var after int64
	if c := w.cur.Load(); c != nil {
		after = c.Revision
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := w.client.Watch(ctx, &policyv1.WatchRequest{AfterRevision: after})
	if err != nil {
		return false, err
	}
	got := false
	for {
		resp, err := st.Recv()
		if err != nil {
			if status.Code(err) == codes.OK || errors.Is(err, context.Canceled) {
				err = errors.New("stream closed")
			}
			return got, err
		}
		w.connected.Store(true)
		got = true
		ps := resp.GetSnapshot()
		if ps == nil {
			continue
		}
		if c := w.cur.Load(); c != nil && ps.GetRevision() <= c.Revision {
			continue // already have it (policyd revisions only grow)
		}
		snap, err := policy.FromProto(ps)
		if err != nil {
			w.bad.Add(1)
			w.log.Error().Err(err).Int64("revision", ps.GetRevision()).Msg("decode policy snapshot: keeping the previous one")
			continue
		}
		c := &Current{Revision: ps.GetRevision(), Snapshot: snap, Received: time.Now()}
		w.cur.Store(c)
		w.log.Info().Int64("revision", c.Revision).Msg("policy snapshot received")
		if w.opts.OnUpdate != nil {
			w.opts.OnUpdate(*c)
		}
	}
}
