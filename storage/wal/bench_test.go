package wal

import (
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-dev/weft/storage/vfs"
)

// The benchmarks use the real filesystem under b.TempDir(), with default
// options (64 MiB preallocated segments), and 128-byte records. Run them
// short, e.g.
//
//	go test ./storage/wal -run '^$' -bench . -benchtime 2s
//
// Each reports ops/s (one op = one durable record), the p50 and p99 latency
// of an op, and for group commit the records per fdatasync.

const benchRecSize = 128

func reportLatency(b *testing.B, lat []time.Duration, elapsed time.Duration) {
	b.Helper()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

func benchOpen(b *testing.B) (*WAL, *atomic.Int64) {
	fsys, syncs := countSyncs(vfs.OS())
	w, err := Open(fsys, filepath.Join(b.TempDir(), "wal"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	return w, syncs
}

// BenchmarkAppendSync is one writer making each record durable on its own:
// Append + Sync (one write + one fdatasync) per record.
func BenchmarkAppendSync(b *testing.B) {
	w, _ := benchOpen(b)
	defer w.Close()
	rec := make([]byte, benchRecSize)
	lat := make([]time.Duration, 0, 1<<16)
	b.SetBytes(benchRecSize)
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		t0 := time.Now()
		if err := w.Append(rec); err != nil {
			b.Fatal(err)
		}
		if err := w.Sync(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	reportLatency(b, lat, time.Since(start))
}

// BenchmarkCommitter is group commit: N goroutines each Commit one record
// at a time through a Committer; one flusher syncs whatever is waiting.
func BenchmarkCommitter(b *testing.B) {
	for _, writers := range []int{8, 64} {
		b.Run(map[int]string{8: "writers=8", 64: "writers=64"}[writers], func(b *testing.B) {
			w, syncs := benchOpen(b)
			c := NewCommitter(w)
			defer c.Close()
			rec := make([]byte, benchRecSize)
			var left atomic.Int64
			left.Store(int64(b.N))
			lats := make([][]time.Duration, writers)
			var wg sync.WaitGroup
			b.SetBytes(benchRecSize)
			b.ResetTimer()
			syncs0 := syncs.Load()
			start := time.Now()
			for g := range writers {
				wg.Go(func() {
					for left.Add(-1) >= 0 {
						t0 := time.Now()
						if err := c.Commit(rec); err != nil {
							b.Error(err)
							return
						}
						lats[g] = append(lats[g], time.Since(t0))
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			reportLatency(b, slices.Concat(lats...), elapsed)
			if n := syncs.Load() - syncs0; n > 0 {
				b.ReportMetric(float64(b.N)/float64(n), "recs/sync")
			}
		})
	}
}
