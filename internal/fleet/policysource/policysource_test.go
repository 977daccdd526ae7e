package policysource_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/fleet"
	"github.com/switchyard-dev/switchyard/internal/fleet/policysource"
	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/internal/policy/watch"
)

// TestFollowsPolicydFiles runs the source against a policyd in files mode
// and edits its directory: every edit arrives as a whole catalog, the
// flags' workers first and winning an id clash, the policies' snapshot
// handed over just before.
func TestFollowsPolicydFiles(t *testing.T) {
	log := testLog(t)
	dir := newCatalogDir(t, "m")
	dir.provider = "http://127.0.0.1:8100/v1/"
	w0 := worker{id: "w0", url: "http://127.0.0.1:8000/", kv: "tcp://127.0.0.1:5557", replay: "tcp://127.0.0.1:5567"}
	clash := worker{id: "flag-0", url: "http://127.0.0.1:8009"}
	dir.write(w0, clash)
	pd := startPolicyd(t, dir.dir, log)

	static, err := fleet.NewCatalog([]fleet.Worker{{ID: "flag-0", URL: "http://10.0.0.9:8000"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var revisions []int64
	src := policysource.New(policyClient(t, pd.GRPCAddr()), policysource.Options{
		Static:     static,
		Log:        log,
		OnSnapshot: func(c watch.Current) { revisions = append(revisions, c.Revision) },
	})
	ctx, cancel := context.WithCancel(context.Background())
	updates := make(chan fleet.Catalog, 16)
	done := make(chan error, 1)
	go func() { done <- src.Watch(ctx, func(c fleet.Catalog) { updates <- c }) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	}()
	next := func() fleet.Catalog {
		t.Helper()
		select {
		case c := <-updates:
			return c
		case <-time.After(10 * time.Second):
			t.Fatal("no catalog within 10s")
			return fleet.Catalog{}
		}
	}
	ids := func(c fleet.Catalog) []string {
		var out []string
		for _, w := range c.Workers {
			out = append(out, w.ID+"@"+w.URL)
		}
		for _, p := range c.Providers {
			out = append(out, p.ID()+"@"+p.BaseURL)
		}
		return out
	}
	expect := func(what string, want ...string) fleet.Catalog {
		t.Helper()
		c := next()
		if got := ids(c); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: catalog %v, want %v", what, got, want)
		}
		return c
	}

	expect("before policyd answers", "flag-0@http://10.0.0.9:8000")
	c := expect("first snapshot", "flag-0@http://10.0.0.9:8000", "w0@http://127.0.0.1:8000", "provider/cloud@http://127.0.0.1:8100/v1")
	want := fleet.Worker{ID: "w0", Pool: "gpus", Group: "workers", Models: []string{"m"}, URL: "http://127.0.0.1:8000",
		MetricsPath: "/metrics", KVEndpoint: w0.kv, ReplayEndpoint: w0.replay, BlockSize: 16}
	if !c.Workers[1].Equal(want) {
		t.Errorf("worker from the catalog\n got %+v\nwant %+v", c.Workers[1], want)
	}

	w1 := worker{id: "w1", url: "http://127.0.0.1:8001", kv: "tcp://127.0.0.1:5558"}
	dir.write(w0, clash, w1)
	expect("worker added", "flag-0@http://10.0.0.9:8000", "w0@http://127.0.0.1:8000", "w1@http://127.0.0.1:8001", "provider/cloud@http://127.0.0.1:8100/v1")

	dir.provider = ""
	dir.write(w1)
	expect("worker and provider removed", "flag-0@http://10.0.0.9:8000", "w1@http://127.0.0.1:8001")

	// An invalid edit keeps the last good snapshot: no catalog comes.
	dir.write(worker{id: "bad id", url: "http://x"})
	select {
	case c := <-updates:
		t.Fatalf("an invalid catalog produced %v", ids(c))
	case <-time.After(500 * time.Millisecond):
	}
	if len(revisions) != 3 {
		t.Errorf("OnSnapshot saw revisions %v, want 3", revisions)
	}
}

// TestCatalogSkipsProvidersWithoutModels: a provider that serves no model
// has nothing to be routed to.
func TestCatalogSkipsProvidersWithoutModels(t *testing.T) {
	snap := &policy.Snapshot{Providers: []policy.Provider{
		{Name: "idle", BaseURL: "http://idle/v1"},
		{Name: "cloud", BaseURL: "http://cloud/v1", Models: []policy.ProviderModel{{Name: "m", ServedName: "cloud-m"}}},
	}}
	c := policysource.Catalog(snap)
	want := []fleet.Provider{{Name: "cloud", BaseURL: "http://cloud/v1", Models: []string{"m"}}}
	if !reflect.DeepEqual(c.Providers, want) {
		t.Fatalf("providers %+v, want %+v (public names, the idle one left out)", c.Providers, want)
	}
}
