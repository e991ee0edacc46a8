package wal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
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
	if w.FirstIndex() != 51 || w.LastIndex() != 51 || w.SyncedIndex() != 51 {
		t.Fatalf("after Cut: first %d last %d synced %d", w.FirstIndex(), w.LastIndex(), w.SyncedIndex())
	}
	if segs := segments(t, m); len(segs) != 1 || firstOf(t, segs[0]) != 51 {
		t.Fatalf("segments after Cut: %v", segs)
	}
	for i := 50; i < 80; i++ {
		w.Append(rec(i))
	}
	w.Sync()
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
	if first.Index != 51 || first.Type != RecordSnapshot {
		t.Fatalf("first record %+v", first)
	}
	// A second Cut replaces the first; an empty snapshot is allowed.
	if err := w.Cut(nil); err != nil {
		t.Fatal(err)
	}
	w.Close()
	w = mustOpen(t, m, opts)
	defer w.Close()
	snap, got = mustReadAll(t, w)
	if snap == nil || len(snap) != 0 || len(got) != 0 {
		t.Fatalf("after empty Cut: snap %q, %d records", snap, len(got))
	}
	if w.FirstIndex() != 82 {
		t.Fatalf("FirstIndex = %d, want 82", w.FirstIndex())
	}
}

func firstOf(t *testing.T, name string) uint64 {
	_, first, ok := parseSegName(name)
	if !ok {
		t.Fatalf("bad name %s", name)
	}
	return first
}

// TestCutLeftovers: a crash after the snapshot segment is durable but before
// the old segments are deleted leaves them behind; Open ignores and deletes
// them.
func TestCutLeftovers(t *testing.T) {
	m := vfs.NewCrashableMem()
	opts := Options{SegmentSize: 256}
	w := mustOpen(t, m, opts)
	for i := range 40 {
		w.Append(rec(i))
	}
	w.Sync()
	before := segments(t, m)
	saved := map[string][]byte{}
	for _, s := range before {
		saved[s] = readFile(t, m, filepath.Join(dir, s))
	}
	w.Cut([]byte("S"))
	w.Append(rec(40))
	w.Close()
	for s, b := range saved { // resurrect
		writeFile(t, m, filepath.Join(dir, s), b)
	}
	vfs.SyncDir(m, dir)
	w = mustOpen(t, m, opts)
	snap, got := mustReadAll(t, w)
	if string(snap) != "S" {
		t.Fatalf("snapshot %q", snap)
	}
	wantRecs(t, got, 40, 41)
	if n := len(segments(t, m)); n != 1 {
		t.Fatalf("%d segments after Open, want 1", n)
	}
	w.Close()
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
		{"snapshot record in plain segment", 2, func(b []byte) { b[segHeaderSize+4] = byte(RecordSnapshot) }, segHeaderSize, "checksum"},
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
	if err := w.Cut(make([]byte, 11)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Cut = %v", err)
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
	if _, _, err := w.ReadMessages(); !errors.Is(err, wire.ErrVersion) && !errors.Is(err, wire.ErrMalformed) {
		t.Fatalf("ReadMessages over a non-message = %v", err)
	}
	w.Cut([]byte("image"))
	w.AppendMessages(msgs...)
	w.Sync()
	snap, got, err := w.ReadMessages()
	if err != nil {
		t.Fatal(err)
	}
	if string(snap) != "image" || !reflect.DeepEqual(got, msgs) {
		t.Fatalf("ReadMessages = %q %v", snap, got)
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
