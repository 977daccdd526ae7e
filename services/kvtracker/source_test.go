package kvtracker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/fleet"
	"github.com/switchyard-dev/switchyard/internal/sim"
)

// catalogFeed is a fleet source the test drives: each catalog sent is the
// fleet from then on.
type catalogFeed chan fleet.Catalog

func (f catalogFeed) Watch(ctx context.Context, update func(fleet.Catalog)) error {
	for {
		select {
		case c := <-f:
			update(c)
		case <-ctx.Done():
			return nil
		}
	}
}

// TestFollowsTheCatalog: a worker added to the fleet is leased and
// ingested, one removed is released, and one described anew (its KV
// endpoint moved) is ingested at its new address in a new epoch. Workers
// without a KV endpoint (the router's alone) are not tracked.
func TestFollowsTheCatalog(t *testing.T) {
	e := newEnv(t)
	f := startFleet(t, simConfig(2, "map"))
	l := e.collect(t)
	w0, w1 := f.Workers()[0], f.Workers()[1]
	catalog := func(entries ...string) fleet.Catalog {
		t.Helper()
		ws, err := fleet.ParseShorthand(strings.Join(entries, ","), fleet.Defaults{Pool: e.pool, Model: sim.DefaultServedModelName})
		if err != nil {
			t.Fatal(err)
		}
		return fleet.Catalog{Workers: ws}
	}
	at := func(id string, w sim.WorkerInfo) string {
		return id + "=" + w.URL + "|" + w.KVEndpoint + "|" + w.ReplayEndpoint
	}
	cfg := e.config("r1")
	cfg.Workers = shorthand(f) // replaced by the feed
	feed := make(catalogFeed)
	tr := startTracker(t, cfg, func(tr *Tracker) { tr.source = feed })
	held := func(ids ...string) func() error {
		var want []string
		for _, id := range ids {
			want = append(want, bus.KVLeaseKey(e.pool, id))
		}
		return func() error {
			if got := tr.heldKeys(); !slices.Equal(got, want) {
				return fmt.Errorf("holds %v, want %v", got, want)
			}
			return nil
		}
	}

	feed <- fleet.Catalog{Workers: append(catalog(at("a", w0)).Workers, catalog("http-only=http://127.0.0.1:1").Workers...)}
	eventually(t, 10*time.Second, held("a"))
	p := newPrompter("catalog")
	warmUp(t, l, w0, "a", p)

	feed <- catalog(at("a", w0), at("b", w1))
	eventually(t, 10*time.Second, held("a", "b"))
	warmUp(t, l, w1, "b", p)

	feed <- catalog(at("b", w1))
	eventually(t, 10*time.Second, held("b"))
	if got := tr.metric(t, "switchyard_kvtracker_workers_configured"); got != 1 {
		t.Errorf("workers configured %v, want 1", got)
	}

	feed <- catalog(at("b", w0))
	warmUp(t, l, w0, "b", p)
	v, err := l.view("b")
	if err != nil {
		t.Fatal(err)
	}
	if len(v.epochs) != 2 {
		t.Errorf("worker b: %d epochs, want 2 (moving its endpoint starts over)", len(v.epochs))
	}
	eventually(t, 10*time.Second, held("b"))
}
