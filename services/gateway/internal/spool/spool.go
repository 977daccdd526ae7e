// Package spool is the gateway's usage events on disk: an append-only log
// that holds every event from the moment the request ends until JetStream
// acknowledges it, so that neither a NATS outage of any length (within the
// bound) nor a gateway restart loses one.
//
// # Layout
//
// A directory of segment files, seg-<n>.log, each a run of records:
//
//	length uint32 (little-endian) | crc32c uint32 of the payload | payload
//
// The newest segment takes appends; it is sealed (synced, and a new one
// started) when it reaches SegmentBytes or SegmentAge. A reader follows
// the records in order; Ack marks one done, and a segment whose every
// record is done, and that the reader has passed, is deleted.
//
// # Recovery
//
// Open reads every segment left by a previous process. Each record in
// them is unacknowledged as far as this process knows (acks live in
// memory), so each is read and published again; the usage stream
// de-duplicates copies by Nats-Msg-Id within its window, and the meter by
// request id within its own, so a re-sent event is never counted twice.
// Rotating segments every few seconds keeps what a restart re-sends to
// those seconds, unless NATS was away. A torn record at the end of the
// last segment (a crash mid-write: short, or its checksum wrong) is cut
// off there; a bad record anywhere else ends that segment's reading, the
// rest of which is counted as lost.
//
// # Durability
//
// Appends are written with one write(2) each and synced when a segment is
// sealed: a killed process loses nothing written, a machine that loses
// power can lose its newest segment's records.
//
// # Bounds
//
// MaxBytes bounds the directory; Append refuses a record beyond it
// (ErrFull), and the caller counts it dropped.
package spool

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Defaults.
const (
	SegmentBytes = 1 << 20
	SegmentAge   = 5 * time.Second
	// MaxRecord bounds one record; a usage event is a few hundred bytes.
	MaxRecord = 1 << 20
)

// Errors.
var (
	ErrFull   = errors.New("usage spool full")
	ErrClosed = errors.New("usage spool closed")
	ErrLarge  = errors.New("record larger than the spool's limit")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Options size a spool.
type Options struct {
	MaxBytes     int64
	SegmentBytes int64         // 0: SegmentBytes
	SegmentAge   time.Duration // 0: SegmentAge
}

// Seq names a record: its segment and its index there.
type Seq struct {
	Segment uint64
	Index   int
}

// Spool is safe for concurrent use.
type Spool struct {
	dir  string
	opts Options
	lock *os.File

	mu     sync.Mutex
	cond   *sync.Cond
	closed bool
	segs   []*segment // oldest first; the last takes appends
	bytes  int64      // every segment's size
	// The reader's place: the segment index in segs and the byte offset
	// and record index in it.
	rseg   int
	roff   int64
	ridx   int
	rfile  *os.File // the segment being read, opened lazily
	lost   int64    // records lost to corruption at recovery
	now    func() time.Time
	sealAt time.Time
}

type segment struct {
	n       uint64
	path    string
	f       *os.File // open for appends: the newest only
	size    int64
	records int
	acked   int
	sealed  bool
	// readable ends the records a reader may take (corruption cuts it).
	readable int64
}

// Open opens (creating) the spool in dir, taking a lock on it so that no
// other process uses it, and recovers what a previous process left.
func Open(dir string, o Options) (*Spool, error) {
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = SegmentBytes
	}
	if o.SegmentAge <= 0 {
		o.SegmentAge = SegmentAge
	}
	if o.MaxBytes <= 0 {
		return nil, errors.New("usage spool: max bytes must be positive")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("usage spool: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("usage spool: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("usage spool %s: in use by another process (%w): give each gateway a directory of its own", dir, err)
	}
	s := &Spool{dir: dir, opts: o, lock: lock, now: time.Now}
	s.cond = sync.NewCond(&s.mu)
	if err := s.recover(); err != nil {
		s.release()
		return nil, err
	}
	return s, nil
}

// recover reads the segments left behind.
func (s *Spool) recover() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("usage spool: %w", err)
	}
	var ns []uint64
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok || !strings.HasPrefix(name, "seg-") {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimPrefix(name, "seg-"), 10, 64)
		if err != nil {
			continue
		}
		ns = append(ns, n)
	}
	slices.Sort(ns)
	for i, n := range ns {
		seg := &segment{n: n, path: s.segPath(n), sealed: true}
		if err := s.scan(seg, i == len(ns)-1); err != nil {
			return err
		}
		if seg.records == 0 {
			_ = os.Remove(seg.path)
			continue
		}
		s.segs = append(s.segs, seg)
		s.bytes += seg.size
	}
	return nil
}

// scan counts a segment's records and cuts a torn tail (last: the
// segment a crash could have been writing).
func (s *Spool) scan(seg *segment, last bool) error {
	f, err := os.OpenFile(seg.path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("usage spool: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("usage spool: %w", err)
	}
	var off int64
	var head [8]byte
	buf := make([]byte, 0, 4096)
	for off < st.Size() {
		if _, err := f.ReadAt(head[:], off); err != nil {
			break
		}
		n := int64(binary.LittleEndian.Uint32(head[:4]))
		if n > MaxRecord || off+8+n > st.Size() {
			break
		}
		buf = slices.Grow(buf[:0], int(n))[:n]
		if _, err := f.ReadAt(buf, off+8); err != nil || crc32.Checksum(buf, castagnoli) != binary.LittleEndian.Uint32(head[4:]) {
			break
		}
		off += 8 + n
		seg.records++
	}
	seg.size, seg.readable = st.Size(), off
	if off < st.Size() {
		if last {
			// A torn write: cut it off.
			if err := f.Truncate(off); err != nil {
				return fmt.Errorf("usage spool: %w", err)
			}
			seg.size = off
		} else {
			s.lost++ // what follows the bad record cannot be trusted
		}
	}
	return nil
}

func (s *Spool) segPath(n uint64) string {
	return filepath.Join(s.dir, fmt.Sprintf("seg-%016d.log", n))
}

// Lost is the number of segments whose reading corruption cut short at
// recovery.
func (s *Spool) Lost() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost
}

// Append writes a record. It returns ErrFull when the spool holds
// MaxBytes already.
func (s *Spool) Append(p []byte) error {
	if len(p) > MaxRecord {
		return ErrLarge
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	need := int64(8 + len(p))
	if s.bytes+need > s.opts.MaxBytes {
		return ErrFull
	}
	seg, err := s.writable()
	if err != nil {
		return err
	}
	rec := make([]byte, 8, need)
	binary.LittleEndian.PutUint32(rec[:4], uint32(len(p)))
	binary.LittleEndian.PutUint32(rec[4:8], crc32.Checksum(p, castagnoli))
	rec = append(rec, p...)
	if _, err := seg.f.Write(rec); err != nil {
		// A short write leaves a torn record; the next open cuts it.
		seg.size, _ = seg.f.Seek(0, io.SeekEnd)
		return fmt.Errorf("usage spool: %w", err)
	}
	seg.size += need
	seg.readable = seg.size
	seg.records++
	s.bytes += need
	s.cond.Broadcast()
	return nil
}

// writable is the segment taking appends, sealing the current one when it
// is full or old.
func (s *Spool) writable() (*segment, error) {
	var cur *segment
	if n := len(s.segs); n > 0 && !s.segs[n-1].sealed {
		cur = s.segs[n-1]
		if cur.size < s.opts.SegmentBytes && s.now().Before(s.sealAt) {
			return cur, nil
		}
		s.seal(cur)
	}
	next := uint64(1)
	if n := len(s.segs); n > 0 {
		next = s.segs[n-1].n + 1
	}
	f, err := os.OpenFile(s.segPath(next), os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("usage spool: %w", err)
	}
	seg := &segment{n: next, path: f.Name(), f: f}
	s.segs = append(s.segs, seg)
	s.sealAt = s.now().Add(s.opts.SegmentAge)
	return seg, nil
}

// seal syncs and closes a segment's appends.
func (s *Spool) seal(seg *segment) {
	if seg.f != nil {
		_ = seg.f.Sync()
		_ = seg.f.Close()
		seg.f = nil
	}
	seg.sealed = true
	s.collect()
}

// Next returns the next record to publish, waiting for one; it returns
// ErrClosed once the spool is closed. The bytes are the caller's.
func (s *Spool) Next() (Seq, []byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.closed {
			return Seq{}, nil, ErrClosed
		}
		if s.rseg < len(s.segs) {
			seg := s.segs[s.rseg]
			if s.roff < seg.readable {
				return s.readLocked(seg)
			}
			if seg.sealed && s.rseg+1 < len(s.segs) {
				s.advanceLocked()
				continue
			}
		}
		s.cond.Wait()
	}
}

func (s *Spool) advanceLocked() {
	if s.rfile != nil {
		s.rfile.Close()
		s.rfile = nil
	}
	s.rseg++
	s.roff, s.ridx = 0, 0
	s.collect()
}

func (s *Spool) readLocked(seg *segment) (Seq, []byte, error) {
	if s.rfile == nil {
		f, err := os.Open(seg.path)
		if err != nil {
			return Seq{}, nil, fmt.Errorf("usage spool: %w", err)
		}
		s.rfile = f
	}
	var head [8]byte
	if _, err := s.rfile.ReadAt(head[:], s.roff); err != nil {
		return Seq{}, nil, fmt.Errorf("usage spool: read %s: %w", seg.path, err)
	}
	n := int64(binary.LittleEndian.Uint32(head[:4]))
	p := make([]byte, n)
	if _, err := s.rfile.ReadAt(p, s.roff+8); err != nil {
		return Seq{}, nil, fmt.Errorf("usage spool: read %s: %w", seg.path, err)
	}
	seq := Seq{Segment: seg.n, Index: s.ridx}
	s.roff += 8 + n
	s.ridx++
	return seq, p, nil
}

// Ack marks a record done: its event reached JetStream (or is given up).
func (s *Spool) Ack(q Seq) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, seg := range s.segs {
		if seg.n == q.Segment {
			seg.acked++
			break
		}
	}
	s.collect()
}

// collect deletes the sealed segments the reader has read through whose
// every record is done. Callers hold s.mu.
func (s *Spool) collect() {
	keep := s.segs[:0]
	rseg := s.rseg
	for i, seg := range s.segs {
		read := i < s.rseg || (i == s.rseg && s.roff >= seg.readable)
		if read && seg.sealed && seg.acked >= seg.records {
			_ = os.Remove(seg.path)
			s.bytes -= seg.size
			if i < s.rseg {
				rseg--
			} else { // the reader's own: it starts the next
				if s.rfile != nil {
					s.rfile.Close()
					s.rfile = nil
				}
				s.roff, s.ridx = 0, 0
			}
			continue
		}
		keep = append(keep, seg)
	}
	for i := len(keep); i < len(s.segs); i++ {
		s.segs[i] = nil
	}
	s.segs, s.rseg = keep, rseg
}

// Tick seals the newest segment once it is SegmentAge old, so that an
// idle spool's last records are deleted once done, and a restart re-sends
// no more than the last seconds. Call it every second or so.
func (s *Spool) Tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.segs); n > 0 && !s.segs[n-1].sealed && !s.now().Before(s.sealAt) {
		s.seal(s.segs[n-1])
	}
}

// Stats are the spool's size: records not yet acked and bytes on disk.
func (s *Spool) Stats() (pending int64, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, seg := range s.segs {
		pending += int64(seg.records - seg.acked)
	}
	return pending, s.bytes
}

// Close seals the newest segment and releases the directory. What is not
// acked stays for the next Open.
func (s *Spool) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for _, seg := range s.segs {
		if seg.f != nil {
			_ = seg.f.Sync()
			_ = seg.f.Close()
			seg.f = nil
		}
	}
	if s.rfile != nil {
		s.rfile.Close()
		s.rfile = nil
	}
	s.cond.Broadcast()
	s.mu.Unlock()
	s.release()
	return nil
}

func (s *Spool) release() {
	_ = syscall.Flock(int(s.lock.Fd()), syscall.LOCK_UN)
	_ = s.lock.Close()
}
