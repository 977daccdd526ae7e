package kvtracker

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testkit"
)

// TestWorkerRestartDropsBlocksAtOnce: a worker restarts on the same ports
// and stays idle. Its new process has an empty cache but publishes nothing
// to say so; its metrics show a new process start time, and the tracker
// drops its blocks in a new epoch without waiting for an event. What the
// new process caches then flows as before.
func TestWorkerRestartDropsBlocksAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end; skipped in -short")
	}
	e := newEnv(t)
	sc := simConfig(1, "map")
	sc.Port = testkit.FreePort(t)
	// A wildcard host: vLLM (and the simulator) bind only then.
	sc.KVEventsConfig = kvEventsConfig(fmt.Sprintf("tcp://*:%d", testkit.FreePort(t)), fmt.Sprintf("tcp://*:%d", testkit.FreePort(t)))
	fleet := startFleet(t, sc)
	w := fleet.Workers()[0]
	cfg := e.config("r1")
	cfg.Workers = fmt.Sprintf("w0=%s|%s|%s", w.URL, w.KVEndpoint, w.ReplayEndpoint)
	cfg.RestartCheckInterval = time.Minute
	tr := startTracker(t, cfg, nil)
	l := e.collect(t)
	p := newPrompter("worker-restart")
	warmUp(t, l, w, "w0", p)
	before, err := l.view("w0")
	if err != nil {
		t.Fatal(err)
	}
	if len(before.set) == 0 {
		t.Fatal("no blocks before the restart")
	}
	eventually(t, 10*time.Second, func() error {
		if tr.metric(t, "switchyard_kvtracker_worker_start_time_seconds", "worker", "w0") == 0 {
			return errors.New("the worker's start time not read yet")
		}
		return nil
	})

	if err := fleet.Close(); err != nil {
		t.Fatal(err)
	}
	restarted := startFleet(t, sc)
	back := time.Now()

	eventually(t, 10*time.Second, func() error {
		v, err := l.view("w0")
		if err != nil {
			t.Fatal(err)
		}
		if len(v.epochs) <= len(before.epochs) || len(v.set) != 0 {
			return fmt.Errorf("%d epochs (%d before the restart), %d blocks held", len(v.epochs), len(before.epochs), len(v.set))
		}
		return nil
	})
	t.Logf("blocks dropped %s after the worker came back, before any event from it", time.Since(back).Round(time.Millisecond))
	if n := tr.metric(t, "switchyard_kvtracker_resets_total", "reason", "process_restart"); n != 1 {
		t.Errorf("process_restart resets %v, want 1", n)
	}
	// The new process's first batches can go out before the tracker's
	// re-dialled subscription reaches it (a SUB socket's slow join): the
	// next batch reveals them as a gap across the reconnect. warmUp sends
	// until the blocks show.
	warmUp(t, l, restarted.Workers()[0], "w0", p)
	if n := tr.metric(t, "switchyard_kvtracker_resets_total", "reason", "restart"); n != 0 {
		t.Errorf("%v more resets at the new process's first events: the restart was acted on twice", n)
	}
}

func TestParseStartTime(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	for _, c := range []struct {
		name, text string
		want       float64
		err        bool
	}{
		{"vllm", "# HELP process_start_time_seconds Start time\n# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1.76e+09\nvllm:num_requests_running{engine=\"0\"} 0\n", 1.76e9, false},
		{"labels and timestamp", "process_start_time_seconds{pid=\"7\"} 1764590000.25 1764590001000\n", 1764590000.25, false},
		{"no newline at the end", "process_start_time_seconds 12", 12, false},
		{"a longer name is another series", "process_start_time_seconds_total 5\n", 0, true},
		{"missing", "vllm:num_requests_running 0\n", 0, true},
		{"not a number", "process_start_time_seconds abc\nprocess_start_time_seconds 7\n", 7, false},
		{"negative, NaN, Inf", "process_start_time_seconds -1\nprocess_start_time_seconds NaN\nprocess_start_time_seconds +Inf\n", 0, true},
		{"a megabyte line before it", "# " + long + "\nprocess_start_time_seconds 9\n", 9, false},
		{"a megabyte line of it", "process_start_time_seconds " + long + "\nprocess_start_time_seconds 10\n", 10, false},
		{"empty", "", 0, true},
	} {
		got, err := parseStartTime(strings.NewReader(c.text))
		if (err != nil) != c.err || got != c.want {
			t.Errorf("%s: %v, %v; want %v (error %v)", c.name, got, err, c.want, c.err)
		}
	}
	// A failing body is an error, not a missing series.
	boom := errors.New("connection reset")
	if _, err := parseStartTime(io.MultiReader(strings.NewReader("x 1\n"), iotest.ErrReader(boom))); !errors.Is(err, boom) {
		t.Errorf("read error: %v", err)
	}
}

func FuzzParseStartTime(f *testing.F) {
	f.Add("process_start_time_seconds 1.76e+09\n")
	f.Add("process_start_time_seconds{a=\"}\"} 3 4\n")
	f.Add("# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds\n")
	f.Fuzz(func(t *testing.T, text string) {
		v, err := parseStartTime(strings.NewReader(text))
		if err == nil && !(v > 0) {
			t.Fatalf("accepted %v", v)
		}
	})
}
