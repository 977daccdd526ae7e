package kvtracker

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestDoublingReplicas is the scaling rule deploy/README.md gives
// operators: kvtracker scales by replica count, each replica moving
// toward ceil(workers / live replicas). Two replicas over four workers
// hold two each; two more join and every replica ends with one, no worker
// held twice at any sampled moment, every worker's events still ingested.
func TestDoublingReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end; skipped in -short")
	}
	e := newEnv(t)
	f := startFleet(t, simConfig(4, "map"))
	l := e.collect(t)
	start := func(id string) *replica {
		cfg := e.config(id)
		cfg.Workers = shorthand(f)
		return startTracker(t, cfg, nil)
	}
	replicas := []*replica{start("replica-a"), start("replica-b")}
	shares := func() ([]int, error) {
		var counts []int
		seen := map[string]string{}
		for i, r := range replicas {
			keys := r.heldKeys()
			counts = append(counts, len(keys))
			for _, k := range keys {
				if other, ok := seen[k]; ok {
					t.Fatalf("worker %s held by %s and replica %d at once", k, other, i)
				}
				seen[k] = fmt.Sprint(i)
			}
		}
		if len(seen) != 4 {
			return counts, fmt.Errorf("%d of 4 workers held: %v", len(seen), counts)
		}
		return counts, nil
	}
	settled := func(want int) {
		t.Helper()
		eventually(t, 30*time.Second, func() error {
			counts, err := shares()
			if err != nil {
				return err
			}
			if slices.Max(counts) != want || slices.Min(counts) != want {
				return fmt.Errorf("shares %v, want %d each", counts, want)
			}
			return nil
		})
	}
	settled(2)
	p := newPrompter("doubling")
	for _, w := range f.Workers() {
		warmUp(t, l, w, fmt.Sprintf("w%d", w.ID), p)
	}

	began := time.Now()
	replicas = append(replicas, start("replica-c"), start("replica-d"))
	settled(1)
	t.Logf("4 workers: 2 replicas at 2 each, then 4 at 1 each within %v", time.Since(began).Round(time.Millisecond))
	for _, w := range f.Workers() {
		sendAndSee(t, l, w, fmt.Sprintf("w%d", w.ID), p)
	}
}

// TestShedCount: above its share a replica gives up the excess, at most a
// quarter of the share a round, and always at least one.
func TestShedCount(t *testing.T) {
	for _, c := range []struct{ held, fair, want int }{
		{5, 4, 1},        // one over
		{3, 2, 1},        // small shares shed one at a time
		{90, 64, 16},     // the first of two replicas up, over 128 workers
		{74, 64, 10},     // the rest of that excess
		{1000, 500, 125}, // doubling 1,000 workers' replicas: four rounds
	} {
		if got := shedCount(c.held, c.fair); got != c.want {
			t.Errorf("shedCount(%d, %d) = %d, want %d", c.held, c.fair, got, c.want)
		}
	}
}
