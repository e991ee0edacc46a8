package wal

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/weft-dev/weft/storage/vfs"
)

// countSyncs wraps fsys and counts data syncs.
func countSyncs(fsys vfs.FS) (vfs.FS, *atomic.Int64) {
	var n atomic.Int64
	return vfs.WithErrors(fsys, vfs.InjectorFunc(func(op vfs.Op, _ string) error {
		if op == vfs.OpSync {
			n.Add(1)
		}
		return nil
	})), &n
}

func TestCommitter(t *testing.T) {
	m := vfs.NewCrashableMem()
	fsys, syncs := countSyncs(m)
	w := mustOpen(t, fsys, Options{SegmentSize: 4096})
	c := NewCommitter(w)
	const writers, perWriter = 16, 50
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range perWriter {
				// Two records per batch: batches must stay contiguous.
				a, b := fmt.Appendf(nil, "%d/%d/a", g, i), fmt.Appendf(nil, "%d/%d/b", g, i)
				if err := c.Commit(a, b); err != nil {
					t.Error(err)
					return
				}
				if i%10 == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	wg.Wait()
	before := syncs.Load()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit([]byte("late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Commit after Close = %v", err)
	}
	if err := c.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close = %v", err)
	}
	t.Logf("%d batches in %d syncs", writers*perWriter, before)

	// Everything committed is durable; each writer's batches are in order
	// and each batch is contiguous.
	w = mustOpen(t, m.CrashClone(nil), Options{SegmentSize: 4096})
	defer w.Close()
	_, got := mustReadAll(t, w)
	if len(got) != 2*writers*perWriter {
		t.Fatalf("recovered %d records, want %d", len(got), 2*writers*perWriter)
	}
	next := make([]int, writers)
	for i := 0; i < len(got); i += 2 {
		var g, n int
		var s string
		if _, err := fmt.Sscanf(string(got[i]), "%d/%d/%s", &g, &n, &s); err != nil || s != "a" {
			t.Fatalf("record %d = %q", i, got[i])
		}
		if n != next[g] || string(got[i+1]) != fmt.Sprintf("%d/%d/b", g, n) {
			t.Fatalf("record %d = %q %q, want writer %d batch %d", i, got[i], got[i+1], g, next[g])
		}
		next[g]++
	}
}

func TestCommitterFailure(t *testing.T) {
	m := vfs.NewCrashableMem()
	w := mustOpen(t, vfs.WithErrors(m, vfs.FailNth(vfs.OpSync, 3)), Options{SegmentSize: 4096})
	c := NewCommitter(w)
	if err := c.Commit([]byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit([]byte("2")); !errors.Is(err, ErrFailed) {
		t.Fatalf("Commit with failing sync = %v", err)
	}
	if err := c.Commit([]byte("3")); !errors.Is(err, ErrFailed) {
		t.Fatalf("Commit after failure = %v", err)
	}
	if err := c.Close(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Close = %v", err)
	}
	if err := c.Commit(make([]byte, 1)); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	// Oversized batches fail alone, without failing the log.
	w = mustOpen(t, m, Options{SegmentSize: 4096, MaxRecordSize: 4})
	c = NewCommitter(w)
	defer c.Close()
	if err := c.Commit([]byte("12345")); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized Commit = %v", err)
	}
	if err := c.Commit([]byte("1234")); err != nil {
		t.Fatalf("Commit after ErrTooLarge = %v", err)
	}
}
