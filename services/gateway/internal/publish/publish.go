// Package publish sends the gateway's events to NATS off the request path:
// route completions on core NATS (routers release in-flight slots) and usage
// events on JetStream (meter bills them).
//
// Durability: an event lives only in this process until the server accepts
// it. Usage events are published with Nats-Msg-Id = request id, waited for
// (ack timeout AckTimeout) and re-published up to MaxAttempts times; the
// stream de-duplicates a re-publish that did land. An event is lost, counted
// and logged when the queue is full, when every attempt fails (NATS down for
// longer than MaxAttempts × AckTimeout), when Close runs out of time, or when
// the process dies before the ack. Route completions are fire-and-forget:
// a lost one only makes routers over-count an endpoint until their in-flight
// entry expires.
package publish

import (
	"context"
	"errors"
	"sync"
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
	AckTimeout  = 10 * time.Second
	MaxAttempts = 3
	// QueueSize bounds the events waiting to be sent; at ~300 bytes each it
	// is a few MB at most, minutes of traffic during a short NATS blip.
	QueueSize = 8192
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

type item struct {
	event   string
	subject string
	msgID   string
	msg     proto.Message
	data    []byte
	attempt int
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

	mu     sync.RWMutex
	closed bool
	queue  chan item

	acks      chan pending
	abort     chan struct{}
	abortOnce sync.Once
	sendDone  chan struct{}
	ackDone   chan struct{}
}

// New starts a publisher on a connected nc and a JetStream context created
// with jetstream.WithPublishAsyncTimeout (without it a publish lost in a
// reconnect never resolves). Stop it with Close.
func New(nc *nats.Conn, js jetstream.JetStream, log zerolog.Logger, m Metrics) *Publisher {
	p := &Publisher{
		nc:       nc,
		js:       js,
		log:      log.Sample(&zerolog.BurstSampler{Burst: 5, Period: 10 * time.Second}),
		metrics:  m,
		queue:    make(chan item, QueueSize),
		acks:     make(chan pending, QueueSize),
		abort:    make(chan struct{}),
		sendDone: make(chan struct{}),
		ackDone:  make(chan struct{}),
	}
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

func (p *Publisher) enqueue(it item) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		p.fail(it, ReasonShutdown, nil)
		return
	}
	select {
	case p.queue <- it:
	default:
		p.fail(it, ReasonQueueFull, nil)
	}
}

func (p *Publisher) fail(it item, reason string, err error) {
	p.metrics.Failures.WithLabelValues(it.event, reason).Inc()
	ev := p.log.Warn().Str("event", it.event).Str("reason", reason).Str("request_id", it.msgID).Int("attempt", it.attempt)
	if err != nil {
		ev = ev.Err(err)
	}
	ev.Msg("event not published")
}

func (p *Publisher) sendLoop() {
	defer close(p.sendDone)
	defer close(p.acks)
	for it := range p.queue {
		select {
		case <-p.abort:
			p.fail(it, ReasonShutdown, nil)
			continue
		default:
		}
		if it.data == nil {
			data, err := proto.Marshal(it.msg)
			if err != nil {
				p.fail(it, ReasonMarshal, err)
				continue
			}
			it.data = data
		}
		it.attempt++
		if it.msgID == "" {
			if err := p.nc.Publish(it.subject, it.data); err != nil {
				p.fail(it, ReasonNATS, err)
				continue
			}
			p.metrics.Published.WithLabelValues(it.event).Inc()
			continue
		}
		msg := nats.NewMsg(it.subject)
		msg.Data = it.data
		fut, err := p.js.PublishMsgAsync(msg, jetstream.WithMsgID(it.msgID))
		if err != nil {
			p.retry(it, err)
			continue
		}
		select {
		case p.acks <- pending{fut: fut, item: it}:
		case <-p.abort:
			p.fail(it, ReasonShutdown, nil)
		}
	}
}

func (p *Publisher) ackLoop() {
	defer close(p.ackDone)
	for pa := range p.acks {
		select {
		case <-pa.fut.Ok():
			p.metrics.Published.WithLabelValues(pa.item.event).Inc()
		case err := <-pa.fut.Err():
			p.retry(pa.item, err)
		case <-p.abort:
			p.fail(pa.item, ReasonShutdown, nil)
		}
	}
}

// retry re-queues a usage event whose publish failed; the same Nats-Msg-Id
// makes a duplicate harmless if the first attempt landed after all.
func (p *Publisher) retry(it item, err error) {
	if it.attempt >= MaxAttempts || errors.Is(err, nats.ErrConnectionClosed) {
		p.fail(it, ReasonNATS, err)
		return
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		p.fail(it, ReasonShutdown, err)
		return
	}
	select {
	case p.queue <- it:
	default:
		p.fail(it, ReasonQueueFull, err)
	}
}

// Close stops accepting events and sends what is queued, waiting for
// JetStream acks until ctx is done; whatever is left then is counted as
// lost. It does not close the NATS connection.
func (p *Publisher) Close(ctx context.Context) error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.queue)
	}
	p.mu.Unlock()
	select {
	case <-p.ackDone:
		<-p.sendDone
		return nil
	case <-ctx.Done():
		p.abortOnce.Do(func() { close(p.abort) })
		<-p.sendDone
		<-p.ackDone
		return ctx.Err()
	}
}
