package lifecycle

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/switchyard-dev/switchyard/internal/configcheck"
)

// Listen is a service's listen addresses. Services listen on loopback
// unless told otherwise (":PORT" for every interface).
type Listen struct {
	// GRPCAddr is the gRPC listen address.
	GRPCAddr string
	// HTTPAddr is the HTTP listen address (REST, /metrics, /healthz,
	// /readyz).
	HTTPAddr string
	// GRPCTLS is the gRPC listener's TLS (--grpc-tls-cert, --grpc-tls-key)
	// and, with a client CA (--grpc-tls-client-ca), mutual TLS.
	GRPCTLS ServerTLS
}

// RegisterFlags registers --grpc-addr and --http-addr with d's values as
// defaults; what names what the HTTP port serves, for the help.
func (l *Listen) RegisterFlags(fs *flag.FlagSet, d Listen, httpServes string) {
	fs.StringVar(&l.GRPCAddr, "grpc-addr", d.GRPCAddr, "gRPC listen address; :PORT for every interface")
	fs.StringVar(&l.HTTPAddr, "http-addr", d.HTTPAddr, "HTTP listen address ("+httpServes+"); :PORT for every interface")
	l.GRPCTLS.registerFlags(fs)
}

// Validate checks both addresses.
func (l Listen) Validate() error {
	var errs []error
	if err := configcheck.ListenAddr(l.GRPCAddr); err != nil {
		errs = append(errs, fmt.Errorf("grpc-addr: %w", err))
	}
	if err := configcheck.ListenAddr(l.HTTPAddr); err != nil {
		errs = append(errs, fmt.Errorf("http-addr: %w", err))
	}
	errs = append(errs, l.GRPCTLS.validate()...)
	return errors.Join(errs...)
}

// Stop is how a service stops.
type Stop struct {
	// ShutdownTimeout bounds the graceful stop of the servers, then of each
	// part of the service.
	ShutdownTimeout time.Duration
	// DrainDelay is how long the service stays up, not ready, before it
	// stops serving: the time a load balancer takes to notice.
	DrainDelay time.Duration
}

// DefaultStop is what services use unless they say otherwise: no drain
// delay (set one behind a load balancer, e.g. 5s in Kubernetes).
var DefaultStop = Stop{ShutdownTimeout: 10 * time.Second}

// RegisterFlags registers --shutdown-timeout and --drain-delay.
func (s *Stop) RegisterFlags(fs *flag.FlagSet, d Stop) {
	fs.DurationVar(&s.ShutdownTimeout, "shutdown-timeout", d.ShutdownTimeout, "bound on the graceful stop of the servers, then of each part of the service")
	fs.DurationVar(&s.DrainDelay, "drain-delay", d.DrainDelay, "how long to stay up, not ready, before stopping (the time a load balancer takes to notice)")
}

// Validate checks the durations.
func (s Stop) Validate() error {
	var errs []error
	if s.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("shutdown-timeout: must be positive, got %s", s.ShutdownTimeout))
	}
	if s.DrainDelay < 0 {
		errs = append(errs, fmt.Errorf("drain-delay: must not be negative, got %s", s.DrainDelay))
	}
	return errors.Join(errs...)
}

// TLS is a client's TLS settings: a CA to verify the server with, and a
// certificate and key when the server asks for one (mutual TLS). All are
// file paths; empty is the system's roots and no client certificate.
type TLS struct {
	CA, Cert, Key string
}

func (t *TLS) registerFlags(fs *flag.FlagSet, prefix, server string) {
	fs.StringVar(&t.CA, prefix+"-tls-ca", "", "PEM file of the CA that signed "+server+"'s certificate (empty: the system's)")
	fs.StringVar(&t.Cert, prefix+"-tls-cert", "", "PEM client certificate for "+server+" (mutual TLS; with --"+prefix+"-tls-key)")
	fs.StringVar(&t.Key, prefix+"-tls-key", "", "PEM key of --"+prefix+"-tls-cert")
}

// set reports whether any TLS setting is given.
func (t TLS) set() bool { return t.CA != "" || t.Cert != "" || t.Key != "" }

func (t TLS) validate(prefix string) []error {
	var errs []error
	if (t.Cert == "") != (t.Key == "") {
		errs = append(errs, fmt.Errorf("%s-tls-cert and %s-tls-key: give both or neither", prefix, prefix))
	}
	for name, path := range map[string]string{"ca": t.CA, "cert": t.Cert, "key": t.Key} {
		if path == "" {
			continue
		}
		if _, err := os.Stat(path); err != nil {
			errs = append(errs, fmt.Errorf("%s-tls-%s: %w", prefix, name, err))
		}
	}
	return errs
}

// NATS is how a service reaches NATS.
type NATS struct {
	// URL is a comma-separated server list; empty disables NATS where the
	// service allows it. A user and password, or a token, may be in the
	// URL; they never reach logs or errors.
	URL string
	// Creds is a NATS credentials file (a user JWT and its NKey seed).
	Creds string
	// NKey is a file holding an NKey seed, for NKey authentication.
	NKey string
	TLS  TLS
}

// RegisterFlags registers --nats-url (what says what NATS carries for the
// service) and the credential and TLS flags.
func (n *NATS) RegisterFlags(fs *flag.FlagSet, defaultURL, what string) {
	fs.StringVar(&n.URL, "nats-url", defaultURL, "NATS server URL(s), comma-separated ("+what+")")
	fs.StringVar(&n.Creds, "nats-creds", "", "NATS credentials file (user JWT and NKey seed)")
	fs.StringVar(&n.NKey, "nats-nkey", "", "file holding an NKey seed for NATS NKey authentication")
	n.TLS.registerFlags(fs, "nats", "the NATS server")
}

// Validate checks the settings; required says whether an empty URL is an
// error.
func (n NATS) Validate(required bool) error {
	var errs []error
	switch {
	case n.URL == "" && required:
		errs = append(errs, errors.New("nats-url: required"))
	case n.URL != "":
		if err := configcheck.URLList(n.URL, configcheck.NATSSchemes...); err != nil {
			errs = append(errs, fmt.Errorf("nats-url: %w", err))
		}
	}
	if n.Creds != "" && n.NKey != "" {
		errs = append(errs, errors.New("nats-creds and nats-nkey: give one or the other"))
	}
	for name, path := range map[string]string{"nats-creds": n.Creds, "nats-nkey": n.NKey} {
		if path == "" {
			continue
		}
		if _, err := os.Stat(path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	errs = append(errs, n.TLS.validate("nats")...)
	return errors.Join(errs...)
}

// Redis is how a service reaches Redis.
type Redis struct {
	// URL is redis://[user:password@]host:port[/db], rediss:// for TLS, or
	// unix://; empty disables Redis where the service allows it. The
	// password never reaches logs or errors.
	URL string
	TLS TLS
}

// RegisterFlags registers --redis-url (what says what Redis holds for the
// service) and the TLS flags.
func (r *Redis) RegisterFlags(fs *flag.FlagSet, defaultURL, what string) {
	fs.StringVar(&r.URL, "redis-url", defaultURL, "Redis URL: redis://[user:password@]host:port[/db], rediss:// for TLS ("+what+")")
	r.TLS.registerFlags(fs, "redis", "Redis")
}

// Validate checks the settings; required says whether an empty URL is an
// error.
func (r Redis) Validate(required bool) error {
	var errs []error
	switch {
	case r.URL == "" && required:
		errs = append(errs, errors.New("redis-url: required"))
	case r.URL != "":
		if err := configcheck.URLList(r.URL, configcheck.RedisSchemes...); err != nil {
			errs = append(errs, fmt.Errorf("redis-url: %w", err))
		}
	}
	errs = append(errs, r.TLS.validate("redis")...)
	return errors.Join(errs...)
}
