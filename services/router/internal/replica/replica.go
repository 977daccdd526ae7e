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
	AddInFlight(PeerDecision)
	Complete(Completion) bool
}

// PeerDecision is another replica's decision as the tracker needs it.
type PeerDecision struct {
	RequestID  string
	EndpointID string
	Model      string
	// At is the local receive time: it is compared with local scrape
	// times, so both come from one clock, immune to skew between pods.
	At           time.Time
	PromptTokens int64
	CachedTokens int64
	OutputTokens int64
}

// Completion is the gateway's report that a routed attempt ended.
type Completion struct {
	RequestID  string
	EndpointID string
	At         time.Time
	Success    bool
	// UpstreamFailed: the upstream, not the client, failed the request.
	UpstreamFailed bool
	// TTFTSeconds is zero when no first token arrived.
	TTFTSeconds  float64
	PromptTokens int64
	CachedTokens int64
}

// Config for New.
type Config struct {
	// Conn is the router's NATS connection, shared with its other NATS
	// users; the router drains it after they all stopped.
	Conn     *nats.Conn
	RouterID string
	Tracker  Tracker
	// MaxAge drops peer decisions older than this when they arrive (e.g.
	// replayed from a reconnect buffer): their entry would expire anyway.
	MaxAge time.Duration
	// Hooks for metrics; any may be nil.
	OnDecision   func()       // a peer decision was applied
	OnCompletion func(bool)   // a completion arrived; true if it released something
	OnDropped    func()       // a local decision could not be queued for publishing
	OnBadMessage func(string) // a payload did not decode; argument is the subject
	Log          zerolog.Logger
}

// Decision is what Publish needs; a value so queueing it allocates nothing.
type Decision struct {
	RequestID    string
	EndpointID   string
	Model        string
	Tenant       string
	At           time.Time
	PromptTokens int64
	CachedTokens int64
	// OutputTokens is the request's output limit (RouteRequest.
	// max_output_tokens), 0 when unknown.
	OutputTokens int64
}

// queueSize bounds decisions waiting to be published. Publishing happens on
// a separate goroutine because nats.go may hold its connection lock while
// writing to the socket, and Route must never wait on I/O.
const queueSize = 4096

// Sync is a live replica link.
type Sync struct {
	cfg   Config
	queue chan Decision
	subs  []*nats.Subscription
}

// New subscribes to peer decisions and completions on cfg.Conn. A
// connection that is not up yet is fine: nats.go sends the subscriptions
// once it connects, and the router routes on its own meanwhile.
func New(cfg Config) (*Sync, error) {
	s := &Sync{cfg: cfg, queue: make(chan Decision, queueSize)}
	for _, sub := range []struct {
		subject string
		handler nats.MsgHandler
	}{
		{bus.SubjectRouteDecided, s.onDecision},
		{bus.SubjectRouteCompleted, s.onCompletion},
	} {
		ns, err := cfg.Conn.Subscribe(sub.subject, sub.handler)
		if err != nil {
			s.unsubscribe()
			return nil, fmt.Errorf("subscribe %s: %w", sub.subject, err)
		}
		s.subs = append(s.subs, ns)
	}
	return s, nil
}

func (s *Sync) unsubscribe() {
	for _, sub := range s.subs {
		_ = sub.Unsubscribe()
	}
	s.subs = nil
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
// still queued (the connection's drain, done by its owner, delivers them).
// Subscriptions stay until the connection drains, so completions keep
// releasing in-flight entries during shutdown.
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
				default:
					return nil
				}
			}
		}
	}
}

func (s *Sync) publish(d Decision) {
	msg := &eventsv1.RouteDecision{
		RequestId:             d.RequestID,
		RouterId:              s.cfg.RouterID,
		EndpointId:            d.EndpointID,
		Model:                 d.Model,
		Tenant:                d.Tenant,
		PromptTokens:          d.PromptTokens,
		PredictedCachedTokens: d.CachedTokens,
		DecidedAt:             timestamppb.New(d.At),
		MaxOutputTokens:       d.OutputTokens,
	}
	data, err := proto.Marshal(msg)
	if err != nil {
		s.cfg.Log.Error().Err(err).Msg("marshal route decision")
		return
	}
	if err := s.cfg.Conn.Publish(bus.SubjectRouteDecided, data); err != nil {
		// Typically the reconnect buffer is full during a long outage.
		s.cfg.Log.Debug().Err(err).Msg("publish route decision")
		if s.cfg.OnDropped != nil {
			s.cfg.OnDropped()
		}
	}
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
	s.cfg.Tracker.AddInFlight(PeerDecision{
		RequestID: d.GetRequestId(), EndpointID: d.GetEndpointId(), Model: d.GetModel(), At: now,
		PromptTokens: max(0, d.GetPromptTokens()), CachedTokens: max(0, d.GetPredictedCachedTokens()),
		OutputTokens: max(0, d.GetMaxOutputTokens()),
	})
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
	released := s.cfg.Tracker.Complete(Completion{
		RequestID: c.GetRequestId(), EndpointID: c.GetEndpointId(), At: time.Now(), Success: c.GetSuccess(),
		UpstreamFailed: c.GetUpstreamFailed(), TTFTSeconds: c.GetTtftSeconds(), PromptTokens: max(0, c.GetPromptTokens()), CachedTokens: max(0, c.GetCachedTokens()),
	})
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
