// Package endpoints describes the workers the router may route to and reads
// them from static configuration: the --endpoints shorthand and the YAML file
// given by --endpoints-file. A later source (policyd's InferenceWorkerSets)
// will produce the same Spec values.
package endpoints

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Endpoint kinds. Static configuration knows only KindLocal (a vLLM worker
// inside the cluster); KindProvider endpoints come from policyd's
// InferenceProviders and are never scraped.
const (
	KindLocal    = "local"
	KindProvider = "provider"
)

// Spec is one configured endpoint.
type Spec struct {
	// ID is stable and unique, e.g. "sim-0"; it appears in metrics labels,
	// NATS payloads and retry exclusions.
	ID string `json:"id"`
	// URL is the worker's base URL without a trailing slash; /metrics and
	// /v1/models are appended to it.
	URL string `json:"url"`
	// Models the endpoint serves. Empty means: discover them from the
	// worker's /v1/models.
	Models []string `json:"models,omitempty"`
	// Group is the InferenceWorkerSet or InferenceProvider the endpoint
	// belongs to, and Pool its InferencePool; set by policyd's catalog,
	// empty for static configuration.
	Group string `json:"-"`
	Pool  string `json:"-"`
	// Kind is "local" (the default when empty) or "provider".
	Kind string `json:"kind,omitempty"`
}

// ParseShorthand reads the --endpoints flag: comma-separated id=url pairs,
// e.g. "sim-0=http://127.0.0.1:8001,sim-1=http://127.0.0.1:8002". Blank
// entries are ignored so a trailing comma is harmless. Models are always
// discovered from /v1/models for shorthand endpoints.
func ParseShorthand(s string) ([]Spec, error) {
	var specs []Spec
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, u, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("endpoint %d %q: want id=url", i+1, part)
		}
		spec := Spec{ID: strings.TrimSpace(id), URL: strings.TrimSpace(u), Kind: KindLocal}
		norm, err := normalize(spec)
		if err != nil {
			return nil, fmt.Errorf("endpoint %d: %w", i+1, err)
		}
		specs = append(specs, norm)
	}
	if err := checkUnique(specs); err != nil {
		return nil, err
	}
	return specs, nil
}

// ParseFile reads the YAML endpoints file: a list of {id, url, models, kind}.
// Unknown fields are errors, so a misspelt key is not silently ignored.
func ParseFile(data []byte) ([]Spec, error) {
	var raw []Spec
	if err := yaml.UnmarshalStrict(data, &raw); err != nil {
		return nil, fmt.Errorf("parse endpoints yaml: %w", err)
	}
	specs := make([]Spec, 0, len(raw))
	for i, r := range raw {
		norm, err := normalize(r)
		if err != nil {
			return nil, fmt.Errorf("endpoint %d: %w", i+1, err)
		}
		specs = append(specs, norm)
	}
	if err := checkUnique(specs); err != nil {
		return nil, err
	}
	return specs, nil
}

// Merge concatenates endpoint lists and rejects duplicate ids across them.
func Merge(lists ...[]Spec) ([]Spec, error) {
	var all []Spec
	for _, l := range lists {
		all = append(all, l...)
	}
	if err := checkUnique(all); err != nil {
		return nil, err
	}
	return all, nil
}

func checkUnique(specs []Spec) error {
	seen := make(map[string]struct{}, len(specs))
	for _, s := range specs {
		if _, dup := seen[s.ID]; dup {
			return fmt.Errorf("duplicate endpoint id %q", s.ID)
		}
		seen[s.ID] = struct{}{}
	}
	return nil
}

// normalize validates one spec and returns it in canonical form: URL without
// a trailing slash, kind set, models without duplicates.
func normalize(s Spec) (Spec, error) {
	if err := ValidateID(s.ID); err != nil {
		return s, err
	}
	u, err := normalizeURL(s.URL)
	if err != nil {
		return s, fmt.Errorf("endpoint %q: %w", s.ID, err)
	}
	s.URL = u
	switch s.Kind {
	case "":
		s.Kind = KindLocal
	case KindLocal:
	default:
		return s, fmt.Errorf("endpoint %q: kind %q: want %q", s.ID, s.Kind, KindLocal)
	}
	if len(s.Models) > 0 {
		models := make([]string, 0, len(s.Models))
		for _, m := range s.Models {
			if strings.TrimSpace(m) == "" {
				return s, fmt.Errorf("endpoint %q: empty model name", s.ID)
			}
			if slices.Contains(models, m) {
				return s, fmt.Errorf("endpoint %q: model %q listed twice", s.ID, m)
			}
			models = append(models, m)
		}
		s.Models = models
	} else {
		s.Models = nil
	}
	return s, nil
}

// ValidateID accepts ids made of letters, digits and . _ - / :, so an id is
// safe as a metrics label, in logs and inside the shorthand syntax.
func ValidateID(id string) error {
	if id == "" {
		return errors.New("endpoint id is empty")
	}
	if len(id) > 128 {
		return fmt.Errorf("endpoint id %.20q...: longer than 128 bytes", id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '_', c == '-', c == '/', c == ':':
		default:
			return fmt.Errorf("endpoint id %q: character %q not allowed (letters, digits and . _ - / : only)", id, c)
		}
	}
	return nil
}

func normalizeURL(raw string) (string, error) {
	if raw == "" {
		return "", errors.New("url is empty")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("url %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("url %q: scheme must be http or https", raw)
	}
	if u.Host == "" || u.Hostname() == "" {
		return "", fmt.Errorf("url %q: no host", raw)
	}
	if u.User != nil {
		// Credentials would leak into logs, metrics and Explain output.
		return "", fmt.Errorf("url %q: credentials in the url are not allowed", u.Redacted())
	}
	if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return "", fmt.Errorf("url %q: query and fragment are not allowed in a base url", raw)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// Static is an endpoint source whose set never changes.
type Static []Spec

// Watch reports the set once and then waits for ctx to end, the contract a
// dynamic source (policyd) will also follow: update is called with the full
// set each time it changes.
func (s Static) Watch(ctx context.Context, update func([]Spec)) error {
	update(slices.Clone(s))
	<-ctx.Done()
	return nil
}
