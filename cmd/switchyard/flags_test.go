package main

import (
	"flag"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/flaghelp"
)

// commandFlags is the FlagSet `switchyard name` runs with.
func commandFlags(t *testing.T, name string) *flag.FlagSet {
	t.Helper()
	for _, c := range commands(io.Discard) {
		if c.name == name {
			fs, _, _, _ := c.flags(io.Discard)
			return fs
		}
	}
	t.Fatalf("no command %q", name)
	return nil
}

// TestHelpStatesDefaultsOnce fails when a usage string mentions a default
// that `-h` prints anyway, "(default X)", after it. Some defaults depend on
// where and how switchyard runs, so it runs as a newcomer's `switchyard dev`
// would: from the repository root (dev's --policies is deploy/examples) with
// $REDIS_URL set (dev's --redis-url).
func TestHelpStatesDefaultsOnce(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	t.Setenv("REDIS_URL", "redis://127.0.0.1:6379")
	for _, c := range commands(io.Discard) {
		for _, bad := range flaghelp.RepeatedDefaults(commandFlags(t, c.name)) {
			t.Errorf("switchyard %s %s\n\tsays default twice: drop it from the usage string, the flag package prints it", c.name, bad)
		}
	}
}

// listenFlags are the flags that take a listen address (or host), per
// command; dialFlags name servers to connect to.
var (
	listenFlags = map[string][]string{
		"dev":       {"gateway-addr", "gateway-metrics-addr", "router-grpc-addr", "router-http-addr", "kvtracker-http-addr", "meter-http-addr", "policyd-grpc-addr", "policyd-http-addr"},
		"sim":       {"host"},
		"gateway":   {"addr", "metrics-addr"},
		"router":    {"grpc-addr", "http-addr"},
		"kvtracker": {"http-addr"},
		"meter":     {"http-addr"},
		"policyd":   {"grpc-addr", "http-addr"},
	}
	dialFlags = []string{"router-addr", "policyd-addr"}
)

// public are the listen flags whose default is every interface: the
// gateway's port is what clients connect to.
var public = map[string]bool{"gateway addr": true}

func host(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr // sim's --host
}

// TestListenDefaults: a service started by hand listens on loopback, as
// `switchyard dev` does, except the gateway's public port. The deploy
// manifests pass every interface (TestManifestsListenEverywhere).
func TestListenDefaults(t *testing.T) {
	for _, c := range commands(io.Discard) {
		fs := commandFlags(t, c.name)
		fs.VisitAll(func(f *flag.Flag) {
			if f.Name != "host" && f.Name != "addr" && !strings.HasSuffix(f.Name, "-addr") || slices.Contains(dialFlags, f.Name) {
				return
			}
			if !slices.Contains(listenFlags[c.name], f.Name) {
				t.Errorf("switchyard %s --%s: add it to listenFlags or dialFlags", c.name, f.Name)
				return
			}
			h := host(f.DefValue)
			switch ip := net.ParseIP(h); {
			case public[c.name+" "+f.Name]:
				if h != "" {
					t.Errorf("switchyard %s --%s defaults to %q, want every interface", c.name, f.Name, f.DefValue)
				}
			case ip == nil || !ip.IsLoopback():
				t.Errorf("switchyard %s --%s defaults to %q, want loopback", c.name, f.Name, f.DefValue)
			}
		})
	}
}
