package kvevents

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
)

// maxValueDepth bounds the nesting of opaque extra_keys values, so hostile
// input cannot exhaust the stack.
const maxValueDepth = 32

// DecodeError says what was wrong with a payload and where.
type DecodeError struct {
	// Path locates the value, e.g. "events[3].token_ids[7]"; empty for the
	// batch itself.
	Path string
	// Offset is the byte offset in the payload where decoding stopped.
	Offset int
	Msg    string
}

func (e *DecodeError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("decode kv event batch at byte %d: %s", e.Offset, e.Msg)
	}
	return fmt.Sprintf("decode kv event batch: %s at byte %d: %s", e.Path, e.Offset, e.Msg)
}

// at prefixes the path of a *DecodeError with p (a field name or "[i]").
// It runs only on the error path, so building strings here costs nothing
// on valid input.
func at(err error, p string) error {
	de, ok := err.(*DecodeError)
	if !ok {
		return err
	}
	switch {
	case de.Path == "":
		de.Path = p
	case de.Path[0] == '[':
		de.Path = p + de.Path
	default:
		de.Path = p + "." + de.Path
	}
	return de
}

func atIndex(err error, i int) error { return at(err, "["+strconv.Itoa(i)+"]") }

// Decoder decodes vLLM KV event payloads. It is not safe for concurrent
// use; give each goroutine its own.
//
// The zero value is ready to use. A Decoder recycles the events it
// decoded: the events in a Batch, and every slice and pointer inside them,
// are valid until the next Decode on the same Decoder. Copy what you keep.
type Decoder struct {
	stored   []*storedSlot
	removed  []*removedSlot
	unknown  []*Unknown
	nStored  int
	nRemoved int
	nUnknown int
	dpRank   int64
}

// storedSlot holds a BlockStored together with the storage its optional
// fields point at, so decoding a steady stream allocates nothing.
type storedSlot struct {
	ev                       BlockStored
	parent                   EngineHash
	loraID, groupIdx, window int64
	medium, loraName, kind   string
	hashes                   []EngineHash
	tokens                   []uint32
	extra                    []any
}

type removedSlot struct {
	ev       BlockRemoved
	groupIdx int64
	medium   string
	hashes   []EngineHash
}

// Decode decodes payload into out, reusing out.Events' backing array and
// the Decoder's own event storage. It auto-detects the array and map
// encodings, per batch and per event, and accepts every layout vLLM has
// shipped: fields missing from older layouts decode as nil, unknown map
// keys and extra trailing array elements are skipped, and events with an
// unknown tag decode as *Unknown. Malformed input returns a *DecodeError.
func (d *Decoder) Decode(payload []byte, out *Batch) error {
	d.nStored, d.nRemoved, d.nUnknown = 0, 0, 0
	out.TS = 0
	out.Events = out.Events[:0]
	out.DataParallelRank = nil
	r := reader{b: payload}
	var err error
	switch k := r.kind(); k {
	case kindArray:
		err = d.batchArray(&r, out)
	case kindMap:
		err = d.batchMap(&r, out)
	default:
		err = r.errf("batch: want array or map, got %s", r.kindName())
	}
	if err == nil && r.i != len(r.b) {
		err = r.errf("%d trailing bytes after the batch", len(r.b)-r.i)
	}
	if err != nil {
		// Leave no half-decoded batch behind for a caller that ignores err.
		clear(out.Events)
		out.Events = out.Events[:0]
		out.DataParallelRank = nil
	}
	return err
}

func (d *Decoder) batchArray(r *reader, out *Batch) error {
	n, err := r.arrayLen()
	if err != nil {
		return err
	}
	if n < 2 {
		return r.errf("batch: want at least 2 elements [ts, events], got %d", n)
	}
	if out.TS, err = r.float(); err != nil {
		return at(err, "ts")
	}
	if err := d.events(r, out); err != nil {
		return err
	}
	if n >= 3 {
		if err := d.dp(r, out); err != nil {
			return err
		}
	}
	for i := 3; i < n; i++ {
		if err := r.skip(); err != nil {
			return atIndex(err, i)
		}
	}
	return nil
}

func (d *Decoder) batchMap(r *reader, out *Batch) error {
	n, err := r.mapLen()
	if err != nil {
		return err
	}
	var seenTS, seenEvents bool
	for i := 0; i < n; i++ {
		key, err := r.key()
		if err != nil {
			return err
		}
		switch string(key) {
		case "ts":
			if out.TS, err = r.float(); err != nil {
				return at(err, "ts")
			}
			seenTS = true
		case "events":
			if err := d.events(r, out); err != nil {
				return err
			}
			seenEvents = true
		case "data_parallel_rank":
			if err := d.dp(r, out); err != nil {
				return err
			}
		default:
			if err := r.skip(); err != nil {
				return at(err, string(key))
			}
		}
	}
	if !seenTS {
		return r.errf("batch: missing required field ts")
	}
	if !seenEvents {
		return r.errf("batch: missing required field events")
	}
	return nil
}

func (d *Decoder) dp(r *reader, out *Batch) error {
	if r.isNil() {
		r.i++
		out.DataParallelRank = nil
		return nil
	}
	v, err := r.int64()
	if err != nil {
		return at(err, "data_parallel_rank")
	}
	d.dpRank = v
	out.DataParallelRank = &d.dpRank
	return nil
}

func (d *Decoder) events(r *reader, out *Batch) error {
	n, err := r.arrayLen()
	if err != nil {
		return at(err, "events")
	}
	out.Events = out.Events[:0]
	if cap(out.Events) < n {
		out.Events = make([]Event, 0, n)
	}
	for i := 0; i < n; i++ {
		ev, err := d.event(r)
		if err != nil {
			return at(atIndex(err, i), "events")
		}
		out.Events = append(out.Events, ev)
	}
	return nil
}

// event decodes one tagged struct, array or map form.
func (d *Decoder) event(r *reader) (Event, error) {
	switch r.kind() {
	case kindArray:
		n, err := r.arrayLen()
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, r.errf("want a tagged array, got an empty one")
		}
		tag, err := r.str()
		if err != nil {
			return nil, at(err, "[0]")
		}
		return d.fields(r, tag, n-1, -1)
	case kindMap:
		hdr := r.i
		n, err := r.mapLen()
		if err != nil {
			return nil, err
		}
		start := r.i
		if n > 0 && r.kind() == kindStr {
			// msgspec writes the tag first: take it without a scan.
			k, err := r.key()
			if err != nil {
				return nil, err
			}
			if string(k) == "type" {
				tag, err := r.str()
				if err != nil {
					return nil, at(err, "type")
				}
				return d.fields(r, tag, -1, n-1)
			}
			r.i = start
		}
		tag, err := r.findTag(n)
		if err != nil {
			return nil, err
		}
		if tag == nil {
			r.i = hdr
			return nil, r.errf("event map has no \"type\" tag")
		}
		r.i = start
		return d.fields(r, tag, -1, n)
	default:
		return nil, r.errf("want array or map, got %s", r.kindName())
	}
}

// Field indexes, in vLLM's declaration order (see storedFields).
const (
	fBlockHashes = iota
	fParent
	fTokenIDs
	fBlockSize
	fLoRAID
	fMedium
	fLoRAName
	fExtraKeys
	fGroupIdx
	fKind
	fWindow
	fUnknown = -1
	fTag     = -2
)

func storedField(key []byte) int {
	switch string(key) {
	case "block_hashes":
		return fBlockHashes
	case "parent_block_hash":
		return fParent
	case "token_ids":
		return fTokenIDs
	case "block_size":
		return fBlockSize
	case "lora_id":
		return fLoRAID
	case "medium":
		return fMedium
	case "lora_name":
		return fLoRAName
	case "extra_keys":
		return fExtraKeys
	case "group_idx":
		return fGroupIdx
	case "kv_cache_spec_kind":
		return fKind
	case "kv_cache_spec_sliding_window":
		return fWindow
	case "type":
		return fTag
	}
	return fUnknown
}

// Positions of BlockRemoved's fields in array form, and their map keys.
func removedField(key []byte) int {
	switch string(key) {
	case "block_hashes":
		return 0
	case "medium":
		return 1
	case "group_idx":
		return 2
	case "type":
		return fTag
	}
	return fUnknown
}

// fields decodes the body of an event: nArr positional fields after the
// tag (array form) or nMap key/value pairs (map form; a "type" pair among
// them is skipped).
func (d *Decoder) fields(r *reader, tag []byte, nArr, nMap int) (Event, error) {
	switch string(tag) {
	case TagBlockStored:
		return d.blockStored(r, nArr, nMap)
	case TagBlockRemoved:
		return d.blockRemoved(r, nArr, nMap)
	case TagAllBlocksCleared:
		return &AllBlocksCleared{}, d.skipBody(r, nArr, nMap)
	}
	u := d.unknownSlot()
	if u.Name != string(tag) {
		u.Name = string(tag)
	}
	return u, d.skipBody(r, nArr, nMap)
}

func (d *Decoder) skipBody(r *reader, nArr, nMap int) error {
	n := nArr
	if nMap >= 0 {
		n = 2 * nMap
	}
	for i := 0; i < n; i++ {
		if err := r.skip(); err != nil {
			return err
		}
	}
	return nil
}

func (d *Decoder) unknownSlot() *Unknown {
	if d.nUnknown == len(d.unknown) {
		d.unknown = append(d.unknown, new(Unknown))
	}
	u := d.unknown[d.nUnknown]
	d.nUnknown++
	return u
}

func (d *Decoder) storedSlot() *storedSlot {
	if d.nStored == len(d.stored) {
		d.stored = append(d.stored, new(storedSlot))
	}
	s := d.stored[d.nStored]
	d.nStored++
	return s
}

func (d *Decoder) removedSlot() *removedSlot {
	if d.nRemoved == len(d.removed) {
		d.removed = append(d.removed, new(removedSlot))
	}
	s := d.removed[d.nRemoved]
	d.nRemoved++
	return s
}

func (d *Decoder) blockStored(r *reader, nArr, nMap int) (Event, error) {
	s := d.storedSlot()
	s.ev = BlockStored{}
	var seen uint32
	field := func(f int) error {
		if f >= 0 {
			seen |= 1 << f
		}
		var err error
		switch f {
		case fBlockHashes:
			s.hashes, err = r.hashes(s.hashes[:0])
			s.ev.BlockHashes = s.hashes
		case fParent:
			s.ev.ParentBlockHash = nil
			if r.isNil() {
				r.i++
				break
			}
			if s.parent, err = r.hash(); err == nil {
				s.ev.ParentBlockHash = &s.parent
			}
		case fTokenIDs:
			s.tokens, err = r.tokens(s.tokens[:0])
			s.ev.TokenIDs = s.tokens
		case fBlockSize:
			var v int64
			v, err = r.int64()
			s.ev.BlockSize = int(v)
		case fLoRAID:
			s.ev.LoRAID, err = r.optInt(&s.loraID)
		case fMedium:
			s.ev.Medium, err = r.optStr(&s.medium)
		case fLoRAName:
			s.ev.LoRAName, err = r.optStr(&s.loraName)
		case fExtraKeys:
			s.ev.ExtraKeys = nil
			if r.isNil() {
				r.i++
				break
			}
			s.extra, err = r.values(s.extra[:0])
			s.ev.ExtraKeys = s.extra
			if s.ev.ExtraKeys == nil {
				// [] is not None: keep an empty, non-nil slice.
				s.ev.ExtraKeys = []any{}
			}
		case fGroupIdx:
			s.ev.GroupIdx, err = r.optInt(&s.groupIdx)
		case fKind:
			s.ev.KVCacheSpecKind, err = r.optStr(&s.kind)
		case fWindow:
			s.ev.KVCacheSpecSlidingWindow, err = r.optInt(&s.window)
		default:
			err = r.skip()
		}
		return err
	}
	if nArr >= 0 {
		for i := 0; i < nArr; i++ {
			f := i
			if f > fWindow {
				f = fUnknown
			}
			if err := field(f); err != nil {
				if f >= 0 {
					return nil, at(err, storedFields[f])
				}
				return nil, atIndex(err, i+1)
			}
		}
	} else {
		for i := 0; i < nMap; i++ {
			key, err := r.key()
			if err != nil {
				return nil, err
			}
			f := storedField(key)
			if f == fTag {
				f = fUnknown
			}
			if err := field(f); err != nil {
				return nil, at(err, string(key))
			}
		}
	}
	const required = 1<<fBlockHashes | 1<<fTokenIDs | 1<<fBlockSize
	if seen&required != required {
		for _, f := range []int{fBlockHashes, fTokenIDs, fBlockSize} {
			if seen&(1<<f) == 0 {
				return nil, r.errf("BlockStored: missing required field %s", storedFields[f])
			}
		}
	}
	return &s.ev, nil
}

func (d *Decoder) blockRemoved(r *reader, nArr, nMap int) (Event, error) {
	s := d.removedSlot()
	s.ev = BlockRemoved{}
	var seenHashes bool
	field := func(f int) error {
		var err error
		switch f {
		case 0:
			seenHashes = true
			s.hashes, err = r.hashes(s.hashes[:0])
			s.ev.BlockHashes = s.hashes
		case 1:
			s.ev.Medium, err = r.optStr(&s.medium)
		case 2:
			s.ev.GroupIdx, err = r.optInt(&s.groupIdx)
		default:
			err = r.skip()
		}
		return err
	}
	names := [...]string{"block_hashes", "medium", "group_idx"}
	if nArr >= 0 {
		for i := 0; i < nArr; i++ {
			f := i
			if f > 2 {
				f = fUnknown
			}
			if err := field(f); err != nil {
				if f >= 0 {
					return nil, at(err, names[f])
				}
				return nil, atIndex(err, i+1)
			}
		}
	} else {
		for i := 0; i < nMap; i++ {
			key, err := r.key()
			if err != nil {
				return nil, err
			}
			f := removedField(key)
			if f == fTag {
				f = fUnknown
			}
			if err := field(f); err != nil {
				return nil, at(err, string(key))
			}
		}
	}
	if !seenHashes {
		return nil, r.errf("BlockRemoved: missing required field block_hashes")
	}
	return &s.ev, nil
}

// reader is a bounds-checked msgpack cursor. Every length prefix is
// checked against the bytes left before anything is allocated from it.
type reader struct {
	b []byte
	i int
}

type kind uint8

const (
	kindInvalid kind = iota
	kindNil
	kindBool
	kindInt
	kindFloat
	kindStr
	kindBin
	kindArray
	kindMap
	kindExt
	kindEOF
)

var kindNames = [...]string{
	kindInvalid: "invalid byte",
	kindNil:     "nil",
	kindBool:    "bool",
	kindInt:     "int",
	kindFloat:   "float",
	kindStr:     "str",
	kindBin:     "bin",
	kindArray:   "array",
	kindMap:     "map",
	kindExt:     "ext",
	kindEOF:     "end of input",
}

func kindOf(c byte) kind {
	switch {
	case c <= 0x7f || c >= 0xe0:
		return kindInt
	case c <= 0x8f:
		return kindMap
	case c <= 0x9f:
		return kindArray
	case c <= 0xbf:
		return kindStr
	}
	switch c {
	case 0xc0:
		return kindNil
	case 0xc2, 0xc3:
		return kindBool
	case 0xc4, 0xc5, 0xc6:
		return kindBin
	case 0xc7, 0xc8, 0xc9, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
		return kindExt
	case 0xca, 0xcb:
		return kindFloat
	case 0xcc, 0xcd, 0xce, 0xcf, 0xd0, 0xd1, 0xd2, 0xd3:
		return kindInt
	case 0xd9, 0xda, 0xdb:
		return kindStr
	case 0xdc, 0xdd:
		return kindArray
	case 0xde, 0xdf:
		return kindMap
	}
	return kindInvalid // 0xc1
}

func (r *reader) kind() kind {
	if r.i >= len(r.b) {
		return kindEOF
	}
	return kindOf(r.b[r.i])
}

func (r *reader) kindName() string {
	k := r.kind()
	if k == kindInvalid {
		return fmt.Sprintf("invalid byte 0x%02x", r.b[r.i])
	}
	return kindNames[k]
}

func (r *reader) errf(format string, args ...any) error {
	return &DecodeError{Offset: r.i, Msg: fmt.Sprintf(format, args...)}
}

func (r *reader) want(what string) error {
	return r.errf("want %s, got %s", what, r.kindName())
}

func (r *reader) isNil() bool { return r.i < len(r.b) && r.b[r.i] == 0xc0 }

// need reports whether n more bytes follow position r.i.
func (r *reader) need(n int) bool { return n >= 0 && len(r.b)-r.i >= n }

func (r *reader) u8(off int) (uint64, bool) {
	if !r.need(off + 1) {
		return 0, false
	}
	return uint64(r.b[r.i+off]), true
}

func (r *reader) u16(off int) (uint64, bool) {
	if !r.need(off + 2) {
		return 0, false
	}
	return uint64(binary.BigEndian.Uint16(r.b[r.i+off:])), true
}

func (r *reader) u32(off int) (uint64, bool) {
	if !r.need(off + 4) {
		return 0, false
	}
	return uint64(binary.BigEndian.Uint32(r.b[r.i+off:])), true
}

func (r *reader) u64(off int) (uint64, bool) {
	if !r.need(off + 8) {
		return 0, false
	}
	return binary.BigEndian.Uint64(r.b[r.i+off:]), true
}

func (r *reader) truncated() error {
	return r.errf("truncated input")
}

// container reads an array or map header and checks the count against the
// bytes left (every element takes at least one byte, a map entry two).
func (r *reader) container(fix, fixMask byte, b16, b32 byte, per int, what string) (int, error) {
	if r.i >= len(r.b) {
		return 0, r.want(what)
	}
	c := r.b[r.i]
	var n uint64
	var hdr int
	var ok bool
	switch {
	case c&^fixMask == fix:
		n, hdr, ok = uint64(c&fixMask), 1, true
	case c == b16:
		n, ok = r.u16(1)
		hdr = 3
	case c == b32:
		n, ok = r.u32(1)
		hdr = 5
	default:
		return 0, r.want(what)
	}
	if !ok {
		return 0, r.truncated()
	}
	if n > uint64(len(r.b)-r.i-hdr)/uint64(per) {
		return 0, r.errf("%s of %d elements exceeds the %d bytes left", what, n, len(r.b)-r.i-hdr)
	}
	r.i += hdr
	return int(n), nil
}

func (r *reader) arrayLen() (int, error) { return r.container(0x90, 0x0f, 0xdc, 0xdd, 1, "array") }
func (r *reader) mapLen() (int, error)   { return r.container(0x80, 0x0f, 0xde, 0xdf, 2, "map") }

// strOrBin reads the body of a str (allowStr) or bin (allowBin) without
// copying; what names the expected value in errors.
func (r *reader) strOrBin(allowBin, allowStr bool, what string) ([]byte, error) {
	if r.i >= len(r.b) {
		return nil, r.want(what)
	}
	c := r.b[r.i]
	var n uint64
	var hdr int
	ok := true
	switch {
	case c >= 0xa0 && c <= 0xbf && allowStr:
		n, hdr = uint64(c&0x1f), 1
	case c == 0xd9 && allowStr, c == 0xc4 && allowBin:
		n, ok = r.u8(1)
		hdr = 2
	case c == 0xda && allowStr, c == 0xc5 && allowBin:
		n, ok = r.u16(1)
		hdr = 3
	case c == 0xdb && allowStr, c == 0xc6 && allowBin:
		n, ok = r.u32(1)
		hdr = 5
	default:
		return nil, r.want(what)
	}
	if !ok {
		return nil, r.truncated()
	}
	if n > uint64(len(r.b)-r.i-hdr) {
		return nil, r.errf("%s of %d bytes exceeds the %d bytes left", what, n, len(r.b)-r.i-hdr)
	}
	start := r.i + hdr
	r.i = start + int(n)
	return r.b[start:r.i:r.i], nil
}

func (r *reader) str() ([]byte, error) { return r.strOrBin(false, true, "str") }

// key reads a map key; vLLM's keys are field names, always str.
func (r *reader) key() ([]byte, error) { return r.strOrBin(false, true, "str key") }

// findTag returns the "type" value of a map-form event of n entries (nil
// when there is none), leaving r after the map. msgspec writes the tag first; the scan covers
// writers that do not.
func (r *reader) findTag(n int) ([]byte, error) {
	var tag []byte
	for i := 0; i < n; i++ {
		if r.kind() == kindStr {
			k, err := r.key()
			if err != nil {
				return nil, err
			}
			if string(k) == "type" {
				if tag, err = r.str(); err != nil {
					return nil, at(err, "type")
				}
				continue
			}
		} else if err := r.skip(); err != nil {
			return nil, err
		}
		if err := r.skip(); err != nil {
			return nil, err
		}
	}
	return tag, nil
}

// intVal reads any msgpack int. neg reports a negative value, whose
// two's-complement bits are in u.
func (r *reader) intVal() (u uint64, neg bool, err error) {
	if r.i >= len(r.b) {
		return 0, false, r.want("int")
	}
	c := r.b[r.i]
	if c <= 0x7f {
		r.i++
		return uint64(c), false, nil
	}
	if c >= 0xe0 {
		r.i++
		return uint64(int64(int8(c))), true, nil
	}
	var ok bool
	var hdr int
	switch c {
	case 0xcc:
		u, ok = r.u8(1)
		hdr = 2
	case 0xcd:
		u, ok = r.u16(1)
		hdr = 3
	case 0xce:
		u, ok = r.u32(1)
		hdr = 5
	case 0xcf:
		u, ok = r.u64(1)
		hdr = 9
	case 0xd0:
		u, ok = r.u8(1)
		u, hdr = uint64(int64(int8(u))), 2
	case 0xd1:
		u, ok = r.u16(1)
		u, hdr = uint64(int64(int16(u))), 3
	case 0xd2:
		u, ok = r.u32(1)
		u, hdr = uint64(int64(int32(u))), 5
	case 0xd3:
		u, ok = r.u64(1)
		hdr = 9
	default:
		return 0, false, r.want("int")
	}
	if !ok {
		return 0, false, r.truncated()
	}
	r.i += hdr
	return u, c >= 0xd0 && int64(u) < 0, nil
}

func (r *reader) int64() (int64, error) {
	start := r.i
	u, neg, err := r.intVal()
	if err != nil {
		return 0, err
	}
	if !neg && u > math.MaxInt64 {
		r.i = start
		return 0, r.errf("int %d overflows int64", u)
	}
	return int64(u), nil
}

func (r *reader) optInt(dst *int64) (*int64, error) {
	if r.isNil() {
		r.i++
		return nil, nil
	}
	v, err := r.int64()
	if err != nil {
		return nil, err
	}
	*dst = v
	return dst, nil
}

// optStr reads a str or nil into *dst, reusing the previous string when the
// bytes are equal so a steady stream of "GPU" allocates nothing.
func (r *reader) optStr(dst *string) (*string, error) {
	if r.isNil() {
		r.i++
		return nil, nil
	}
	b, err := r.str()
	if err != nil {
		return nil, err
	}
	if *dst != string(b) {
		*dst = intern(b)
	}
	return dst, nil
}

func intern(b []byte) string {
	switch string(b) {
	case MediumGPU:
		return MediumGPU
	case "CPU":
		return "CPU"
	}
	return string(b)
}

func (r *reader) float() (float64, error) {
	if r.i >= len(r.b) {
		return 0, r.want("float")
	}
	switch r.b[r.i] {
	case 0xcb:
		u, ok := r.u64(1)
		if !ok {
			return 0, r.truncated()
		}
		r.i += 9
		return math.Float64frombits(u), nil
	case 0xca:
		u, ok := r.u32(1)
		if !ok {
			return 0, r.truncated()
		}
		r.i += 5
		return float64(math.Float32frombits(uint32(u))), nil
	}
	if r.kind() == kindInt {
		// msgspec accepts an int where a float is declared.
		u, neg, err := r.intVal()
		if neg {
			return float64(int64(u)), err
		}
		return float64(u), err
	}
	return 0, r.want("float")
}

// hash reads a block hash: any msgpack int (two's complement for negative
// values), or str/bin bytes folded by EngineHashFromBytes.
func (r *reader) hash() (EngineHash, error) {
	if r.i < len(r.b) {
		c := r.b[r.i]
		if c <= 0x7f {
			r.i++
			return EngineHash(c), nil
		}
		switch kindOf(c) {
		case kindInt:
			u, _, err := r.intVal()
			return EngineHash(u), err
		case kindBin, kindStr:
			b, err := r.strOrBin(true, true, "block hash")
			return EngineHashFromBytes(b), err
		}
	}
	return 0, r.want("int or bytes block hash")
}

func (r *reader) hashes(dst []EngineHash) ([]EngineHash, error) {
	n, err := r.arrayLen()
	if err != nil {
		return dst, err
	}
	dst = growHashes(dst, n)
	for i := 0; i < n; i++ {
		h, err := r.hash()
		if err != nil {
			return dst, atIndex(err, i)
		}
		dst = append(dst, h)
	}
	return dst, nil
}

func growHashes(s []EngineHash, n int) []EngineHash {
	if cap(s) < n {
		return make([]EngineHash, 0, max(n, 2*cap(s)))
	}
	return s
}

// tokens reads token ids; the common one- to five-byte int forms are
// decoded inline.
func (r *reader) tokens(dst []uint32) ([]uint32, error) {
	n, err := r.arrayLen()
	if err != nil {
		return dst, err
	}
	if cap(dst) < n {
		dst = make([]uint32, 0, max(n, 2*cap(dst)))
	}
	b := r.b
	for i := 0; i < n; i++ {
		if r.i >= len(b) {
			return dst, atIndex(r.truncated(), i)
		}
		switch c := b[r.i]; {
		case c <= 0x7f:
			dst = append(dst, uint32(c))
			r.i++
		case c == 0xcd && r.i+3 <= len(b):
			dst = append(dst, uint32(binary.BigEndian.Uint16(b[r.i+1:])))
			r.i += 3
		case c == 0xce && r.i+5 <= len(b):
			dst = append(dst, binary.BigEndian.Uint32(b[r.i+1:]))
			r.i += 5
		default:
			start := r.i
			u, neg, err := r.intVal()
			if err != nil {
				return dst, atIndex(err, i)
			}
			if neg || u > math.MaxUint32 {
				r.i = start
				return dst, atIndex(r.errf("token id %d out of range", int64(u)), i)
			}
			dst = append(dst, uint32(u))
		}
	}
	return dst, nil
}

// values reads an array of opaque values (extra_keys).
func (r *reader) values(dst []any) ([]any, error) {
	n, err := r.arrayLen()
	if err != nil {
		return dst, err
	}
	clear(dst[:cap(dst)])
	if cap(dst) < n {
		dst = make([]any, 0, n)
	}
	for i := 0; i < n; i++ {
		v, err := r.value(1)
		if err != nil {
			return dst, atIndex(err, i)
		}
		dst = append(dst, v)
	}
	return dst, nil
}

// value decodes any msgpack value into nil, bool, int64, uint64 (only
// above MaxInt64), float64, string, []byte, []any or map[string]any.
func (r *reader) value(depth int) (any, error) {
	if depth > maxValueDepth {
		return nil, r.errf("value nested deeper than %d", maxValueDepth)
	}
	switch r.kind() {
	case kindNil:
		r.i++
		return nil, nil
	case kindBool:
		v := r.b[r.i] == 0xc3
		r.i++
		return v, nil
	case kindInt:
		u, neg, err := r.intVal()
		if err != nil {
			return nil, err
		}
		if !neg && u > math.MaxInt64 {
			return u, nil
		}
		return int64(u), nil
	case kindFloat:
		return r.float()
	case kindStr:
		b, err := r.str()
		return string(b), err
	case kindBin:
		b, err := r.strOrBin(true, false, "bin")
		if err != nil {
			return nil, err
		}
		return append([]byte{}, b...), nil
	case kindArray:
		n, err := r.arrayLen()
		if err != nil {
			return nil, err
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = r.value(depth + 1); err != nil {
				return nil, atIndex(err, i)
			}
		}
		return out, nil
	case kindMap:
		n, err := r.mapLen()
		if err != nil {
			return nil, err
		}
		out := make(map[string]any, n)
		for i := 0; i < n; i++ {
			k, err := r.strOrBin(false, true, "str map key")
			if err != nil {
				return nil, err
			}
			if out[string(k)], err = r.value(depth + 1); err != nil {
				return nil, at(err, strconv.Quote(string(k)))
			}
		}
		return out, nil
	}
	return nil, r.want("a value")
}

// skip steps over one value of any type without recursion: pending counts
// the values still to skip, so nesting depth cannot exhaust the stack.
func (r *reader) skip() error {
	for pending := 1; pending > 0; pending-- {
		if r.i >= len(r.b) {
			return r.truncated()
		}
		c := r.b[r.i]
		var body uint64
		var hdr int
		ok := true
		switch kindOf(c) {
		case kindInt:
			switch c {
			case 0xcc, 0xd0:
				hdr = 2
			case 0xcd, 0xd1:
				hdr = 3
			case 0xce, 0xd2:
				hdr = 5
			case 0xcf, 0xd3:
				hdr = 9
			default:
				hdr = 1
			}
		case kindNil, kindBool:
			hdr = 1
		case kindFloat:
			hdr = 5
			if c == 0xcb {
				hdr = 9
			}
		case kindStr, kindBin:
			switch {
			case c >= 0xa0 && c <= 0xbf:
				body, hdr = uint64(c&0x1f), 1
			case c == 0xd9 || c == 0xc4:
				body, ok = r.u8(1)
				hdr = 2
			case c == 0xda || c == 0xc5:
				body, ok = r.u16(1)
				hdr = 3
			default:
				body, ok = r.u32(1)
				hdr = 5
			}
		case kindExt:
			switch c {
			case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
				body, hdr = 1<<(c-0xd4), 2
			case 0xc7:
				body, ok = r.u8(1)
				hdr = 3
			case 0xc8:
				body, ok = r.u16(1)
				hdr = 4
			default:
				body, ok = r.u32(1)
				hdr = 6
			}
		case kindArray:
			n, err := r.arrayLen()
			if err != nil {
				return err
			}
			pending += n
			continue
		case kindMap:
			n, err := r.mapLen()
			if err != nil {
				return err
			}
			pending += 2 * n
			continue
		default:
			return r.want("a value")
		}
		if !ok || uint64(len(r.b)-r.i) < uint64(hdr)+body {
			return r.truncated()
		}
		r.i += hdr + int(body)
	}
	return nil
}
