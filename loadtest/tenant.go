package main

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/switchyard-dev/switchyard/loadtest/internal/workload"
)

// tenantSyntax is the --tenant syntax, for help and errors.
const tenantSyntax = "NAME:key-env=ENV[:concurrency=N][:rate=R][:priority=critical|standard|sheddable][:workload=W]"

// Priority classes a tenant's requests can carry (x-switchyard-priority).
var priorities = []string{"critical", "standard", "sheddable"}

var (
	tenantName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	envName    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

// maxTenantConcurrency bounds one tenant's clients: more would be a typo,
// and each is a goroutine and a connection.
const maxTenantConcurrency = 100_000

// tenantSpec is one --tenant flag: a client population of `loadtest run`
// with its own API key, load and prompts.
type tenantSpec struct {
	name string
	// keyEnv names the environment variable holding its API key.
	keyEnv string
	// concurrency is its clients (--mode concurrent) or its bound on
	// sessions in flight (constant, poisson; 0: the default bound).
	concurrency int
	// rate is its sessions per model second (--mode constant, poisson).
	rate float64
	// priority is sent as x-switchyard-priority; empty sends none.
	priority string
	// workload replaces --workload for this tenant; empty keeps it.
	workload workload.Kind
}

// parseTenant parses NAME:key=value:…, strictly: every error names the
// part at fault.
func parseTenant(s string) (tenantSpec, error) {
	parts := strings.Split(s, ":")
	t := tenantSpec{name: parts[0]}
	if !tenantName.MatchString(t.name) {
		return tenantSpec{}, fmt.Errorf("name %q: want 1 to 64 letters, digits, '-', '_' or '.', starting with a letter or digit (syntax %s)", t.name, tenantSyntax)
	}
	seen := map[string]bool{}
	for _, part := range parts[1:] {
		key, val, ok := strings.Cut(part, "=")
		if !ok {
			return tenantSpec{}, fmt.Errorf("part %q: want key=value (syntax %s)", part, tenantSyntax)
		}
		if seen[key] {
			return tenantSpec{}, fmt.Errorf("part %q: %s given twice", part, key)
		}
		seen[key] = true
		if val == "" {
			return tenantSpec{}, fmt.Errorf("part %q: empty value", part)
		}
		switch key {
		case "key-env":
			if !envName.MatchString(val) {
				return tenantSpec{}, fmt.Errorf("part %q: not an environment variable name", part)
			}
			t.keyEnv = val
		case "concurrency":
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 || n > maxTenantConcurrency {
				return tenantSpec{}, fmt.Errorf("part %q: want a whole number from 1 to %d", part, maxTenantConcurrency)
			}
			t.concurrency = n
		case "rate":
			r, err := strconv.ParseFloat(val, 64)
			if err != nil || !(r > 0) || math.IsInf(r, 0) {
				return tenantSpec{}, fmt.Errorf("part %q: want a positive number of sessions per second", part)
			}
			t.rate = r
		case "priority":
			if !slices.Contains(priorities, val) {
				return tenantSpec{}, fmt.Errorf("part %q: want critical, standard or sheddable", part)
			}
			t.priority = val
		case "workload":
			k, err := workload.ParseKind(val)
			if err != nil {
				return tenantSpec{}, fmt.Errorf("part %q: %w", part, err)
			}
			t.workload = k
		default:
			return tenantSpec{}, fmt.Errorf("part %q: unknown key %q (want key-env, concurrency, rate, priority or workload)", part, key)
		}
	}
	if t.keyEnv == "" {
		return tenantSpec{}, fmt.Errorf("no key-env=ENV: every tenant sends its own API key (syntax %s)", tenantSyntax)
	}
	return t, nil
}

// String is the flag that parses back to t.
func (t tenantSpec) String() string {
	var b strings.Builder
	b.WriteString(t.name + ":key-env=" + t.keyEnv)
	if t.concurrency > 0 {
		fmt.Fprintf(&b, ":concurrency=%d", t.concurrency)
	}
	if t.rate > 0 {
		b.WriteString(":rate=" + strconv.FormatFloat(t.rate, 'g', -1, 64))
	}
	if t.priority != "" {
		b.WriteString(":priority=" + t.priority)
	}
	if t.workload != "" {
		b.WriteString(":workload=" + string(t.workload))
	}
	return b.String()
}

// seed is the seed of the tenant's prompts: the run's seed mixed with its
// name, so that two tenants never draw the same text and so never share a
// cached prefix by accident, while the same flags give the same prompts.
func (t tenantSpec) seed(base uint64) uint64 {
	h := fnv.New64a()
	h.Write([]byte(t.name))
	return base ^ h.Sum64()
}

// validateTenants checks the tenants against the run: the load each
// needs in the run's mode, distinct names and seeds, and that every API
// key is set (lookup reads the environment).
func validateTenants(ts []tenantSpec, mode string, baseSeed uint64, lookup func(string) (string, bool)) error {
	var errs []error
	names := map[string]bool{}
	seeds := map[uint64]string{}
	for _, t := range ts {
		bad := func(format string, a ...any) {
			errs = append(errs, fmt.Errorf("tenant %s: "+format, append([]any{t.name}, a...)...))
		}
		if names[t.name] {
			bad("named twice")
		}
		names[t.name] = true
		if other, ok := seeds[t.seed(baseSeed)]; ok && other != t.name {
			bad("its prompts' seed equals tenant %s's: rename one", other)
		}
		seeds[t.seed(baseSeed)] = t.name
		switch mode {
		case "concurrent":
			if t.concurrency == 0 {
				bad("needs concurrency=N in --mode concurrent")
			}
			if t.rate > 0 {
				bad("rate=%g is for --mode poisson (this run is concurrent)", t.rate)
			}
		case "poisson", "constant":
			if t.rate == 0 {
				bad("needs rate=R in --mode %s", mode)
			}
		}
		if v, ok := lookup(t.keyEnv); !ok {
			bad("environment variable %s (key-env) is not set", t.keyEnv)
		} else if strings.TrimSpace(v) == "" {
			bad("environment variable %s (key-env) is empty", t.keyEnv)
		}
	}
	return errors.Join(errs...)
}

// tenantFlag is the repeatable --tenant flag.
type tenantFlag []tenantSpec

func (f *tenantFlag) String() string {
	if f == nil {
		return ""
	}
	s := make([]string, len(*f))
	for i, t := range *f {
		s[i] = t.String()
	}
	return strings.Join(s, " ")
}

func (f *tenantFlag) Set(s string) error {
	t, err := parseTenant(s)
	if err != nil {
		return err
	}
	*f = append(*f, t)
	return nil
}
