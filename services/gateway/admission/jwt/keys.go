package jwt

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/rs/zerolog"
)

// Config is the jwt step's local configuration (gateway flags --jwt-*):
// the identity provider of a gateway without policyd, or of a
// GatewayBackend with auth.mode APIKey that names none in spec.auth.jwt.
// A GatewayBackend's spec.auth.jwt wins over them (they are then ignored,
// with a warning), and with auth.mode None they are not used. MinRefresh
// applies to every identity provider: it protects the IdP and the
// gateway, not a tenant's setting.
type Config struct {
	// Issuer is the iss every token must carry (--jwt-issuer).
	Issuer string
	// Audience must be one of a token's aud (--jwt-audience).
	Audience string
	// TenantClaim names the string claim holding the tenant
	// (--jwt-tenant-claim).
	TenantClaim string
	// JWKSFile or JWKSURL (exactly one) is where the issuer's public keys
	// are (--jwt-jwks-file, --jwt-jwks-url).
	JWKSFile, JWKSURL string
	// ClockSkew is the leeway on exp, nbf and iat (--jwt-clock-skew).
	ClockSkew time.Duration
	// Refresh is how often the JWKS is re-read (file: when changed) or
	// re-fetched (--jwt-refresh); MinRefresh bounds the early refreshes
	// an unknown kid triggers (--jwt-min-refresh).
	Refresh, MinRefresh time.Duration
}

// DefaultConfig is the flags' defaults.
func DefaultConfig() Config {
	return Config{TenantClaim: "tenant", ClockSkew: time.Minute, Refresh: 5 * time.Minute, MinRefresh: 10 * time.Second}
}

// RegisterFlags registers the --jwt-* flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	fs.StringVar(&c.Issuer, "jwt-issuer", d.Issuer, "jwt admission step: the iss every bearer JWT must carry")
	fs.StringVar(&c.Audience, "jwt-audience", d.Audience, "jwt admission step: the audience a bearer JWT's aud must contain")
	fs.StringVar(&c.TenantClaim, "jwt-tenant-claim", d.TenantClaim, "jwt admission step: the claim naming the tenant (one of the GatewayBackend's spec.tenants)")
	fs.StringVar(&c.JWKSFile, "jwt-jwks-file", d.JWKSFile, "jwt admission step: the issuer's JWKS file, re-read when it changes (or --jwt-jwks-url)")
	fs.StringVar(&c.JWKSURL, "jwt-jwks-url", d.JWKSURL, "jwt admission step: the issuer's JWKS URL, fetched every --jwt-refresh and on an unknown kid (or --jwt-jwks-file)")
	fs.DurationVar(&c.ClockSkew, "jwt-clock-skew", d.ClockSkew, "jwt admission step: leeway on exp, nbf and iat")
	fs.DurationVar(&c.Refresh, "jwt-refresh", d.Refresh, "jwt admission step: how often the JWKS is re-read (file: when changed) or re-fetched")
	fs.DurationVar(&c.MinRefresh, "jwt-min-refresh", d.MinRefresh, "jwt admission step: the least time between two refreshes an unknown kid triggers")
}

// Set reports whether any --jwt-* flag names an IdP.
func (c Config) Set() bool {
	return c.Issuer != "" || c.Audience != "" || c.JWKSFile != "" || c.JWKSURL != ""
}

// Validate checks the configuration the jwt step needs, naming flags.
func (c Config) Validate() error {
	var errs []error
	if c.Issuer == "" {
		errs = append(errs, errors.New("jwt-issuer: required by the jwt admission step"))
	}
	if c.Audience == "" {
		errs = append(errs, errors.New("jwt-audience: required by the jwt admission step"))
	}
	if c.TenantClaim == "" {
		errs = append(errs, errors.New("jwt-tenant-claim: required by the jwt admission step"))
	}
	switch {
	case (c.JWKSFile == "") == (c.JWKSURL == ""):
		errs = append(errs, errors.New("jwt-jwks-file, jwt-jwks-url: name exactly one"))
	case c.JWKSURL != "":
		if u, err := url.Parse(c.JWKSURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			errs = append(errs, fmt.Errorf("jwt-jwks-url %q: want an http(s) URL", c.JWKSURL))
		}
	}
	if c.ClockSkew < 0 || c.ClockSkew > 10*time.Minute {
		errs = append(errs, fmt.Errorf("jwt-clock-skew %s: want 0 to 10m", c.ClockSkew))
	}
	if c.Refresh <= 0 || c.MinRefresh <= 0 {
		errs = append(errs, fmt.Errorf("jwt-refresh %s, jwt-min-refresh %s: want more than 0", c.Refresh, c.MinRefresh))
	}
	return errors.Join(errs...)
}

// maxJWKSBytes bounds a JWKS read or fetched.
const maxJWKSBytes = 1 << 20

// jwksSource is where a key set comes from and how often it is re-read:
// exactly one of File and URL.
type jwksSource struct {
	File, URL           string
	Refresh, MinRefresh time.Duration
}

// keySet is an issuer's JWKS, refreshed in the background and on
// unknown kids.
type keySet struct {
	src    jwksSource
	log    zerolog.Logger
	client *http.Client
	// loaded is closed once the first load has been tried: a request
	// meeting a key set still loading waits for it rather than be
	// refused, so a GatewayBackend's new identity provider takes over
	// without a burst of 503s.
	loaded     chan struct{}
	loadedOnce sync.Once

	mu       sync.Mutex
	set      jose.JSONWebKeySet
	stamp    string    // the file's modification time and size at its last read
	lastTry  time.Time // the last refresh an unknown kid triggered
	lastTick time.Time // the last periodic refresh
	lastErr  error     // the last refresh's error, nil after a success
}

func newKeySet(src jwksSource, log zerolog.Logger) *keySet {
	return &keySet{src: src, log: log, client: &http.Client{Timeout: 5 * time.Second}, loaded: make(chan struct{}), lastTick: time.Now()}
}

// load is the first refresh; whatever its outcome, requests stop waiting.
func (k *keySet) load(ctx context.Context) error {
	defer k.loadedOnce.Do(func() { close(k.loaded) })
	return k.refresh(ctx)
}

// tick refreshes when src.Refresh has passed since the last periodic
// refresh.
func (k *keySet) tick(ctx context.Context, now time.Time) {
	k.mu.Lock()
	due := now.Sub(k.lastTick) >= k.src.Refresh
	if due {
		k.lastTick = now
	}
	k.mu.Unlock()
	if !due {
		return
	}
	if err := k.refresh(ctx); err != nil {
		k.log.Warn().Err(err).Msg("JWKS refresh failed; keeping the keys loaded before")
	}
}

// refresh re-reads the file when it changed, or fetches the URL; on
// error the keys loaded before stay.
func (k *keySet) refresh(ctx context.Context) error {
	err := k.fetch(ctx)
	k.mu.Lock()
	k.lastErr = err
	k.mu.Unlock()
	return err
}

func (k *keySet) fetch(ctx context.Context) error {
	var data []byte
	stamp := ""
	if k.src.File != "" {
		fi, err := os.Stat(k.src.File)
		if err != nil {
			return err
		}
		stamp = fmt.Sprint(fi.ModTime().UnixNano(), fi.Size())
		k.mu.Lock()
		same := stamp == k.stamp
		k.mu.Unlock()
		if same {
			return nil
		}
		f, err := os.Open(k.src.File)
		if err != nil {
			return err
		}
		data, err = io.ReadAll(io.LimitReader(f, maxJWKSBytes+1))
		_ = f.Close()
		if err != nil {
			return err
		}
	} else {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.src.URL, nil)
		if err != nil {
			return err
		}
		resp, err := k.client.Do(req)
		if err != nil {
			return err
		}
		data, err = io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
		_ = resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("JWKS %s: HTTP %d", k.src.URL, resp.StatusCode)
		}
	}
	set, err := parseJWKS(data)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.set, k.stamp = set, stamp
	k.mu.Unlock()
	return nil
}

// parseJWKS decodes a JWKS and keeps its public signing keys.
func parseJWKS(data []byte) (jose.JSONWebKeySet, error) {
	if len(data) > maxJWKSBytes {
		return jose.JSONWebKeySet{}, fmt.Errorf("JWKS larger than %d bytes", maxJWKSBytes)
	}
	var raw jose.JSONWebKeySet
	if err := json.Unmarshal(data, &raw); err != nil {
		return raw, fmt.Errorf("JWKS: %w", err)
	}
	var set jose.JSONWebKeySet
	for _, key := range raw.Keys {
		if key.IsPublic() && key.Valid() && (key.Use == "" || key.Use == "sig") {
			set.Keys = append(set.Keys, key)
		}
	}
	if len(set.Keys) == 0 {
		return set, errors.New("JWKS has no public signing key")
	}
	return set, nil
}

// key returns the public key of kid, and whether it may verify alg; an
// unknown kid triggers one refresh, at most once per src.MinRefresh. A
// key set whose first load is under way is waited for (within ctx).
func (k *keySet) key(ctx context.Context, kid, alg string) (key any, algOK, found bool) {
	select {
	case <-k.loaded:
	default:
		select {
		case <-k.loaded:
		case <-ctx.Done():
			return nil, false, false
		}
	}
	if key, algOK, found = k.lookup(kid, alg); found {
		return key, algOK, true
	}
	k.mu.Lock()
	due := time.Since(k.lastTry) >= k.src.MinRefresh
	if due {
		k.lastTry = time.Now()
	}
	k.mu.Unlock()
	if !due {
		return nil, false, false
	}
	if err := k.refresh(ctx); err != nil {
		k.log.Warn().Err(err).Msg("JWKS refresh on an unknown kid failed")
		return nil, false, false
	}
	return k.lookup(kid, alg)
}

// lookup finds kid; a key whose JWK names another algorithm, or whose
// type cannot verify alg, is found but not fit.
func (k *keySet) lookup(kid, alg string) (key any, algOK, found bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, jk := range k.set.Keys {
		if jk.KeyID != kid {
			continue
		}
		if jk.Algorithm != "" && jk.Algorithm != alg {
			return nil, false, true
		}
		return jk.Key, true, true
	}
	return nil, false, false
}

func (k *keySet) empty() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.set.Keys) == 0
}

// state is an error when the key set has no key (not loaded yet, or every
// load failed), for readiness.
func (k *keySet) state() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.set.Keys) > 0 {
		return nil
	}
	if k.lastErr != nil {
		return k.lastErr
	}
	return errors.New("not loaded yet")
}
