package flowcontrol

import (
	"flag"
	"strings"
	"testing"
)

// Every bad --queue-* value is reported at once, by flag; with flow
// control off only the threshold, the KV threshold, the reserve and the
// default output limit are checked.
func TestConfigValidate(t *testing.T) {
	parse := func(args ...string) error {
		var c Config
		fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
		c.RegisterFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return c.Validate()
	}
	if err := parse(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if err := parse("--queue-threshold", "0", "--queue-max-length", "0"); err != nil {
		t.Errorf("off: %v", err)
	}
	err := parse("--queue-threshold", "-1", "--queue-kv-cache-threshold", "1.5")
	for _, want := range []string{"queue-threshold -1", "queue-kv-cache-threshold 1.5"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: want %q", err, want)
		}
	}
	err = parse("--queue-reserve", "1", "--queue-default-max-tokens", "0")
	for _, want := range []string{"queue-reserve 1: want 0 (off) to less than 1", "queue-default-max-tokens 0"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: want %q", err, want)
		}
	}
	err = parse("--queue-kv-cache-threshold", "0.5", "--queue-reserve", "0.5")
	if err == nil || !strings.Contains(err.Error(), "queue-reserve 0.5: must be below queue-kv-cache-threshold 0.5") {
		t.Errorf("%v: want the reserve refused at the KV threshold", err)
	}
	err = parse("--queue-threshold", "2", "--queue-max-length", "0", "--queue-max-wait", "0s", "--queue-retry-interval", "0s")
	for _, want := range []string{"queue-max-length 0", "queue-max-wait 0s", "queue-retry-interval 0s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: want %q", err, want)
		}
	}
}
