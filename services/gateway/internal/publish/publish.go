// Package publish sends the gateway's events to NATS off the request path:
// route completions on core NATS (routers release in-flight slots) and usage
// events on JetStream (meter bills them).
//
// Durability: a usage event is kept in this process until JetStream acks
// it. It is published with Nats-Msg-Id = request id, only while the
// connection is up (nats.go refuses headers before its first connection,
// and a message written into a dying connection may or may not land); an
// event whose ack does not come within the JetStream context's async
// publish timeout is published again, with the same id, once the
// connection is up, for as long as it takes: the stream de-duplicates
// whichever copies land inside bus.DuplicateWindow (an event nats.go
// buffered across a reconnect and its re-publish land moments apart). So a
// NATS outage of any length loses nothing while the queue holds out, and
// the lost counter counts only events really lost: the queue was full,
// Close ran out of time, the connection was closed for good, or the server
// refused the event itself MaxAttempts times.
//
// With a spool (package spool, the gateway's --usage-spool-dir) a usage
// event is written to disk before anything else, read back from there to
// be published, and marked done there once JetStream acks it: the spool,
// not memory, holds it through an outage, so its bound is the spool's
// size, and a gateway stopped or killed before the ack sends it again
// when it starts. Without one, events still held when the process dies
// are lost, and not counted.
//
// The usage stream is made (or updated) before the first usage publish and
// again after every reconnect and whenever a publish finds no stream, so a
// NATS server that restarts without it (memory storage, a reset server)
// gets it back.
//
// Route completions are fire-and-forget: a lost one only makes routers
// over-count an endpoint until their in-flight entry expires.
package publish

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-dev/switchyard/internal/bus"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
	"github.com/switchyard-dev/switchyard/services/gateway/internal/spool"
)

// Tuning shared by the gateway and its tests.
const (
	// AckTimeout is the JetStream async publish timeout the gateway sets.
	AckTimeout = 10 * time.Second
	// MaxAttempts bounds the publishes of an event the server refuses (an
	// API error, not a timeout or a missing stream).
	MaxAttempts = 3
	// QueueSize bounds the events waiting to be sent; at ~300 bytes each it
	// is about 10 MB at most: minutes of traffic during a NATS outage.
	QueueSize = 32768
	// maxRetryDelay caps the wait before an event is published again.
	maxRetryDelay = 2 * time.Second
	// connectPoll is how often a held event checks for the connection.
	connectPoll = 20 * time.Millisecond
)

// Event label values.
const (
	EventUsage           = "usage"
	EventRouteCompletion = "route_completion"
)

// Failure reason label values.
const (
	ReasonQueueFull = "queue_full"
	ReasonShutdown  = "shutdown"
	ReasonMarshal   = "marshal"
	ReasonNATS      = "nats"
	// ReasonSpoolFull: the spool held its --usage-spool-max-bytes.
	ReasonSpoolFull = "spool_full"
	// ReasonSpool: the spool could not write the event (a disk error).
	ReasonSpool = "spool"
)

// Metrics the publisher reports into; the gateway owns the registry.
type Metrics struct {
	Published *prometheus.CounterVec // labels: event
	Failures  *prometheus.CounterVec // labels: event, reason
}

// Options tune a Publisher.
type Options struct {
	// EnsureStream makes the usage stream; nil is bus.EnsureUsageStream.
	EnsureStream func(ctx context.Context, js jetstream.JetStream) error
	// Spool holds usage events on disk until JetStream acks them; nil
	// holds them in memory. The publisher closes it.
	Spool *spool.Spool
}

type item struct {
	event   string
	subject string
	msgID   string
	msg     proto.Message
	data    []byte
	attempt int
	due     time.Time // for a retry: not before
	// spooled is set for an event read from the spool, seq its record.
	spooled bool
	seq     spool.Seq
}

type pending struct {
	fut  jetstream.PubAckFuture
	item item
}

// Publisher is safe for concurrent use. Sending never blocks.
type Publisher struct {
	nc           *nats.Conn
	js           jetstream.JetStream
	log          zerolog.Logger
	metrics      Metrics
	ensure       func(ctx context.Context, js jetstream.JetStream) error
	spool        *spool.Spool
	spoolIn      chan item // events on their way to the spool
	readDone     chan struct{}
	spoolWritten chan struct{}

	mu      sync.Mutex
	closed  bool
	aborted bool
	delayed []item // retries waiting for their due time

	queue chan item
	acks  chan pending
	abort chan struct{}
	// held counts events accepted and not yet published or lost.
	held      atomic.Int64
	abortOnce sync.Once
	sendDone  chan struct{}
	ackDone   chan struct{}

	// Stream state: streamErr is the last EnsureStream error (nil once it
	// succeeded); needEnsure asks the send loop to make the stream before
	// the next usage publish; reconnects is the connection's count when it
	// was last made.
	streamErr  atomic.Pointer[error]
	needEnsure atomic.Bool
	reconnects uint64
}

// New starts a publisher on nc (connected or not yet) and a JetStream
// context created with jetstream.WithPublishAsyncTimeout (without it a
// publish lost in a reconnect never resolves). Stop it with Close.
func New(nc *nats.Conn, js jetstream.JetStream, log zerolog.Logger, m Metrics, o Options) *Publisher {
	p := &Publisher{
		nc:           nc,
		js:           js,
		log:          log.Sample(&zerolog.BurstSampler{Burst: 5, Period: 10 * time.Second}),
		metrics:      m,
		ensure:       o.EnsureStream,
		spool:        o.Spool,
		readDone:     make(chan struct{}),
		spoolIn:      make(chan item, QueueSize),
		spoolWritten: make(chan struct{}),
		queue:        make(chan item, QueueSize),
		acks:         make(chan pending, QueueSize),
		abort:        make(chan struct{}),
		sendDone:     make(chan struct{}),
		ackDone:      make(chan struct{}),
	}
	if p.ensure == nil {
		p.ensure = bus.EnsureUsageStream
	}
	notYet := errors.New("not made yet: waiting for nats")
	p.streamErr.Store(&notYet)
	p.needEnsure.Store(true)
	go p.sendLoop()
	go p.ackLoop()
	if p.spool != nil {
		go p.readSpool()
		go p.writeSpool()
	} else {
		close(p.readDone)
		close(p.spoolWritten)
	}
	return p
}

// RouteCompleted queues ev for core NATS. ev must not be modified afterwards.
func (p *Publisher) RouteCompleted(ev *eventsv1.RouteCompletion) {
	p.enqueue(item{event: EventRouteCompletion, subject: bus.SubjectRouteCompleted, msg: ev})
}

// RequestFinished queues ev for JetStream on tenant's usage subject, with
// ev.RequestId as Nats-Msg-Id: in the spool when there is one, else in
// memory. ev must not be modified afterwards.
func (p *Publisher) RequestFinished(tenant string, ev *eventsv1.UsageEvent) {
	it := item{event: EventUsage, subject: bus.UsageSubject(tenant), msgID: ev.GetRequestId(), msg: ev}
	if p.spool == nil {
		p.enqueue(it)
		return
	}
	// Written off the request's path (for microseconds only memory holds
	// it); in a burst the writer cannot keep up with, by the caller.
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.fail(it, ReasonShutdown, nil)
		return
	}
	select {
	case p.spoolIn <- it:
		p.held.Add(1)
		p.mu.Unlock()
	default:
		p.mu.Unlock()
		p.toSpool(it)
	}
}

// writeSpool writes the events RequestFinished hands it to the spool,
// until Close closes spoolIn.
func (p *Publisher) writeSpool() {
	defer close(p.spoolWritten)
	for it := range p.spoolIn {
		p.held.Add(-1) // from here the spool holds it
		p.toSpool(it)
	}
}

// toSpool writes one event to the spool.
func (p *Publisher) toSpool(it item) {
	data, err := proto.Marshal(it.msg)
	if err != nil {
		p.fail(it, ReasonMarshal, err)
		return
	}
	switch err := p.spool.Append(encodeRecord(it.subject, it.msgID, data)); {
	case err == nil:
	case errors.Is(err, spool.ErrFull):
		p.fail(it, ReasonSpoolFull, nil)
	default:
		// Better in memory than nowhere: it is sent if the process lives.
		p.log.Warn().Err(err).Msg("usage spool write failed: the event is held in memory")
		it.data = data
		p.enqueue(it)
	}
}

// readSpool feeds the send loop from the spool, as fast as it publishes.
func (p *Publisher) readSpool() {
	defer close(p.readDone)
	for {
		seq, rec, err := p.spool.Next()
		if err != nil {
			return // closed
		}
		subject, msgID, data, err := decodeRecord(rec)
		if err != nil {
			p.fail(item{event: EventUsage}, ReasonSpool, err)
			p.spool.Ack(seq)
			continue
		}
		it := item{event: EventUsage, subject: subject, msgID: msgID, data: data, spooled: true, seq: seq}
		p.held.Add(1)
		select {
		case p.queue <- it:
		case <-p.abort:
			p.held.Add(-1) // stays in the spool for the next start
			return
		}
	}
}

// encodeRecord is a spooled event: its subject, its id, its payload.
func encodeRecord(subject, msgID string, data []byte) []byte {
	b := make([]byte, 0, 4+len(subject)+len(msgID)+len(data))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(subject)))
	b = append(b, subject...)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(msgID)))
	b = append(b, msgID...)
	return append(b, data...)
}

func decodeRecord(b []byte) (subject, msgID string, data []byte, err error) {
	bad := errors.New("usage spool: malformed record")
	if len(b) < 2 {
		return "", "", nil, bad
	}
	n := int(binary.LittleEndian.Uint16(b))
	if len(b) < 2+n+2 {
		return "", "", nil, bad
	}
	subject, b = string(b[2:2+n]), b[2+n:]
	n = int(binary.LittleEndian.Uint16(b))
	if len(b) < 2+n {
		return "", "", nil, bad
	}
	return subject, string(b[2 : 2+n]), b[2+n:], nil
}

// Held is the number of events accepted and not yet published or lost.
func (p *Publisher) Held() int64 { return p.held.Load() }

// StreamErr is why the usage stream is not known to exist (nil once it was
// made since the last connection).
func (p *Publisher) StreamErr() error {
	if e := p.streamErr.Load(); e != nil {
		return *e
	}
	return nil
}

func (p *Publisher) enqueue(it item) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		p.fail(it, ReasonShutdown, nil)
		return
	}
	select {
	case p.queue <- it:
		p.held.Add(1)
	default:
		p.fail(it, ReasonQueueFull, nil)
	}
}

// fail counts an event that was never accepted.
func (p *Publisher) fail(it item, reason string, err error) {
	p.metrics.Failures.WithLabelValues(it.event, reason).Inc()
	ev := p.log.Warn().Str("event", it.event).Str("reason", reason).Str("request_id", it.msgID).Int("attempt", it.attempt)
	if err != nil {
		ev = ev.Err(err)
	}
	ev.Msg("event not published")
}

// lost counts an accepted event as lost. A spooled one given up at
// shutdown is not: it is sent again at the next start.
func (p *Publisher) lost(it item, reason string, err error) {
	p.held.Add(-1)
	if it.spooled {
		if reason == ReasonShutdown {
			return
		}
		p.spool.Ack(it.seq) // given up for good
	}
	p.fail(it, reason, err)
}

func (p *Publisher) published(it item) {
	p.metrics.Published.WithLabelValues(it.event).Inc()
	p.held.Add(-1)
	if it.spooled {
		p.spool.Ack(it.seq)
	}
}

// Spooled is the spool's size: events not yet acked and bytes on disk;
// zeros without a spool.
func (p *Publisher) Spooled() (events, bytes int64) {
	if p.spool == nil {
		return 0, 0
	}
	return p.spool.Stats()
}

func (p *Publisher) sendLoop() {
	defer close(p.sendDone)
	defer close(p.acks)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	ticks := 0
	for {
		select {
		case <-p.abort:
			p.drainOnAbort()
			return
		case it := <-p.queue:
			p.send(it)
		case <-tick.C:
			for _, it := range p.dueRetries() {
				p.send(it)
			}
			if ticks++; p.spool != nil && ticks%20 == 0 {
				p.spool.Tick()
			}
		}
	}
}

// drainOnAbort counts whatever is still queued or waiting to be retried.
func (p *Publisher) drainOnAbort() {
	p.mu.Lock()
	p.aborted = true
	delayed := p.delayed
	p.delayed = nil
	p.mu.Unlock()
	for _, it := range delayed {
		p.lost(it, ReasonShutdown, nil)
	}
	for {
		select {
		case it := <-p.queue:
			p.lost(it, ReasonShutdown, nil)
		default:
			return
		}
	}
}

func (p *Publisher) dueRetries() []item {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	var due []item
	keep := p.delayed[:0]
	for _, it := range p.delayed {
		if it.due.After(now) {
			keep = append(keep, it)
		} else {
			due = append(due, it)
		}
	}
	p.delayed = keep
	return due
}

func (p *Publisher) send(it item) {
	if it.data == nil {
		data, err := proto.Marshal(it.msg)
		if err != nil {
			p.lost(it, ReasonMarshal, err)
			return
		}
		it.data = data
	}
	if !p.waitConnected() {
		p.lost(it, ReasonShutdown, nil)
		return
	}
	if it.msgID == "" {
		it.attempt++
		if err := p.nc.Publish(it.subject, it.data); err != nil {
			p.lost(it, ReasonNATS, err)
			return
		}
		p.published(it)
		return
	}
	if err := p.ensureStream(); err != nil {
		p.retry(it, err)
		return
	}
	it.attempt++
	msg := nats.NewMsg(it.subject)
	msg.Data = it.data
	fut, err := p.js.PublishMsgAsync(msg, jetstream.WithMsgID(it.msgID))
	if err != nil {
		p.retry(it, err)
		return
	}
	select {
	case p.acks <- pending{fut: fut, item: it}:
	case <-p.abort:
		p.lost(it, ReasonShutdown, nil)
	}
}

// waitConnected holds the send loop until the connection is up; false on
// abort.
func (p *Publisher) waitConnected() bool {
	for !p.nc.IsConnected() {
		if p.nc.IsClosed() {
			return true // the publish fails and says so
		}
		select {
		case <-p.abort:
			return false
		case <-time.After(connectPoll):
		}
	}
	if r := p.nc.Stats().Reconnects; r != p.reconnects {
		// A server that came back may have lost the stream (memory
		// storage, a reset server): make it again before publishing.
		p.reconnects = r
		p.needEnsure.Store(true)
	}
	return true
}

func (p *Publisher) spoolPending() int64 {
	n, _ := p.Spooled()
	return n
}

func (p *Publisher) ensureStream() error {
	if !p.needEnsure.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), AckTimeout)
	defer cancel()
	err := p.ensure(ctx, p.js)
	if err != nil {
		p.streamErr.Store(&err)
		p.log.Warn().Err(err).Msg("usage stream not ready: usage events wait")
		return err
	}
	if p.StreamErr() != nil {
		p.log.Info().Msg("usage stream ready: publishing usage events")
	}
	p.streamErr.Store(nil)
	p.needEnsure.Store(false)
	return nil
}

func (p *Publisher) ackLoop() {
	defer close(p.ackDone)
	for pa := range p.acks {
		select {
		case <-pa.fut.Ok():
			p.published(pa.item)
		case err := <-pa.fut.Err():
			p.retry(pa.item, err)
		case <-p.abort:
			p.lost(pa.item, ReasonShutdown, nil)
		}
	}
}

// retry schedules a usage event whose publish failed to be published
// again; the same Nats-Msg-Id makes a copy that landed after all harmless.
// Only a refusal by the server itself (not a timeout, an outage or a
// missing stream) counts towards MaxAttempts.
func (p *Publisher) retry(it item, err error) {
	noStream := bus.Missing(err)
	if noStream {
		p.needEnsure.Store(true)
	}
	var apiErr *jetstream.APIError
	refused := !noStream && errors.As(err, &apiErr)
	switch {
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrMaxPayload), errors.Is(err, nats.ErrBadSubject),
		refused && it.attempt >= MaxAttempts:
		p.lost(it, ReasonNATS, err)
		return
	}
	delay := min(50*time.Millisecond<<min(it.attempt, 6), maxRetryDelay)
	it.due = time.Now().Add(delay)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.aborted {
		p.lost(it, ReasonShutdown, err)
		return
	}
	p.delayed = append(p.delayed, it)
}

// Close stops accepting events and waits until every event held (and
// spooled) is published or ctx is done; whatever is left then is counted
// as lost, or, spooled, stays in the spool for the next start. It closes
// the spool, not the NATS connection.
func (p *Publisher) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	if p.spool != nil {
		close(p.spoolIn) // closed is set: nothing sends on it any more
		<-p.spoolWritten
	}
	defer func() {
		p.abortOnce.Do(func() { close(p.abort) })
		<-p.sendDone
		<-p.ackDone
		if p.spool != nil {
			_ = p.spool.Close()
			<-p.readDone
		}
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for p.held.Load() > 0 || p.spoolPending() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}
