package flaghelp

import (
	"flag"
	"slices"
	"strings"
	"testing"
	"time"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func TestRepeatedDefaults(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("replica-id", "vm", "this replica's id (default: hostname)")
	fs.String("gateway-backend", "", "GatewayBackend to serve (default: the only one)")
	fs.String("redis-url", "redis://r", "Redis URL for snapshots")
	fs.Bool("details", true, "report cached tokens (vLLM's default is false)")
	fs.Bool("strict", false, "treat warnings as errors, not the default")
	fs.Int("workers", 0, "workers (default: one per GPU)")
	fs.Duration("ttl", time.Second, "how long (DEFAULT one second)")
	fs.Var(&listFlag{"a"}, "path", "paths (defaults to a)")
	fs.String("steps", "default-tenant", "steps, known: default-tenant, api-keys")
	fs.Var(new(listFlag), "f", "files (default: none)")
	if err := fs.Parse([]string{"--replica-id=other"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range RepeatedDefaults(fs) {
		name, _, _ := strings.Cut(b, ":")
		got = append(got, name)
	}
	// Sorted, as VisitAll visits; a flag set on the command line is judged
	// by its registered default.
	want := []string{"--details", "--path", "--replica-id", "--ttl"}
	if !slices.Equal(got, want) {
		t.Fatalf("RepeatedDefaults = %q, want %q", got, want)
	}
}
