package wal

import (
	"math/rand/v2"
	"testing"

	"github.com/weft-dev/weft/storage/vfs"
)

// TestSyncWrittenConcurrent appends and writes records on the test's
// goroutine, rolling through small segments, while another goroutine
// syncs what was written; at random points the filesystem is cloned as a
// power loss would leave it. Every record the syncing goroutine reported
// durable before the clone must be in the log reopened from it, in order.
// Run with -race, it also shows the log's goroutine and SyncWritten share
// nothing unguarded.
func TestSyncWrittenConcurrent(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		mem := vfs.NewCrashableMem()
		w := mustOpen(t, mem, Options{SegmentSize: 4096})
		type report struct {
			idx uint64
			err error
		}
		kick, reports := make(chan struct{}, 1), make(chan report, 1)
		go func() {
			for range kick {
				idx, err := w.SyncWritten()
				reports <- report{idx, err}
			}
			close(reports)
		}()
		rng := rand.New(rand.NewPCG(seed, 0))
		var durable uint64 // the highest index SyncWritten reported
		inFlight := false
		collect := func(r report) {
			if r.err != nil {
				t.Fatalf("seed %d: SyncWritten: %v", seed, r.err)
			}
			if r.idx < durable || r.idx > w.WrittenIndex() {
				t.Fatalf("seed %d: SyncWritten reported %d after %d, %d written", seed, r.idx, durable, w.WrittenIndex())
			}
			durable = r.idx
			inFlight = false
		}
		next := 0
		for round := 0; round < 300; round++ {
			for range 1 + rng.IntN(8) {
				if err := w.Append(rec(next)); err != nil {
					t.Fatal(err)
				}
				next++
			}
			if err := w.Write(); err != nil {
				t.Fatal(err)
			}
			if !inFlight {
				kick <- struct{}{}
				inFlight = true
			}
			select {
			case r := <-reports:
				collect(r)
			default:
			}
			if rng.IntN(40) == 0 {
				if inFlight {
					collect(<-reports) // what it reports is durable in the clone
				}
				crashed := mem.CrashClone(rand.New(rand.NewPCG(seed, uint64(round))))
				w2 := mustOpen(t, crashed, Options{SegmentSize: 4096})
				_, got := mustReadAll(t, w2)
				if uint64(len(got)) < durable {
					t.Fatalf("seed %d round %d: %d records survived a crash, %d were reported durable", seed, round, len(got), durable)
				}
				wantRecs(t, got, 0, len(got))
				w2.Close()
			}
		}
		if inFlight {
			collect(<-reports)
		}
		close(kick)
		for range reports {
		}
		if w.SyncedIndex() != durable {
			t.Fatalf("seed %d: SyncedIndex %d, SyncWritten reported %d", seed, w.SyncedIndex(), durable)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSyncWrittenNothingWritten: appended records are not written, so
// SyncWritten covers none of them.
func TestSyncWrittenNothingWritten(t *testing.T) {
	mem := vfs.NewCrashableMem()
	w := mustOpen(t, mem, Options{})
	if err := w.Append(rec(0), rec(1)); err != nil {
		t.Fatal(err)
	}
	if idx, err := w.SyncWritten(); err != nil || idx != 0 {
		t.Fatalf("SyncWritten before Write = %d, %v; want 0", idx, err)
	}
	if err := w.Write(); err != nil {
		t.Fatal(err)
	}
	if w.WrittenIndex() != 2 || w.SyncedIndex() != 0 {
		t.Fatalf("after Write: written %d synced %d, want 2 and 0", w.WrittenIndex(), w.SyncedIndex())
	}
	if idx, err := w.SyncWritten(); err != nil || idx != 2 {
		t.Fatalf("SyncWritten after Write = %d, %v; want 2", idx, err)
	}
	_, got := mustReadAll(t, mustOpen(t, mem.CrashClone(nil), Options{}))
	wantRecs(t, got, 0, 2)
}
