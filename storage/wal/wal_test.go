package wal

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/weft-dev/weft/storage/vfs"
	"github.com/weft-dev/weft/wire"
)

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
	var want int64
	for _, m := range msgs {
		want += int64(wire.Size(m))
	}
	for range 20 {
		if n, err := w.AppendMessages(msgs...); err != nil || n != want {
			t.Fatalf("AppendMessages = %d bytes, %v; want %d bytes", n, err, want)
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
	if _, err := w2.AppendMessages(big); !errors.Is(err, ErrTooLarge) {
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

// TestUnsafeNoSyncRolls: with UnsafeNoSync the log rolls to new segments
// without a single sync (the full segment's fdatasync at a roll stalled a
// loaded agent for 30 to 200 ms); with the default every roll syncs the
// full segment, the new one and the directory. A reopened log reads every
// record either way.
func TestUnsafeNoSyncRolls(t *testing.T) {
	for _, unsafe := range []bool{false, true} {
		mem := vfs.NewCrashableMem()
		syncs := 0
		fsys := vfs.WithErrors(mem, vfs.InjectorFunc(func(op vfs.Op, _ string) error {
			if op == vfs.OpSync || op == vfs.OpSyncDir {
				syncs++
			}
			return nil
		}))
		w := mustOpen(t, fsys, Options{SegmentSize: 4096, UnsafeNoSync: unsafe})
		opened := syncs
		for i := range 400 {
			if err := w.Append(rec(i)); err != nil {
				t.Fatal(err)
			}
			if i%10 == 9 {
				if err := w.Sync(); err != nil {
					t.Fatal(err)
				}
			}
		}
		segs := len(segments(t, mem))
		if segs < 3 {
			t.Fatalf("UnsafeNoSync %v: %d segments, want several rolls", unsafe, segs)
		}
		if got := syncs - opened; unsafe && got != 0 || !unsafe && got < 3*(segs-1) {
			t.Errorf("UnsafeNoSync %v: %d syncs over %d rolls and 40 Syncs", unsafe, got, segs-1)
		}
		w.Close()
		_, recs := mustReadAll(t, mustOpen(t, mem, Options{SegmentSize: 4096}))
		wantRecs(t, recs, 0, 400)
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
