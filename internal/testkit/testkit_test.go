package testkit

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSyncBufferConcurrentWrites(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 100 {
				fmt.Fprintf(&b, "%d-%d\n", i, j)
			}
		})
	}
	wg.Wait()
	if n := strings.Count(b.String(), "\n"); n != 800 {
		t.Errorf("%d lines, want 800", n)
	}
}

func TestEventuallyWaits(t *testing.T) {
	start := time.Now()
	Eventually(t, time.Second, "50ms to pass", func() bool { return time.Since(start) > 50*time.Millisecond })
	if time.Since(start) < 50*time.Millisecond {
		t.Error("returned before the condition held")
	}
}
