package main

import (
	"errors"
	"flag"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/switchyard-dev/switchyard/internal/flagenv"
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

// container is what the test reads of a Deployment's or StatefulSet's
// containers.
type container struct {
	Name  string
	Image string
	Args  []string
	Env   []struct {
		Name      string
		Value     string
		ValueFrom any `yaml:"valueFrom"`
	}
	Ports []struct {
		ContainerPort int `yaml:"containerPort"`
	} `yaml:"ports"`
}

// TestManifestsListenEverywhere runs each switchyard container's args and
// env through the command's real flags, so a misspelt variable or flag
// fails here, and checks every listen address accepts other pods (the
// defaults are loopback) on a port the container declares.
func TestManifestsListenEverywhere(t *testing.T) {
	var files []string
	err := filepath.WalkDir(filepath.Join("..", "..", "deploy", "kustomize"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "crds" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".yaml") && d.Name() != "kustomization.yaml" {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(f)
		for {
			var doc struct {
				Kind string
				Spec struct {
					Template struct {
						Spec struct{ Containers []container }
					}
				}
			}
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			for _, c := range doc.Spec.Template.Spec.Containers {
				if c.Image == "switchyard" {
					checkContainer(t, file+": "+c.Name, c)
					checked++
				}
			}
		}
		f.Close()
	}
	if checked < 4 { // router, policyd, gateway, the dev overlay's sim
		t.Fatalf("checked %d switchyard containers in %q", checked, files)
	}
}

func checkContainer(t *testing.T, where string, c container) {
	t.Helper()
	if len(c.Args) == 0 {
		t.Errorf("%s: no args, want the command first", where)
		return
	}
	cmd := c.Args[0]
	fs := commandFlags(t, cmd)
	if err := fs.Parse(c.Args[1:]); err != nil {
		t.Errorf("%s: args: %v", where, err)
		return
	}
	env := map[string]string{}
	for _, e := range c.Env {
		name := strings.TrimPrefix(e.Name, flagenv.Prefix)
		if name == e.Name {
			continue
		}
		known := false
		fs.VisitAll(func(f *flag.Flag) { known = known || flagenv.EnvName(f.Name) == e.Name })
		if !known {
			t.Errorf("%s: %s sets no flag of switchyard %s", where, e.Name, cmd)
		}
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
		}
	}
	if err := flagenv.Apply(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Errorf("%s: %v", where, err)
	}
	var ports []string
	for _, p := range c.Ports {
		ports = append(ports, strconv.Itoa(p.ContainerPort))
	}
	for _, name := range listenFlags[cmd] {
		v := fs.Lookup(name).Value.String()
		if h := host(v); h != "" && h != "0.0.0.0" && h != "::" {
			t.Errorf("%s: --%s is %q: other pods cannot reach it, want :PORT", where, name, v)
		}
		if _, port, err := net.SplitHostPort(v); err == nil && !slices.Contains(ports, port) {
			t.Errorf("%s: --%s listens on port %s, which the container does not declare (%v)", where, name, port, ports)
		}
	}
}
