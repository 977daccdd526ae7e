package policyd

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/policy/watch"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	policyv1 "github.com/switchyard-dev/switchyard/proto/switchyard/policy/v1"
)

// An invalid edit keeps the served snapshot and reports why; a valid edit
// reaches a watching router within a second. Real gRPC over loopback.
func TestFileModeEdits(t *testing.T) {
	dir := copyExamples(t)
	s := startServer(t, fileConfig(dir))
	client := dial(t, s.GRPCAddr())

	updates := make(chan watch.Current, 16)
	w := watch.New(client, testLog(t), watch.Options{OnUpdate: func(c watch.Current) { updates <- c }, MinBackoff: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx)

	first := receive(t, updates, 10*time.Second)
	if first.Snapshot.Program("").Name != "dev" || len(first.Snapshot.Policies) != 5 {
		t.Fatalf("first snapshot: program %q, %d policies", first.Snapshot.Program("").Name, len(first.Snapshot.Policies))
	}

	// Invalid edit: a typo in the burst policy's objective.
	burst := filepath.Join(dir, "policies", "burst-policy.yaml")
	orig, err := os.ReadFile(burst)
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(orig), "minimize: PredictedTTFT", "minimize: PredictedTTTF", 1)
	writeFile(t, burst, broken)
	var diags []*policyv1.Diagnostic
	eventually(t, 10*time.Second, "the invalid edit to be reported", func() bool {
		resp, err := client.GetSnapshot(ctx, &policyv1.GetSnapshotRequest{})
		if err != nil {
			t.Fatal(err)
		}
		diags = resp.GetDiagnostics()
		return len(diags) > 0
	})
	resp, err := client.GetSnapshot(ctx, &policyv1.GetSnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetSnapshot().GetRevision(); got != first.Revision {
		t.Errorf("serving revision %d after an invalid edit, want the last good %d", got, first.Revision)
	}
	if len(diags) != 1 || !strings.Contains(diags[0].GetMessage(), `unknown objective "PredictedTTTF" (did you mean PredictedTTFT?)`) ||
		diags[0].GetPath() != "spec.rules[0].route.select[0].minimize" || diags[0].GetLine() != 19 {
		t.Errorf("diagnostics %v", diags)
	}
	select {
	case c := <-updates:
		t.Fatalf("watcher got revision %d from an invalid edit", c.Revision)
	default:
	}
	if snap, rev := s.Snapshot(); rev != first.Revision || snap == nil {
		t.Errorf("server serves %d", rev)
	}

	// Valid edit: the saturation threshold goes from 2 to 4.
	fixed := strings.Replace(string(orig), "greaterThan: 2", "greaterThan: 4", 1)
	start := time.Now()
	writeFile(t, burst, fixed)
	next := receive(t, updates, 10*time.Second)
	latency := time.Since(start)
	t.Logf("valid edit reached the watcher in %v", latency)
	if latency > time.Second {
		t.Errorf("valid edit took %v to reach the watcher, want under a second", latency)
	}
	if next.Revision <= first.Revision {
		t.Errorf("revision %d after %d", next.Revision, first.Revision)
	}
	r := next.Snapshot.Policies[1] // burst-policy, by name
	if r.Name != "burst-policy" || r.Rules[0].Filters[0].Predicates[0].Value != 4 {
		t.Errorf("new snapshot does not carry the edit: %+v", r.Rules[0].Filters[0])
	}
	if got := w.Current(); got == nil || got.Revision != next.Revision {
		t.Errorf("watcher current %+v", got)
	}
	resp, err = client.GetSnapshot(ctx, &policyv1.GetSnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetDiagnostics()) != 0 {
		t.Errorf("diagnostics remain after the fix: %v", resp.GetDiagnostics())
	}
}

func receive(t *testing.T, ch <-chan watch.Current, within time.Duration) watch.Current {
	t.Helper()
	select {
	case c := <-ch:
		return c
	case <-time.After(within):
		t.Fatalf("no snapshot within %v", within)
	}
	return watch.Current{}
}

// writeFile replaces a file the way editors do: write aside, rename.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp~"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// A directory that starts invalid serves nothing and is not ready; the
// REST API reports why and validates files.
func TestFileModeRESTAndReadiness(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "p.yaml"), "apiVersion: switchyard.dev/v1alpha1\nkind: InferencePolicy\nmetadata: {name: p}\nspec: {rules: [{name: r, route: {onEmpty: Never}}]}\n")
	s := startServer(t, fileConfig(dir))
	base := "http://" + s.HTTPAddr()

	var snap struct {
		Snapshot    *json.RawMessage `json:"snapshot"`
		Diagnostics []struct {
			Severity string `json:"severity"`
			Message  string `json:"message"`
			Path     string `json:"path"`
		} `json:"diagnostics"`
	}
	eventually(t, 10*time.Second, "the first read", func() bool {
		getJSON(t, base+"/v1/policy/snapshot", &snap)
		return len(snap.Diagnostics) > 0
	})
	if snap.Snapshot != nil && string(*snap.Snapshot) != "null" {
		t.Errorf("snapshot served from invalid files: %s", *snap.Snapshot)
	}
	d := snap.Diagnostics[len(snap.Diagnostics)-1] // the warning about the missing catalog sorts first
	if d.Severity != "SEVERITY_ERROR" || d.Path != "spec.rules[0].route.onEmpty" || !strings.Contains(d.Message, `unknown onEmpty action "Never"`) {
		t.Errorf("diagnostics %+v", snap.Diagnostics)
	}
	if code := httpStatus(t, base+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("readyz %d with no valid snapshot", code)
	}

	// Validate over REST, merged with what is served (nothing valid yet)
	// and standalone.
	body := `{"files":[{"name":"typo.yaml","content":"` + b64("apiVersion: switchyard.dev/v1alpha1\nkind: InferencePolicy\nmetadata: {name: q}\nspec: {rules: [{name: r, route: {select: [{minimize: PredictedTTTF}]}}]}\n") + `"}],"standalone":true}`
	resp, err := http.Post(base+"/v1/policy:validate", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var vr struct {
		Valid       bool `json:"valid"`
		Diagnostics []struct {
			File, Path, Message string
			Line                int
		} `json:"diagnostics"`
	}
	if err := json.Unmarshal(raw, &vr); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	if n := len(vr.Diagnostics); vr.Valid || n == 0 || vr.Diagnostics[n-1].File != "typo.yaml" || vr.Diagnostics[n-1].Line != 4 ||
		!strings.Contains(vr.Diagnostics[n-1].Message, "did you mean PredictedTTFT?") {
		t.Errorf("validate: %s", raw)
	}

	// Fixing the file makes it serve.
	writeFile(t, filepath.Join(dir, "p.yaml"), "apiVersion: switchyard.dev/v1alpha1\nkind: InferencePolicy\nmetadata: {name: p}\nspec: {rules: [{name: r, route: {onEmpty: Reject}}]}\n")
	eventually(t, 10*time.Second, "readiness", func() bool { return httpStatus(t, base+"/readyz") == http.StatusOK })
	if _, rev := s.Snapshot(); rev == 0 {
		t.Error("no revision")
	}
	if code := httpStatus(t, base+"/metrics"); code != http.StatusOK {
		t.Errorf("metrics %d", code)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, raw)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, raw)
	}
}

func httpStatus(t *testing.T, url string) int { return testkit.HTTPStatus(t, url) }

// The watcher keeps the last snapshot while policyd is away and picks up
// the restarted policyd's snapshot.
func TestWatcherSurvivesRestart(t *testing.T) {
	dir := copyExamples(t)
	cfg := fileConfig(dir)
	s1, err := New(cfg, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	addr := s1.GRPCAddr()
	ctx1, stop1 := context.WithCancel(context.Background())
	done1 := make(chan error, 1)
	go func() { done1 <- s1.Serve(ctx1) }()

	updates := make(chan watch.Current, 16)
	w := watch.New(dial(t, addr), testLog(t), watch.Options{OnUpdate: func(c watch.Current) { updates <- c }, MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx)
	first := receive(t, updates, 10*time.Second)

	stop1()
	if err := <-done1; err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the watcher to notice", func() bool { return !w.Connected() })
	if c := w.Current(); c == nil || c.Revision != first.Revision || c.Snapshot == nil {
		t.Fatalf("watcher lost its snapshot: %+v", c)
	}

	// policyd comes back on the same address with an edited catalog.
	writeFile(t, filepath.Join(dir, "policies", "batch-to-idle.yaml"), strings.Replace(readFile(t, filepath.Join(dir, "policies", "batch-to-idle.yaml")), "0.70", "0.80", 1))
	cfg.GRPCAddr = addr
	s2 := startServer(t, cfg)
	_ = s2
	next := receive(t, updates, 10*time.Second)
	if next.Revision <= first.Revision {
		t.Errorf("revision %d after restart, had %d", next.Revision, first.Revision)
	}
	var got float64
	for _, p := range next.Snapshot.Policies {
		if p.Name == "batch-to-idle" {
			got = p.Rules[0].Filters[0].Predicates[0].Value
		}
	}
	if got != 0.80 {
		t.Errorf("restarted policyd's snapshot has threshold %v", got)
	}
	if w.Rejected() != 0 {
		t.Errorf("%d snapshots rejected", w.Rejected())
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestFileModeSaysValidAgain: an invalid edit is logged as a warning; when
// the edit is undone, the files compile to the snapshot already served, and
// the log must still say they are valid again, or the warning would stay
// its last word.
func TestFileModeSaysValidAgain(t *testing.T) {
	dir := copyExamples(t)
	logs := &testkit.SyncBuffer{}
	s := startServerLog(t, fileConfig(dir), zerolog.New(logs))
	eventually(t, 10*time.Second, "the first snapshot", func() bool { snap, _ := s.Snapshot(); return snap != nil })

	burst := filepath.Join(dir, "policies", "burst-policy.yaml")
	orig, err := os.ReadFile(burst)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, burst, strings.Replace(string(orig), "minimize: PredictedTTFT", "minimize: PredictedTTTF", 1))
	eventually(t, 10*time.Second, "the invalid edit's warning", func() bool {
		return strings.Contains(logs.String(), "resources invalid")
	})
	if strings.Contains(logs.String(), "valid again") {
		t.Fatalf("valid again before the fix:\n%s", logs.String())
	}
	writeFile(t, burst, string(orig))
	eventually(t, 10*time.Second, "a log line saying the files are valid again", func() bool {
		return strings.Contains(logs.String(), "resources valid again")
	})
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "valid again") || !strings.Contains(last, `"level":"info"`) {
		t.Errorf("last log line %s", last)
	}
}
