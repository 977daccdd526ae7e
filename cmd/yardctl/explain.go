package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// explainFlags are explain's flags, online and offline in one FlagSet:
// the mode follows from -f once parsed, and -h documents both.
type explainFlags struct {
	// The request, in both modes.
	request, model, tenant, tags string
	// Asking a router.
	router routerFlags
	// Offline.
	files          fileFlag
	state, backend string
}

const explainHelp = `Usage:
  yardctl explain [--request REQ.json] [--model MODEL] [--tenant T] [--tags a,b] [--router URL] [-o table|json]
  yardctl explain -f PATH [-f PATH...] [--request REQ.json] [--model MODEL] [--tenant T] [--tags a,b] [--state STATE.yaml]

Which target a request would get, and why.

Without -f, asks a running router (POST /v1/route:explain). The --request body
is sent as it is: the router reads its prompt as it will when the request comes
through the gateway, and the table shows how much of it each worker caches.

With -f, evaluates the policies of the resources in PATH offline, with no
cluster and no router, against the backends' state in --state, and prints the
decision trace.
`

// explainFlagGroups order explain's help; every flag is in one group.
var explainFlagGroups = []struct {
	title string
	names []string
}{
	{"The request, in both modes", []string{"request", "model", "tenant", "tags"}},
	{"Asking a router (without -f)", []string{"router", "token-file", "tls-ca", "tls-cert", "tls-key", "tls-server-name", "timeout", "o"}},
	{"Offline (with -f)", []string{"f", "state", "gateway-backend"}},
}

func newExplainFlags(stderr io.Writer) (*flag.FlagSet, *explainFlags) {
	fs := flag.NewFlagSet("yardctl explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	e := &explainFlags{}
	fs.StringVar(&e.request, "request", "", "file with the OpenAI chat or completions request body ('-' for stdin); offline also reads tenant and tags from it")
	fs.StringVar(&e.model, "model", "", "requested model, replacing the request body's")
	fs.StringVar(&e.tenant, "tenant", "", "tenant sending the request (offline: replaces the request file's)")
	fs.StringVar(&e.tags, "tags", "", "comma-separated request tags; the tenant's default tags are added")
	e.router.register(fs)
	fs.Var(&e.files, "f", "YAML file or directory of Switchyard resources (repeatable, comma-separated): explain offline")
	fs.StringVar(&e.state, "state", "", "YAML file with the backends' load and cache state; idle backends without it")
	fs.StringVar(&e.backend, "gateway-backend", "", "GatewayBackend whose policies apply; the only or first one when empty")
	fs.Usage = func() { explainUsage(fs) }
	return fs, e
}

// explainUsage prints the help, the flags in groups rather than in one
// alphabetical list.
func explainUsage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprint(w, explainHelp)
	for _, g := range explainFlagGroups {
		one := flag.NewFlagSet("", flag.ContinueOnError)
		one.SetOutput(w)
		for _, name := range g.names {
			f := fs.Lookup(name)
			one.Var(f.Value, f.Name, f.Usage)
			// Var records the current value, which a failed parse may have set.
			one.Lookup(name).DefValue = f.DefValue
		}
		fmt.Fprintf(w, "\n%s:\n", g.title)
		one.PrintDefaults()
	}
}

// checkMode refuses the flags of one mode in the other where they would
// be silently ignored. It looks only at flags no one sets from the
// environment: a SWITCHYARD_ROUTER exported for the online mode must not
// break the offline one.
func (e *explainFlags) checkMode(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	offline := len(e.files) > 0
	switch {
	case !offline && set["state"]:
		return errors.New("--state is for the offline explain: add -f PATH with the resources")
	case offline && set["o"]:
		return errors.New("-o is for asking a router: the offline explain prints its decision trace")
	}
	return nil
}
