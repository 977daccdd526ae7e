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
// refused the event itself MaxAttempts times. (Events still held when the
// process dies are lost and not counted: there is no spool on disk.)
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
}

type item struct {
	event   string
	subject string
	msgID   string
	msg     proto.Message
	data    []byte
	attempt int
	due     time.Time // for a retry: not before
}

type pending struct {
	fut  jetstream.PubAckFuture
	item item
}

// Publisher is safe for concurrent use. Sending never blocks.
type Publisher struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	log     zerolog.Logger
	metrics Metrics
	ensure  func(ctx context.Context, js jetstream.JetStream) error

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
		nc:       nc,
		js:       js,
		log:      log.Sample(&zerolog.BurstSampler{Burst: 5, Period: 10 * time.Second}),
		metrics:  m,
		ensure:   o.EnsureStream,
		queue:    make(chan item, QueueSize),
		acks:     make(chan pending, QueueSize),
		abort:    make(chan struct{}),
		sendDone: make(chan struct{}),
		ackDone:  make(chan struct{}),
	}
	if p.ensure == nil {
		p.ensure = bus.EnsureUsageStream
	}
	notYet := errors.New("not made yet: waiting for nats")
	p.streamErr.Store(&notYet)
	p.needEnsure.Store(true)
	go p.sendLoop()
	go p.ackLoop()
	return p
}

// RouteCompleted queues ev for core NATS. ev must not be modified afterwards.
func (p *Publisher) RouteCompleted(ev *eventsv1.RouteCompletion) {
	p.enqueue(item{event: EventRouteCompletion, subject: bus.SubjectRouteCompleted, msg: ev})
}

// RequestFinished queues ev for JetStream on tenant's usage subject, with
// ev.RequestId as Nats-Msg-Id. ev must not be modified afterwards.
func (p *Publisher) RequestFinished(tenant string, ev *eventsv1.UsageEvent) {
	p.enqueue(item{event: EventUsage, subject: bus.UsageSubject(tenant), msgID: ev.GetRequestId(), msg: ev})
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

// lost counts an accepted event as lost.
func (p *Publisher) lost(it item, reason string, err error) {
	p.fail(it, reason, err)
	p.held.Add(-1)
}

func (p *Publisher) published(it item) {
	p.metrics.Published.WithLabelValues(it.event).Inc()
	p.held.Add(-1)
}

func (p *Publisher) sendLoop() {
	defer close(p.sendDone)
	defer close(p.acks)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
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

// Close stops accepting events and waits until every event held is
// published or ctx is done; whatever is left then is counted as lost. It
// does not close the NATS connection.
func (p *Publisher) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	defer func() {
		p.abortOnce.Do(func() { close(p.abort) })
		<-p.sendDone
		<-p.ackDone
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for p.held.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}
