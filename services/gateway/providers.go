package gateway

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"

	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/internal/policy/watch"
	"github.com/switchyard-dev/switchyard/internal/upstream"
	policyv1 "github.com/switchyard-dev/switchyard/proto/switchyard/policy/v1"
)

// maxKeyBytes bounds an API key file.
const maxKeyBytes = 16 << 10

// catalog is the gateway's copy of policyd's snapshot. The gateway needs
// it for what only the gateway does: find a provider's API key (the router
// never sees keys), read the GatewayBackend's tags header, and tell
// clients the GatewayBackend's public model names.
// Which tags are allowed, and each tenant's default tags, the router
// applies from its own copy of the same snapshot: the decision and the
// filter stay in one place.
type catalog struct {
	conn       *grpc.ClientConn
	w          *watch.Watcher
	backend    string
	secretsDir string
}

func newCatalog(cfg Config, log zerolog.Logger) (*catalog, error) {
	opts, err := cfg.Policyd.DialOptions("policyd")
	if err != nil {
		return nil, fmt.Errorf("gateway config: %w", err)
	}
	conn, err := grpc.NewClient(cfg.PolicydAddr, opts...)
	if err != nil {
		return nil, fmt.Errorf("policyd client %s: %w", cfg.PolicydAddr, err)
	}
	return &catalog{
		conn:       conn,
		w:          watch.New(policyv1.NewPolicyServiceClient(conn), log, watch.Options{}),
		backend:    cfg.GatewayBackend,
		secretsDir: cfg.ProviderSecretsDir,
	}, nil
}

func (c *catalog) run(ctx context.Context) error { return c.w.Run(ctx) }

func (c *catalog) snapshot() *policy.Snapshot {
	if cur := c.w.Current(); cur != nil {
		return cur.Snapshot
	}
	return nil
}

// program is the compiled GatewayBackend this gateway serves; nil before
// the first snapshot or when the snapshot lacks it.
func (c *catalog) program() *policy.Program {
	if s := c.snapshot(); s != nil {
		return s.Program(c.backend)
	}
	return nil
}

// tagsHeader is the header the GatewayBackend reads tags from; "" when it
// names none (or no snapshot arrived yet).
func (c *catalog) tagsHeader() string {
	if p := c.program(); p != nil {
		return p.TagsHeader
	}
	return ""
}

// models are the GatewayBackend's public model names, aliases included
// (shared; do not modify); empty when it lists none, which means any
// model, or no snapshot arrived yet.
func (c *catalog) models() []string {
	if p := c.program(); p != nil {
		return p.Models
	}
	return nil
}

var errNoCredentials = errors.New("no credentials")

// provider is the snapshot's provider of that name.
func (c *catalog) provider(name string) (*policy.Provider, error) {
	s := c.snapshot()
	if s == nil {
		return nil, fmt.Errorf("provider %s: no policy snapshot yet: %w", name, errNoCredentials)
	}
	p := s.Provider(name)
	if p == nil {
		return nil, fmt.Errorf("provider %s: not in the policy snapshot: %w", name, errNoCredentials)
	}
	return p, nil
}

// providerTarget fills in what a provider's attempt needs beyond its type
// and URL: its type's settings, and its key, or for an adapter that reads
// its own credentials (upstream.OwnCredentials) where they are.
func (c *catalog) providerTarget(name string, t *upstream.Target, adapter upstream.Adapter) error {
	p, err := c.provider(name)
	if err != nil {
		return err
	}
	t.Provider = p.Namespace + "/" + p.Name
	t.Settings = upstream.Settings{Region: p.Settings.BedrockRegion, AzureAPIVersion: p.Settings.AzureAPIVersion}
	if o := p.Settings.DatabricksOAuth; o != nil {
		t.Settings.DatabricksOAuthClientID = o.ClientID
		t.ClientSecret, err = readKey(name, filepath.Join(c.secretsDir, o.SecretName, o.SecretKey))
		return err
	}
	if e := p.Settings.AzureEntra; e != nil {
		t.Settings.AzureEntra = upstream.AzureEntra{TenantID: e.TenantID, ClientID: e.ClientID, AuthorityHost: e.AuthorityHost}
		t.ClientSecret, err = readKey(name, filepath.Join(c.secretsDir, e.SecretName, e.SecretKey))
		return err
	}
	if _, own := adapter.(upstream.OwnCredentials); !own {
		t.APIKey, err = c.apiKey(name)
		return err
	}
	switch cr := p.Credentials; {
	case cr.Env != "":
		return fmt.Errorf("provider %s: credentials.env is not supported by type %s: %w", name, p.Type, errNoCredentials)
	case cr.File != "":
		t.Credentials.Dir = cr.File
	case cr.SecretName != "":
		t.Credentials.Dir = filepath.Join(c.secretsDir, cr.SecretName)
	}
	return nil
}

// apiKey reads a provider's key from where its credentials point: an
// environment variable or a file (local mode), or a Kubernetes Secret
// mounted under the secrets directory as <secret>/<key>. It is read on
// every call so that a rotated Secret takes effect without a restart.
// Errors never contain the key.
func (c *catalog) apiKey(provider string) (string, error) {
	s := c.snapshot()
	if s == nil {
		return "", fmt.Errorf("provider %s: no policy snapshot yet: %w", provider, errNoCredentials)
	}
	p := s.Provider(provider)
	if p == nil {
		return "", fmt.Errorf("provider %s: not in the policy snapshot: %w", provider, errNoCredentials)
	}
	cr := p.Credentials
	switch {
	case cr.Env != "":
		if k := strings.TrimSpace(os.Getenv(cr.Env)); k != "" {
			return k, nil
		}
		return "", fmt.Errorf("provider %s: environment variable %s is empty: %w", provider, cr.Env, errNoCredentials)
	case cr.File != "":
		return readKey(provider, cr.File)
	case cr.SecretName != "":
		key := cr.SecretKey
		if key == "" {
			key = "apiKey"
		}
		return readKey(provider, filepath.Join(c.secretsDir, cr.SecretName, key))
	}
	return "", fmt.Errorf("provider %s: %w configured", provider, errNoCredentials)
}

func readKey(provider, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("provider %s: key file: %w", provider, err)
	}
	defer f.Close()
	buf := make([]byte, maxKeyBytes+1)
	n, _ := f.Read(buf)
	if n > maxKeyBytes {
		return "", fmt.Errorf("provider %s: key file %s larger than %d bytes", provider, path, maxKeyBytes)
	}
	k := strings.TrimSpace(string(buf[:n]))
	if k == "" {
		return "", fmt.Errorf("provider %s: key file %s is empty: %w", provider, path, errNoCredentials)
	}
	return k, nil
}
