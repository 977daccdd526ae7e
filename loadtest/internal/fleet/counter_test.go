package fleet

import (
	"strings"
	"testing"
)

func TestParseCounter(t *testing.T) {
	const exp = `# HELP switchyard_router_kv_deltas_total KV deltas applied.
# TYPE switchyard_router_kv_deltas_total counter
switchyard_router_kv_deltas_total 42
switchyard_router_kv_deltas_total_other 7
switchyard_router_kv_sync_events_total{kind="hole"} 3
switchyard_router_kv_sync_events_total{kind="resync",note="a}b"} 2 1700000000000
`
	for _, c := range []struct {
		name string
		want float64
	}{
		{"switchyard_router_kv_deltas_total", 42},
		{"switchyard_router_kv_sync_events_total", 5},
	} {
		got, err := ParseCounter(strings.NewReader(exp), c.name)
		if err != nil || got != c.want {
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}
	for _, bad := range []struct{ text, want string }{
		{"", "not in /metrics"},
		{"switchyard_x{a=\"b\" 1\n", "unterminated labels"},
		{"switchyard_x{}\n", "no value"},
		{"switchyard_x one\n", "invalid syntax"},
	} {
		if _, err := ParseCounter(strings.NewReader(bad.text), "switchyard_x"); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: error %v, want %q", bad.text, err, bad.want)
		}
	}
}

// FuzzParseCounter: any exposition, however malformed, gives a value or an
// error, never a panic, and a line-by-line scan bounds its work.
func FuzzParseCounter(f *testing.F) {
	f.Add("switchyard_x 1\nswitchyard_x{a=\"b\"} 2\n")
	f.Add("switchyard_x{a=\"}\"} 2 123\n# x\n")
	f.Add("switchyard_x{")
	f.Fuzz(func(t *testing.T, text string) {
		v, err := ParseCounter(strings.NewReader(text), "switchyard_x")
		if err == nil && !strings.Contains(text, "switchyard_x") {
			t.Fatalf("a value %v from an exposition without the metric", v)
		}
	})
}
