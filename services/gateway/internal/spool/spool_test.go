package spool

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func open(t *testing.T, dir string, o Options) *Spool {
	t.Helper()
	if o.MaxBytes == 0 {
		o.MaxBytes = 1 << 20
	}
	s, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func next(t *testing.T, s *Spool) (Seq, string) {
	t.Helper()
	type r struct {
		q   Seq
		p   []byte
		err error
	}
	ch := make(chan r, 1)
	go func() { q, p, err := s.Next(); ch <- r{q, p, err} }()
	select {
	case got := <-ch:
		if got.err != nil {
			t.Fatal(got.err)
		}
		return got.q, string(got.p)
	case <-time.After(5 * time.Second):
		t.Fatal("Next did not return")
	}
	return Seq{}, ""
}

func files(t *testing.T, dir string) int {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "seg-*.log"))
	return len(m)
}

// Records come back in order; a segment is deleted once sealed, read and
// every record of it acked.
func TestAppendReadAck(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{SegmentBytes: 64})
	for i := range 10 {
		if err := s.Append(fmt.Appendf(nil, "event-%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if files(t, dir) < 3 {
		t.Fatalf("%d segments for 10 records of 16 bytes in segments of 64", files(t, dir))
	}
	var seqs []Seq
	for i := range 10 {
		q, p := next(t, s)
		if want := fmt.Sprintf("event-%02d", i); p != want {
			t.Fatalf("record %d: %q, want %q", i, p, want)
		}
		seqs = append(seqs, q)
	}
	if pending, _ := s.Stats(); pending != 10 {
		t.Errorf("pending %d, want 10", pending)
	}
	for i := len(seqs) - 1; i >= 0; i-- { // out of order
		s.Ack(seqs[i])
	}
	s.now = func() time.Time { return time.Now().Add(time.Minute) }
	s.Tick()
	if pending, bytes := s.Stats(); pending != 0 || bytes != 0 || files(t, dir) != 0 {
		t.Errorf("after every ack: pending %d, bytes %d, %d segment files; want none", pending, bytes, files(t, dir))
	}
	if err := s.Append([]byte("after")); err != nil {
		t.Fatal(err)
	}
	if _, p := next(t, s); p != "after" {
		t.Errorf("after deletion: %q", p)
	}
}

// What was not acked comes back after a restart (a killed process: no
// Close), acked segments do not; a torn last record is cut off.
func TestRecoveryAfterKill(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{MaxBytes: 1 << 20, SegmentBytes: 26})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if err := s.Append(fmt.Appendf(nil, "rec-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // the first segment (two records of 5 bytes + 8) read and acked
		q, _ := next(t, s)
		s.Ack(q)
	}
	_, _ = next(t, s) // read, not acked
	// Killed: no Close; the lock goes with the process, here by hand.
	s.release()
	newest, _ := filepath.Glob(filepath.Join(dir, "seg-*.log"))
	f, err := os.OpenFile(newest[len(newest)-1], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write([]byte{40, 0, 0, 0, 1, 2}) // a record cut off mid-write
	f.Close()

	s2 := open(t, dir, Options{SegmentBytes: 26})
	var got []string
	for range 4 {
		_, p := next(t, s2)
		got = append(got, p)
	}
	if fmt.Sprint(got) != "[rec-2 rec-3 rec-4 rec-5]" {
		t.Errorf("after the restart: %v, want rec-2 to rec-5", got)
	}
	if pending, _ := s2.Stats(); pending != 4 {
		t.Errorf("pending %d, want 4", pending)
	}
}

// Beyond MaxBytes appends are refused; acks make room.
func TestFull(t *testing.T) {
	s := open(t, t.TempDir(), Options{MaxBytes: 100, SegmentBytes: 30})
	var n int
	for {
		err := s.Append([]byte("0123456789"))
		if errors.Is(err, ErrFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 5 {
		t.Fatalf("%d records of 18 bytes in 100, want 5", n)
	}
	for range n {
		q, _ := next(t, s)
		s.Ack(q)
	}
	s.now = func() time.Time { return time.Now().Add(time.Minute) }
	s.Tick()
	if err := s.Append([]byte("0123456789")); err != nil {
		t.Errorf("after the acks: %v", err)
	}
	if err := s.Append(make([]byte, MaxRecord+1)); !errors.Is(err, ErrLarge) {
		t.Errorf("an oversized record: %v", err)
	}
}

// One directory, one process.
func TestLocked(t *testing.T) {
	dir := t.TempDir()
	open(t, dir, Options{})
	if _, err := Open(dir, Options{MaxBytes: 1 << 20}); err == nil || !strings.Contains(err.Error(), "in use by another process") {
		t.Fatalf("a second Open: %v, want refused", err)
	}
}

// Writers and a reader at once (run with -race): every record read once.
func TestConcurrent(t *testing.T) {
	s := open(t, t.TempDir(), Options{MaxBytes: 64 << 20, SegmentBytes: 4096})
	const writers, each = 8, 500
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := s.Append(fmt.Appendf(nil, "%d-%d", w, i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	seen := map[string]bool{}
	for range writers * each {
		q, p := next(t, s)
		if seen[p] {
			t.Fatalf("%s read twice", p)
		}
		seen[p] = true
		s.Ack(q)
	}
	wg.Wait()
	if pending, _ := s.Stats(); pending != 0 {
		t.Errorf("pending %d", pending)
	}
}

// FuzzRecover: whatever a segment file holds, Open recovers without
// panicking and yields only records whose checksums hold.
func FuzzRecover(f *testing.F) {
	dir := f.TempDir()
	s, _ := Open(filepath.Join(dir, "seed"), Options{MaxBytes: 1 << 20})
	_ = s.Append([]byte("a usage event"))
	_ = s.Append([]byte("another"))
	_ = s.Close()
	seed, _ := os.ReadFile(filepath.Join(dir, "seed", "seg-0000000000000001.log"))
	f.Add(seed, true)
	f.Add([]byte{255, 255, 255, 255, 0, 0, 0, 0}, false)
	f.Add(append(append([]byte{}, seed...), seed[:5]...), true)
	f.Fuzz(func(t *testing.T, data []byte, last bool) {
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, "seg-0000000000000001.log"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		if !last {
			_ = os.WriteFile(filepath.Join(d, "seg-0000000000000002.log"), seed, 0o600)
		}
		s, err := Open(d, Options{MaxBytes: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		pending, _ := s.Stats()
		for range pending {
			if _, p, err := s.Next(); err != nil || len(p) > len(data)+len(seed) {
				t.Fatalf("record %q, %v", p, err)
			}
		}
	})
}

// BenchmarkAppend: one usage event's record (300 bytes) appended.
func BenchmarkAppend(b *testing.B) {
	s, err := Open(b.TempDir(), Options{MaxBytes: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	rec := make([]byte, 300)
	for b.Loop() {
		if err := s.Append(rec); err != nil {
			b.Fatal(err)
		}
	}
}
