// Package replica keeps router replicas in agreement about in-flight
// requests over core NATS: each replica publishes its decisions and applies
// the other replicas' decisions and the gateway's completions.
package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard-dev/switchyard/internal/bus"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
)

// Tracker is the in-flight state the events update.
type Tracker interface {
	AddInFlight(requestID, endpointID string, at time.Time)
	Complete(requestID, endpointID string, at time.Time) bool
}

// Config for Connect.
type Config struct {
	URL      string
	RouterID string
	Tracker  Tracker
	// MaxAge drops peer decisions older than this when they arrive (e.g.
	// replayed from a reconnect buffer): their entry would expire anyway.
	MaxAge       time.Duration
	DrainTimeout time.Duration
	// Hooks for metrics; any may be nil.
	OnDecision   func()       // a peer decision was applied
	OnCompletion func(bool)   // a completion arrived; true if it released something
	OnDropped    func()       // a local decision could not be queued for publishing
	OnBadMessage func(string) // a payload did not decode; argument is the subject
	Log          zerolog.Logger
}

// Decision is what Publish needs; a value so queueing it allocates nothing.
type Decision struct {
	RequestID  string
	EndpointID string
	Model      string
	Tenant     string
	At         time.Time
}

// queueSize bounds decisions waiting to be published. Publishing happens on
// a separate goroutine because nats.go may hold its connection lock while
// writing to the socket, and Route must never wait on I/O.
const queueSize = 4096

// Sync is a live replica link.
type Sync struct {
	cfg   Config
	nc    *nats.Conn
	queue chan Decision
	done  chan struct{} // closed when the connection is closed
}

// Connect connects to NATS and subscribes. An unreachable server is not an
// error: the connection keeps retrying in the background and the router
// routes on its own meanwhile.
func Connect(cfg Config) (*Sync, error) {
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 5 * time.Second
	}
	s := &Sync{cfg: cfg, queue: make(chan Decision, queueSize), done: make(chan struct{})}
	log := cfg.Log
	nc, err := nats.Connect(cfg.URL,
		nats.Name("switchyard-router "+cfg.RouterID),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500*time.Millisecond),
		nats.DrainTimeout(cfg.DrainTimeout),
		nats.ConnectHandler(func(c *nats.Conn) {
			log.Info().Str("server", c.ConnectedUrlRedacted()).Msg("nats connected")
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn().Err(err).Msg("nats disconnected")
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			log.Info().Str("server", c.ConnectedUrlRedacted()).Msg("nats reconnected")
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			ev := log.Warn().Err(err)
			if sub != nil {
				ev = ev.Str("subject", sub.Subject)
			}
			ev.Msg("nats async error")
		}),
		nats.ClosedHandler(func(*nats.Conn) { close(s.done) }),
	)
	if err != nil {
		return nil, fmt.Errorf("connect nats %s: %w", redact(cfg.URL), err)
	}
	s.nc = nc
	if _, err := nc.Subscribe(bus.SubjectRouteDecided, s.onDecision); err != nil {
		nc.Close()
		return nil, fmt.Errorf("subscribe %s: %w", bus.SubjectRouteDecided, err)
	}
	if _, err := nc.Subscribe(bus.SubjectRouteCompleted, s.onCompletion); err != nil {
		nc.Close()
		return nil, fmt.Errorf("subscribe %s: %w", bus.SubjectRouteCompleted, err)
	}
	return s, nil
}

// redact drops credentials from a NATS URL list before it reaches an error.
func redact(u string) string {
	for i := 0; i < len(u); i++ {
		if u[i] == '@' {
			return "(url with credentials)"
		}
	}
	return u
}

// Publish queues a local decision for the other replicas. It never blocks:
// when the queue is full the decision is dropped, and the peers only
// under-count that request until their next scrape.
func (s *Sync) Publish(d Decision) {
	select {
	case s.queue <- d:
	default:
		if s.cfg.OnDropped != nil {
			s.cfg.OnDropped()
		}
	}
}

// Run publishes queued decisions until ctx ends, then publishes what is
// still queued and drains the connection.
func (s *Sync) Run(ctx context.Context) error {
	for {
		select {
		case d := <-s.queue:
			s.publish(d)
		case <-ctx.Done():
			for {
				select {
				case d := <-s.queue:
					s.publish(d)
					continue
				default:
				}
				break
			}
			return s.drain()
		}
	}
}

func (s *Sync) publish(d Decision) {
	msg := &eventsv1.RouteDecision{
		RequestId:  d.RequestID,
		RouterId:   s.cfg.RouterID,
		EndpointId: d.EndpointID,
		Model:      d.Model,
		Tenant:     d.Tenant,
		DecidedAt:  timestamppb.New(d.At),
	}
	data, err := proto.Marshal(msg)
	if err != nil {
		s.cfg.Log.Error().Err(err).Msg("marshal route decision")
		return
	}
	if err := s.nc.Publish(bus.SubjectRouteDecided, data); err != nil {
		// Typically the reconnect buffer is full during a long outage.
		s.cfg.Log.Debug().Err(err).Msg("publish route decision")
		if s.cfg.OnDropped != nil {
			s.cfg.OnDropped()
		}
	}
}

func (s *Sync) drain() error {
	err := s.nc.Drain()
	if err != nil {
		// Not connected: nothing to drain; Drain has already closed.
		if errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, nats.ErrConnectionClosed) {
			s.nc.Close()
			return nil
		}
		s.nc.Close()
		return fmt.Errorf("drain nats: %w", err)
	}
	select {
	case <-s.done:
	case <-time.After(s.cfg.DrainTimeout + time.Second):
		s.nc.Close()
	}
	return nil
}

func (s *Sync) onDecision(m *nats.Msg) {
	var d eventsv1.RouteDecision
	if err := proto.Unmarshal(m.Data, &d); err != nil {
		s.bad(m.Subject, err)
		return
	}
	if d.GetRouterId() == s.cfg.RouterID {
		return
	}
	if d.GetRequestId() == "" || d.GetEndpointId() == "" {
		s.bad(m.Subject, errors.New("decision without request or endpoint id"))
		return
	}
	now := time.Now()
	if s.cfg.MaxAge > 0 && d.GetDecidedAt() != nil && now.Sub(d.GetDecidedAt().AsTime()) > s.cfg.MaxAge {
		return
	}
	// The local receive time, not decided_at, decides whether the entry is
	// newer than a scrape: both sides of that comparison then come from one
	// clock, immune to skew between pods.
	s.cfg.Tracker.AddInFlight(d.GetRequestId(), d.GetEndpointId(), now)
	if s.cfg.OnDecision != nil {
		s.cfg.OnDecision()
	}
}

func (s *Sync) onCompletion(m *nats.Msg) {
	var c eventsv1.RouteCompletion
	if err := proto.Unmarshal(m.Data, &c); err != nil {
		s.bad(m.Subject, err)
		return
	}
	if c.GetRequestId() == "" {
		s.bad(m.Subject, errors.New("completion without request id"))
		return
	}
	released := s.cfg.Tracker.Complete(c.GetRequestId(), c.GetEndpointId(), time.Now())
	if s.cfg.OnCompletion != nil {
		s.cfg.OnCompletion(released)
	}
}

func (s *Sync) bad(subject string, err error) {
	s.cfg.Log.Warn().Str("subject", subject).Err(err).Msg("drop malformed event")
	if s.cfg.OnBadMessage != nil {
		s.cfg.OnBadMessage(subject)
	}
}
