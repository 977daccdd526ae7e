package router

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// dialNATS opens the replica's one NATS connection, shared by in-flight
// sync and the KV index replica. An unreachable server is not an error: the
// connection keeps retrying in the background and the router routes on its
// own meanwhile. closed is closed when the connection is.
func dialNATS(url, routerID string, drainTimeout time.Duration, log zerolog.Logger) (nc *nats.Conn, closed <-chan struct{}, err error) {
	done := make(chan struct{})
	nc, err = nats.Connect(url,
		nats.Name("switchyard-router "+routerID),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500*time.Millisecond),
		nats.DrainTimeout(drainTimeout),
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
		nats.ClosedHandler(func(*nats.Conn) { close(done) }),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("connect nats %s: %w", redactNATS(url), err)
	}
	return nc, done, nil
}

// drainNATS delivers what is still buffered (the last decisions) and
// closes the connection, waiting at most timeout beyond the drain's own.
func drainNATS(nc *nats.Conn, closed <-chan struct{}, timeout time.Duration) error {
	if err := nc.Drain(); err != nil {
		nc.Close()
		// Not connected: nothing to drain.
		if errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, nats.ErrConnectionClosed) {
			return nil
		}
		return fmt.Errorf("drain nats: %w", err)
	}
	select {
	case <-closed:
	case <-time.After(timeout + time.Second):
		nc.Close()
	}
	return nil
}

// redactNATS drops credentials from a NATS URL list before it reaches an
// error.
func redactNATS(u string) string {
	if strings.Contains(u, "@") {
		return "(url with credentials)"
	}
	return u
}
