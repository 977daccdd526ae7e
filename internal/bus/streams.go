package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Missing reports whether err says a stream or KV bucket does not exist.
// Streams and buckets in memory storage (the KV deltas, the kvtracker's
// leases) are lost when the NATS server restarts; whoever relies on one
// makes it again (EnsureKVStream, CreateOrUpdateKeyValue) when an
// operation fails so. A publish into a missing stream finds no responder.
func Missing(err error) bool {
	return errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders)
}

// DuplicateWindow is how long JetStream remembers a Nats-Msg-Id; a gateway
// retrying a usage publish inside it cannot double-count a request.
const DuplicateWindow = 2 * time.Minute

// UsageStreamConfig is the stream definition every publisher and consumer
// agrees on.
func UsageStreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        StreamUsage,
		Description: "Switchyard usage events, one per client request",
		Subjects:    []string{UsageSubjectAll},
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      7 * 24 * time.Hour,
		Storage:     jetstream.FileStorage,
		Duplicates:  DuplicateWindow,
	}
}

// EnsureUsageStream creates the usage stream or updates it to the current
// definition. Safe to call from every gateway and meter replica at start.
func EnsureUsageStream(ctx context.Context, js jetstream.JetStream) error {
	cfg := UsageStreamConfig()
	_, err := js.CreateOrUpdateStream(ctx, cfg)
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) {
			return fmt.Errorf("ensure stream %s: %w (jetstream api error %d)", cfg.Name, err, apiErr.ErrorCode)
		}
		return fmt.Errorf("ensure stream %s: %w", cfg.Name, err)
	}
	return nil
}

// KVStreamConfig is the KV delta stream definition kvtracker and routers
// agree on. Memory storage: the stream is a short replay buffer in front of
// the Redis snapshots, not a system of record.
func KVStreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        StreamKV,
		Description: "Switchyard KV block deltas per worker",
		Subjects:    []string{KVDeltaSubjectAll},
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      KVStreamMaxAge,
		Storage:     jetstream.MemoryStorage,
		Discard:     jetstream.DiscardOld,
	}
}

// EnsureKVStream creates or updates the KV delta stream.
func EnsureKVStream(ctx context.Context, js jetstream.JetStream) error {
	cfg := KVStreamConfig()
	if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("ensure stream %s: %w", cfg.Name, err)
	}
	return nil
}
