package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/weft-dev/weft/storage/vfs"
)

func TestCut(t *testing.T) {
	m := vfs.NewCrashableMem()
	opts := Options{SegmentSize: 512}
	w := mustOpen(t, m, opts)
	for i := range 50 {
		w.Append(rec(i))
	}
	if err := w.Cut([]byte("snap-50")); err != nil {
		t.Fatal(err)
	}
	if idx, ok := w.SnapshotIndex(); w.FirstIndex() != 51 || w.LastIndex() != 50 || w.SyncedIndex() != 50 || idx != 50 || !ok {
		t.Fatalf("after Cut: first %d last %d synced %d snapshot %d %v", w.FirstIndex(), w.LastIndex(), w.SyncedIndex(), idx, ok)
	}
	// The segments holding only records before the last one are gone; the
	// last (it holds record 50) stays until a record after it rolls over.
	if segs := segments(t, m); len(segs) != 1 {
		t.Fatalf("segments after Cut: %v", segs)
	}
	for i := 50; i < 80; i++ {
		w.Append(rec(i))
	}
	w.Sync()
	if segs := segments(t, m); len(segs) < 2 || firstOf(t, segs[1]) != 51 {
		t.Fatalf("the first record after a Cut must start a segment: %v", segs)
	}
	snap, got := mustReadAll(t, w)
	if string(snap) != "snap-50" {
		t.Fatalf("snapshot %q", snap)
	}
	wantRecs(t, got, 50, 80)
	w.Close()

	w = mustOpen(t, m, opts)
	snap, got = mustReadAll(t, w)
	if string(snap) != "snap-50" {
		t.Fatalf("snapshot after reopen %q", snap)
	}
	wantRecs(t, got, 50, 80)
	var first Record
	for r := range w.Records() {
		first = r
		break
	}
	if first.Index != 51 || first.Type != RecordEntry {
		t.Fatalf("first record %+v", first)
	}
	// A second Cut replaces the first; an empty snapshot is allowed.
	if err := w.Cut(nil); err != nil {
		t.Fatal(err)
	}
	if names := snapshots(t, m); len(names) != 1 || names[0] != snapName(80) {
		t.Fatalf("snapshot files after the second Cut: %v", names)
	}
	if segs := segments(t, m); len(segs) != 1 {
		t.Fatalf("segments after the second Cut: %v", segs)
	}
	w.Close()
	w = mustOpen(t, m, opts)
	defer w.Close()
	snap, got = mustReadAll(t, w)
	if snap == nil || len(snap) != 0 || len(got) != 0 {
		t.Fatalf("after empty Cut: snap %q, %d records", snap, len(got))
	}
	if w.FirstIndex() != 81 || w.LastIndex() != 80 {
		t.Fatalf("FirstIndex = %d LastIndex = %d, want 81 and 80", w.FirstIndex(), w.LastIndex())
	}
}

func firstOf(t *testing.T, name string) uint64 {
	_, first, ok := parseSegName(name)
	if !ok {
		t.Fatalf("bad name %s", name)
	}
	return first
}

// TestCutLeftovers: a crash after the snapshot is durable but before the
// old segments and the old snapshot are deleted leaves them behind; Open
// ignores and deletes them, and a leftover temporary snapshot too.
func TestCutLeftovers(t *testing.T) {
	m := vfs.NewCrashableMem()
	opts := Options{SegmentSize: 256}
	w := mustOpen(t, m, opts)
	for i := range 20 {
		w.Append(rec(i))
	}
	w.Cut([]byte("old"))
	for i := 20; i < 40; i++ {
		w.Append(rec(i))
	}
	w.Sync()
	saved := map[string][]byte{}
	for _, s := range append(segments(t, m), snapshots(t, m)...) {
		saved[s] = readFile(t, m, filepath.Join(dir, s))
	}
	w.Cut([]byte("S"))
	w.Append(rec(40))
	w.Close()
	for s, b := range saved { // resurrect
		writeFile(t, m, filepath.Join(dir, s), b)
	}
	writeFile(t, m, filepath.Join(dir, snapName(41)+tmpSuffix), []byte("half a snapshot"))
	vfs.SyncDir(m, dir)
	w = mustOpen(t, m, opts)
	snap, got := mustReadAll(t, w)
	if string(snap) != "S" {
		t.Fatalf("snapshot %q", snap)
	}
	wantRecs(t, got, 40, 41)
	if segs, snaps := segments(t, m), snapshots(t, m); len(segs) != 1 || len(snaps) != 1 || snaps[0] != snapName(40) {
		t.Fatalf("after Open: segments %v snapshots %v, want 1 and [%s]", segs, snaps, snapName(40))
	}
	w.Close()
}

// TestSnapshotWhileAppending writes a snapshot from another goroutine
// while the log keeps appending and syncing, as a node compacts off its
// loop; a power loss before the commit recovers the old state, after the
// release the new one, and the records appended meanwhile survive both.
func TestSnapshotWhileAppending(t *testing.T) {
	m := vfs.NewCrashableMem()
	opts := Options{SegmentSize: 512}
	w := mustOpen(t, m, opts)
	for i := range 100 {
		w.Append(rec(i))
	}
	s, err := w.BeginSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if s.Index() != 100 || w.SyncedIndex() != 100 {
		t.Fatalf("snapshot index %d synced %d, want 100", s.Index(), w.SyncedIndex())
	}
	image := bytes.Repeat([]byte("image of 100 records;"), 200_000) // 4 MiB: several frames
	finished := make(chan error)
	commit := make(chan struct{})
	go func() {
		for b := image; len(b) > 0; b = b[min(len(b), 100_000):] {
			if _, err := s.Write(b[:min(len(b), 100_000)]); err != nil {
				finished <- err
				return
			}
		}
		err := s.Finish()
		if err == nil {
			var r io.ReadCloser
			if r, err = s.Reader(); err == nil {
				var back []byte
				back, err = io.ReadAll(r)
				r.Close()
				if err == nil && !bytes.Equal(back, image) {
					err = errors.New("read back a different snapshot")
				}
			}
		}
		finished <- err
		<-commit
		finished <- s.Commit()
	}()
	for i := 100; i < 150; i++ {
		w.Append(rec(i))
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-finished; err != nil {
		t.Fatal(err)
	}
	// Power loss before the commit: no snapshot, every record.
	w2 := mustOpen(t, m.CrashClone(nil), opts)
	if snap, got := mustReadAll(t, w2); snap != nil {
		t.Fatal("an uncommitted snapshot was recovered")
	} else {
		wantRecs(t, got, 0, 150)
	}
	w2.Close()
	close(commit)
	if err := <-finished; err != nil {
		t.Fatal(err)
	}
	before := len(segments(t, m))
	if err := w.ReleaseSnapshot(s); err != nil {
		t.Fatal(err)
	}
	if after := len(segments(t, m)); after >= before || firstOf(t, segments(t, m)[0]) != 101 {
		t.Fatalf("release kept %v (had %d segments)", segments(t, m), before)
	}
	w.Append(rec(150))
	w.Sync()
	w2 = mustOpen(t, m.CrashClone(nil), opts)
	defer w2.Close()
	snap, got := mustReadAll(t, w2)
	if !bytes.Equal(snap, image) {
		t.Fatalf("snapshot of %d bytes recovered, want %d", len(snap), len(image))
	}
	wantRecs(t, got, 100, 151)
	w.Close()
}

// TestSnapshotCorrupt: damage to the snapshot in charge is corruption, and
// so is a log that lost the segments after it.
func TestSnapshotCorrupt(t *testing.T) {
	opts := Options{SegmentSize: 256}
	build := func() *vfs.MemFS {
		m := vfs.NewCrashableMem()
		w := mustOpen(t, m, opts)
		for i := range 30 {
			w.Append(rec(i))
		}
		if err := w.Cut(bytes.Repeat([]byte("s"), 3*snapshotChunk/2)); err != nil {
			t.Fatal(err)
		}
		for i := 30; i < 40; i++ {
			w.Append(rec(i))
		}
		w.Close()
		return m
	}
	path := filepath.Join(dir, snapName(30))
	for _, tc := range []struct {
		name   string
		mutate func(b []byte) []byte
		reason string
	}{
		{"bit flip in the first frame", func(b []byte) []byte { b[snapHeaderSize+frameHeaderLen+7] ^= 1; return b }, "checksum"},
		{"bit flip in the header", func(b []byte) []byte { b[17] ^= 1; return b }, "header checksum"},
		{"truncated", func(b []byte) []byte { return b[:len(b)-frameLen(8)] }, "without an end frame"},
		{"truncated mid-frame", func(b []byte) []byte { return b[:snapHeaderSize+frameHeaderLen+100] }, "past the end"},
		{"garbage after the end", func(b []byte) []byte { return append(b, make([]byte, 16)...) }, "after the end frame"},
		{"frame over the chunk limit", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[snapHeaderSize:], snapshotChunk+8) // a longer frame than any writer makes
			return b
		}, "exceeds the maximum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := build()
			writeFile(t, m, path, tc.mutate(readFile(t, m, path)))
			_, err := Open(m, dir, opts)
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Segment != snapName(30) || !strings.Contains(ce.Reason, tc.reason) {
				t.Fatalf("Open = %v, want a CorruptError in %s about %q", err, snapName(30), tc.reason)
			}
		})
	}
	t.Run("segments after the snapshot missing", func(t *testing.T) {
		m := build()
		for _, s := range segments(t, m) {
			m.Remove(filepath.Join(dir, s))
		}
		if _, err := Open(m, dir, opts); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "missing") {
			t.Fatalf("Open = %v", err)
		}
	})
}

// TestLegacySnapshotSegment: a log with a snapshot inside a segment (the
// format before snapshot files) is refused with a reason saying so.
func TestLegacySnapshotSegment(t *testing.T) {
	m := vfs.NewCrashableMem()
	w := mustOpen(t, m, Options{})
	w.Append(rec(0))
	w.Close()
	name := filepath.Join(dir, segments(t, m)[0])
	b := readFile(t, m, name)
	b[10] = flagLegacySnapshot
	copy(b[:segHeaderSize], appendSegHeader(nil, segment{seq: 0, first: 1, flags: flagLegacySnapshot}))
	writeFile(t, m, name, b)
	if _, err := Open(m, dir, Options{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "earlier weft") {
		t.Fatalf("Open = %v", err)
	}
}

// TestReleaseSnapshotLater: the log stops using the files a snapshot
// replaced as soon as it is released, keeps appending while they are
// still on disk, and a crash before the caller deletes them recovers the
// new snapshot and the records after it; Open deletes them then. Remove
// deletes them otherwise, and a second Remove finds nothing to do.
func TestReleaseSnapshotLater(t *testing.T) {
	opts := Options{SegmentSize: 256}
	for _, crash := range []bool{false, true} {
		m := vfs.NewCrashableMem()
		w := mustOpen(t, m, opts)
		for i := range 30 {
			w.Append(rec(i))
		}
		if err := w.Cut([]byte("first")); err != nil {
			t.Fatal(err)
		}
		for i := 30; i < 60; i++ {
			w.Append(rec(i))
		}
		s, err := w.BeginSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		image := []byte("second image")
		if _, err := s.Write(image); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(); err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(); err != nil {
			t.Fatal(err)
		}
		segsBefore, snapsBefore := len(segments(t, m)), len(snapshots(t, m))
		obs, err := w.ReleaseSnapshotLater(s)
		if err != nil {
			t.Fatal(err)
		}
		if obs.Len() < 2 || len(segments(t, m)) != segsBefore || len(snapshots(t, m)) != snapsBefore {
			t.Fatalf("release deleted files itself, or has %d to delete", obs.Len())
		}
		w.Append(rec(60))
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
		if crash {
			w2 := mustOpen(t, m.CrashClone(nil), opts)
			snap, got := mustReadAll(t, w2)
			if !bytes.Equal(snap, image) {
				t.Fatalf("recovered snapshot %q, want %q", snap, image)
			}
			wantRecs(t, got, 60, 61)
			if n := len(snapshots(t, w2.fs)); n != 1 {
				t.Fatalf("Open left %d snapshots", n)
			}
			w2.Close()
		}
		present := append(segments(t, m), snapshots(t, m)...)
		for _, p := range obs.paths {
			if !slices.Contains(present, filepath.Base(p)) {
				t.Fatalf("before Remove, %s is already gone (%v)", filepath.Base(p), present)
			}
		}
		if err := obs.Remove(); err != nil {
			t.Fatal(err)
		}
		left := append(segments(t, m), snapshots(t, m)...)
		for _, p := range obs.paths {
			if slices.Contains(left, filepath.Base(p)) {
				t.Fatalf("after Remove, %s is still there (%v)", filepath.Base(p), left)
			}
		}
		if len(snapshots(t, m)) != 1 {
			t.Fatalf("after Remove: snapshots %v", snapshots(t, m))
		}
		if err := obs.Remove(); err != nil {
			t.Fatalf("a second Remove: %v", err)
		}
		w.Close()
	}
}

// TestSnapshotFrameGrownOnce: a snapshot's frame buffer is allocated once,
// whole, not grown by appends as small writes fill it (which copied and
// allocated several times a frame for the first frame of every snapshot).
func TestSnapshotFrameGrownOnce(t *testing.T) {
	w := mustOpen(t, vfs.NewCrashableMem(), Options{SegmentSize: 512})
	defer w.Close()
	w.Append(rec(0))
	s, err := w.BeginSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Abort()
	piece := bytes.Repeat([]byte{7}, 4096)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range snapshotChunk/len(piece) - 1 { // the first frame, not yet written
		if _, err := s.Write(piece); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	frame := uint64(frameHeaderLen + snapshotChunk)
	if got := after.TotalAlloc - before.TotalAlloc; got > frame+frame/4 {
		t.Fatalf("filling a snapshot's first frame allocated %d bytes, want about one frame (%d)", got, frame)
	}
}
