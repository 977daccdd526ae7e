package flagenv

import (
	"flag"
	"testing"
)

func TestApply(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	addr := fs.String("grpc-addr", "default", "")
	n := fs.Int("max-num-seqs", 1, "")
	both := fs.String("both", "d", "")
	if err := fs.Parse([]string{"--both", "cli"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"SWITCHYARD_GRPC_ADDR":    "from-env",
		"SWITCHYARD_MAX_NUM_SEQS": "7",
		"SWITCHYARD_BOTH":         "env",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if err := Apply(fs, lookup); err != nil {
		t.Fatal(err)
	}
	if *addr != "from-env" || *n != 7 || *both != "cli" {
		t.Fatalf("got addr=%q n=%d both=%q", *addr, *n, *both)
	}

	env["SWITCHYARD_MAX_NUM_SEQS"] = "seven"
	fs2 := flag.NewFlagSet("y", flag.ContinueOnError)
	fs2.Int("max-num-seqs", 1, "")
	_ = fs2.Parse(nil)
	if err := Apply(fs2, lookup); err == nil {
		t.Fatal("want error for a non-integer env value")
	}
}
