package lifecycle

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// ServerTLS is a gRPC listener's TLS: the certificate and key it serves
// with, and a client CA, which makes it mutual TLS: every client must
// present a certificate the CA signed, or the handshake fails. All are PEM
// file paths; none set serves plain gRPC. Files are read at start: restart
// (roll) the service after rotating them.
type ServerTLS struct {
	Cert, Key, ClientCA string
}

func (t *ServerTLS) registerFlags(fs *flag.FlagSet) {
	fs.StringVar(&t.Cert, "grpc-tls-cert", "", "PEM certificate the gRPC listener serves TLS with (with --grpc-tls-key; empty: plain gRPC)")
	fs.StringVar(&t.Key, "grpc-tls-key", "", "PEM key of --grpc-tls-cert")
	fs.StringVar(&t.ClientCA, "grpc-tls-client-ca", "", "PEM CA that signs client certificates: set, every gRPC client must present one it signed (mutual TLS)")
}

// Enabled reports whether the listener serves TLS.
func (t ServerTLS) Enabled() bool { return t.Cert != "" }

func (t ServerTLS) validate() []error {
	var errs []error
	if (t.Cert == "") != (t.Key == "") {
		errs = append(errs, errors.New("grpc-tls-cert and grpc-tls-key: give both or neither"))
	}
	if t.ClientCA != "" && t.Cert == "" {
		errs = append(errs, errors.New("grpc-tls-client-ca: needs --grpc-tls-cert and --grpc-tls-key (mutual TLS is TLS first)"))
	}
	errs = append(errs, statFiles(map[string]string{"grpc-tls-cert": t.Cert, "grpc-tls-key": t.Key, "grpc-tls-client-ca": t.ClientCA})...)
	return errs
}

// Config builds the listener's crypto/tls configuration; nil when TLS is
// off.
func (t ServerTLS) Config() (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
	if err != nil {
		return nil, fmt.Errorf("grpc-tls-cert/grpc-tls-key: %w", err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if t.ClientCA != "" {
		if tc.ClientCAs, err = certPool(t.ClientCA); err != nil {
			return nil, fmt.Errorf("grpc-tls-client-ca: %w", err)
		}
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// GRPCClient is how a service (or yardctl) reaches another's gRPC: TLS,
// on when a CA, a client certificate or a server name is given (the CA
// verifies the server, empty meaning the system's roots; the certificate
// and key are presented for mutual TLS; the server name is the one the
// server's certificate must carry, by default the dialled host), and a
// bearer token sent with every call (a file holding it; the router's
// operator role).
type GRPCClient struct {
	TLS
	ServerName string
	TokenFile  string
}

// RegisterFlags registers --PREFIX-tls-ca, --PREFIX-tls-cert,
// --PREFIX-tls-key, --PREFIX-tls-server-name and, when token says what the
// token is for (non-empty), --PREFIX-token-file; server names the server
// for the help.
func (c *GRPCClient) RegisterFlags(fs *flag.FlagSet, prefix, server, token string) {
	c.TLS.registerFlags(fs, prefix, server)
	fs.StringVar(&c.ServerName, prefix+"-tls-server-name", "", "name "+server+"'s certificate must carry (default: the host dialled); setting it turns TLS on")
	if token != "" {
		fs.StringVar(&c.TokenFile, prefix+"-token-file", "", "file holding the bearer token sent to "+server+" ("+token+")")
	}
}

// Secure reports whether the connection uses TLS.
func (c GRPCClient) Secure() bool { return c.CA != "" || c.Cert != "" || c.ServerName != "" }

// Validate checks the settings; prefix is the flags' prefix.
func (c GRPCClient) Validate(prefix string) error {
	errs := c.TLS.validate(prefix)
	if c.TokenFile != "" {
		if _, err := readToken(c.TokenFile); err != nil {
			errs = append(errs, fmt.Errorf("%s-token-file: %w", prefix, err))
		}
	}
	return errors.Join(errs...)
}

// TLSConfig is the client's crypto/tls configuration; nil without TLS.
func (c GRPCClient) TLSConfig(prefix string) (*tls.Config, error) {
	if !c.Secure() {
		return nil, nil
	}
	tc, err := c.TLS.config(prefix)
	if err != nil {
		return nil, err
	}
	tc.ServerName = c.ServerName
	return tc, nil
}

// RedialParams is how every internal gRPC client redials a server it lost:
// gRPC's default backoff grows to two minutes, which leaves a service
// that returned after a long outage unused for up to that long; capped at
// a second, a returning router or policyd is in use again within about a
// second, at the cost of one connection attempt per second per client
// while it is away.
var RedialParams = grpc.ConnectParams{
	Backoff: backoff.Config{
		BaseDelay:  100 * time.Millisecond,
		Multiplier: 1.6,
		Jitter:     0.2,
		MaxDelay:   time.Second,
	},
	MinConnectTimeout: 2 * time.Second,
}

// DialOptions are the grpc.NewClient options for the transport, the token
// and the redial backoff (RedialParams); prefix names the flags in errors.
func (c GRPCClient) DialOptions(prefix string) ([]grpc.DialOption, error) {
	creds := insecure.NewCredentials()
	tc, err := c.TLSConfig(prefix)
	if err != nil {
		return nil, err
	}
	if tc != nil {
		creds = credentials.NewTLS(tc)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds), grpc.WithConnectParams(RedialParams)}
	if c.TokenFile != "" {
		tok, err := readToken(c.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("%s-token-file: %w", prefix, err)
		}
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: tok}))
	}
	return opts, nil
}

// bearer sends "authorization: Bearer TOKEN" with every call. It allows
// plain connections: inside a cluster network TLS is optional, and the
// choice is the operator's.
type bearer struct{ token string }

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (b bearer) RequireTransportSecurity() bool { return false }

// MinTokenBytes is the shortest bearer token accepted: a token is a
// secret, not a password to remember (openssl rand -hex 32).
const MinTokenBytes = 16

// ReadToken reads a bearer token file: its content with surrounding white
// space trimmed, at least MinTokenBytes long, printable ASCII.
func ReadToken(path string) (string, error) { return readToken(path) }

func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < MinTokenBytes {
		return "", fmt.Errorf("%s: the token is %d bytes, want at least %d (e.g. openssl rand -hex 32)", path, len(tok), MinTokenBytes)
	}
	for _, r := range tok {
		if r < 0x21 || r > 0x7e {
			return "", fmt.Errorf("%s: the token must be printable ASCII without spaces", path)
		}
	}
	return tok, nil
}

func certPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate in it", path)
	}
	return pool, nil
}

func statFiles(files map[string]string) []error {
	var errs []error
	for name, path := range files {
		if path == "" {
			continue
		}
		if _, err := os.Stat(path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return errs
}
