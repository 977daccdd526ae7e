// Package flagenv lets every flag be set from the environment, so the same
// binary is configured by flags on a laptop and by env in a Deployment.
// A flag --grpc-addr of the "router" command reads SWITCHYARD_GRPC_ADDR.
// Flags given on the command line win over the environment.
package flagenv

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// Prefix is prepended to every variable name.
const Prefix = "SWITCHYARD_"

// EnvName is the variable that sets the flag called name.
func EnvName(name string) string {
	return Prefix + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(name))
}

// Apply sets every flag in fs that was not given on the command line from its
// environment variable, if present. Call it after fs.Parse.
func Apply(fs *flag.FlagSet, lookup func(string) (string, bool)) error {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || given[f.Name] {
			return
		}
		name := EnvName(f.Name)
		v, ok := lookup(name)
		if !ok {
			return
		}
		if e := fs.Set(f.Name, v); e != nil {
			err = fmt.Errorf("%s=%q: %w", name, v, e)
		}
	})
	return err
}
