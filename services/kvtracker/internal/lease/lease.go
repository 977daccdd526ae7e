// Package lease splits workers between kvtracker replicas with NATS KV
// (bus.BucketKVLeases): a replica owns a worker while it holds the key
// KVLeaseKey(pool, worker). Acquiring is create-if-absent, renewing is an
// update at the revision last written, and the bucket's TTL expires the
// keys of a replica that stopped renewing, so another takes over.
//
// A holder stops using a lease on its own, without asking the server,
// once TTL minus a safety margin has passed since its last successful
// write began: by then the key may have expired and been taken, so two
// replicas never ingest one worker at once (as long as clocks run at the
// same rate).
//
// The bucket lives in memory on the NATS server, so a server restart
// loses it with every lease in it. Operations then fail (bus.Missing says
// so); Ensure recreates the bucket and reports that it is a new one,
// whose emptiness proves nothing: a replica may still be inside a lease
// it wrote to the old bucket. The caller treats its own leases as lost at
// once and acquires nothing until the old leases' deadlines have passed
// (RecreatedHoldOff).
package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-dev/switchyard/internal/bus"
)

// ErrHeld is returned by Acquire when another replica holds the key.
var ErrHeld = errors.New("lease held by another replica")

// Manager acquires, renews and releases leases for one replica.
type Manager struct {
	js jetstream.JetStream
	// mu guards kv and created, replaced by Ensure.
	mu      sync.Mutex
	kv      jetstream.KeyValue
	created time.Time // the bucket's creation, as the server says

	owner  []byte
	ttl    time.Duration
	margin time.Duration
	epoch  time.Time // monotonic base of deadlines
	// presence is this replica's presence key and its last revision.
	presence    string
	presenceRev uint64
}

// Open creates (or updates) the lease bucket and returns a manager for
// replica owner.
func Open(ctx context.Context, js jetstream.JetStream, owner string) (*Manager, error) {
	m := &Manager{
		js:       js,
		owner:    []byte(owner),
		ttl:      bus.KVLeaseTTL,
		margin:   min(time.Second, bus.KVLeaseTTL/4),
		epoch:    time.Now(),
		presence: bus.KVReplicaKey(owner),
	}
	if _, err := m.Ensure(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// Ensure creates the bucket if it is missing (or updates its definition)
// and reports whether the bucket is not the one the manager used before:
// it was lost with its leases and created anew, here or by another
// replica.
func (m *Manager) Ensure(ctx context.Context) (recreated bool, err error) {
	kv, err := m.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      bus.BucketKVLeases,
		Description: "kvtracker worker leases: key pool.worker, value the holding replica",
		TTL:         bus.KVLeaseTTL,
		History:     1,
		Storage:     jetstream.MemoryStorage,
	})
	if err != nil {
		return false, fmt.Errorf("open lease bucket %s: %w", bus.BucketKVLeases, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return false, fmt.Errorf("lease bucket %s status: %w", bus.BucketKVLeases, err)
	}
	var created time.Time
	if bs, ok := st.(*jetstream.KeyValueBucketStatus); ok && bs.StreamInfo() != nil {
		created = bs.StreamInfo().Created
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	recreated = !m.created.IsZero() && !created.Equal(m.created)
	m.kv, m.created = kv, created
	return recreated, nil
}

// RecreatedHoldOff is how long after it could last have reached the old
// bucket a replica waits before acquiring in a recreated one: every lease
// written to the old bucket has passed its holder's deadline by then.
const RecreatedHoldOff = bus.KVLeaseTTL

func (m *Manager) bucket() jetstream.KeyValue {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.kv
}

// TTL is the lease lifetime without renewal.
func (m *Manager) TTL() time.Duration { return m.ttl }

// now is monotonic time since the manager started.
func (m *Manager) now() time.Duration { return time.Since(m.epoch) }

// Lease is one held key.
type Lease struct {
	m        *Manager
	key      string
	rev      uint64
	deadline atomic.Int64 // m.now() after which the lease may have been taken
}

// Key is the leased key.
func (l *Lease) Key() string { return l.key }

// Valid reports whether the lease certainly still belongs to this replica.
func (l *Lease) Valid() bool { return l.m.now() < time.Duration(l.deadline.Load()) }

// Acquire creates key if nobody holds it.
func (m *Manager) Acquire(ctx context.Context, key string) (*Lease, error) {
	start := m.now()
	rev, err := m.bucket().Create(ctx, key, m.owner)
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return nil, ErrHeld
		}
		return nil, fmt.Errorf("acquire lease %s: %w", key, err)
	}
	l := &Lease{m: m, key: key, rev: rev}
	l.deadline.Store(int64(start + m.ttl - m.margin))
	return l, nil
}

// Renew extends the lease. On any error the lease must be treated as lost.
func (l *Lease) Renew(ctx context.Context) error {
	start := l.m.now()
	rev, err := l.m.bucket().Update(ctx, l.key, l.m.owner, l.rev)
	if err != nil {
		l.deadline.Store(0)
		return fmt.Errorf("renew lease %s: %w", l.key, err)
	}
	l.rev = rev
	l.deadline.Store(int64(start + l.m.ttl - l.m.margin))
	return nil
}

// RenewDue reports whether a renewal is due: a third of the TTL passed
// since the last one, leaving two more attempts before the deadline.
func (l *Lease) RenewDue() bool {
	left := time.Duration(l.deadline.Load()) - l.m.now()
	return left < l.m.ttl-l.m.margin-l.m.ttl/3
}

// Release deletes the key if this replica still holds it, so another
// replica can take the worker at once.
func (l *Lease) Release(ctx context.Context) error {
	l.deadline.Store(0)
	if err := l.m.bucket().Delete(ctx, l.key, jetstream.LastRevision(l.rev)); err != nil {
		return fmt.Errorf("release lease %s: %w", l.key, err)
	}
	return nil
}

// Heartbeat announces this replica for TTL, so others count it when they
// compute their fair share.
func (m *Manager) Heartbeat(ctx context.Context) error {
	rev, err := m.bucket().Put(ctx, m.presence, m.owner)
	if err != nil {
		return fmt.Errorf("replica heartbeat: %w", err)
	}
	m.presenceRev = rev
	return nil
}

// Leave removes this replica's presence key.
func (m *Manager) Leave(ctx context.Context) error {
	if err := m.bucket().Delete(ctx, m.presence); err != nil {
		return fmt.Errorf("replica leave: %w", err)
	}
	return nil
}

// Replicas counts the replicas that announced themselves within TTL
// (including this one once Heartbeat ran).
func (m *Manager) Replicas(ctx context.Context) (int, error) {
	lister, err := m.bucket().ListKeysFiltered(ctx, bus.KVReplicaKeyFilter)
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return 0, nil
		}
		return 0, fmt.Errorf("list replicas: %w", err)
	}
	n := 0
	for range lister.Keys() {
		n++
	}
	return n, nil
}

// Holder returns the replica holding key, "" when none.
func (m *Manager) Holder(ctx context.Context, key string) (string, error) {
	e, err := m.bucket().Get(ctx, key)
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return "", nil
		}
		return "", fmt.Errorf("get lease %s: %w", key, err)
	}
	return string(e.Value()), nil
}
