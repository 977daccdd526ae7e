package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/natsembed"
)

func managers(t *testing.T, owners ...string) ([]*Manager, jetstream.KeyValue) {
	t.Helper()
	srv, err := natsembed.Start(natsembed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []*Manager
	var kv jetstream.KeyValue
	for _, o := range owners {
		nc, err := nats.Connect(srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Open(ctx, js, o)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
		if kv == nil {
			if kv, err = js.KeyValue(ctx, bus.BucketKVLeases); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out, kv
}

func TestExclusiveAcquireRenewRelease(t *testing.T) {
	ms, _ := managers(t, "replica-a", "replica-b")
	a, b := ms[0], ms[1]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := bus.KVLeaseKey("pool", "w0")

	la, err := a.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if !la.Valid() || la.RenewDue() {
		t.Errorf("fresh lease: valid %v, renew due %v", la.Valid(), la.RenewDue())
	}
	if _, err := b.Acquire(ctx, key); !errors.Is(err, ErrHeld) {
		t.Fatalf("second acquire: %v, want ErrHeld", err)
	}
	if holder, err := b.Holder(ctx, key); err != nil || holder != "replica-a" {
		t.Errorf("holder %q %v", holder, err)
	}
	if err := la.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctx, key); !errors.Is(err, ErrHeld) {
		t.Fatalf("acquire after renew: %v, want ErrHeld", err)
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if la.Valid() {
		t.Error("released lease still valid")
	}
	lb, err := b.Acquire(ctx, key)
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	// a's stale lease must neither renew nor release b's.
	if err := la.Renew(ctx); err == nil {
		t.Error("renewed a lease another replica holds")
	}
	if err := la.Release(ctx); err == nil {
		t.Error("released a lease another replica holds")
	}
	if err := lb.Renew(ctx); err != nil {
		t.Errorf("holder's renew after a stale release: %v", err)
	}
}

// TestRenewFailsAfterTakeover: once the key was taken (here: deleted and
// re-created, as after expiry), the old holder's renewal fails and its
// lease stops being valid at once.
func TestRenewFailsAfterTakeover(t *testing.T) {
	ms, kv := managers(t, "replica-a", "replica-b")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := bus.KVLeaseKey("pool", "w1")
	la, err := ms[0].Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := ms[1].Acquire(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := la.Renew(ctx); err == nil {
		t.Fatal("renewal succeeded after takeover")
	}
	if la.Valid() {
		t.Error("lease valid after a failed renewal")
	}
}

func TestReplicas(t *testing.T) {
	ms, _ := managers(t, "a", "b.with:odd chars")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n, err := ms[0].Replicas(ctx); err != nil || n != 0 {
		t.Fatalf("before heartbeats: %d %v", n, err)
	}
	for _, m := range ms {
		if err := m.Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := ms[0].Heartbeat(ctx); err != nil { // idempotent
		t.Fatal(err)
	}
	// Lease keys are not replicas.
	if _, err := ms[0].Acquire(ctx, bus.KVLeaseKey("p", "w")); err != nil {
		t.Fatal(err)
	}
	if n, err := ms[0].Replicas(ctx); err != nil || n != 2 {
		t.Fatalf("two replicas: %d %v", n, err)
	}
	if err := ms[1].Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := ms[0].Replicas(ctx); err != nil || n != 1 {
		t.Fatalf("after leave: %d %v", n, err)
	}
}

// TestEnsureAfterTheBucketIsLost: the bucket is gone (as after a NATS
// restart: it lives in memory). Lease operations fail in a way bus.Missing
// recognises; Ensure makes the bucket again and says it is a new one, and
// a lease of the old bucket can no longer be renewed.
func TestEnsureAfterTheBucketIsLost(t *testing.T) {
	ms, _ := managers(t, "replica-a")
	m := ms[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if recreated, err := m.Ensure(ctx); err != nil || recreated {
		t.Fatalf("ensure of the bucket in use: recreated %v, %v", recreated, err)
	}
	l, err := m.Acquire(ctx, bus.KVLeaseKey("pool", "w0"))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.js.DeleteKeyValue(ctx, bus.BucketKVLeases); err != nil {
		t.Fatal(err)
	}
	if err := m.Heartbeat(ctx); !bus.Missing(err) {
		t.Errorf("heartbeat into a lost bucket: %v, not recognised as missing", err)
	}
	recreated, err := m.Ensure(ctx)
	if err != nil || !recreated {
		t.Fatalf("ensure after the loss: recreated %v, %v", recreated, err)
	}
	if err := l.Renew(ctx); err == nil || l.Valid() {
		t.Errorf("a lease of the lost bucket renewed: %v", err)
	}
	if _, err := m.Acquire(ctx, bus.KVLeaseKey("pool", "w0")); err != nil {
		t.Errorf("acquire in the new bucket: %v", err)
	}
}
