package wal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"path/filepath"
	"strings"
	"time"

	"github.com/weft-dev/weft/storage/vfs"
)

// Defaults and limits for Options.
const (
	// DefaultSegmentSize is the default Options.SegmentSize: 64 MiB.
	DefaultSegmentSize = 64 << 20
	// DefaultMaxRecordSize is the default Options.MaxRecordSize: 64 MiB.
	DefaultMaxRecordSize = 64 << 20
	// MinSegmentSize is the smallest accepted Options.SegmentSize.
	MinSegmentSize = 128
	// MaxRecordSizeLimit is the largest accepted Options.MaxRecordSize.
	MaxRecordSizeLimit = 1 << 30
)

// Options configures a log. The zero value means every default.
type Options struct {
	// SegmentSize is the size in bytes at which the log starts a new
	// segment, and the size each segment file is preallocated to. A segment
	// always holds at least one record, so a record larger than SegmentSize
	// gets a segment of its own that grows past it. Zero means
	// DefaultSegmentSize; otherwise at least MinSegmentSize.
	SegmentSize int64
	// MaxRecordSize caps the payload of one record, in bytes, on Append
	// (ErrTooLarge) and when reading (a longer length is corruption).
	// Snapshots are not records and have no size limit (snapshot.go).
	// Zero means DefaultMaxRecordSize; at most
	// MaxRecordSizeLimit. Reopening a log with a smaller value than it was
	// written with can make valid records unreadable.
	MaxRecordSize int
	// UnsafeNoSync skips the fdatasync that makes appended records durable
	// (Sync and Commit still write them): a crash of the machine, not only
	// of the process, can then lose records whose Sync returned, which
	// breaks every promise a protocol made on them. It exists to compare
	// the protocols with implementations that keep nothing on disk, like
	// etcd's --unsafe-no-fsync; never use it for data you keep. Nor are
	// segments synced when the log rolls to the next one, nor the new
	// segment and the directory: after a crash of the machine such a log
	// may not open at all (a torn segment before the last is corruption).
	// A crash of the process alone loses nothing (the page cache keeps
	// what was written). Snapshots, written off the caller's path, still
	// sync.
	UnsafeNoSync bool
	// RawSync makes Sync's fdatasync of the records a raw system call
	// (vfs.SyncHolding): the goroutine that calls Sync keeps its thread
	// and its P until the disk answers, and no other goroutine runs on
	// that P meanwhile. For a log synced by a goroutine that waits for the
	// sync anyway, in a process with little else to run (an agent's loop
	// at GOMAXPROCS 1). A sync slower than 20 ms pauses the raw syncs
	// until the disk is fast again (rawsync.go), so a stalling disk holds
	// the process once, not throughout; a process that must stay
	// responsive through every stall should leave it off. Segment
	// creation and snapshots sync the ordinary way.
	RawSync bool
}

func (o Options) validate() (Options, error) {
	if o.SegmentSize == 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	if o.MaxRecordSize == 0 {
		o.MaxRecordSize = DefaultMaxRecordSize
	}
	if o.SegmentSize < MinSegmentSize {
		return o, fmt.Errorf("wal: SegmentSize %d below the minimum %d", o.SegmentSize, MinSegmentSize)
	}
	if o.MaxRecordSize < 0 || o.MaxRecordSize > MaxRecordSizeLimit {
		return o, fmt.Errorf("wal: MaxRecordSize %d outside [1, %d]", o.MaxRecordSize, MaxRecordSizeLimit)
	}
	return o, nil
}

// Record is one record read back from the log.
type Record struct {
	// Index is the record's position in the log. The first record ever
	// appended has index 1; indexes are consecutive and survive Cut.
	Index uint64
	// Type is RecordEntry (Records yields nothing else).
	Type RecordType
	// Data is the payload, never nil. It is owned by the caller.
	Data []byte
}

// RepairInfo describes a torn tail that Open cut off the last segment.
type RepairInfo struct {
	Segment string // base name of the repaired segment
	Offset  int64  // the segment now ends here
	Reason  string // what was found at Offset
}

// WAL is an append-only log of records in a directory of segment files.
// Append buffers records in memory; Sync writes them and makes them durable
// with one fdatasync. After a crash, Open recovers every record whose Sync
// returned nil, and possibly some appended later, always as a prefix of the
// appended sequence.
//
// A WAL is not safe for concurrent use; Committer adds a concurrent
// group-commit front.
type WAL struct {
	fs   vfs.FS
	dir  string
	opts Options

	segs []segment // live segments, oldest first; the last is being written
	f    vfs.File  // the last segment, open for writing
	off  int64     // end of the frames written to f

	// The log's logical end, counting records appended but not written.
	next    uint64 // index of the next record appended
	crc     uint32 // chain value after the last appended record
	segUsed int64  // bytes used in the last (logical) segment
	segRecs int    // records in the last (logical) segment

	pend    []byte // frames appended but not written
	rolls   []roll // segment boundaries inside pend, in order
	fDirty  bool   // f has writes not yet synced
	written uint64 // index of the last record written to f (Write)
	synced  uint64 // index of the last durable record (0: none)

	// The latest snapshot (snapshot.go): it covers the records up to snap.
	snap     uint64
	hasSnap  bool
	rollNext bool // the next record appended starts a new segment (BeginSnapshot)

	raw rawSync // Options.RawSync's state (rawsync.go)

	repair *RepairInfo
	err    error // sticky: every later write returns it
	closed bool
}

// roll is a segment boundary inside the pending frames.
type roll struct {
	at  int     // offset in pend of the new segment's first frame
	seg segment // the segment to create
}

// Open opens the log in dir, creating dir and an empty log if there is none.
// It makes the entries of dir and of its ancestors durable (pass an absolute
// path: a relative one is synced only up to ".").
//
// Open reads every segment from the last snapshot on and verifies each
// record's chained checksum, the segment headers and the continuity between
// segments. A damaged tail of the last segment (a torn write: a frame that
// fails verification, or garbage after the end) is cut off and reported by
// Repaired; damage anywhere else returns an error matching ErrCorrupt
// (a *CorruptError giving the segment and offset). Open then fdatasyncs the
// last segment, so every record it recovered is durable before the caller
// acts on it, fsyncs the directory (so are the segments' names), deletes
// segments that a later snapshot made obsolete, and removes leftover
// temporary files.
func Open(fsys vfs.FS, dir string, opts Options) (*WAL, error) {
	opts, err := opts.validate()
	if err != nil {
		return nil, err
	}
	w := &WAL{fs: fsys, dir: dir, opts: opts, raw: rawSync{hold: vfs.SyncHolding, now: time.Now}}
	if err := w.ensureDir(); err != nil {
		return nil, err
	}
	names, err := fsys.List(dir)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	var segs []segment
	var snaps []uint64
	for _, n := range names {
		if strings.HasSuffix(n, tmpSuffix) && (strings.HasSuffix(n, segSuffix+tmpSuffix) || strings.HasSuffix(n, snapSuffix+tmpSuffix)) {
			// A segment or snapshot that was never renamed into place: not
			// part of the log.
			if err := fsys.Remove(w.path(n)); err != nil {
				return nil, fmt.Errorf("wal: removing leftover %s: %w", n, err)
			}
			continue
		}
		if seq, first, ok := parseSegName(n); ok {
			segs = append(segs, segment{name: n, seq: seq, first: first})
		}
		if idx, ok := parseSnapName(n); ok {
			snaps = append(snaps, idx) // sorted, like names
		}
	}
	// The latest snapshot is in charge; it was verified before it was
	// renamed into place, so any damage is corruption. Older ones are
	// obsolete.
	var obsoleteSnaps []uint64
	if len(snaps) > 0 {
		w.snap, w.hasSnap = snaps[len(snaps)-1], true
		obsoleteSnaps = snaps[:len(snaps)-1]
		if err := verifySnapshot(fsys, w.path(snapName(w.snap)), snapName(w.snap), w.snap); err != nil {
			return nil, err
		}
	}
	if len(segs) == 0 {
		if w.hasSnap {
			return nil, &CorruptError{Segment: snapName(w.snap), Reason: "no log segment after the snapshot: segments are missing"}
		}
		seg := segment{seq: 0, first: 1}
		seg.name = segName(seg.seq, seg.first)
		f, err := w.createSegment(seg, nil, true) // syncs dir
		if err != nil {
			return nil, fmt.Errorf("wal: creating first segment: %w", err)
		}
		w.segs, w.f, w.off, w.next = []segment{seg}, f, segHeaderSize, 1
		w.segUsed = segHeaderSize
		return w, nil
	}
	// List is sorted and names are fixed-width hex, so segs is sorted by
	// seq. Recovery starts at the last segment holding the first record
	// after the snapshot (or record 1); the segments before it hold only
	// records the snapshot covers, and are obsolete.
	want := w.snap + 1
	start := -1
	for i, s := range segs {
		if s.first <= want {
			start = i
		}
	}
	if start < 0 {
		return nil, &CorruptError{Segment: segs[0].name, Reason: fmt.Sprintf("log starts at record %d, but recovery needs record %d on: segments are missing", segs[0].first, want)}
	}
	obsolete, live := segs[:start], segs[start:]
	for i := range live {
		if live[i], err = w.readHeader(live[i]); err != nil {
			return nil, err
		}
	}
	if s := live[0]; !w.hasSnap && (s.seq != 0 || s.first != 1 || s.seed != 0) {
		return nil, &CorruptError{Segment: s.name, Reason: "log starts neither at index 1 nor after a snapshot: segments are missing"}
	}
	crc, next := live[0].seed, live[0].first
	var last *scanner
	for i, s := range live {
		if i > 0 {
			switch {
			case s.seq != live[i-1].seq+1:
				return nil, &CorruptError{Segment: s.name, Reason: fmt.Sprintf("segment %d is missing", live[i-1].seq+1)}
			case s.first != next:
				return nil, &CorruptError{Segment: s.name, Reason: fmt.Sprintf("first index %d, want %d: records are missing", s.first, next)}
			case s.seed != crc:
				return nil, &CorruptError{Segment: s.name, Reason: "checksum chain broken between segments"}
			}
		}
		sc, err := w.scanSegment(s, crc, nil)
		if err != nil {
			return nil, err
		}
		if sc.bad != "" && i < len(live)-1 {
			// Only the tail of the last segment can be torn: earlier segments
			// were synced before the next one was created.
			return nil, sc.corrupt()
		}
		crc, next, last = sc.crc, sc.index, sc
	}
	if w.hasSnap && next <= w.snap {
		// The snapshot was taken after its records were synced: a log
		// ending before it lost synced records.
		return nil, &CorruptError{Segment: live[len(live)-1].name, Offset: last.off,
			Reason: fmt.Sprintf("log ends at record %d, before the snapshot's index %d", next-1, w.snap)}
	}

	// Open the last segment, cut off a torn tail, and make what we are
	// about to replay durable.
	tail := live[len(live)-1]
	f, err := fsys.OpenReadWrite(w.path(tail.name))
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	if last.bad != "" {
		w.repair = &RepairInfo{Segment: tail.name, Offset: last.off, Reason: last.bad}
		err = f.Truncate(last.off)
		if err == nil {
			err = f.Preallocate(0, opts.SegmentSize)
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		// The segments' names may not be durable either: an earlier
		// incarnation may have failed between a rename and its directory
		// sync.
		err = vfs.SyncDir(fsys, dir)
	}
	if err == nil && len(obsolete) > 0 {
		err = w.removeSegments(obsolete)
	}
	for _, idx := range obsoleteSnaps {
		if err == nil {
			if err = fsys.Remove(w.path(snapName(idx))); errors.Is(err, fs.ErrNotExist) {
				err = nil
			}
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("wal: recovering %s: %w", tail.name, err)
	}
	w.segs, w.f, w.off = live, f, last.off
	w.next, w.crc, w.written, w.synced = next, crc, next-1, next-1
	w.segUsed, w.segRecs = last.off, last.count
	return w, nil
}

// ensureDir creates dir if it does not exist and makes its entry durable,
// and its ancestors' entries too: an earlier Open that failed after MkdirAll
// may have left any of them not durable, so this is done on every Open (a
// sync of a clean directory is cheap). A relative dir is synced up to ".".
func (w *WAL) ensureDir() error {
	if err := w.fs.MkdirAll(w.dir, 0o755); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	for d := filepath.Clean(w.dir); ; {
		p := filepath.Dir(d)
		if p == d {
			return nil
		}
		if err := vfs.SyncDir(w.fs, p); err != nil {
			return fmt.Errorf("wal: %w", err)
		}
		d = p
	}
}

func (w *WAL) path(name string) string { return filepath.Join(w.dir, name) }

// readHeader reads and checks the header of segment s against its name.
func (w *WAL) readHeader(s segment) (segment, error) {
	f, err := w.fs.Open(w.path(s.name))
	if err != nil {
		return s, fmt.Errorf("wal: %w", err)
	}
	defer f.Close()
	var b [segHeaderSize]byte
	if n, err := f.ReadAt(b[:], 0); err == io.EOF {
		return s, &CorruptError{Segment: s.name, Reason: fmt.Sprintf("file of %d bytes is shorter than a segment header", n)}
	} else if err != nil {
		return s, fmt.Errorf("wal: reading header of %s: %w", s.name, err)
	}
	h, reason := parseSegHeader(b[:])
	switch {
	case reason != "":
		return s, &CorruptError{Segment: s.name, Reason: reason}
	case h.seq != s.seq || h.first != s.first:
		return s, &CorruptError{Segment: s.name, Reason: fmt.Sprintf("header says segment %d first index %d", h.seq, h.first)}
	}
	h.name = s.name
	return h, nil
}

// scanSegment verifies segment s, whose chain starts at seed, calling fn (if
// not nil) for each valid record up to and including index limit (0: no
// limit). It returns the scanner positioned at the segment's end or at its
// first invalid frame.
func (w *WAL) scanSegment(s segment, seed uint32, fn func(Record) error) (*scanner, error) {
	return w.scanSegmentTo(s, seed, 0, fn)
}

func (w *WAL) scanSegmentTo(s segment, seed uint32, limit uint64, fn func(Record) error) (*scanner, error) {
	f, err := w.fs.Open(w.path(s.name))
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	sc := segScanner(f, fi.Size(), s, seed, MaxRecordSizeLimit)
	for limit == 0 || sc.index <= limit {
		typ, payload, ok, err := sc.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		if fn != nil {
			rec := Record{Index: sc.index - 1, Type: typ, Data: append(make([]byte, 0, len(payload)), payload...)}
			if err := fn(rec); err != nil {
				return nil, err
			}
		}
	}
	return sc, nil
}

// createSegment makes segment seg durable in its final place: it writes the
// header and body to a temporary file preallocated to the segment size,
// syncs it, renames it into place and syncs the directory; without sync
// (a roll under UnsafeNoSync) it skips both syncs, so the segment is in
// place but not durable. It returns the file open for writing.
func (w *WAL) createSegment(seg segment, body []byte, sync bool) (vfs.File, error) {
	final := w.path(seg.name)
	tmp := final + tmpSuffix
	f, err := w.fs.Create(tmp)
	if err != nil {
		return nil, err
	}
	buf := appendSegHeader(make([]byte, 0, segHeaderSize+len(body)), seg)
	buf = append(buf, body...)
	err = f.Preallocate(0, max(w.opts.SegmentSize, int64(len(buf))))
	if err == nil {
		_, err = f.WriteAt(buf, 0)
	}
	if err == nil && sync {
		err = f.Sync()
	}
	if err == nil {
		err = w.fs.Rename(tmp, final)
	}
	if err == nil && sync {
		err = vfs.SyncDir(w.fs, w.dir)
	}
	if err != nil {
		f.Close()
		w.fs.Remove(tmp) // best effort; Open removes leftovers too
		return nil, err
	}
	return f, nil
}

// removeSegments deletes segs, oldest first (so a crash leaves a contiguous
// suffix), and syncs the directory.
func (w *WAL) removeSegments(segs []segment) error {
	for _, s := range segs {
		if err := w.fs.Remove(w.path(s.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return vfs.SyncDir(w.fs, w.dir)
}

// writable returns the error that stops writes, if any.
func (w *WAL) writable() error {
	switch {
	case w.closed:
		return ErrClosed
	case w.err != nil:
		return w.err
	}
	return nil
}

// fail makes err sticky.
func (w *WAL) fail(err error) error {
	w.err = fmt.Errorf("%w: %w", ErrFailed, err)
	return w.err
}

var frameHeaderPlaceholder [frameHeaderLen]byte

// Append adds records to the log. It only buffers them (copying the bytes,
// so the caller may reuse recs at once): nothing is written until Sync.
// Either all of recs are appended or, on error, none. A record longer than
// Options.MaxRecordSize fails with ErrTooLarge; after a failed write or
// sync every Append fails with an error matching ErrFailed.
func (w *WAL) Append(recs ...[]byte) error {
	if err := w.writable(); err != nil {
		return err
	}
	for _, r := range recs {
		if len(r) > w.opts.MaxRecordSize {
			return fmt.Errorf("%w: %d bytes, maximum %d", ErrTooLarge, len(r), w.opts.MaxRecordSize)
		}
	}
	for _, r := range recs {
		start := len(w.pend)
		w.pend = append(w.pend, frameHeaderPlaceholder[:]...)
		w.pend = append(w.pend, r...)
		w.endFrame(start)
	}
	return nil
}

// endFrame seals the entry frame starting at w.pend[start] and decides
// which segment it goes to.
func (w *WAL) endFrame(start int) {
	prev := w.crc
	w.pend, w.crc = finishFrame(w.pend, start, RecordEntry, w.crc)
	n := int64(len(w.pend) - start)
	if w.segRecs > 0 && (w.rollNext || w.segUsed+n > w.opts.SegmentSize) {
		w.rollNext = false
		seq := w.segs[len(w.segs)-1].seq
		if len(w.rolls) > 0 {
			seq = w.rolls[len(w.rolls)-1].seg.seq
		}
		seg := segment{seq: seq + 1, first: w.next, seed: prev}
		seg.name = segName(seg.seq, seg.first)
		w.rolls = append(w.rolls, roll{at: start, seg: seg})
		w.segUsed, w.segRecs = segHeaderSize, 0
	}
	w.segUsed += n
	w.segRecs++
	w.next++
}

// Sync writes every appended record and makes it durable with one
// fdatasync of the current segment (plus, when the records cross into a
// new segment, a sync of the full one and the creation of the next). When
// Sync returns nil every record appended so far is durable, those Write
// wrote included (write.go). If there is nothing to write or to sync it
// does nothing.
//
// Any error is sticky: the log refuses further writes (ErrFailed) until it
// is closed and reopened, since after a failed write or fdatasync nothing
// is known about what reached the disk.
func (w *WAL) Sync() error {
	if err := w.writable(); err != nil {
		return err
	}
	if len(w.pend) == 0 && w.written <= w.synced {
		return nil
	}
	if err := w.flush(true); err != nil {
		return w.fail(err)
	}
	return nil
}

// flush writes the pending frames, rolling segments on the way, and with
// sync makes them durable.
func (w *WAL) flush(sync bool) error {
	pos := 0
	for _, r := range w.rolls {
		if err := w.write(w.pend[pos:r.at]); err != nil {
			return err
		}
		// The full segment must be durable before any record of the next
		// one can be: recovery only tolerates a torn tail in the last
		// segment. Not with UnsafeNoSync: that fdatasync wrote back all
		// of the segment's records at once (up to SegmentSize of them),
		// 30 to 200 ms of a loaded agent's loop at every roll, and a
		// compaction rolls the log every few seconds (docs/batching.md,
		// "Loops stalled together every 7.5 seconds").
		if w.fDirty && !w.opts.UnsafeNoSync {
			if err := w.syncSegment(); err != nil {
				return err
			}
		}
		w.fDirty = false
		f, err := w.createSegment(r.seg, nil, !w.opts.UnsafeNoSync)
		if err != nil {
			return err
		}
		w.f.Close()
		w.f, w.off = f, segHeaderSize
		w.segs = append(w.segs, r.seg)
		pos = r.at
	}
	if err := w.write(w.pend[pos:]); err != nil {
		return err
	}
	w.written = w.next - 1
	if sync {
		if !w.opts.UnsafeNoSync {
			if err := w.syncSegment(); err != nil {
				return err
			}
			w.fDirty = false
		}
		w.synced = w.next - 1
	}
	w.rolls = w.rolls[:0]
	if cap(w.pend) > 4<<20 {
		w.pend = nil // don't pin a huge buffer after a burst
	} else {
		w.pend = w.pend[:0]
	}
	return nil
}

// syncSegment fdatasyncs the segment being written (Options.RawSync).
func (w *WAL) syncSegment() error {
	if w.opts.RawSync {
		return w.raw.sync(w.f)
	}
	return w.f.Sync()
}

func (w *WAL) write(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if _, err := w.f.WriteAt(b, w.off); err != nil {
		return err
	}
	w.off += int64(len(b))
	w.fDirty = true
	return nil
}

// Cut compacts the log in one call: BeginSnapshot, then the snapshot
// written, finished, committed and released (snapshot.go). After Cut
// returns nil, recovery begins with the snapshot and the records appended
// after it; the records before it are gone for good. A caller that must
// not stall while the snapshot is written uses those steps itself.
//
// REQUIRES: snapshot reflects every record appended before the call.
//
// A failure to sync the appended records is sticky, as for Sync; a
// failure to write the snapshot is not (the log goes on without it). If
// Cut fails the snapshot may or may not have become durable; either way
// the log recovers consistently (from the new snapshot, or from the old
// one plus the records before the Cut).
func (w *WAL) Cut(snapshot []byte) error {
	s, err := w.BeginSnapshot()
	if err != nil {
		return err
	}
	_, err = s.Write(snapshot)
	if err == nil {
		err = s.Finish()
	}
	if err == nil {
		err = s.Commit()
	}
	if err != nil {
		s.Abort()
		return err
	}
	return w.ReleaseSnapshot(s)
}

// Close syncs any appended records (unless the log has failed) and closes
// the log. It returns the sync error, or the sticky error of a failed log.
func (w *WAL) Close() error {
	if w.closed {
		return ErrClosed
	}
	err := w.Sync()
	w.closed = true
	if w.f != nil {
		if cerr := w.f.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// FirstIndex returns the index of the first record in the log: the one
// after the latest snapshot, or 1 if there has never been a snapshot.
func (w *WAL) FirstIndex() uint64 { return w.snap + 1 }

// LastIndex returns the index of the last record appended, durable or not
// (0 if the log is empty).
func (w *WAL) LastIndex() uint64 { return w.next - 1 }

// SyncedIndex returns the index of the last durable record (0 if none).
func (w *WAL) SyncedIndex() uint64 { return w.synced }

// Repaired returns what Open cut off the tail of the log, or nil if the
// log ended cleanly.
func (w *WAL) Repaired() *RepairInfo { return w.repair }

// Records iterates over the durable records after the latest snapshot (if
// any; see OpenSnapshot), in index order. It rereads and reverifies the segments;
// records appended but not yet synced are not included. Do not write to the
// log during the iteration. A failure yields one non-nil error and ends the
// iteration.
func (w *WAL) Records() iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		if err := w.writable(); err != nil {
			yield(Record{}, err)
			return
		}
		if w.synced < w.FirstIndex() {
			return
		}
		stop := errors.New("stop")
		crc := w.segs[0].seed
		for _, s := range w.segs {
			sc, err := w.scanSegmentTo(s, crc, w.synced, func(r Record) error {
				if r.Index <= w.snap {
					return nil // covered by the snapshot
				}
				if !yield(r, nil) {
					return stop
				}
				return nil
			})
			switch {
			case err == stop:
				return
			case err != nil:
				yield(Record{}, err)
				return
			case sc.bad != "":
				yield(Record{}, sc.corrupt())
				return
			}
			if sc.index > w.synced {
				return
			}
			crc = sc.crc
		}
	}
}

// ReadAll returns the latest snapshot, read whole (nil if the log has
// none, non-nil if it is empty), and the payloads of the durable entry
// records after it, in order.
func (w *WAL) ReadAll() (snapshot []byte, entries [][]byte, err error) {
	if err := w.writable(); err != nil {
		return nil, nil, err
	}
	if w.hasSnap {
		r, err := w.OpenSnapshot()
		if err != nil {
			return nil, nil, err
		}
		snapshot, err = io.ReadAll(r)
		r.Close()
		if err != nil {
			return nil, nil, err
		}
		if snapshot == nil {
			snapshot = []byte{}
		}
	}
	for r, err := range w.Records() {
		if err != nil {
			return nil, nil, err
		}
		entries = append(entries, r.Data)
	}
	return snapshot, entries, nil
}
