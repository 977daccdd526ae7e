package policyd

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
)

// Source modes.
const (
	SourceFiles      = "files"
	SourceKubernetes = "kubernetes"
)

// Config is policyd's configuration.
type Config struct {
	// Listen: gRPC serves PolicyService and health; HTTP serves REST
	// (grpc-gateway), /metrics, /healthz and /readyz.
	lifecycle.Listen
	// Stop: the shutdown timeout and drain delay.
	lifecycle.Stop
	// Source is "files" (a directory of YAML, reloaded on change) or
	// "kubernetes" (the five CRDs through client-go informers).
	Source string
	// Paths are the YAML files and directories read in files mode.
	Paths []string
	// PollInterval is how often files mode checks the files for changes.
	PollInterval time.Duration
	// Kubeconfig for kubernetes mode. Empty finds the configuration as
	// kubectl does ($KUBECONFIG, else ~/.kube/config), and in a pod falls
	// back to its service account (the in-cluster config).
	Kubeconfig string
	// Namespace watched in kubernetes mode; empty watches all.
	Namespace string
	// WriteStatus writes status.conditions back in kubernetes mode.
	WriteStatus bool
	// Debounce coalesces bursts of resource events into one compile.
	Debounce time.Duration
	// KeySecretsInterval is how often kubernetes mode re-reads the Secrets
	// GatewayBackend tenants name (keysSecret) for their key digests. It
	// reads only those, by name (get, no list or watch of Secrets): a key
	// added or revoked in a Secret takes effect within this interval.
	KeySecretsInterval time.Duration
}

// DefaultConfig returns the flag defaults. They listen on loopback, as
// `switchyard dev` does: a policyd started by hand is not exposed to the
// network; a Deployment passes :9092 and :9093.
func DefaultConfig() Config {
	return Config{
		Listen:       lifecycle.Listen{GRPCAddr: "127.0.0.1:9092", HTTPAddr: "127.0.0.1:9093"},
		Stop:         lifecycle.DefaultStop,
		Source:       SourceFiles,
		PollInterval: 500 * time.Millisecond,
		WriteStatus:  true,
		Debounce:     100 * time.Millisecond,

		KeySecretsInterval: 3 * time.Second,
	}
}

// pathList is a repeatable, comma-separated flag.
type pathList []string

func (p *pathList) String() string { return fmt.Sprint(*p) }
func (p *pathList) Set(v string) error {
	for _, s := range splitComma(v) {
		*p = append(*p, s)
	}
	return nil
}

func splitComma(v string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(v); i++ {
		if i == len(v) || v[i] == ',' {
			if s := v[start:i]; s != "" {
				out = append(out, s)
			}
			start = i + 1
		}
	}
	return out
}

// RegisterFlags registers the service's flags on fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	*c = d
	c.Listen.RegisterFlags(fs, d.Listen, "REST, /metrics, /healthz, /readyz")
	fs.StringVar(&c.Source, "source", d.Source, "where resources come from: "+strings.Join(Sources(), " or "))
	fs.Var((*pathList)(&c.Paths), "path", "files mode: YAML file or directory to load (repeatable, comma-separated)")
	fs.DurationVar(&c.PollInterval, "poll-interval", d.PollInterval, "files mode: how often to check the files for changes")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "kubernetes mode: kubeconfig file (empty: $KUBECONFIG, else ~/.kube/config, else the pod's service account)")
	fs.StringVar(&c.Namespace, "namespace", "", "kubernetes mode: namespace to watch (empty: all)")
	fs.BoolVar(&c.WriteStatus, "write-status", d.WriteStatus, "kubernetes mode: write status.conditions back to the resources")
	fs.DurationVar(&c.Debounce, "debounce", d.Debounce, "kubernetes mode: coalesce resource events for this long before compiling")
	fs.DurationVar(&c.KeySecretsInterval, "key-secrets-interval", d.KeySecretsInterval, "kubernetes mode: how often to re-read the Secrets named by GatewayBackend tenants (keysSecret); a revoked key stops working within it")
	c.Stop.RegisterFlags(fs, d.Stop)
}

// Validate checks the configuration, the source's settings included.
func (c *Config) Validate() error {
	var errs []error
	switch _, ok := sourceFactory(c.Source); {
	case !ok && c.Source == SourceKubernetes:
		errs = append(errs, fmt.Errorf("source: %q: this binary was built without Kubernetes support (-tags nokube); use a build without the tag, or --source %s", c.Source, SourceFiles))
	case !ok:
		errs = append(errs, fmt.Errorf("source: %q: want one of %s", c.Source, strings.Join(Sources(), ", ")))
	case c.Source == SourceFiles:
		if len(c.Paths) == 0 {
			errs = append(errs, errors.New("path: files mode needs at least one file or directory"))
		}
		if c.PollInterval <= 0 {
			errs = append(errs, errors.New("poll-interval: must be positive"))
		}
	}
	if c.Debounce < 0 {
		errs = append(errs, errors.New("debounce: must not be negative"))
	}
	if c.Source == SourceKubernetes && c.KeySecretsInterval <= 0 {
		errs = append(errs, errors.New("key-secrets-interval: must be positive"))
	}
	errs = append(errs, c.validateServer())
	return errors.Join(errs...)
}

// validateServer checks what every source shares.
func (c *Config) validateServer() error {
	return errors.Join(c.Listen.Validate(), c.Stop.Validate())
}
