// Package registry maps type names to factories, for the things a service
// takes in numbers and chooses by name in its configuration (the router's
// classifiers, policyd's resource sources).
//
// The pattern it serves: a consumer owns a one-method interface and a
// Registry of factories for it; each implementation is a package of its
// own; the consumer (or the binary) registers them by name; the
// configuration names the ones to build, and the service's Validate
// refuses a name nobody registered with the list of those it knows.
// Registering happens at start (package variables, init, main): a name
// registered twice is a programming error and panics.
package registry

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Registry is a set of factories of type F by name. The zero value is not
// usable; New names what it registers, for its messages.
type Registry[F any] struct {
	kind string
	mu   sync.RWMutex
	m    map[string]F
}

// New returns an empty registry of kind (a singular noun: "classifier").
func New[F any](kind string) *Registry[F] {
	return &Registry[F]{kind: kind, m: map[string]F{}}
}

// Register makes f available under name. An empty name, or one registered
// already, panics.
func (r *Registry[F]) Register(name string, f F) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if name == "" || strings.TrimSpace(name) != name || strings.Contains(name, ",") {
		panic(fmt.Sprintf("registry: %s name %q: want a non-empty name without blanks or commas", r.kind, name))
	}
	if _, dup := r.m[name]; dup {
		panic(fmt.Sprintf("registry: %s %q registered twice", r.kind, name))
	}
	r.m[name] = f
}

// Lookup returns the factory registered under name; for an unknown name,
// an error that says which names are known.
func (r *Registry[F]) Lookup(name string) (F, error) {
	r.mu.RLock()
	f, ok := r.m[name]
	r.mu.RUnlock()
	if !ok {
		return f, fmt.Errorf("unknown %s %q: want one of %s", r.kind, name, strings.Join(r.Names(), ", "))
	}
	return f, nil
}

// Names lists the registered names, sorted.
func (r *Registry[F]) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.m))
	for n := range r.m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Entry is a registered factory with its name.
type Entry[F any] struct {
	Name string
	New  F
}

// List resolves a comma-separated list of names (blanks around a name
// ignored; an empty list means none) to their factories, in order. Every
// unknown or repeated name is reported, in one error.
func (r *Registry[F]) List(names string) ([]Entry[F], error) {
	var (
		out  []Entry[F]
		errs []string
	)
	for n := range strings.SplitSeq(names, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if slices.ContainsFunc(out, func(e Entry[F]) bool { return e.Name == n }) {
			errs = append(errs, fmt.Sprintf("%s %q listed twice", r.kind, n))
			continue
		}
		f, err := r.Lookup(n)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		out = append(out, Entry[F]{Name: n, New: f})
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "; "))
	}
	return out, nil
}
