package ratelimit

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Config is the gateway's rate-limit configuration (its --ratelimit-*
// flags). The limits apply when the admission chain names the ratelimit
// step; Redis is the gateway's --redis-url.
type Config struct {
	// LimitsFile is a YAML (or JSON) file of limits keyed by tenant name
	// (ParseLimitsFile): for the tenant "default" (no authentication) and
	// tenants whose GatewayBackend entry sets no limits (an entry's limits,
	// from policyd, take precedence). A tenant limited by neither is not
	// limited.
	LimitsFile string
	// RedisDown is what the gateway does while Redis is unreachable: open
	// admits each replica's share of every limit (limit / Replicas,
	// counted in memory), closed refuses with 503.
	RedisDown DownMode
	// Replicas is how many gateway replicas share the limits, dividing
	// them while Redis is unreachable and the limiter is open.
	Replicas int
	// DefaultMaxTokens is the output tokens reserved for a request that
	// sets neither max_tokens nor max_completion_tokens; corrected with
	// the real count when it completes.
	DefaultMaxTokens int64
	// RedisTimeout bounds each Redis call; past it the decision is taken
	// as if Redis were unreachable.
	RedisTimeout time.Duration
}

// DefaultConfig is what the flags default to.
func DefaultConfig() Config {
	return Config{RedisDown: DownOpen, Replicas: 1, DefaultMaxTokens: 4096, RedisTimeout: defaultCallTimeout}
}

// RegisterFlags registers the --ratelimit-* flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	fs.StringVar(&c.LimitsFile, "ratelimit-limits-file", d.LimitsFile, "YAML file of per-tenant limits (tenants: {name: {requestsPerMinute, inputTokensPerMinute, outputTokensPerMinute, tokensPerDay, tokensPerMonth, models: {model: {...}}}}) for tenants whose GatewayBackend entry sets none (e.g. default); used by the ratelimit admission step")
	fs.Func("ratelimit-redis-down", "while Redis is unreachable: open (each replica admits limit / --ratelimit-replicas) or closed (refuse with 503) (default open)", func(s string) error {
		c.RedisDown = DownMode(s)
		return nil
	})
	c.RedisDown = d.RedisDown
	fs.IntVar(&c.Replicas, "ratelimit-replicas", d.Replicas, "gateway replicas sharing the limits: each admits limit / replicas while Redis is unreachable (--ratelimit-redis-down=open)")
	fs.Int64Var(&c.DefaultMaxTokens, "ratelimit-default-max-tokens", d.DefaultMaxTokens, "output tokens reserved for a request without max_tokens/max_completion_tokens (corrected with the real count at completion)")
	fs.DurationVar(&c.RedisTimeout, "ratelimit-redis-timeout", d.RedisTimeout, "bound on each rate-limit Redis call; past it Redis counts as unreachable")
}

// Validate reports every invalid field, by flag.
func (c *Config) Validate() error {
	var errs []error
	if c.RedisDown != DownOpen && c.RedisDown != DownClosed {
		errs = append(errs, fmt.Errorf("ratelimit-redis-down %q: want open or closed", c.RedisDown))
	}
	if c.Replicas < 1 || c.Replicas > 1000 {
		errs = append(errs, fmt.Errorf("ratelimit-replicas %d: want 1 to 1000", c.Replicas))
	}
	if c.DefaultMaxTokens < 1 || c.DefaultMaxTokens > 10_000_000 {
		errs = append(errs, fmt.Errorf("ratelimit-default-max-tokens %d: want 1 to 10000000", c.DefaultMaxTokens))
	}
	if c.RedisTimeout <= 0 || c.RedisTimeout > 10*time.Second {
		errs = append(errs, fmt.Errorf("ratelimit-redis-timeout %s: want more than 0, at most 10s", c.RedisTimeout))
	}
	return errors.Join(errs...)
}

// LimitsFile is the --ratelimit-limits-file document.
type LimitsFile struct {
	Tenants map[string]TenantLimits `json:"tenants"`
}

// Bounds on a limits file: hostile or mistaken files fail with a clear
// error instead of a huge allocation.
const (
	MaxLimitsFileBytes = 1 << 20
	MaxTenants         = 10_000
	MaxModelsPerTenant = 256
	maxModelLen        = 256
)

// tenantName is the GatewayBackend's rule for tenant names.
var tenantName = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`)

// ParseLimitsFile reads a limits document: unknown fields are errors, and
// every invalid limit is reported with its path
// (tenants.team-a.models.llama.requestsPerMinute).
func ParseLimitsFile(data []byte) (map[string]TenantLimits, error) {
	if len(data) > MaxLimitsFileBytes {
		return nil, fmt.Errorf("limits file: %d bytes, at most %d", len(data), MaxLimitsFileBytes)
	}
	var f LimitsFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("limits file: %w", err)
	}
	if len(f.Tenants) > MaxTenants {
		return nil, fmt.Errorf("limits file: tenants: %d, at most %d", len(f.Tenants), MaxTenants)
	}
	names := make([]string, 0, len(f.Tenants))
	for n := range f.Tenants {
		names = append(names, n)
	}
	sort.Strings(names)
	var errs []error
	for _, n := range names {
		t := f.Tenants[n]
		path := "tenants." + n
		if !tenantName.MatchString(n) {
			errs = append(errs, fmt.Errorf("%s: tenant name %q: want 1-63 lowercase letters, digits, '.', '_' and '-', starting and ending with a letter or digit", path, n))
		}
		errs = append(errs, t.Limits.Validate(path))
		if len(t.Models) > MaxModelsPerTenant {
			errs = append(errs, fmt.Errorf("%s.models: %d, at most %d", path, len(t.Models), MaxModelsPerTenant))
			continue
		}
		models := make([]string, 0, len(t.Models))
		for m := range t.Models {
			models = append(models, m)
		}
		sort.Strings(models)
		for _, m := range models {
			mpath := path + ".models." + m
			if m == "" || len(m) > maxModelLen || strings.ContainsAny(m, "{}\x00") {
				errs = append(errs, fmt.Errorf("%s: model name %q: want 1 to %d bytes, no braces", path+".models", m, maxModelLen))
			}
			errs = append(errs, t.Models[m].Validate(mpath))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("limits file: %w", err)
	}
	if f.Tenants == nil {
		f.Tenants = map[string]TenantLimits{}
	}
	return f.Tenants, nil
}

// LoadLimitsFile reads and parses path; an empty path is no limits.
func LoadLimitsFile(path string) (map[string]TenantLimits, error) {
	if path == "" {
		return map[string]TenantLimits{}, nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("ratelimit-limits-file: %w", err)
	}
	if st.Size() > MaxLimitsFileBytes {
		return nil, fmt.Errorf("ratelimit-limits-file %s: %d bytes, at most %d", path, st.Size(), MaxLimitsFileBytes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ratelimit-limits-file: %w", err)
	}
	t, err := ParseLimitsFile(data)
	if err != nil {
		return nil, fmt.Errorf("ratelimit-limits-file %s: %w", path, err)
	}
	return t, nil
}
