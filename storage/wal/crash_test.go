package wal

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/weft-dev/weft/storage/vfs"
)

var (
	crashSeeds = flag.Int("crash.seeds", 2000, "iterations of TestCrashRandom (200 with -short)")
	crashSeed  = flag.Int64("crash.seed", -1, "run only this TestCrashRandom seed")
	crashTrace = flag.Bool("crash.trace", false, "print the operations of TestCrashRandom")
)

// expRec is a record the model expects at some index.
type expRec struct {
	typ  RecordType
	data []byte
}

// crashModel is what the log must recover: hist[i] is the record appended
// with index i+1 (after the last recovery, which truncates hist), durable the
// index up to which recovery must reach. snaps holds the snapshots Cut was
// asked for, by index (each names its index); the latest one whose Cut
// returned nil is committed, and recovery must start from it or from a
// later one whose Cut failed after it became durable.
type crashModel struct {
	hist      []expRec
	durable   uint64
	snaps     map[uint64][][]byte // a failed Cut may have left its snapshot
	committed uint64              // 0: none
}

// check verifies a freshly opened log against the model and then moves the
// model to the recovered state.
func (m *crashModel) check(w *WAL) error {
	var got []Record
	for r, err := range w.Records() {
		if err != nil {
			return fmt.Errorf("Records: %w", err)
		}
		got = append(got, r)
	}
	last := w.LastIndex()
	switch {
	case last < m.durable:
		return fmt.Errorf("recovered up to %d, but %d was durable", last, m.durable)
	case last > uint64(len(m.hist)):
		return fmt.Errorf("recovered up to %d, but only %d were appended", last, len(m.hist))
	case w.SyncedIndex() != last:
		return fmt.Errorf("SyncedIndex %d != LastIndex %d after Open", w.SyncedIndex(), last)
	}
	var snap []byte
	idx, has := w.SnapshotIndex()
	if has {
		r, err := w.OpenSnapshot()
		if err == nil {
			snap, err = io.ReadAll(r)
			r.Close()
		}
		if err != nil {
			return fmt.Errorf("reading the snapshot: %w", err)
		}
	}
	switch {
	case m.committed > 0 && (!has || idx < m.committed):
		return fmt.Errorf("recovered snapshot %d (%v), but the one at %d was committed", idx, has, m.committed)
	case has && !slices.ContainsFunc(m.snaps[idx], func(b []byte) bool { return bytes.Equal(b, snap) }):
		return fmt.Errorf("snapshot at %d reads %.40q (%d bytes), not one Cut wrote", idx, snap, len(snap))
	case has && idx > last:
		return fmt.Errorf("snapshot at %d beyond the log's end %d", idx, last)
	}
	first := uint64(1)
	if has {
		first = idx + 1
	}
	if w.FirstIndex() != first {
		return fmt.Errorf("FirstIndex %d, want %d", w.FirstIndex(), first)
	}
	if uint64(len(got)) != last-first+1 {
		return fmt.Errorf("Records yielded %d records for [%d, %d]", len(got), first, last)
	}
	for i, r := range got {
		want := m.hist[first-1+uint64(i)]
		if r.Index != first+uint64(i) || r.Type != want.typ || !bytes.Equal(r.Data, want.data) {
			return fmt.Errorf("record %d: got index %d %s %q, want index %d %s %q",
				i, r.Index, r.Type, r.Data, first+uint64(i), want.typ, want.data)
		}
	}
	m.hist = m.hist[:last]
	m.durable = last
	if has {
		m.committed = idx
	}
	for k := range m.snaps {
		if k > last || k < m.committed {
			delete(m.snaps, k)
		}
	}
	return nil
}

// TestCrashRandom runs random workloads of appends, syncs, Cuts, clean
// reopens, injected I/O errors and power losses (CrashClone with torn
// writes) and checks after every recovery that the log holds exactly a
// prefix of what was appended, from the latest snapshot on, containing
// everything whose Sync returned nil.
func TestCrashRandom(t *testing.T) {
	seeds := *crashSeeds
	if testing.Short() {
		seeds = min(seeds, 200)
	}
	var stats crashStats
	for seed := range seeds {
		if *crashSeed >= 0 && int64(seed) != *crashSeed {
			continue
		}
		if err := runCrashSeed(uint64(seed), &stats); err != nil {
			t.Fatalf("seed %d: %v (rerun with -run TestCrashRandom -crash.seed=%d)", seed, err, seed)
		}
	}
	t.Logf("%d seeds: %+v", seeds, stats)
	if *crashSeed < 0 && seeds >= 200 {
		// The workload must actually reach the interesting cases.
		for name, n := range map[string]int{
			"crashes": stats.crashes, "repairs": stats.repairs, "lost unsynced": stats.lostUnsynced,
			"kept unsynced": stats.keptUnsynced, "injected failures": stats.failures,
			"cuts": stats.cuts, "rollovers": stats.rollovers,
		} {
			if n == 0 {
				t.Errorf("no %s in %d seeds", name, seeds)
			}
		}
	}
}

type crashStats struct {
	ops, crashes, repairs, failures, cuts, rollovers int
	lostUnsynced, keptUnsynced                       int // recoveries that dropped / kept unsynced records
}

func runCrashSeed(seed uint64, st *crashStats) error {
	trace := func(format string, args ...any) {
		if *crashTrace {
			fmt.Printf(format+"\n", args...)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	opts := Options{SegmentSize: int64(MinSegmentSize + rng.IntN(2048)), MaxRecordSize: 4096}
	mem := vfs.NewCrashableMem()
	// Injected failures: none for a third of the seeds, else rare.
	var failProb atomic.Uint64 // per mille
	if seed%3 != 0 {
		failProb.Store(uint64(1 + rng.IntN(30)))
	}
	var injecting atomic.Bool
	injRng := rand.New(rand.NewPCG(seed, 0x1e44))
	inj := vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if injecting.Load() && injRng.IntN(1000) < int(failProb.Load()) {
			return fmt.Errorf("%s %s: %w", op, path, vfs.ErrInjected)
		}
		return nil
	})
	fsys := func() vfs.FS { return vfs.WithErrors(mem, inj) }

	model := crashModel{snaps: map[uint64][][]byte{}}
	var w *WAL
	// reopen opens the log (retrying injected failures) and checks it.
	reopen := func() error {
		var err error
		for attempt := 0; ; attempt++ {
			injecting.Store(attempt < 3)
			w, err = Open(fsys(), dir, opts)
			trace("open attempt %d: %v", attempt, err)
			if err == nil {
				break
			}
			if !errors.Is(err, vfs.ErrInjected) || attempt >= 3 {
				return fmt.Errorf("Open: %w", err)
			}
			st.failures++
		}
		injecting.Store(false)
		if w.Repaired() != nil {
			st.repairs++
			trace("repaired: %+v", *w.Repaired())
		}
		trace("recovered [%d, %d]; model durable %d appended %d", w.FirstIndex(), w.LastIndex(), model.durable, len(model.hist))
		before, appended := model.durable, uint64(len(model.hist))
		if err := model.check(w); err != nil {
			return err
		}
		if before < appended && model.durable > before {
			st.keptUnsynced++
		}
		if model.durable < appended {
			st.lostUnsynced++
		}
		injecting.Store(true)
		return nil
	}
	if err := reopen(); err != nil {
		return err
	}
	failed := false // w returned an error: it must refuse writes until reopened
	nextPayload := 0
	payload := func() []byte {
		nextPayload++
		n := rng.IntN(200)
		switch rng.IntN(20) {
		case 0:
			n = 0
		case 1:
			n = int(opts.SegmentSize) + rng.IntN(500) // bigger than a segment
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		// Unique content, so a record from the wrong position never matches.
		return fmt.Appendf(b[:0:0], "%d/%d:%s", seed, nextPayload, b)
	}
	onErr := func(what string, err error) error {
		if !errors.Is(err, vfs.ErrInjected) {
			return fmt.Errorf("%s: unexpected error %w", what, err)
		}
		if what == "Cut" && !errors.Is(err, ErrFailed) {
			// The snapshot's own write failed: not sticky, the log goes on.
			st.failures++
			trace("%s failed (not sticky): %v", what, err)
			return nil
		}
		if !errors.Is(err, ErrFailed) {
			return fmt.Errorf("%s: error is not sticky: %w", what, err)
		}
		st.failures++
		failed = true
		trace("%s failed: %v", what, err)
		return nil
	}

	for range 40 + rng.IntN(80) {
		st.ops++
		if failed {
			if err := w.Append([]byte("x")); !errors.Is(err, ErrFailed) {
				return fmt.Errorf("Append on a failed log = %v", err)
			}
		}
		switch p := rng.IntN(100); {
		case failed || p < 6: // power loss (a failure followed by a crash is a crash inside an operation)
			st.crashes++
			var crng *rand.Rand
			if rng.IntN(4) != 0 {
				crng = rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
			}
			trace("crash (random %v)", crng != nil)
			mem = mem.CrashClone(crng)
			failed = false
			if err := reopen(); err != nil {
				return fmt.Errorf("after crash %d: %w", st.crashes, err)
			}
		case p < 9: // clean restart
			injecting.Store(false)
			if err := w.Close(); err != nil {
				return fmt.Errorf("Close: %w", err)
			}
			model.durable = uint64(len(model.hist))
			trace("clean restart")
			if err := reopen(); err != nil {
				return fmt.Errorf("after clean restart: %w", err)
			}
		case p < 13: // Cut
			// The snapshot says which records it covers.
			snap := fmt.Appendf(nil, "snapshot after %d", len(model.hist))
			if rng.IntN(500) == 0 { // several frames (rare: crashes copy the whole filesystem)
				snap = append(snap, bytes.Repeat([]byte{byte(seed)}, snapshotChunk+rng.IntN(snapshotChunk))...)
			}
			model.snaps[uint64(len(model.hist))] = append(model.snaps[uint64(len(model.hist))], snap)
			st.cuts++
			trace("cut at %d", len(model.hist))
			if err := w.Cut(snap); err != nil {
				if err := onErr("Cut", err); err != nil {
					return err
				}
				if !failed { // the snapshot failed, after the records were synced
					model.durable = uint64(len(model.hist))
				}
				continue
			}
			model.durable = uint64(len(model.hist))
			model.committed = model.durable
		case p < 16: // check without a crash
			injecting.Store(false)
			first := w.FirstIndex()
			var n uint64
			for r, err := range w.Records() {
				if err != nil {
					return fmt.Errorf("Records: %w", err)
				}
				if r.Index <= model.committed {
					return fmt.Errorf("live Records yielded record %d, covered by the snapshot at %d", r.Index, model.committed)
				}
				want := model.hist[r.Index-1]
				if r.Index != first+n || r.Type != want.typ || !bytes.Equal(r.Data, want.data) {
					return fmt.Errorf("live Records: record %d mismatch", r.Index)
				}
				n++
			}
			if first+n-1 != w.SyncedIndex() || w.SyncedIndex() != model.durable {
				return fmt.Errorf("live Records ended at %d, synced %d, model durable %d", first+n-1, w.SyncedIndex(), model.durable)
			}
			injecting.Store(true)
		default: // append a batch, usually sync it
			for range 1 + rng.IntN(6) {
				b := payload()
				if err := w.Append(b); err != nil {
					return fmt.Errorf("Append: %w", err)
				}
				model.hist = append(model.hist, expRec{RecordEntry, b})
				trace("append %d (%d bytes)", len(model.hist), len(b))
			}
			if rng.IntN(4) != 0 {
				trace("sync")
				segs := len(w.segs)
				if err := w.Sync(); err != nil {
					if err := onErr("Sync", err); err != nil {
						return err
					}
					continue
				}
				if len(w.segs) > segs {
					st.rollovers++
				}
				model.durable = uint64(len(model.hist))
			}
		}
	}
	return nil
}
