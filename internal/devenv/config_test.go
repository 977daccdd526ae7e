package devenv

import (
	"flag"
	"strings"
	"testing"
)

// dev's flags: --tenants and --keys-file only mean something with --auth,
// and the tenants must be valid and distinct.
func TestConfigTenants(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // "" for valid
	}{
		{[]string{"--auth", "--tenants", "steady,flood", "--keys-file", "/tmp/k"}, ""},
		{[]string{"--auth"}, ""},
		{[]string{"--tenants", "a"}, "tenants, keys-file: only with --auth"},
		{[]string{"--keys-file", "/tmp/k"}, "tenants, keys-file: only with --auth"},
		{[]string{"--auth", "--tenants", "Team A"}, `tenants: "Team A" is not a valid tenant name`},
		{[]string{"--auth", "--tenants", "a,a"}, `tenants: "a" listed twice`},
		{[]string{"--auth", "--tenants", ","}, "tenants: name at least one"},
		{[]string{"--queue-threshold", "-1"}, "queue-threshold -1"},
	} {
		var cfg Config
		fs := flag.NewFlagSet("dev", flag.ContinueOnError)
		cfg.RegisterFlags(fs)
		cfg.Policies = "deploy/examples"
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		err := cfg.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}
