package fleet

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Limits of the fields a worker carries.
const (
	maxNameLen   = 128
	maxTopicLen  = 256
	maxBlockSize = 1 << 16
)

// ValidateID checks a worker (or provider endpoint) id against the id
// rule: 1-128 bytes of letters, digits and . _ - / :, so it is safe as a
// metric label, a NATS subject token, a lease key (escaped), a Redis key
// part and inside the shorthand syntax.
func ValidateID(id string) error { return validName(id, true) }

// ValidatePool checks a pool name: the id rule without ':', which
// separates pool and id in Redis keys.
func ValidatePool(pool string) error { return validName(pool, false) }

func validName(s string, colon bool) error {
	if s == "" {
		return errors.New("empty")
	}
	if len(s) > maxNameLen {
		return fmt.Errorf("%.20q...: longer than %d bytes", s, maxNameLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '_', c == '-', c == '/':
		case c == ':' && colon:
		default:
			allowed := ". _ - / :"
			if !colon {
				allowed = ". _ - /"
			}
			return fmt.Errorf("%q: character %q not allowed (letters, digits and %s only)", s, c, allowed)
		}
	}
	return nil
}

// ErrURLCredentials is wrapped by CheckURL's error for a URL carrying a
// user or password.
var ErrURLCredentials = errors.New("credentials in the url are not allowed")

// CheckURL checks a worker's or provider's base URL and returns it in
// canonical form, without a trailing slash: http or https, a host, no
// credentials (they would leak into logs, metrics and Explain output), no
// query or fragment (paths are appended to it).
func CheckURL(raw string) (string, error) {
	if raw == "" {
		return "", errors.New("empty")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%q: %w", raw, errors.Unwrap(err))
	}
	if u.User != nil {
		return "", fmt.Errorf("%q: %w", u.Redacted(), ErrURLCredentials)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%q: scheme must be http or https", raw)
	}
	if u.Host == "" || u.Hostname() == "" {
		return "", fmt.Errorf("%q: no host", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return "", fmt.Errorf("%q: query and fragment are not allowed in a base url", raw)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// CheckDialEndpoint checks an endpoint a ZMQ socket can connect to:
// tcp://host:port with a numeric port, ipc://path or inproc://name.
func CheckDialEndpoint(ep string) error {
	scheme, rest, ok := strings.Cut(ep, "://")
	if !ok || rest == "" {
		return fmt.Errorf("%q: want tcp://host:port, ipc://path or inproc://name", ep)
	}
	switch scheme {
	case "tcp":
		i := strings.LastIndexByte(rest, ':')
		if i <= 0 {
			return fmt.Errorf("%q: want tcp://host:port", ep)
		}
		host := rest[:i]
		if strings.Contains(host, "*") {
			return fmt.Errorf("%q: host %q cannot be dialled (a worker binds the wildcard; give the address to dial it at)", ep, host)
		}
		if strings.ContainsAny(host, " \t/") {
			return fmt.Errorf("%q: host %q cannot be dialled", ep, host)
		}
		if p, err := strconv.ParseUint(rest[i+1:], 10, 16); err != nil || p == 0 {
			return fmt.Errorf("%q: port %q: want 1-65535", ep, rest[i+1:])
		}
	case "ipc", "inproc":
	default:
		return fmt.Errorf("%q: unsupported transport %q (tcp, ipc or inproc)", ep, scheme)
	}
	return nil
}

// FieldError is a problem with one field of an entry; Path names it as
// the YAML does ("[2].kvEndpoint", "models[0]").
type FieldError struct {
	Path string
	Err  error
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

func fieldErr(path string, err error) error { return &FieldError{Path: path, Err: err} }

// at puts err under prefix: under a YAML position ("[2]") a field error's
// path grows ("[2].kvEndpoint"); under anything else ("entry 2", "worker
// \"a\"") err is prefixed.
func at(prefix string, err error) error {
	if fe, ok := err.(*FieldError); ok && strings.HasPrefix(prefix, "[") {
		return &FieldError{Path: prefix + "." + fe.Path, Err: fe.Err}
	}
	return fmt.Errorf("%s: %w", prefix, err)
}

// normalize checks one worker and returns it in canonical form: defaults
// filled, URL without a trailing slash, models without repeats.
func normalize(w Worker) (Worker, error) {
	if err := ValidateID(w.ID); err != nil {
		return w, fieldErr("id", err)
	}
	if w.Pool == "" {
		w.Pool = DefaultPool
	}
	if err := ValidatePool(w.Pool); err != nil {
		return w, fieldErr("pool", err)
	}
	if len(w.Models) == 0 {
		w.Models = nil
	}
	if err := checkModels(w.Models); err != nil {
		return w, err
	}
	if w.URL != "" {
		u, err := CheckURL(w.URL)
		if err != nil {
			return w, fieldErr("url", err)
		}
		w.URL = u
	}
	if w.MetricsPath == "" {
		w.MetricsPath = DefaultMetricsPath
	}
	if !strings.HasPrefix(w.MetricsPath, "/") || strings.ContainsAny(w.MetricsPath, "?# \t") {
		return w, fieldErr("metricsPath", fmt.Errorf("%q: want a path starting with /", w.MetricsPath))
	}
	if w.KVEndpoint != "" {
		if err := CheckDialEndpoint(w.KVEndpoint); err != nil {
			return w, fieldErr("kvEndpoint", err)
		}
	}
	if w.ReplayEndpoint != "" {
		if err := CheckDialEndpoint(w.ReplayEndpoint); err != nil {
			return w, fieldErr("replayEndpoint", err)
		}
	}
	if len(w.Topic) > maxTopicLen {
		return w, fieldErr("topic", fmt.Errorf("longer than %d bytes", maxTopicLen))
	}
	if w.BlockSize == 0 {
		w.BlockSize = DefaultBlockSize
	}
	if w.BlockSize < 1 || w.BlockSize > maxBlockSize {
		return w, fieldErr("blockSize", fmt.Errorf("%d: want 1-%d", w.BlockSize, maxBlockSize))
	}
	if w.GPUBlocks < 0 {
		return w, fieldErr("gpuBlocks", fmt.Errorf("%d: must not be negative", w.GPUBlocks))
	}
	if w.URL == "" && w.KVEndpoint == "" && w.Topic == "" {
		return w, fmt.Errorf("worker %q: nothing to reach it by: give a url (http://...), a kvEndpoint (tcp://...), or a topic for a worker that connects to a kvtracker's --bind", w.ID)
	}
	return w, nil
}

// normalizeProvider checks one provider and returns it in canonical form.
func normalizeProvider(p Provider) (Provider, error) {
	if err := ValidateID(p.ID()); err != nil {
		return p, fieldErr("name", err)
	}
	u, err := CheckURL(p.BaseURL)
	if err != nil {
		return p, fieldErr("baseURL", err)
	}
	p.BaseURL = u
	if err := checkModels(p.Models); err != nil {
		return p, err
	}
	return p, nil
}

// checkModels accepts model names of 1-256 bytes without surrounding
// space, each listed once.
func checkModels(models []string) error {
	seen := make(map[string]bool, len(models))
	for i, m := range models {
		switch {
		case strings.TrimSpace(m) == "" || m != strings.TrimSpace(m) || len(m) > 256:
			return fieldErr("models["+strconv.Itoa(i)+"]", fmt.Errorf("%q: want a model name (1-256 bytes, no surrounding space)", m))
		case seen[m]:
			return fieldErr("models["+strconv.Itoa(i)+"]", fmt.Errorf("%q listed twice", m))
		}
		seen[m] = true
	}
	return nil
}

// index enforces the uniqueness half of the id rule over a growing set.
type index struct {
	// ids maps every worker and provider id to the label of its holder.
	ids map[string]string
	// subjects maps a worker's pool and id as NATS subjects see them
	// ('.' folded into '_') to its label.
	subjects map[string]string
}

func newIndex() *index { return &index{ids: map[string]string{}, subjects: map[string]string{}} }

// subjectKey is what bus.KVDeltaSubject makes of pool and id: of the
// characters the id rule allows, only '.' changes (into '_').
func subjectKey(pool, id string) string {
	return strings.ReplaceAll(pool, ".", "_") + "\x00" + strings.ReplaceAll(id, ".", "_")
}

func (x *index) addWorker(w *Worker, label string) error {
	if prev, dup := x.ids[w.ID]; dup {
		return fmt.Errorf("%s: duplicate id %q (also %s)", label, w.ID, prev)
	}
	k := subjectKey(w.Pool, w.ID)
	if prev, dup := x.subjects[k]; dup {
		return fmt.Errorf("%s: id %q collides with %s in pool %q (NATS subjects take '.' as '_')", label, w.ID, prev, w.Pool)
	}
	x.ids[w.ID] = label
	x.subjects[k] = label
	return nil
}

func (x *index) addProvider(p *Provider, label string) error {
	id := p.ID()
	if prev, dup := x.ids[id]; dup {
		return fmt.Errorf("%s: duplicate id %q (also %s)", label, id, prev)
	}
	x.ids[id] = label
	return nil
}

func workerLabel(w *Worker) string {
	if w.Group != "" {
		return fmt.Sprintf("worker %q of %s", w.ID, w.Group)
	}
	return fmt.Sprintf("worker %q", w.ID)
}

func providerLabel(p *Provider) string { return fmt.Sprintf("provider %q", p.Name) }

// NewCatalog checks workers and providers together and returns them in
// canonical form; the error names the first entry that breaks the rules.
func NewCatalog(workers []Worker, providers []Provider) (Catalog, error) {
	c := Catalog{Workers: make([]Worker, 0, len(workers)), Providers: make([]Provider, 0, len(providers))}
	x := newIndex()
	for _, w := range workers {
		n, err := normalize(w)
		if err != nil {
			return Catalog{}, at(workerLabel(&w), err)
		}
		if err := x.addWorker(&n, workerLabel(&n)); err != nil {
			return Catalog{}, err
		}
		c.Workers = append(c.Workers, n)
	}
	for _, p := range providers {
		n, err := normalizeProvider(p)
		if err != nil {
			return Catalog{}, at(providerLabel(&p), err)
		}
		if err := x.addProvider(&n, providerLabel(&n)); err != nil {
			return Catalog{}, err
		}
		c.Providers = append(c.Providers, n)
	}
	return c, nil
}

// Join is base followed by the entries of more that keep the rules:
// an entry of more that is invalid, or whose id base (or an earlier entry
// of more) already holds, is left out, and the reason returned. base must
// be a checked catalog (NewCatalog's); it wins, as flags win over policyd.
func Join(base, more Catalog) (Catalog, []error) {
	out := base.Clone()
	x := newIndex()
	for i := range out.Workers {
		w := &out.Workers[i]
		_ = x.addWorker(w, workerLabel(w))
	}
	for i := range out.Providers {
		p := &out.Providers[i]
		_ = x.addProvider(p, providerLabel(p))
	}
	var dropped []error
	for _, w := range more.Workers {
		n, err := normalize(w)
		if err == nil {
			err = x.addWorker(&n, workerLabel(&n))
		} else {
			err = at(workerLabel(&w), err)
		}
		if err != nil {
			dropped = append(dropped, err)
			continue
		}
		out.Workers = append(out.Workers, n)
	}
	for _, p := range more.Providers {
		n, err := normalizeProvider(p)
		if err == nil {
			err = x.addProvider(&n, providerLabel(&n))
		} else {
			err = at(providerLabel(&p), err)
		}
		if err != nil {
			dropped = append(dropped, err)
			continue
		}
		out.Providers = append(out.Providers, n)
	}
	return out, dropped
}
