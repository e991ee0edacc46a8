package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/weft-dev/weft/storage/vfs"
	"github.com/weft-dev/weft/wire"
)

const dir = "/wal"

func rec(i int) []byte {
	return []byte(fmt.Sprintf("record-%d-%s", i, strings.Repeat("x", i%23)))
}

func mustOpen(t testing.TB, fsys vfs.FS, opts Options) *WAL {
	t.Helper()
	w, err := Open(fsys, dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return w
}

func mustReadAll(t testing.TB, w *WAL) ([]byte, [][]byte) {
	t.Helper()
	snap, recs, err := w.ReadAll()
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	return snap, recs
}

func wantRecs(t testing.TB, got [][]byte, from, to int) {
	t.Helper()
	if len(got) != to-from {
		t.Fatalf("got %d records, want %d (records %d..%d)", len(got), to-from, from, to-1)
	}
	for i, g := range got {
		if !bytes.Equal(g, rec(from+i)) {
			t.Fatalf("record %d = %q, want %q", i, g, rec(from+i))
		}
	}
}

func segments(t testing.TB, fsys vfs.FS) []string {
	t.Helper()
	names, err := fsys.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var segs []string
	for _, n := range names {
		if strings.HasSuffix(n, segSuffix) {
			segs = append(segs, n)
		}
	}
	return segs
}

func readFile(t testing.TB, fsys vfs.FS, name string) []byte {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t testing.TB, fsys vfs.FS, name string, b []byte) {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func TestRoundTrip(t *testing.T) {
	for _, name := range []string{"mem", "os"} {
		t.Run(name, func(t *testing.T) {
			var fsys vfs.FS = vfs.NewCrashableMem()
			d := dir
			if name == "os" {
				fsys, d = vfs.OS(), filepath.Join(t.TempDir(), "a", "wal")
			}
			opts := Options{SegmentSize: 4096}
			w, err := Open(fsys, d, opts)
			if err != nil {
				t.Fatal(err)
			}
			if w.LastIndex() != 0 || w.FirstIndex() != 1 || w.SyncedIndex() != 0 {
				t.Fatalf("empty log: first %d last %d synced %d", w.FirstIndex(), w.LastIndex(), w.SyncedIndex())
			}
			for i := range 300 {
				if err := w.Append(rec(i)); err != nil {
					t.Fatal(err)
				}
				if i%7 == 6 {
					if err := w.Sync(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if got := w.SyncedIndex(); got != 294 {
				t.Fatalf("SyncedIndex = %d, want 294", got)
			}
			// Records sees only durable records.
			_, got, err := w.ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			wantRecs(t, got, 0, 294)
			if err := w.Append(nil); err != nil { // empty records are fine
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if err := w.Append(rec(0)); !errors.Is(err, ErrClosed) {
				t.Fatalf("Append after Close: %v", err)
			}
			w, err = Open(fsys, d, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if w.Repaired() != nil {
				t.Fatalf("clean log repaired: %+v", w.Repaired())
			}
			_, got, err = w.ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 301 || len(got[300]) != 0 {
				t.Fatalf("got %d records", len(got))
			}
			wantRecs(t, got[:300], 0, 300)
			if w.LastIndex() != 301 || w.SyncedIndex() != 301 {
				t.Fatalf("last %d synced %d", w.LastIndex(), w.SyncedIndex())
			}
			// Records carries indexes and types.
			i := uint64(1)
			for r, err := range w.Records() {
				if err != nil || r.Index != i || r.Type != RecordEntry {
					t.Fatalf("record %d: %+v %v", i, r, err)
				}
				i++
			}
		})
	}
}

func TestRollover(t *testing.T) {
	m := vfs.NewCrashableMem()
	opts := Options{SegmentSize: 256}
	w := mustOpen(t, m, opts)
	for i := range 100 {
		w.Append(rec(i))
		if i%10 == 9 {
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A record bigger than a segment gets a segment of its own.
	big := bytes.Repeat([]byte("B"), 1000)
	w.Append(big)
	w.Append(rec(101))
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	segs := segments(t, m)
	if len(segs) < 20 {
		t.Fatalf("only %d segments for 100 records of 256-byte segments", len(segs))
	}
	for i, s := range segs {
		seq, _, ok := parseSegName(s)
		if !ok || seq != uint64(i) {
			t.Fatalf("segment %d named %s", i, s)
		}
		if sz := len(readFile(t, m, filepath.Join(dir, s))); sz != 256 && !(sz > 256 && i >= len(segs)-2) {
			t.Fatalf("segment %s is %d bytes, want the preallocated 256", s, sz)
		}
	}
	w.Close()
	w = mustOpen(t, m, opts)
	_, got := mustReadAll(t, w)
	wantRecs(t, got[:100], 0, 100)
	if !bytes.Equal(got[100], big) || !bytes.Equal(got[101], rec(101)) {
		t.Fatal("big record or its successor lost")
	}
}

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

func snapshots(t testing.TB, fsys vfs.FS) []string {
	t.Helper()
	names, err := fsys.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if strings.Contains(n, snapSuffix) {
			out = append(out, n)
		}
	}
	return out
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

func lastSegment(t testing.TB, fsys vfs.FS) string {
	segs := segments(t, fsys)
	return filepath.Join(dir, segs[len(segs)-1])
}

func TestTornTail(t *testing.T) {
	opts := Options{SegmentSize: 1024}
	build := func() (*vfs.MemFS, []byte, int64) {
		m := vfs.NewCrashableMem()
		w := mustOpen(t, m, opts)
		for i := range 10 {
			w.Append(rec(i))
		}
		w.Sync()
		end := w.off
		w.Close()
		return m, readFile(t, m, lastSegment(t, m)), end
	}
	for _, tc := range []struct {
		name   string
		mutate func(b []byte, end int64) []byte
		want   int // records recovered
	}{
		{"garbage after end", func(b []byte, end int64) []byte { b[end+20] = 1; return b }, 10},
		{"half a frame", func(b []byte, end int64) []byte {
			copy(b[end:], []byte{20, 0, 0, 0, 1, 0, 0, 0, 1, 2, 3, 4, 'a', 'b'})
			return b
		}, 10},
		{"truncated mid-frame", func(b []byte, end int64) []byte { return b[:end-5] }, 9},
		{"truncated header", func(b []byte, end int64) []byte { return b[:end-int64(frameLen(len(rec(9))))+4] }, 9},
		{"flipped last payload", func(b []byte, end int64) []byte { b[end-10] ^= 0x40; return b }, 9},
		{"flipped padding", func(b []byte, end int64) []byte {
			// rec(9) is 18 bytes: 12+18 = 30, so 2 bytes of padding.
			b[end-1] = 7
			return b
		}, 9},
		{"bad type", func(b []byte, end int64) []byte { b[end-int64(frameLen(len(rec(9))))+4] = 9; return b }, 9},
		{"zeroed last header", func(b []byte, end int64) []byte {
			off := end - int64(frameLen(len(rec(9))))
			clear(b[off : off+frameHeaderLen])
			return b
		}, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, b, end := build()
			writeFile(t, m, lastSegment(t, m), tc.mutate(b, end))
			w := mustOpen(t, m, opts)
			_, got := mustReadAll(t, w)
			wantRecs(t, got, 0, tc.want)
			if w.Repaired() == nil {
				t.Fatal("no repair reported")
			}
			t.Logf("repair: %+v", *w.Repaired())
			// The log is usable, and the repair is durable.
			w.Append(rec(100))
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
			w.Close()
			w = mustOpen(t, m.CrashClone(nil), opts)
			defer w.Close()
			if w.Repaired() != nil {
				t.Fatalf("second open repaired again: %+v", *w.Repaired())
			}
			_, got = mustReadAll(t, w)
			wantRecs(t, got[:tc.want], 0, tc.want)
			if len(got) != tc.want+1 || !bytes.Equal(got[tc.want], rec(100)) {
				t.Fatalf("appended record after repair lost: %d records", len(got))
			}
		})
	}
}

func TestCorruptMiddle(t *testing.T) {
	opts := Options{SegmentSize: 256}
	build := func() (*vfs.MemFS, []string) {
		m := vfs.NewCrashableMem()
		w := mustOpen(t, m, opts)
		for i := range 60 {
			w.Append(rec(i))
		}
		w.Sync()
		w.Close()
		return m, segments(t, m)
	}
	for _, tc := range []struct {
		name   string
		seg    int // index into segments
		mutate func(b []byte)
		off    int64 // wanted CorruptError.Offset, -1: don't check
		reason string
	}{
		{"payload bit flip", 2, func(b []byte) { b[segHeaderSize+frameHeaderLen+1] ^= 1 }, segHeaderSize, "checksum"},
		{"second frame", 3, func(b []byte) {
			n := binary32(b[segHeaderSize:])
			b[segHeaderSize+frameLen(int(n))+frameHeaderLen] ^= 0x80
		}, -1, "checksum"},
		{"header", 1, func(b []byte) { b[20] ^= 1 }, 0, "header"},
		{"garbage after end marker", 0, func(b []byte) { b[len(b)-1] = 1 }, -1, "after the end"},
		{"snapshot record in plain segment", 2, func(b []byte) { b[segHeaderSize+4] = byte(RecordSnapshot) }, segHeaderSize, "invalid record type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, segs := build()
			name := filepath.Join(dir, segs[tc.seg])
			b := readFile(t, m, name)
			tc.mutate(b)
			writeFile(t, m, name, b)
			_, err := Open(m, dir, opts)
			var ce *CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open = %v, want a CorruptError", err)
			}
			if ce.Segment != segs[tc.seg] || (tc.off >= 0 && ce.Offset != tc.off) || !strings.Contains(ce.Reason, tc.reason) {
				t.Fatalf("CorruptError %+v, want segment %s offset %d reason ~%q", ce, segs[tc.seg], tc.off, tc.reason)
			}
			t.Log(err)
		})
	}
	t.Run("missing segment", func(t *testing.T) {
		m, segs := build()
		m.Remove(filepath.Join(dir, segs[3]))
		if _, err := Open(m, dir, opts); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "missing") {
			t.Fatalf("Open = %v", err)
		}
	})
	t.Run("missing first segment", func(t *testing.T) {
		m, segs := build()
		m.Remove(filepath.Join(dir, segs[0]))
		if _, err := Open(m, dir, opts); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open = %v", err)
		}
	})
	t.Run("segment swapped in from another log", func(t *testing.T) {
		m, segs := build()
		other, _ := build()
		// Same records, same names: the chain still matches, so this is fine...
		b := readFile(t, other, filepath.Join(dir, segs[2]))
		writeFile(t, m, filepath.Join(dir, segs[2]), b)
		if _, err := Open(m, dir, opts); err != nil {
			t.Fatalf("identical segment rejected: %v", err)
		}
		// ...but a segment whose records differ breaks the chain at the next one.
		b[segHeaderSize+frameHeaderLen] ^= 1
		crcFix(b)
		writeFile(t, m, filepath.Join(dir, segs[2]), b)
		if _, err := Open(m, dir, opts); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open = %v", err)
		}
	})
}

func binary32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// crcFix recomputes the chained CRCs of every frame in segment b, as a
// forger would.
func crcFix(b []byte) {
	h, _ := parseSegHeader(b)
	crc := h.seed
	for off := segHeaderSize; off+frameHeaderLen <= len(b); {
		n := int(binary32(b[off:]))
		if b[off+4] == 0 {
			return
		}
		start := off
		buf := append([]byte(nil), b[start:start+frameHeaderLen+n]...)
		buf, crc = finishFrame(buf, 0, RecordType(b[off+4]), crc)
		copy(b[start:], buf)
		off += len(buf)
	}
}

func TestSyncFailureIsSticky(t *testing.T) {
	m := vfs.NewCrashableMem()
	opts := Options{SegmentSize: 4096}
	w := mustOpen(t, m, opts)
	w.Append(rec(0))
	w.Sync()
	w.Close()

	fsys := vfs.WithErrors(m, vfs.FailNth(vfs.OpSync, 2)) // Open syncs once
	w = mustOpen(t, fsys, opts)
	w.Append(rec(1))
	err := w.Sync()
	if !errors.Is(err, ErrFailed) || !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Sync = %v, want ErrFailed wrapping ErrInjected", err)
	}
	if err := w.Append(rec(2)); !errors.Is(err, ErrFailed) {
		t.Fatalf("Append after failed Sync = %v", err)
	}
	if err := w.Sync(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Sync after failed Sync = %v", err)
	}
	if err := w.Cut(nil); !errors.Is(err, ErrFailed) {
		t.Fatalf("Cut after failed Sync = %v", err)
	}
	if _, _, err := w.ReadAll(); !errors.Is(err, ErrFailed) {
		t.Fatalf("ReadAll after failed Sync = %v", err)
	}
	if err := w.Close(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Close = %v", err)
	}
	// Record 1 was written but its sync failed: after a power loss it is
	// gone; reopened without one, it may be found (and is then made durable).
	w = mustOpen(t, m.CrashClone(nil), opts)
	_, got := mustReadAll(t, w)
	wantRecs(t, got, 0, 1)
	w.Close()
	w = mustOpen(t, m, opts)
	_, got = mustReadAll(t, w)
	wantRecs(t, got, 0, 2)
	w.Append(rec(2))
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	w.Close()
}

func TestErrorInjectionEverywhere(t *testing.T) {
	// Fail each operation kind at each of its first occurrences in a
	// workload with rollover and Cut; after the failure the log must be
	// sticky-failed, and reopening (with or without a crash) must recover
	// a prefix containing every record whose Sync succeeded.
	ops := []vfs.Op{vfs.OpCreate, vfs.OpOpen, vfs.OpOpenDir, vfs.OpMkdirAll, vfs.OpRename, vfs.OpRemove, vfs.OpList,
		vfs.OpStat, vfs.OpRead, vfs.OpWrite, vfs.OpSync, vfs.OpSyncDir, vfs.OpTruncate, vfs.OpPreallocate}
	opts := Options{SegmentSize: 256}
	injected := map[vfs.Op]int{}
	for _, op := range ops {
		for n := 1; n <= 12; n++ {
			m := vfs.NewCrashableMem()
			fsys := vfs.WithErrors(m, vfs.FailNth(op, n))
			durable, appended := 0, 0
			failed := false
			w, err := Open(fsys, dir, opts)
			if err != nil {
				if !errors.Is(err, vfs.ErrInjected) {
					t.Fatalf("%s #%d: Open = %v", op, n, err)
				}
				failed = true
				injected[op]++
			}
			for i := 0; i < 30 && !failed; i++ {
				if err := w.Append(rec(i)); err != nil {
					t.Fatalf("%s #%d: Append = %v", op, n, err)
				}
				appended++
				if i%3 == 2 {
					if err := w.Sync(); err != nil {
						if !errors.Is(err, ErrFailed) || !errors.Is(err, vfs.ErrInjected) {
							t.Fatalf("%s #%d: Sync = %v", op, n, err)
						}
						failed = true
						injected[op]++
						if err := w.Append(rec(99)); !errors.Is(err, ErrFailed) {
							t.Fatalf("%s #%d: Append after failure = %v", op, n, err)
						}
						break
					}
					durable = appended
				}
			}
			if w != nil {
				w.Close()
			}
			for _, fs := range []vfs.FS{m.CrashClone(nil), m} {
				w := mustOpen(t, fs, opts)
				_, got := mustReadAll(t, w)
				if len(got) < durable || len(got) > appended {
					t.Fatalf("%s #%d: recovered %d records, durable %d appended %d", op, n, len(got), durable, appended)
				}
				wantRecs(t, got, 0, len(got))
				w.Close()
			}
		}
	}
	t.Logf("failures surfaced per op: %v", injected)
	for _, op := range []vfs.Op{vfs.OpCreate, vfs.OpRename, vfs.OpWrite, vfs.OpSync, vfs.OpSyncDir, vfs.OpPreallocate, vfs.OpMkdirAll, vfs.OpList} {
		if injected[op] == 0 {
			t.Errorf("no injected %s failure surfaced", op)
		}
	}
}

func TestTooLarge(t *testing.T) {
	w := mustOpen(t, vfs.NewCrashableMem(), Options{SegmentSize: 4096, MaxRecordSize: 10})
	defer w.Close()
	if err := w.Append([]byte("ok"), make([]byte, 11)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Append = %v", err)
	}
	if w.LastIndex() != 0 {
		t.Fatal("a failed Append appended records")
	}
	// A snapshot is not a record: it may be larger than MaxRecordSize, and
	// larger than a snapshot frame.
	big := bytes.Repeat([]byte("0123456789"), snapshotChunk/4)
	if err := w.Cut(big); err != nil {
		t.Fatalf("Cut of a %d-byte snapshot = %v", len(big), err)
	}
	if snap, _ := mustReadAll(t, w); !bytes.Equal(snap, big) {
		t.Fatalf("snapshot read back: %d bytes, want %d", len(snap), len(big))
	}
	if err := w.Append([]byte("0123456789")); err != nil {
		t.Fatalf("Append after ErrTooLarge = %v", err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	// A smaller limit on reopen does not hide records written under a
	// larger one.
	m := vfs.NewCrashableMem()
	w = mustOpen(t, m, Options{SegmentSize: 4096, MaxRecordSize: 100})
	w.Append(make([]byte, 100), []byte("next"))
	w.Close()
	w = mustOpen(t, m, Options{SegmentSize: 4096, MaxRecordSize: 10})
	if _, got := mustReadAll(t, w); len(got) != 2 || len(got[0]) != 100 || w.Repaired() != nil {
		t.Fatalf("reopen with smaller MaxRecordSize: %d records, repaired %v", len(got), w.Repaired())
	}
}

func TestOptions(t *testing.T) {
	for _, o := range []Options{{SegmentSize: 10}, {MaxRecordSize: -1}, {MaxRecordSize: MaxRecordSizeLimit + 1}} {
		if _, err := Open(vfs.NewCrashableMem(), dir, o); err == nil {
			t.Errorf("Open accepted %+v", o)
		}
	}
	o, err := Options{}.validate()
	if err != nil || o.SegmentSize != DefaultSegmentSize || o.MaxRecordSize != DefaultMaxRecordSize {
		t.Fatalf("defaults: %+v %v", o, err)
	}
}

func TestSegName(t *testing.T) {
	n := segName(0x1a, 0x2b)
	if n != "000000000000001a-000000000000002b.wal" {
		t.Fatal(n)
	}
	if seq, first, ok := parseSegName(n); !ok || seq != 0x1a || first != 0x2b {
		t.Fatal(seq, first, ok)
	}
	for _, bad := range []string{"x.wal", "000000000000001A-000000000000002b.wal", n + ".tmp", "000000000000001a_000000000000002b.wal"} {
		if _, _, ok := parseSegName(bad); ok {
			t.Errorf("parsed %q", bad)
		}
	}
}

func TestMessages(t *testing.T) {
	m := vfs.NewCrashableMem()
	w := mustOpen(t, m, Options{SegmentSize: 512})
	msgs := []wire.Message{
		&wire.RecBallot{Ballot: wire.Ballot{N: 3, P: 1}, CBallot: wire.Ballot{N: 2, P: 1}},
		&wire.RecDelivered{
			M:   wire.AppMsg{ID: wire.MsgID{Client: 7, Seq: 9}, Dest: []wire.GroupID{0, 2}, Payload: []byte("hello")},
			LTS: wire.Timestamp{T: 4, G: 0}, GTS: wire.Timestamp{T: 5, G: 2},
		},
		&wire.RecCollected{IDs: []wire.MsgID{{Client: 7, Seq: 9}}},
	}
	for range 20 {
		if err := w.AppendMessages(msgs...); err != nil {
			t.Fatal(err)
		}
		w.Sync()
	}
	w.Append([]byte("not a message"))
	w.Close()
	w = mustOpen(t, m, Options{SegmentSize: 512})
	defer w.Close()
	if _, err := w.ReadMessages(); !errors.Is(err, wire.ErrVersion) && !errors.Is(err, wire.ErrMalformed) {
		t.Fatalf("ReadMessages over a non-message = %v", err)
	}
	w.Cut([]byte("image"))
	w.AppendMessages(msgs...)
	w.Sync()
	got, err := w.ReadMessages()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, msgs) {
		t.Fatalf("ReadMessages = %v", got)
	}
	if _, err := DecodeMessage(Record{Type: RecordSnapshot}); err == nil {
		t.Fatal("DecodeMessage accepted a snapshot")
	}
	big := &wire.RecDelivered{M: wire.AppMsg{Payload: make([]byte, 100)}}
	w2 := mustOpen(t, vfs.NewCrashableMem(), Options{SegmentSize: 4096, MaxRecordSize: 50})
	defer w2.Close()
	if err := w2.AppendMessages(big); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("AppendMessages = %v", err)
	}
}

func TestOpenCreatesDurableDir(t *testing.T) {
	m := vfs.NewCrashableMem()
	w, err := Open(m, "/a/b/wal", Options{SegmentSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	w.Append(rec(0))
	w.Sync()
	// Nothing but what Open and Sync made durable survives.
	w, err = Open(m.CrashClone(nil), "/a/b/wal", Options{SegmentSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	_, got := mustReadAll(t, w)
	wantRecs(t, got, 0, 1)
}

func TestLeftoverTmpRemoved(t *testing.T) {
	m := vfs.NewCrashableMem()
	w := mustOpen(t, m, Options{SegmentSize: 256})
	w.Close()
	writeFile(t, m, filepath.Join(dir, segName(1, 1)+tmpSuffix), []byte("junk"))
	writeFile(t, m, filepath.Join(dir, "README"), []byte("not ours"))
	w = mustOpen(t, m, Options{SegmentSize: 256})
	w.Close()
	names, _ := m.List(dir)
	if !slices.Equal(names, []string{segName(0, 1), "README"}) {
		t.Fatalf("dir = %v", names)
	}
}

// TestUnsafeNoSync: with UnsafeNoSync, Sync writes the records (a reopened
// log reads them) but does not make them durable: some power losses lose
// records whose Sync returned, which never happens with the default.
func TestUnsafeNoSync(t *testing.T) {
	for _, unsafe := range []bool{false, true} {
		fsys := vfs.NewCrashableMem()
		w := mustOpen(t, fsys, Options{SegmentSize: 4096, UnsafeNoSync: unsafe})
		for i := range 10 {
			if err := w.Append(rec(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
		lost := 0
		for seed := range 50 {
			w2 := mustOpen(t, fsys.CrashClone(rand.New(rand.NewPCG(uint64(seed), 1))), Options{SegmentSize: 4096})
			if _, recs := mustReadAll(t, w2); len(recs) < 10 {
				lost++
			}
			w2.Close()
		}
		if unsafe != (lost > 0) {
			t.Errorf("UnsafeNoSync %v: %d of 50 power losses lost synced records", unsafe, lost)
		}
		w.Close()
		_, recs := mustReadAll(t, mustOpen(t, fsys, Options{SegmentSize: 4096}))
		wantRecs(t, recs, 0, 10)
	}
}
