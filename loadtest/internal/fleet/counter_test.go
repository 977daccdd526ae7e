package fleet

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
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

// TestReadCounters: several metrics off one scrape of a real HTTP server,
// a histogram's _sum and _count among them; a missing one is an error.
func TestReadCounters(t *testing.T) {
	scrapes := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scrapes++
		fmt.Fprint(w, "h_bucket{le=\"+Inf\"} 4\nh_sum 1.5\nh_count 4\nc_total 9\n")
	}))
	defer srv.Close()
	got, err := ReadCounters(context.Background(), srv.Client(), srv.URL, "h_sum", "h_count", "c_total")
	if err != nil || len(got) != 3 || got[0] != 1.5 || got[1] != 4 || got[2] != 9 || scrapes != 1 {
		t.Errorf("got %v, %v after %d scrapes; want [1.5 4 9] from one", got, err, scrapes)
	}
	if _, err := ReadCounters(context.Background(), srv.Client(), srv.URL, "h_sum", "missing"); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a missing metric: %v", err)
	}
}
