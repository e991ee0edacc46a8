package wal

import (
	"errors"
	"testing"
	"time"

	"github.com/weft-dev/weft/storage/vfs"
)

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

// TestRawSync: with Options.RawSync the log syncs as without it: records
// whose Sync returned survive a crash (the in-memory FS has no raw call,
// so SyncHolding must fall back to its Sync), a failed sync is sticky, and
// a log on the real filesystem reads back what it synced.
func TestRawSync(t *testing.T) {
	opts := Options{SegmentSize: 4096, RawSync: true}
	m := vfs.NewCrashableMem()
	w := mustOpen(t, m, opts)
	for i := range 40 { // several segments: the roll's sync too
		w.Append(rec(i))
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	w = mustOpen(t, m.CrashClone(nil), opts)
	_, got := mustReadAll(t, w)
	wantRecs(t, got, 0, 40)
	w.Close()

	w = mustOpen(t, vfs.WithErrors(m, vfs.FailNth(vfs.OpSync, 2)), opts) // Open syncs once
	w.Append(rec(40))
	if err := w.Sync(); !errors.Is(err, ErrFailed) || !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Sync = %v, want ErrFailed wrapping ErrInjected", err)
	}
	w.Close()

	osDir := t.TempDir()
	w, err := Open(vfs.OS(), osDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		w.Append(rec(i))
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	if w, err = Open(vfs.OS(), osDir, opts); err != nil {
		t.Fatal(err)
	}
	_, got = mustReadAll(t, w)
	wantRecs(t, got, 0, 40)
	w.Close()
}

// TestRawSyncPausesWhileSlow: a raw sync slower than rawSyncSlow makes the
// next syncs ordinary (the process runs its other goroutines while the
// disk is slow), and an ordinary sync that is fast again brings the raw
// ones back. Sync times come from a scripted clock.
func TestRawSyncPausesWhileSlow(t *testing.T) {
	var now time.Time
	var script []time.Duration
	fsys := vfs.WithErrors(vfs.NewCrashableMem(), vfs.InjectorFunc(func(op vfs.Op, _ string) error {
		if op == vfs.OpSync && len(script) > 0 {
			now, script = now.Add(script[0]), script[1:]
		}
		return nil
	}))
	w := mustOpen(t, fsys, Options{SegmentSize: 1 << 20, RawSync: true})
	defer w.Close()
	holds := 0
	w.raw.hold = func(f vfs.File) error { holds++; return f.Sync() }
	w.raw.now = func() time.Time { return now }
	const ms = time.Millisecond
	for i, c := range []struct {
		took        time.Duration
		raw, paused bool
	}{
		{1 * ms, true, false},
		{30 * ms, true, true},   // a slow raw sync pauses them
		{30 * ms, false, true},  // still slow: ordinary
		{1 * ms, false, false},  // fast again: they resume
		{1 * ms, true, false},   // raw
		{21 * ms, true, true},   // just past the bound
		{20 * ms, false, false}, // at it: fast enough
	} {
		script = []time.Duration{c.took}
		before := holds
		w.Append(rec(i))
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
		if raw := holds > before; raw != c.raw || w.raw.paused != c.paused {
			t.Fatalf("sync %d taking %v: raw %v paused %v, want raw %v paused %v", i, c.took, raw, w.raw.paused, c.raw, c.paused)
		}
	}
	if got := w.RawSyncPauses(); got != 2 {
		t.Fatalf("RawSyncPauses = %d, want 2", got)
	}
}
