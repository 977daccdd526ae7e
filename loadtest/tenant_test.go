package main

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/loadtest/internal/fakeoai"
	"github.com/switchyard-dev/switchyard/loadtest/internal/results"
	"github.com/switchyard-dev/switchyard/loadtest/internal/workload"
)

func TestParseTenant(t *testing.T) {
	good := []struct {
		in   string
		want tenantSpec
	}{
		{"steady:key-env=STEADY_KEY:concurrency=2", tenantSpec{name: "steady", keyEnv: "STEADY_KEY", concurrency: 2}},
		{"flood:concurrency=20:key-env=FLOOD_KEY:priority=sheddable", tenantSpec{name: "flood", keyEnv: "FLOOD_KEY", concurrency: 20, priority: "sheddable"}},
		{"t-1.a_b:key-env=_K:rate=0.5:workload=multi-turn:priority=critical",
			tenantSpec{name: "t-1.a_b", keyEnv: "_K", rate: 0.5, workload: workload.MultiTurn, priority: "critical"}},
	}
	for _, tc := range good {
		got, err := parseTenant(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseTenant(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	// Each error names the part at fault.
	bad := []struct{ in, wantErr string }{
		{"", `name ""`},
		{":key-env=K", `name ""`},
		{"a b:key-env=K", `name "a b"`},
		{"-x:key-env=K", `name "-x"`},
		{"steady", "no key-env"},
		{"steady:concurrency=2", "no key-env"},
		{"steady:key-env=K:concurrency", `part "concurrency": want key=value`},
		{"steady:key-env=K:concurrency=", `part "concurrency=": empty value`},
		{"steady:key-env=K:concurrency=0", `part "concurrency=0"`},
		{"steady:key-env=K:concurrency=two", `part "concurrency=two"`},
		{"steady:key-env=K:concurrency=1000001", `part "concurrency=1000001"`},
		{"steady:key-env=K:rate=-1", `part "rate=-1"`},
		{"steady:key-env=K:rate=NaN", `part "rate=NaN"`},
		{"steady:key-env=K:rate=+Inf", `part "rate=+Inf"`},
		{"steady:key-env=K:priority=urgent", `part "priority=urgent": want critical, standard or sheddable`},
		{"steady:key-env=K:workload=chat", `part "workload=chat"`},
		{"steady:key-env=K:key-env=L", `part "key-env=L": key-env given twice`},
		{"steady:key-env=1K", `part "key-env=1K": not an environment variable name`},
		{"steady:key-env=K:burst=3", `part "burst=3": unknown key "burst"`},
		{"steady:key=sk-123", `part "key=sk-123": unknown key "key"`},
	}
	for _, tc := range bad {
		if _, err := parseTenant(tc.in); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("parseTenant(%q): error %v, want one containing %q", tc.in, err, tc.wantErr)
		}
	}
}

// FuzzParseTenant: the parser never panics, and what it accepts prints
// back to a flag that parses to the same tenant.
func FuzzParseTenant(f *testing.F) {
	for _, s := range []string{"steady:key-env=STEADY_KEY:concurrency=2", "flood:key-env=F:rate=1e3:priority=sheddable:workload=control",
		"a:key-env=K:key-env=K", "x::", "a:=:", "b:rate=0x1p-2:key-env=Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ts, err := parseTenant(s)
		if err != nil {
			return
		}
		again, err := parseTenant(ts.String())
		if err != nil || again != ts {
			t.Fatalf("%q parsed to %+v, printed %q, which parses to %+v, %v", s, ts, ts.String(), again, err)
		}
		if ts.keyEnv == "" || !tenantName.MatchString(ts.name) {
			t.Fatalf("%q accepted without a key or with a bad name: %+v", s, ts)
		}
	})
}

// TestTenantValidation: what a run with tenants refuses, each named.
func TestTenantValidation(t *testing.T) {
	t.Setenv("LT_KEY_A", "ka")
	t.Setenv("LT_KEY_EMPTY", " ")
	os.Unsetenv("LT_KEY_UNSET")
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--tenant", "a:key-env=LT_KEY_UNSET:concurrency=1"}, "tenant a: environment variable LT_KEY_UNSET (key-env) is not set"},
		{[]string{"--tenant", "a:key-env=LT_KEY_EMPTY:concurrency=1"}, "tenant a: environment variable LT_KEY_EMPTY (key-env) is empty"},
		{[]string{"--tenant", "a:key-env=LT_KEY_A"}, "tenant a: needs concurrency=N in --mode concurrent"},
		{[]string{"--tenant", "a:key-env=LT_KEY_A:concurrency=1:rate=2"}, "tenant a: rate=2 is for --mode poisson"},
		{[]string{"--mode", "poisson", "--tenant", "a:key-env=LT_KEY_A:concurrency=1"}, "tenant a: needs rate=R in --mode poisson"},
		{[]string{"--tenant", "a:key-env=LT_KEY_A:concurrency=1", "--tenant", "a:key-env=LT_KEY_A:concurrency=2"}, "tenant a: named twice"},
		{[]string{"--mode", "sweep", "--sweep", "1,2", "--tenant", "a:key-env=LT_KEY_A:concurrency=1"}, "not with --mode sweep"},
		{[]string{"--concurrency", "4", "--tenant", "a:key-env=LT_KEY_A:concurrency=1"}, "concurrency: not with --tenant"},
		{[]string{"--api-key-env", "LT_KEY_A", "--tenant", "a:key-env=LT_KEY_A:concurrency=1"}, "api-key-env: not with --tenant"},
		{[]string{"--tenant", "a:key-env=LT_KEY_A:concurrency=1:turns=3"}, `part "turns=3": unknown key`},
		{[]string{"--max-retry-after", "5s"}, "max-retry-after: only with --retry-after"},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"run", "--url", "http://127.0.0.1:1/v1"}, tc.args...)
		if code := run(context.Background(), args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.wantErr) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr.String(), tc.wantErr)
		}
	}
}

// TestTenants drives `loadtest run` with a steady and a flooding tenant
// against a server that refuses the flood's first requests with 429s of two
// reasons: each tenant's requests carry its own key and priority and none of
// the other's prompts, and the results split by tenant with the 429s counted
// by reason.
func TestTenants(t *testing.T) {
	srv := fakeoai.New(fakeoai.Echo)
	defer srv.Close()
	srv.Refuse("flood-key", fakeoai.Refusal{Reasons: []string{"tenant_over_share", "queue_full"}, Times: 10})
	t.Setenv("LT_STEADY_KEY", "steady-key")
	t.Setenv("LT_FLOOD_KEY", "flood-key")
	dir := t.TempDir()
	out := filepath.Join(dir, "res.json")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"run", "--url", srv.URL + "/v1", "--requests", "60", "--output-tokens", "4",
		"--prefixes", "2", "--prefix-tokens", "200", "--suffix-tokens", "10", "--out", out,
		"--tenant", "steady:key-env=LT_STEADY_KEY:concurrency=1:priority=critical",
		"--tenant", "flood:key-env=LT_FLOOD_KEY:concurrency=10:priority=sheddable"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}

	// What the server saw: every request under one of the two keys, with
	// that tenant's priority; the tenants' shared prefixes disjoint.
	keyOf := map[string]string{"steady-key": "steady", "flood-key": "flood"}
	prioOf := map[string]string{"steady": "critical", "flood": "sheddable"}
	seenBy := map[string]int{}
	prefixes := map[string]map[string]bool{"steady": {}, "flood": {}}
	for _, r := range srv.Seen() {
		tenant, ok := keyOf[r.Key]
		if !ok {
			t.Fatalf("request with key %q", r.Key)
		}
		if r.MaxTokens == 1 {
			continue // calibration, before the run
		}
		seenBy[tenant]++
		if r.Priority != prioOf[tenant] {
			t.Errorf("tenant %s sent priority %q", tenant, r.Priority)
		}
		prefixes[tenant][r.Messages[0].Content] = true
	}
	for p := range prefixes["steady"] {
		if prefixes["flood"][p] {
			t.Error("the tenants sent the same shared prefix")
		}
	}
	if len(prefixes["steady"]) == 0 || len(prefixes["flood"]) == 0 {
		t.Errorf("prefixes %d and %d: want both tenants' requests", len(prefixes["steady"]), len(prefixes["flood"]))
	}

	// The records: each names its tenant, as many as the server saw.
	lines, err := os.ReadFile(filepath.Join(dir, "res.requests.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	recBy := map[string]int{}
	reasons := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(lines)), "\n") {
		var r results.Record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		recBy[r.Tenant]++
		if r.Status == 429 {
			reasons[r.Tenant+"/"+r.RefusalReason]++
		}
	}
	if !maps.Equal(recBy, seenBy) || recBy["steady"]+recBy["flood"] != 60 {
		t.Errorf("records by tenant %v, requests the server saw by key %v; want the same, 60 in all", recBy, seenBy)
	}
	if want := map[string]int{"flood/tenant_over_share": 5, "flood/queue_full": 5}; !maps.Equal(reasons, want) {
		t.Errorf("429 records %v, want %v", reasons, want)
	}

	// The summary: per tenant, in flag order, and the whole run.
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var f results.File
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Tenants) != 2 || f.Tenants[0].Tenant != "steady" || f.Tenants[1].Tenant != "flood" {
		t.Fatalf("tenants %+v", f.Tenants)
	}
	steady, flood := f.Tenants[0], f.Tenants[1]
	if steady.Succeeded != seenBy["steady"] || steady.Refused != 0 || steady.Priority != "critical" || steady.Concurrency != 1 ||
		!steady.TTFTP50.Valid() || !steady.TTFTP99.Valid() || !steady.OutputTokensPerS.Valid() {
		t.Errorf("steady %+v", steady.Summary)
	}
	if flood.Succeeded != seenBy["flood"]-10 || flood.Refused429 != 10 || flood.Concurrency != 10 ||
		!maps.Equal(flood.Refused429Reasons, map[string]int{"tenant_over_share": 5, "queue_full": 5}) ||
		!maps.Equal(flood.RefusedByStatus, map[string]int{"429": 10}) {
		t.Errorf("flood: ok %d (server saw %d), 429 %d %v, by status %v", flood.Succeeded, seenBy["flood"], flood.Refused429,
			flood.Refused429Reasons, flood.RefusedByStatus)
	}
	whole := f.Workloads["shared-prefix"][results.Direct]
	if whole == nil || whole.Requests != 60 || whole.Refused429 != 10 || whole.Concurrency != 11 {
		t.Errorf("whole run %+v", whole)
	}
	if len(f.Params.Tenants) != 2 || f.Params.Tenants[0].KeyEnv != "LT_STEADY_KEY" || f.Params.Tenants[0].Seed == f.Params.Tenants[1].Seed ||
		strings.Contains(string(b), "steady-key") {
		t.Errorf("params tenants %+v (the keys themselves must not be written)", f.Params.Tenants)
	}

	// The table and the report show the tenants.
	for _, row := range []string{"| steady | shared-prefix | critical | 1 |", "| flood | shared-prefix | sheddable | 10 |", "queue_full 5, tenant_over_share 5"} {
		if !strings.Contains(stdout.String(), row) {
			t.Errorf("table lacks %q:\n%s", row, stdout.String())
		}
	}
	if page, err := os.ReadFile(filepath.Join(dir, "res.html")); err != nil || !strings.Contains(string(page), "<h2>Per tenant</h2>") {
		t.Errorf("report page without the tenants (%v)", err)
	}
	// `loadtest report` renders them again from the JSON.
	stdout.Reset()
	t.Chdir(dir) // where a file named "-" would land
	if code := run(context.Background(), []string{"report", "--in", out, "--html", "-", "--table", "-"}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "| flood | shared-prefix | sheddable | 10 |") {
		t.Errorf("report exit %d, table without the tenants:\n%s", code, stdout.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "-")); !os.IsNotExist(err) {
		t.Errorf("--html - / --table - wrote a file named -: %v", err)
	}
}
