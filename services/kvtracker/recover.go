package kvtracker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/services/kvtracker/internal/lease"
)

// What the tracker needs in JetStream, the KV delta stream and the lease
// bucket, is kept in the server's memory: a NATS restart loses both, and
// with the bucket every lease. The lease loop makes them again after every
// reconnect, and whenever an operation says one is missing (bus.Missing):
// a lease call, or a delta whose publish found no stream. When the bucket
// turns out to be a new one, every lease this replica held is void: its
// pipelines stop at once, and it acquires nothing for
// lease.RecreatedHoldOff after it last could have reached the old bucket,
// so a replica still inside a lease of the old bucket is past its deadline
// before anyone takes the worker.

// jsState is the lease loop's view of JetStream, written by the lease loop
// and read by the readiness probes.
type jsState struct {
	// needEnsure asks the lease loop to make the stream and the bucket
	// again; set from any goroutine.
	needEnsure atomic.Bool
	// ensuring is set while the lease loop makes them.
	ensuring atomic.Bool

	mu sync.Mutex
	// ensureErr is why the last attempt to make them failed; nil when
	// they are there.
	ensureErr error
	// setUp: the first ensure succeeded.
	setUp bool
	// lastBeat is the last successful heartbeat; beatErr the failure
	// since.
	lastBeat time.Time
	beatErr  error
	// acquireAfter holds acquisitions back after the bucket was recreated;
	// reacquiring is set until a lease round after it has acquired.
	acquireAfter time.Time
	reacquiring  bool

	// reconnects is the connection's reconnect count the lease loop last
	// acted on: a larger count is a reconnect not yet checked.
	reconnects atomic.Uint64
	// outageSince is the first lease round that saw NATS down; zero when
	// up. Lease loop only.
	outageSince time.Time
}

// missing records that an operation found the stream or the bucket gone.
func (s *jsState) missing(err error) {
	if bus.Missing(err) {
		s.needEnsure.Store(true)
	}
}

// ensureTimeout bounds one attempt to make the stream and the bucket; the
// lease loop retries at its next round.
const ensureTimeout = 5 * time.Second

// checkJetStream runs at the start of each lease round: it notes outages
// and reconnects, and makes the stream and the bucket again when needed.
// It reports whether the round may acquire leases.
func (t *Tracker) checkJetStream(ctx context.Context, d *deps) bool {
	s := &t.jst
	now := time.Now()
	if !d.nc.IsConnected() {
		if s.outageSince.IsZero() {
			s.outageSince = now
		}
		return false
	}
	if n := d.nc.Stats().Reconnects; n != s.reconnects.Load() {
		// A reconnect may be to a server that lost everything.
		s.needEnsure.Store(true) // first: the probe sees one or the other
		s.reconnects.Store(n)
	}
	if s.needEnsure.Load() {
		if err := t.ensure(ctx, d); err != nil {
			if ctx.Err() == nil {
				t.log.Warn().Err(err).Msg("kv stream and lease bucket not there, retrying")
			}
			return false
		}
	}
	s.outageSince = time.Time{}
	s.mu.Lock()
	after := s.acquireAfter
	s.mu.Unlock()
	return !now.Before(after)
}

// ensure makes the KV stream and the lease bucket, and voids this
// replica's leases when the bucket is a new one.
func (t *Tracker) ensure(ctx context.Context, d *deps) error {
	s := &t.jst
	ctx, cancel := context.WithTimeout(ctx, ensureTimeout)
	defer cancel()
	s.ensuring.Store(true)
	defer s.ensuring.Store(false)
	s.needEnsure.Store(false) // a failure seen from now on asks again
	err := bus.EnsureKVStream(ctx, d.js)
	recreated := false
	if err == nil {
		recreated, err = d.leases.Ensure(ctx)
	}
	s.mu.Lock()
	s.ensureErr = err
	if err != nil {
		s.mu.Unlock()
		s.needEnsure.Store(true)
		return err
	}
	if recreated {
		since := s.outageSince
		if since.IsZero() {
			since = time.Now()
		}
		s.acquireAfter = since.Add(lease.RecreatedHoldOff)
		s.reacquiring = true
	}
	after := s.acquireAfter
	s.mu.Unlock()
	if recreated {
		t.mu.Lock()
		held := len(t.runs)
		t.mu.Unlock()
		t.log.Warn().Int("leases_void", held).Time("acquire_after", after).
			Msg("lease bucket was lost (NATS restarted?) and made again: every lease in it is void, stopping this replica's pipelines; " +
				"workers are acquired again once any old lease has expired")
		t.stopEvery(d, false, "lost")
	}
	return nil
}

// beat records a heartbeat's outcome.
func (s *jsState) beat(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.lastBeat, s.beatErr = time.Now(), nil
		return
	}
	s.beatErr = err
}

// probeJetStream is the "jetstream" readiness check: the KV stream and the
// lease bucket are there.
func (t *Tracker) probeJetStream() error {
	s := &t.jst
	if nc := t.nc.Load(); nc != nil && nc.Stats().Reconnects != s.reconnects.Load() {
		return errors.New("reconnected to nats: checking the kv stream and the lease bucket")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.ensureErr != nil:
		return s.ensureErr
	case !s.setUp:
		return errors.New("kv stream and lease bucket not made yet")
	case s.needEnsure.Load() || s.ensuring.Load():
		return errors.New("kv stream or lease bucket missing: making them again")
	}
	return nil
}

// probeLeases is the "leases" readiness check: the replica takes part in
// the lease round (its heartbeats land) and may acquire.
func (t *Tracker) probeLeases() error {
	if !t.serving.Load() {
		return errors.New("first lease round not done")
	}
	s := &t.jst
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	switch age := now.Sub(s.lastBeat); {
	case s.lastBeat.IsZero() && s.beatErr != nil:
		return fmt.Errorf("no heartbeat yet: %w", s.beatErr)
	case s.lastBeat.IsZero():
		return errors.New("no heartbeat yet")
	case age > bus.KVLeaseTTL && s.beatErr != nil:
		return fmt.Errorf("no heartbeat for %s: %w", age.Round(time.Second), s.beatErr)
	case age > bus.KVLeaseTTL:
		return fmt.Errorf("no heartbeat for %s", age.Round(time.Second))
	}
	if wait := s.acquireAfter.Sub(now); wait > 0 {
		return fmt.Errorf("lease bucket was made again: acquiring workers in %s, once any old lease has expired", wait.Round(100*time.Millisecond))
	}
	if s.reacquiring {
		return errors.New("lease bucket was made again: acquiring workers")
	}
	return nil
}

// acquired records that a lease round acquired its share.
func (s *jsState) acquired() {
	s.mu.Lock()
	s.reacquiring = false
	s.mu.Unlock()
}
