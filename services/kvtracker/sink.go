package kvtracker

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
	"github.com/switchyard-dev/switchyard/services/kvtracker/internal/ingest"
)

// publishStallWait is how long a publish waits for room when
// maxPendingAcks deltas are unacknowledged: back-pressure on the pipeline
// rather than a dropped delta.
const publishStallWait = 2 * time.Second

// maxPendingAcks bounds unacknowledged async publishes per connection.
const maxPendingAcks = 8192

// jsSink publishes one worker's deltas to JetStream without waiting for
// acks; the acks arrive in batches on the connection's reply subscription.
type jsSink struct {
	js      jetstream.JetStream
	subject string
	opts    []jetstream.PublishOpt
}

func newJSSink(js jetstream.JetStream, subject string) *jsSink {
	return &jsSink{js: js, subject: subject, opts: []jetstream.PublishOpt{jetstream.WithStallWait(publishStallWait)}}
}

func (s *jsSink) Publish(d *eventsv1.KVBlockDelta) (ingest.Ack, error) {
	data, err := proto.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("marshal kv delta: %w", err)
	}
	// The message is the future's until acked (it is resent on no
	// responders), so it is never reused.
	f, err := s.js.PublishMsgAsync(&nats.Msg{Subject: s.subject, Data: data}, s.opts...)
	if err != nil {
		return nil, fmt.Errorf("publish kv delta on %s: %w", s.subject, err)
	}
	return f, nil
}
