package policyd

import (
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-dev/switchyard/internal/policy"
	policyv1 "github.com/switchyard-dev/switchyard/proto/switchyard/policy/v1"
)

// served is one snapshot as served: compiled, and encoded once for every
// watcher.
type served struct {
	revision int64
	snap     *policy.Snapshot
	wire     *policyv1.Snapshot
	// key is the encoding without revision and time, to tell a real
	// change from a recompile of the same resources.
	key []byte
	// generations of the resources in it ("Kind ns/name" → generation),
	// so a valid resource that is already served stays Accepted while
	// another one is invalid.
	generations map[string]int64
}

// state holds the serving snapshot and the latest result of reading the
// sources. Readers take the current value and a channel that is closed on
// the next change.
type state struct {
	mu        sync.Mutex
	cur       *served
	objs      []*policy.Object // the resources as last read
	diags     policy.Diagnostics
	checkedAt time.Time
	changed   chan struct{}
}

func newState() *state { return &state{changed: make(chan struct{})} }

// apply compiles the resources read from a source. A valid set that
// differs from the served one becomes the next revision; an invalid set
// leaves the served snapshot alone (the last good one keeps serving) and
// its diagnostics are reported.
func (st *state) apply(objs []*policy.Object, readDiags policy.Diagnostics, now time.Time) Result {
	snap, diags := policy.Compile(objs)
	diags = append(append(policy.Diagnostics(nil), readDiags...), diags...)
	diags.Sort()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.objs, st.diags, st.checkedAt = objs, diags, now
	if snap == nil || diags.HasErrors() {
		return st.resultLocked(Result{Diags: diags})
	}
	wire := policy.ToProto(snap, 0)
	wire.CreatedAt = nil
	key, err := proto.MarshalOptions{Deterministic: true}.Marshal(wire)
	if err != nil {
		return st.resultLocked(Result{Diags: append(diags, policy.Diagnostic{Message: "encode snapshot: " + err.Error()})})
	}
	gens := make(map[string]int64, len(objs))
	for _, o := range objs {
		gens[o.Ref()] = o.Generation
	}
	if st.cur != nil && string(st.cur.key) == string(key) {
		st.cur.generations = gens
		return st.resultLocked(Result{Unchanged: true, Diags: diags})
	}
	// Revisions are the change's time in milliseconds, kept strictly
	// increasing: a restarted policyd continues above what routers have,
	// so their Watch(after_revision) still gets the new snapshot.
	rev := now.UnixMilli()
	if st.cur != nil && rev <= st.cur.revision {
		rev = st.cur.revision + 1
	}
	wire = policy.ToProto(snap, rev)
	st.cur = &served{revision: rev, snap: snap, wire: wire, key: key, generations: gens}
	close(st.changed)
	st.changed = make(chan struct{})
	return st.resultLocked(Result{Applied: true, Diags: diags})
}

// resultLocked completes r with what is served now.
func (st *state) resultLocked(r Result) Result {
	if st.cur != nil {
		r.Revision, r.Served, r.Generations = st.cur.revision, st.cur.snap, st.cur.generations
	}
	return r
}

// current returns the served snapshot (nil before the first valid set) and
// a channel closed when it changes.
func (st *state) current() (*served, <-chan struct{}) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.cur, st.changed
}

// sources returns the resources as last read, their diagnostics and when.
func (st *state) sources() ([]*policy.Object, policy.Diagnostics, time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.objs, st.diags, st.checkedAt
}
