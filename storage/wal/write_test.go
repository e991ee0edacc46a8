package wal

import (
	"math/rand/v2"
	"testing"

	"github.com/weft-dev/weft/storage/vfs"
)

// TestWriteThenSync: records written without a sync are in the file but
// not durable; the next Sync makes them durable even with nothing newly
// appended (the case a node's deferred sync relies on, node/pipeline.go).
func TestWriteThenSync(t *testing.T) {
	mem := vfs.NewCrashableMem()
	w := mustOpen(t, mem, Options{})
	if err := w.Append(rec(0), rec(1)); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(); err != nil {
		t.Fatal(err)
	}
	if w.WrittenIndex() != 2 || w.SyncedIndex() != 0 {
		t.Fatalf("after Write: written %d synced %d, want 2 and 0", w.WrittenIndex(), w.SyncedIndex())
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if w.SyncedIndex() != 2 {
		t.Fatalf("after Sync: synced %d, want 2", w.SyncedIndex())
	}
	_, got := mustReadAll(t, mustOpen(t, mem.CrashClone(nil), Options{}))
	wantRecs(t, got, 0, 2)
}

// TestWriteRandom interleaves Append, Write and Sync through small
// segments, cloning the filesystem as a power loss would leave it at
// random points: every record Sync made durable survives, in order, and
// SyncedIndex and WrittenIndex never go back.
func TestWriteRandom(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		mem := vfs.NewCrashableMem()
		w := mustOpen(t, mem, Options{SegmentSize: 4096})
		rng := rand.New(rand.NewPCG(seed, 0))
		next := 0
		var written, synced uint64
		for round := range 400 {
			for range rng.IntN(6) {
				if err := w.Append(rec(next)); err != nil {
					t.Fatal(err)
				}
				next++
			}
			switch rng.IntN(3) {
			case 0:
				if err := w.Write(); err != nil {
					t.Fatal(err)
				}
			case 1:
				if err := w.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			if w.WrittenIndex() < written || w.SyncedIndex() < synced || w.SyncedIndex() > w.WrittenIndex() {
				t.Fatalf("seed %d round %d: written %d synced %d after %d and %d", seed, round, w.WrittenIndex(), w.SyncedIndex(), written, synced)
			}
			written, synced = w.WrittenIndex(), w.SyncedIndex()
			if rng.IntN(30) == 0 {
				crashed := mem.CrashClone(rand.New(rand.NewPCG(seed, uint64(round))))
				w2 := mustOpen(t, crashed, Options{SegmentSize: 4096})
				_, got := mustReadAll(t, w2)
				if uint64(len(got)) < synced {
					t.Fatalf("seed %d round %d: %d records survived, %d were synced", seed, round, len(got), synced)
				}
				wantRecs(t, got, 0, len(got))
				w2.Close()
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
