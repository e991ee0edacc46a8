package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/weft-dev/weft/storage/vfs"
)

// Snapshot files. A snapshot is a file of its own beside the segments, so
// that it has no size limit (it is written in frames of at most
// snapshotChunk bytes) and can be written by another goroutine while the
// log keeps appending: see BeginSnapshot.
const (
	snapMagic      = "weftsnp\x00"
	snapVersion    = 1
	snapHeaderSize = 32
	snapSuffix     = ".snap"
	// snapshotChunk is the payload of every frame of a snapshot file but
	// its last data frame; the reader accepts nothing longer.
	snapshotChunk = 1 << 20
	// recordSnapshotEnd is a snapshot file's last frame: its payload is the
	// number of snapshot bytes, 8 bytes little-endian.
	recordSnapshotEnd RecordType = 3
)

// snapName is the file name of the snapshot covering records up to index.
func snapName(index uint64) string { return fmt.Sprintf("%016x%s", index, snapSuffix) }

// parseSnapName parses a name made by snapName.
func parseSnapName(name string) (uint64, bool) {
	base, found := strings.CutSuffix(name, snapSuffix)
	if !found || len(base) != 16 {
		return 0, false
	}
	idx, err := strconv.ParseUint(base, 16, 64)
	return idx, err == nil && snapName(idx) == name
}

// appendSnapHeader appends the 32-byte header of the snapshot at index.
func appendSnapHeader(buf []byte, index uint64) []byte {
	start := len(buf)
	buf = append(buf, snapMagic...)
	buf = binary.LittleEndian.AppendUint16(buf, snapVersion)
	buf = append(buf, 0, 0, 0, 0, 0, 0)
	buf = binary.LittleEndian.AppendUint64(buf, index)
	buf = binary.LittleEndian.AppendUint32(buf, 0)
	return binary.LittleEndian.AppendUint32(buf, crc32.Checksum(buf[start:], castagnoli))
}

// SnapshotWriter writes one snapshot file: the image of the log's state
// after record Index. BeginSnapshot returns it; Write, Finish, Reader,
// Commit and Abort touch only the snapshot's own file, so they may run on
// another goroutine than the log's (one goroutine at a time), while the
// log keeps appending. A snapshot replaces the records before it only
// once it is committed and the log has been told (WAL.ReleaseSnapshot).
//
// The file is written as <index>.snap.tmp and renamed into place by
// Commit: a crash before the rename leaves the old snapshot (and the
// records it does not cover) in charge; Open deletes the leftover.
type SnapshotWriter struct {
	fs    vfs.FS
	dir   string
	index uint64

	f     vfs.File
	off   int64  // end of the frames written
	crc   uint32 // chain value after the last frame written
	total uint64 // snapshot bytes written or buffered
	frame []byte // the frame being filled: header placeholder + payload

	finished, committed, aborted bool
	err                          error // sticky for this writer
}

// BeginSnapshot starts a snapshot of the log at its last record. It syncs
// the records appended so far (the snapshot must reflect every one of
// them: REQUIRES the caller's image includes them all) and makes the next
// record appended start a new segment, so that once the snapshot is
// released the segments it replaces can be deleted whole. It does no
// other I/O: the snapshot's file is created by its first write.
//
// A failure of the sync is sticky, as for Sync. Failures of the
// snapshot's own writes are not: the log is unaffected, and the caller
// may Abort and try again later.
func (w *WAL) BeginSnapshot() (*SnapshotWriter, error) {
	if err := w.Sync(); err != nil {
		return nil, err
	}
	if err := w.writable(); err != nil {
		return nil, err
	}
	s := &SnapshotWriter{fs: w.fs, dir: w.dir, index: w.next - 1}
	s.frame = append([]byte(nil), frameHeaderPlaceholder[:]...) // grows to a chunk as needed
	w.rollNext = true
	return s, nil
}

// create creates the temporary file and writes the header. It is done on
// the first write, not in BeginSnapshot, so that the log's goroutine does
// no file I/O for a snapshot.
func (s *SnapshotWriter) create() error {
	f, err := s.fs.Create(s.tmpPath())
	if err != nil {
		return s.fail(err)
	}
	hdr := appendSnapHeader(nil, s.index)
	if _, err := f.WriteAt(hdr, 0); err != nil {
		f.Close()
		s.fs.Remove(s.tmpPath())
		return s.fail(err)
	}
	s.f, s.off = f, snapHeaderSize
	s.crc = binary.LittleEndian.Uint32(hdr[snapHeaderSize-4:])
	return nil
}

// Index returns the index of the last record the snapshot covers.
func (s *SnapshotWriter) Index() uint64 { return s.index }

// Size returns the size of the snapshot file (valid after Finish).
func (s *SnapshotWriter) Size() int64 { return s.off }

func (s *SnapshotWriter) tmpPath() string { return s.path() + tmpSuffix }
func (s *SnapshotWriter) path() string    { return filepath.Join(s.dir, snapName(s.index)) }

func (s *SnapshotWriter) fail(err error) error {
	if s.err == nil {
		s.err = fmt.Errorf("wal: snapshot %d: %w", s.index, err)
	}
	return s.err
}

var errSnapshotState = errors.New("wal: snapshot writer used out of order")

// Write appends p to the snapshot, writing a frame every snapshotChunk
// bytes.
func (s *SnapshotWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.finished || s.aborted {
		return 0, s.fail(errSnapshotState)
	}
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), frameHeaderLen+snapshotChunk-len(s.frame))
		if len(s.frame)+k > cap(s.frame) {
			// Grown once to a whole frame: grown by appends, the first
			// frame of every snapshot was copied several times over.
			s.frame = slices.Grow(s.frame, frameHeaderLen+snapshotChunk-len(s.frame))
		}
		s.frame = append(s.frame, p[:k]...)
		p = p[k:]
		s.total += uint64(k)
		if len(s.frame) == frameHeaderLen+snapshotChunk {
			if err := s.writeFrame(RecordSnapshot); err != nil {
				return n - len(p), err
			}
		}
	}
	return n, nil
}

// writeFrame seals the frame being filled as typ and writes it.
func (s *SnapshotWriter) writeFrame(typ RecordType) error {
	if s.f == nil {
		if err := s.create(); err != nil {
			return err
		}
	}
	var b []byte
	b, s.crc = finishFrame(s.frame, 0, typ, s.crc)
	if _, err := s.f.WriteAt(b, s.off); err != nil {
		return s.fail(err)
	}
	s.off += int64(len(b))
	s.frame = append(b[:0], frameHeaderPlaceholder[:]...)
	return nil
}

// Finish writes the rest of the snapshot and its end frame and fsyncs the
// temporary file. The snapshot is not in charge yet: see Commit.
func (s *SnapshotWriter) Finish() error {
	if s.err != nil {
		return s.err
	}
	if s.finished || s.aborted {
		return s.fail(errSnapshotState)
	}
	if len(s.frame) > frameHeaderLen {
		if err := s.writeFrame(RecordSnapshot); err != nil {
			return err
		}
	}
	s.frame = binary.LittleEndian.AppendUint64(s.frame, s.total)
	if err := s.writeFrame(recordSnapshotEnd); err != nil {
		return err
	}
	if err := s.f.Sync(); err != nil {
		return s.fail(err)
	}
	s.finished = true
	s.frame = nil
	return nil
}

// Reader reads back the finished, not yet committed snapshot from disk,
// verifying it as OpenSnapshot does: so the caller can check that it
// decodes before it replaces the log.
func (s *SnapshotWriter) Reader() (io.ReadCloser, error) {
	if !s.finished || s.aborted {
		return nil, errSnapshotState
	}
	return openSnapshotFile(s.fs, s.tmpPath(), snapName(s.index)+tmpSuffix, s.index)
}

// Commit renames the finished snapshot into place and fsyncs the
// directory: from then on recovery starts from it (and the records after
// its index). The caller then tells the log, on the log's goroutine, with
// WAL.ReleaseSnapshot.
func (s *SnapshotWriter) Commit() error {
	if s.err != nil {
		return s.err
	}
	if !s.finished || s.aborted || s.committed {
		return s.fail(errSnapshotState)
	}
	s.f.Close()
	s.f = nil
	if err := s.fs.Rename(s.tmpPath(), s.path()); err != nil {
		return s.fail(err)
	}
	if err := vfs.SyncDir(s.fs, s.dir); err != nil {
		return s.fail(err)
	}
	s.committed = true
	return nil
}

// Abort closes and removes an uncommitted snapshot (best effort: Open
// removes leftovers too). It does nothing after Commit.
func (s *SnapshotWriter) Abort() {
	if s.committed || s.aborted {
		return
	}
	s.aborted = true
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
	s.fs.Remove(s.tmpPath())
	if s.err == nil {
		s.err = fmt.Errorf("wal: snapshot %d: aborted", s.index)
	}
}

// ReleaseSnapshot makes the committed snapshot s the log's latest: the
// records up to s.Index() are no longer the log's, and the segments
// holding only such records, and older snapshots, are deleted. (Their
// deletion need not be durable: Open deletes what a later snapshot made
// obsolete.) Call it on the log's goroutine. An error deleting a file is
// not sticky: the log stays usable, no longer uses the file, and Open
// deletes it.
func (w *WAL) ReleaseSnapshot(s *SnapshotWriter) error {
	obs, err := w.ReleaseSnapshotLater(s)
	if err != nil {
		return err
	}
	return obs.Remove()
}

// ReleaseSnapshotLater is ReleaseSnapshot without the deletions: the log
// stops using the files at once, on its goroutine, and the caller deletes
// them with Obsolete.Remove, on any goroutine, when it likes. Deleting a
// 64 MiB segment whose pages are still cached took 6 to 29 ms on the test
// machine, in the kernel, which a node's loop should not wait for. The
// log never reads or reuses the files again (new segments and snapshots
// have new names), and a crash before they are gone leaves what Open
// deletes anyway.
func (w *WAL) ReleaseSnapshotLater(s *SnapshotWriter) (Obsolete, error) {
	if err := w.writable(); err != nil {
		return Obsolete{}, err
	}
	if !s.committed || s.dir != w.dir {
		return Obsolete{}, errSnapshotState
	}
	if w.hasSnap && s.index <= w.snap {
		return Obsolete{}, nil // an older (or the same) snapshot: nothing to release
	}
	obs := Obsolete{fs: w.fs}
	old, hadOld := w.snap, w.hasSnap
	w.snap, w.hasSnap = s.index, true
	if hadOld {
		obs.paths = append(obs.paths, w.path(snapName(old)))
	}
	// A segment whose successor starts at or before s.index+1 holds only
	// records the snapshot covers. The last segment always stays.
	k := 0
	for k+1 < len(w.segs) && w.segs[k+1].first <= s.index+1 {
		k++
	}
	for _, sg := range w.segs[:k] {
		obs.paths = append(obs.paths, w.path(sg.name))
	}
	w.segs = w.segs[k:]
	return obs, nil
}

// Obsolete is the files a released snapshot replaced (ReleaseSnapshotLater).
type Obsolete struct {
	fs    vfs.FS
	paths []string
}

// Len returns the number of files to delete.
func (o Obsolete) Len() int { return len(o.paths) }

// Remove deletes the files, on any goroutine; one already gone is not an
// error. It tries every file and returns the first error.
func (o Obsolete) Remove() error {
	var first error
	for _, p := range o.paths {
		if err := o.fs.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) && first == nil {
			first = fmt.Errorf("wal: removing %s: %w", filepath.Base(p), err)
		}
	}
	return first
}

// SnapshotIndex returns the index of the last record the latest snapshot
// covers, and whether the log has a snapshot.
func (w *WAL) SnapshotIndex() (uint64, bool) { return w.snap, w.hasSnap }

// OpenSnapshot opens the latest snapshot for reading (nil if the log has
// none). The reader verifies every frame's checksum and the end frame as
// it goes: a damaged snapshot reads as an error matching ErrCorrupt.
func (w *WAL) OpenSnapshot() (io.ReadCloser, error) {
	if !w.hasSnap {
		return nil, nil
	}
	return openSnapshotFile(w.fs, w.path(snapName(w.snap)), snapName(w.snap), w.snap)
}

// snapshotReader reads the snapshot bytes out of a snapshot file's
// frames.
type snapshotReader struct {
	f     vfs.File
	sc    *scanner
	data  []byte // rest of the current frame's payload
	total uint64 // bytes returned
	done  bool
	err   error
}

// openSnapshotFile opens the snapshot file at path (name is its base name
// for errors) and checks its header against index.
func openSnapshotFile(fsys vfs.FS, path, name string, index uint64) (io.ReadCloser, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("wal: %w", err)
	}
	var hdr [snapHeaderSize]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		f.Close()
		if err == io.EOF {
			return nil, &CorruptError{Segment: name, Reason: "file shorter than a snapshot header"}
		}
		return nil, fmt.Errorf("wal: reading snapshot %s: %w", name, err)
	}
	reason := ""
	switch {
	case crc32.Checksum(hdr[:snapHeaderSize-4], castagnoli) != binary.LittleEndian.Uint32(hdr[snapHeaderSize-4:]):
		reason = "snapshot header checksum mismatch"
	case string(hdr[:8]) != snapMagic:
		reason = "bad snapshot magic"
	case binary.LittleEndian.Uint16(hdr[8:]) != snapVersion:
		reason = fmt.Sprintf("unsupported snapshot version %d", binary.LittleEndian.Uint16(hdr[8:]))
	case binary.LittleEndian.Uint64(hdr[16:]) != index:
		reason = fmt.Sprintf("header says index %d", binary.LittleEndian.Uint64(hdr[16:]))
	}
	if reason != "" {
		f.Close()
		return nil, &CorruptError{Segment: name, Reason: reason}
	}
	seed := binary.LittleEndian.Uint32(hdr[snapHeaderSize-4:])
	sc := newScanner(f, fi.Size(), scanSnapshot, name, snapHeaderSize, 0, seed, snapshotChunk)
	return &snapshotReader{f: f, sc: sc}, nil
}

func (r *snapshotReader) Read(p []byte) (int, error) {
	for len(r.data) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.done {
			return 0, io.EOF
		}
		r.err = r.nextFrame()
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	r.total += uint64(n)
	return n, nil
}

// nextFrame reads the next frame: data, or the end frame (which must
// count every byte and be the file's last).
func (r *snapshotReader) nextFrame() error {
	typ, payload, ok, err := r.sc.next()
	switch {
	case err != nil:
		return err
	case !ok && r.sc.bad == "":
		r.sc.bad = "file ends without an end frame"
		fallthrough
	case !ok:
		return r.sc.corrupt()
	case typ == RecordSnapshot:
		r.data = payload
		return nil
	}
	// The end frame.
	switch {
	case len(payload) != 8 || binary.LittleEndian.Uint64(payload) != r.total:
		r.sc.bad = fmt.Sprintf("end frame does not count the %d bytes before it", r.total)
	case r.sc.off != r.sc.size:
		r.sc.bad = "data after the end frame"
	}
	if r.sc.bad != "" {
		return r.sc.corrupt()
	}
	r.done = true
	return nil
}

func (r *snapshotReader) Close() error { return r.f.Close() }

// verifySnapshot reads the snapshot file at path through to its end frame.
func verifySnapshot(fsys vfs.FS, path, name string, index uint64) error {
	r, err := openSnapshotFile(fsys, path, name, index)
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = io.Copy(io.Discard, r)
	return err
}
