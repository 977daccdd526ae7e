package kvtracker

import (
	"context"
	"errors"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/fleet"
	"github.com/switchyard-dev/switchyard/internal/rediskeys"
	"github.com/switchyard-dev/switchyard/internal/vllm/kvzmq"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
	"github.com/switchyard-dev/switchyard/services/kvtracker/internal/ingest"
	"github.com/switchyard-dev/switchyard/services/kvtracker/internal/lease"
)

// flushTimeout bounds the wait for a stopped worker's last deltas to be
// acknowledged before its lease is released.
const flushTimeout = 2 * time.Second

// boundQueue is how many messages of one bound worker wait for its
// pipeline; beyond it they are dropped, which the pipeline sees as a gap.
const boundQueue = 1024

// run is one leased worker being ingested.
type run struct {
	key     string
	spec    fleet.Worker
	lease   *lease.Lease
	cancel  context.CancelFunc
	done    chan struct{}
	in      chan kvzmq.Message // bound workers only
	snapReq chan struct{}
	watch   *streamWatch
	err     error // set before done closes
}

func (r *run) requestSnapshot() {
	select {
	case r.snapReq <- struct{}{}:
	default:
	}
}

// routing maps bound-socket topics to the runs that take them.
type routing struct {
	runs  map[string]*run
	known map[string]bool // topics of every configured bound worker
}

func (t *Tracker) updateRouting() {
	t.mu.Lock()
	rt := &routing{runs: map[string]*run{}, known: map[string]bool{}}
	for _, s := range t.wanted {
		if bound(s) {
			rt.known[s.Topic] = true
		}
	}
	for _, r := range t.runs {
		if bound(r.spec) {
			rt.runs[r.spec.Topic] = r
		}
	}
	t.mu.Unlock()
	t.routing.Store(rt)
}

// dispatch hands the bound socket's messages to the pipelines by topic.
func (t *Tracker) dispatch(ctx context.Context) {
	for {
		m, err := t.bound.Recv(ctx)
		if err != nil {
			if errors.Is(err, kvzmq.ErrMalformed) {
				t.metrics.ingest.MalformedMessage()
				continue
			}
			return // ctx ended or the socket closed
		}
		rt := t.routing.Load()
		r := rt.runs[m.Topic]
		switch {
		case r != nil:
			select {
			case r.in <- m:
			default:
				t.metrics.boundDropped.WithLabelValues("overflow").Inc()
			}
		case rt.known[m.Topic]:
			t.metrics.boundDropped.WithLabelValues("not_leased").Inc()
		default:
			t.metrics.boundDropped.WithLabelValues("unknown_topic").Inc()
		}
	}
}

type chanSource <-chan kvzmq.Message

func (c chanSource) Recv(ctx context.Context) (kvzmq.Message, error) {
	select {
	case m := <-c:
		return m, nil
	case <-ctx.Done():
		return kvzmq.Message{}, ctx.Err()
	}
}

// leaseLoop keeps this replica's share of the workers leased and
// ingested until ctx ends, then stops every pipeline.
func (t *Tracker) leaseLoop(ctx context.Context, d *deps) {
	tick := time.NewTicker(t.leaseTick)
	defer tick.Stop()
	for {
		t.leaseRound(ctx, d)
		t.serving.Store(true)
		select {
		case <-ctx.Done():
			t.stopAll(d)
			return
		case <-tick.C:
		}
	}
}

// leaseRound renews held leases (stopping a worker at once when that
// fails), collects finished pipelines, and moves toward a fair share:
// ceil(workers / live replicas), acquiring free workers below it and
// shedding one above it.
func (t *Tracker) leaseRound(ctx context.Context, d *deps) {
	acquire := t.checkJetStream(ctx, d)
	rctx, cancel := context.WithTimeout(ctx, t.leaseTick)
	defer cancel()
	if d.nc.IsConnected() {
		err := d.leases.Heartbeat(rctx)
		if ctx.Err() == nil {
			t.jst.beat(err)
		}
		if err != nil && ctx.Err() == nil {
			t.jst.missing(err)
			t.log.Warn().Err(err).Msg("lease heartbeat failed")
		}
	}

	t.mu.Lock()
	wanted := t.wanted
	runs := make([]*run, 0, len(t.runs))
	for _, r := range t.runs {
		runs = append(runs, r)
	}
	t.mu.Unlock()

	// Renew everything first: stopping a pipeline can take a moment, and
	// the other leases must not wait for it.
	type stop struct {
		r       *run
		release bool
		event   string
	}
	var stops []stop
	for _, r := range runs {
		select {
		case <-r.done:
			// The pipeline stopped on its own (lease lost inside it, or a
			// receive error): give the worker back; it restarts in a new
			// epoch, here or elsewhere.
			if r.err != nil {
				t.metrics.runErrors.Inc()
				t.log.Warn().Err(r.err).Str("worker", r.key).Msg("worker pipeline stopped")
			}
			stops = append(stops, stop{r, r.lease.Valid(), "released"})
			continue
		default:
		}
		if w, ok := wanted[r.key]; !ok || !w.Equal(r.spec) {
			// Removed from the fleet, or described anew (another
			// address): released now, and a changed worker is taken up
			// again below with its new description.
			stops = append(stops, stop{r, true, "released"})
			continue
		}
		if !r.lease.Valid() {
			r.cancel()
			t.log.Warn().Str("worker", r.key).Msg("worker lease expired before renewal, stopping ingestion")
			stops = append(stops, stop{r, false, "lost"})
			continue
		}
		if r.lease.RenewDue() {
			if err := r.lease.Renew(rctx); err != nil {
				t.jst.missing(err)
				// Stop before anything else is published: the key may be
				// someone else's already.
				r.cancel()
				t.log.Warn().Err(err).Str("worker", r.key).Msg("worker lease renewal failed, stopping ingestion")
				stops = append(stops, stop{r, false, "lost"})
			}
		}
	}
	for _, s := range stops {
		t.stopRun(s.r, d, s.release, s.event)
	}
	if ctx.Err() != nil || !acquire {
		return
	}

	replicas, err := d.leases.Replicas(rctx)
	if err != nil {
		t.jst.missing(err)
		t.log.Warn().Err(err).Msg("count replicas")
	}
	replicas = max(replicas, 1)
	fair := (len(wanted) + replicas - 1) / replicas

	keys := make([]string, 0, len(wanted))
	for k := range wanted {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	// Replicas start their scan at different places, so they do not all
	// contend for the same first worker.
	if len(keys) > 0 {
		h := fnv.New32a()
		_, _ = h.Write([]byte(t.cfg.ReplicaID))
		off := int(h.Sum32() % uint32(len(keys)))
		keys = append(keys[off:], keys[:off]...)
	}
	for _, k := range keys {
		if t.held() >= fair || ctx.Err() != nil {
			break
		}
		if t.running(k) {
			continue
		}
		l, err := d.leases.Acquire(rctx, k)
		if err != nil {
			t.jst.missing(err)
			if !errors.Is(err, lease.ErrHeld) && ctx.Err() == nil {
				t.log.Warn().Err(err).Str("worker", k).Msg("lease acquire failed")
			}
			continue
		}
		t.startRun(ctx, wanted[k], k, l, d)
	}
	t.jst.acquired()
	if held := t.held(); held > fair && replicas > 1 {
		t.mu.Lock()
		victims := make([]*run, 0, len(t.runs))
		for _, r := range t.runs {
			victims = append(victims, r)
		}
		t.mu.Unlock()
		slices.SortFunc(victims, func(a, b *run) int { return strings.Compare(b.key, a.key) })
		victims = victims[:shedCount(held, fair)]
		t.log.Info().Int("workers", len(victims)).Str("first", victims[0].key).Int("held", held).Int("fair_share", fair).Msg("shedding workers to other replicas")
		for _, v := range victims {
			t.stopRun(v, d, true, "shed")
		}
	}
}

// shedCount is how many workers a replica holding held, above its fair
// share, gives up in one lease round: the excess, but at most a quarter
// of the share (and at least one). A replica joining a fleet of n workers
// is at its share within about four rounds rather than n/2, and a replica
// count that flickers (a heartbeat missed in a NATS blip) moves a quarter
// of a share, not all of it.
func shedCount(held, fair int) int {
	return min(held-fair, max(1, fair/4))
}

func (t *Tracker) held() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.runs)
}

func (t *Tracker) running(key string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.runs[key]
	return ok
}

func (t *Tracker) startRun(ctx context.Context, spec fleet.Worker, key string, l *lease.Lease, d *deps) {
	rctx, cancel := context.WithCancel(ctx)
	r := &run{key: key, spec: spec, lease: l, cancel: cancel, done: make(chan struct{}), snapReq: make(chan struct{}, 1)}
	if bound(spec) {
		r.in = make(chan kvzmq.Message, boundQueue)
	}
	r.watch = t.newWatch(spec)
	t.mu.Lock()
	t.runs[key] = r
	n := len(t.runs)
	t.mu.Unlock()
	t.updateRouting()
	t.metrics.leasesHeld.Set(float64(n))
	t.metrics.leaseEvents.WithLabelValues("acquired").Inc()
	t.log.Info().Str("worker", key).Msg("worker lease acquired")
	go t.runWorker(rctx, r, d)
}

// stopRun stops r's pipeline and waits for it; with release, its deltas
// are flushed and its lease deleted so another replica may start at once.
func (t *Tracker) stopRun(r *run, d *deps, release bool, event string) {
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(t.cfg.ShutdownTimeout):
		t.log.Error().Str("worker", r.key).Msg("worker pipeline did not stop in time")
		release = false // it may still publish: let the lease expire instead
	}
	t.mu.Lock()
	delete(t.runs, r.key)
	n := len(t.runs)
	t.mu.Unlock()
	t.updateRouting()
	t.metrics.leasesHeld.Set(float64(n))
	t.metrics.leaseEvents.WithLabelValues(event).Inc()
	t.metrics.cached.DeleteLabelValues(r.spec.Pool, r.spec.ID)
	t.metrics.connected.DeleteLabelValues(r.spec.Pool, r.spec.ID)
	t.metrics.lastEvent.DeleteLabelValues(r.spec.Pool, r.spec.ID)
	t.metrics.startTime.DeleteLabelValues(r.spec.Pool, r.spec.ID)
	if !release || t.skipRelease.Load() || !d.nc.IsConnected() {
		// Without NATS the release would only wait out its timeout: the
		// lease expires on its own.
		return
	}
	flush(d)
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	if err := r.lease.Release(ctx); err != nil {
		t.log.Warn().Err(err).Str("worker", r.key).Msg("lease release failed; it expires on its own")
	}
}

// stopAll stops every pipeline at shutdown and releases the leases.
func (t *Tracker) stopAll(d *deps) {
	t.stopEvery(d, true, "released")
	if !t.skipRelease.Load() && d.nc.IsConnected() {
		ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		defer cancel()
		if err := d.leases.Leave(ctx); err != nil {
			t.log.Warn().Err(err).Msg("leave replica set")
		}
	}
}

// stopEvery stops every pipeline at once, releasing the leases or not.
func (t *Tracker) stopEvery(d *deps, release bool, event string) {
	t.mu.Lock()
	runs := make([]*run, 0, len(t.runs))
	for _, r := range t.runs {
		runs = append(runs, r)
		r.cancel()
	}
	t.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() { t.stopRun(r, d, release, event) })
	}
	wg.Wait()
}

// flush waits for every outstanding delta's ack, so a successor's first
// delta lands after the last of ours.
func flush(d *deps) {
	select {
	case <-d.js.PublishAsyncComplete():
	case <-time.After(flushTimeout):
	}
}

// newWatch starts watching a worker's stream from now.
func (t *Tracker) newWatch(spec fleet.Worker) *streamWatch {
	w := &streamWatch{
		after:     t.cfg.SilenceWarning,
		log:       t.log.With().Str("pool", spec.Pool).Str("worker", spec.ID).Logger(),
		endpoint:  spec.KVEndpoint,
		lastEvent: t.metrics.lastEvent.WithLabelValues(spec.Pool, spec.ID),
	}
	w.started.Store(time.Now().UnixNano())
	w.lastEvent.Set(0)
	if bound(spec) {
		w.endpoint = t.BindEndpoint()
	} else {
		w.connected = t.metrics.connected.WithLabelValues(spec.Pool, spec.ID)
		w.connected.Set(0)
	}
	return w
}

// runWorker ingests one leased worker until ctx ends or its pipeline fails.
func (t *Tracker) runWorker(ctx context.Context, r *run, d *deps) {
	defer close(r.done)
	spec := r.spec
	log := t.log.With().Str("pool", spec.Pool).Str("worker", spec.ID).Logger()
	watch := r.watch
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go watch.watch(wctx)
	var src ingest.Source
	if bound(spec) {
		src = chanSource(r.in)
	} else {
		sub, err := kvzmq.DialSubscriber(ctx, spec.KVEndpoint, spec.Topic, kvzmq.WithLogger(log))
		if err != nil {
			if ctx.Err() == nil {
				r.err = err
			}
			return
		}
		defer sub.Close()
		watch.connectedNow()
		src = sub
	}
	src = watch.source(src)
	floor := t.previousEpoch(ctx, d, spec) + 1
	var replay ingest.Replayer
	if ep := spec.ReplayEndpoint; ep != "" {
		replay = func(ctx context.Context, start uint64, fn func(uint64, []byte) error) error {
			return kvzmq.Replay(ctx, ep, start, fn)
		}
	}
	var drop func(uint64) bool
	if t.dropMessage != nil {
		drop = func(seq uint64) bool { return t.dropMessage(spec.ID, seq) }
	}
	w := ingest.New(ingest.Options{
		Spec:           spec,
		Sink:           newJSSink(d.js, bus.KVDeltaSubject(spec.Pool, spec.ID)),
		Replay:         replay,
		ReplayTimeout:  t.cfg.ReplayTimeout,
		NewEpoch:       func() uint64 { return t.epochs.next(floor) },
		Valid:          r.lease.Valid,
		OnEpoch:        r.requestSnapshot,
		OnPublishError: r.requestSnapshot,
		Drop:           drop,
		Metrics:        t.metrics.ingest,
		Log:            t.log,
	})
	defer w.Close()

	pctx, stopPublishing := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { t.publishLoop(pctx, r, w, d, log) })
	if spec.URL != "" && t.cfg.RestartCheckInterval > 0 {
		path := spec.MetricsPath
		if path == "" {
			path = fleet.DefaultMetricsPath
		}
		rw := &restartWatch{url: spec.URL + path, client: t.httpClient, interval: t.cfg.RestartCheckInterval, w: w, log: log,
			started: t.metrics.startTime.WithLabelValues(spec.Pool, spec.ID)}
		if !bound(spec) {
			rw.conns, _ = src.(ingest.Reconnecting)
		}
		wg.Go(func() { rw.run(pctx) })
	}
	err := w.Run(ctx, src)
	stopPublishing()
	wg.Wait()
	if err != nil && ctx.Err() == nil {
		r.err = err
	}
}

// previousEpoch reads the epoch of the worker's last snapshot, so the new
// epoch is larger even if this replica's clock is behind the last one's.
func (t *Tracker) previousEpoch(ctx context.Context, d *deps, spec fleet.Worker) uint64 {
	if d.rdb == nil {
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	data, err := d.rdb.Get(ctx, rediskeys.KVSnapshot(spec.Pool, spec.ID)).Bytes()
	if err != nil {
		return 0
	}
	var snap eventsv1.WorkerKVSnapshot
	if proto.Unmarshal(data, &snap) != nil {
		return 0
	}
	return snap.GetEpoch()
}

// publishLoop writes r's snapshots and summaries until ctx ends.
func (t *Tracker) publishLoop(ctx context.Context, r *run, w *ingest.Worker, d *deps, log zerolog.Logger) {
	snapT := time.NewTicker(t.cfg.SnapshotInterval)
	defer snapT.Stop()
	sumT := time.NewTicker(t.cfg.SummaryInterval)
	defer sumT.Stop()
	sw := snapshotWriter{t: t, r: r, w: w, d: d, log: log}
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.snapReq:
			sw.write(ctx)
		case <-snapT.C:
			sw.write(ctx)
		case <-sumT.C:
			t.writeSummary(ctx, r, w, d, log)
		}
	}
}

// onAsyncPublishError handles a delta whose ack came back as an error
// (after the pipeline moved on): routers will see a hole in the delta
// numbering, so the worker's next snapshot is written now.
func (t *Tracker) onAsyncPublishError(subject string, err error) {
	t.metrics.ingest.PublishError()
	t.jst.missing(err)
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.runs {
		if bus.KVDeltaSubject(r.spec.Pool, r.spec.ID) == subject {
			r.requestSnapshot()
			t.pubWarn.Warn().Err(err).Str("worker", r.key).Msg("kv delta not stored")
			return
		}
	}
}
