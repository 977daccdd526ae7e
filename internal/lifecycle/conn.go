package lifecycle

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/configcheck"
)

// NATSConn is a service's one NATS connection.
type NATSConn struct {
	*nats.Conn
	closed chan struct{}
}

// DialNATS connects to n. An unreachable server is not an error: the
// connection keeps retrying in the background, forever, with backoff, and
// the service serves what it can meanwhile (IsConnected says which). Only
// bad settings fail here. name identifies the client to the server.
func DialNATS(n NATS, name string, log zerolog.Logger) (*NATSConn, error) {
	c := &NATSConn{closed: make(chan struct{})}
	opts := []nats.Option{
		nats.Name(name),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(natsBackoff),
		nats.ConnectHandler(func(nc *nats.Conn) {
			log.Info().Str("server", nc.ConnectedUrlRedacted()).Msg("nats connected")
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil: our own Close or Drain
				log.Warn().Err(err).Msg("nats disconnected")
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info().Str("server", nc.ConnectedUrlRedacted()).Msg("nats reconnected")
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			ev := log.Warn().Err(err)
			if sub != nil {
				ev = ev.Str("subject", sub.Subject)
			}
			ev.Msg("nats async error")
		}),
		nats.ClosedHandler(func(*nats.Conn) { close(c.closed) }),
	}
	switch {
	case n.Creds != "":
		opts = append(opts, nats.UserCredentials(n.Creds))
	case n.NKey != "":
		o, err := nats.NkeyOptionFromSeed(n.NKey)
		if err != nil {
			return nil, fmt.Errorf("nats-nkey %s: %w", n.NKey, err)
		}
		opts = append(opts, o)
	}
	if n.TLS.set() {
		tc, err := n.TLS.config("nats")
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.Secure(tc))
	}
	nc, err := nats.Connect(n.URL, opts...)
	if err != nil {
		// nats.go errors may quote the URL, credentials included.
		return nil, fmt.Errorf("nats %s: %w", configcheck.Redact(n.URL), errors.New(redactErr(err, n.URL)))
	}
	c.Conn = nc
	return c, nil
}

// natsBackoff doubles the wait after each failed attempt, up to 5 s, so a
// long outage costs the server little when it returns.
func natsBackoff(attempts int) time.Duration {
	d := 250 * time.Millisecond
	for i := 1; i < attempts && d < 5*time.Second; i++ {
		d *= 2
	}
	return min(d, 5*time.Second)
}

// Drain delivers what is still buffered and closes the connection,
// waiting at most timeout (then closing it anyway).
func (c *NATSConn) Drain(timeout time.Duration) error {
	if err := c.Conn.Drain(); err != nil {
		c.Close()
		if errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, nats.ErrConnectionClosed) {
			return nil // not connected: nothing to deliver
		}
		return fmt.Errorf("drain nats: %w", err)
	}
	select {
	case <-c.closed:
	case <-time.After(timeout):
		c.Close()
	}
	return nil
}

// OpenRedis returns a client for r. Like NATS, an unreachable server is
// not an error here: each command fails until it is back. Only bad
// settings fail.
func OpenRedis(r Redis) (*redis.Client, error) {
	opts, err := redis.ParseURL(r.URL)
	if err != nil {
		return nil, fmt.Errorf("redis-url %s: %s", configcheck.Redact(r.URL), redactErr(err, r.URL))
	}
	if r.TLS.set() {
		tc, err := r.TLS.config("redis")
		if err != nil {
			return nil, err
		}
		if opts.TLSConfig != nil {
			tc.ServerName = opts.TLSConfig.ServerName
		}
		opts.TLSConfig = tc
	}
	return redis.NewClient(opts), nil
}

// SetRedisLogger sends go-redis's log lines to log, as JSON like every
// other line, instead of the plain text it prints on stderr by default.
// go-redis has one logger per process, so main calls this once.
//
// go-redis's lines carry no level. It filters them itself at a level of
// its own, which follows log's (its info and debug chatter only when log
// shows them); what it prints at its default level are failures (a dial
// that failed, a connection it had to close), so a line is a warning,
// an error when it reports a recovered panic, and at debug level when
// go-redis was asked for debug lines and the line reports no failure.
func SetRedisLogger(log zerolog.Logger) {
	lvl := logging.LogLevelError
	switch l := log.GetLevel(); {
	case l <= zerolog.DebugLevel:
		lvl = logging.LogLevelDebug
	case l == zerolog.InfoLevel:
		lvl = logging.LogLevelInfo
	case l == zerolog.WarnLevel:
		lvl = logging.LogLevelWarn
	}
	redis.SetLogLevel(lvl)
	redis.SetLogger(redisLogger{log: log.With().Str("component", "redis").Logger(), chatty: lvl >= logging.LogLevelInfo})
}

// redisLogger adapts zerolog to go-redis's logging interface.
type redisLogger struct {
	log zerolog.Logger
	// chatty: go-redis prints info and debug lines too, not only failures.
	chatty bool
}

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	msg := strings.TrimSpace(strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "))
	lower := strings.ToLower(msg)
	lvl := zerolog.WarnLevel
	switch {
	case strings.Contains(lower, "panic"):
		lvl = zerolog.ErrorLevel
	case l.chatty && !strings.Contains(lower, "fail") && !strings.Contains(lower, "error"):
		lvl = zerolog.DebugLevel
	}
	l.log.WithLevel(lvl).Msg(msg)
}

// config builds the crypto/tls configuration.
func (t TLS) config(prefix string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CA != "" {
		pem, err := os.ReadFile(t.CA)
		if err != nil {
			return nil, fmt.Errorf("%s-tls-ca: %w", prefix, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s-tls-ca %s: no PEM certificate in it", prefix, t.CA)
		}
		tc.RootCAs = pool
	}
	if t.Cert != "" {
		cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, fmt.Errorf("%s-tls-cert/%s-tls-key: %w", prefix, prefix, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// redactErr is err's text with the user info of every URL in list
// hidden, for clients whose errors quote what they were given.
func redactErr(err error, list string) string {
	msg := err.Error()
	for _, raw := range strings.Split(list, ",") {
		raw = strings.TrimSpace(raw)
		if red := configcheck.Redact(raw); raw != "" && red != raw {
			msg = strings.ReplaceAll(msg, raw, red)
		}
	}
	return msg
}
