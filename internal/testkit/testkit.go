// Package testkit holds the small helpers that tests of several packages
// share: waiting for a condition, and a buffer a server may write its log
// to while the test reads it. It is imported by tests only.
package testkit

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// Eventually polls cond every 10 ms until it holds, and fails the test
// with what it waited for once within has passed.
func Eventually(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// SyncBuffer is an io.Writer that is safe to write from a server's
// goroutines while the test reads it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Serve runs serve (a service's Serve) until the test ends, then cancels
// its context and fails the test if it returned an error.
func Serve(tb testing.TB, serve func(ctx context.Context) error) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("serve: %v", err)
		}
	})
}

// HTTPStatus is the status code of a GET of url.
func HTTPStatus(tb testing.TB, url string) int {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// FreePort is a loopback TCP port nothing listens on right now, for a
// server the test starts later on a port its clients already know (a
// restart, an outage). Another process may take it meanwhile; tests that
// can bind port 0 should.
func FreePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// ReportPercentiles reports the median and 99th percentile of a
// benchmark's latencies, in microseconds, as name+"p50-µs" and
// name+"p99-µs" (name "" or a set's, such as "builtins-"). It sorts lat.
func ReportPercentiles(b *testing.B, name string, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(pct(0.50), name+"p50-µs")
	b.ReportMetric(pct(0.99), name+"p99-µs")
}
