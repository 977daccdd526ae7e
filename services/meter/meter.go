// Package meter consumes usage events from JetStream and aggregates them per tenant and model.
//
// It is not implemented yet: the metering issue builds it. Run returns
// ErrNotImplemented so that nothing pretends to work.
package meter

import (
	"context"
	"errors"
	"flag"

	"github.com/rs/zerolog"
)

// ErrNotImplemented is returned by Run until the service exists.
var ErrNotImplemented = errors.New("meter: not implemented yet (metering issue)")

// Config is the service configuration.
type Config struct {
	NATSURL string
}

// RegisterFlags registers the service's flags on fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.NATSURL, "nats-url", "nats://127.0.0.1:4222", "NATS server URL")
}

// Validate checks the configuration.
func (c *Config) Validate() error { return nil }

// Run runs the service until ctx is done.
func Run(ctx context.Context, cfg Config, log zerolog.Logger) error {
	return ErrNotImplemented
}
