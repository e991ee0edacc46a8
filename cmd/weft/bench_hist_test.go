package main

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestLatHist: every latency falls in a bucket that holds it and is at
// most 1/128 of it wide (or 1 µs), and the quantiles of a sample match the
// sorted sample's within half a bucket.
func TestLatHist(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	k := newLatKind()
	var all []int64
	for range 50000 {
		ns := int64(1000 + rng.ExpFloat64()*3e6)
		if rng.IntN(50) == 0 {
			ns = int64(1000 + rng.IntN(200_000)) // 1 µs buckets below 128 µs (1 µs is the floor)
		}
		all = append(all, ns)
		k.add(ns)
		b := latBucket(ns)
		lo, w := latLow(b), latWidth(b)
		if us := max(ns/1000, 1) * 1000; lo > us || us >= lo+w || (w > 1000 && w > lo/128) {
			t.Fatalf("%dns in bucket %d of [%d, %d)ns", ns, b, lo, lo+w)
		}
	}
	if k.count() != len(all) {
		t.Fatalf("count %d, want %d", k.count(), len(all))
	}
	slices.Sort(all)
	for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999} {
		want := float64(all[min(int(q*float64(len(all))), len(all)-1)]) / 1e6
		got := k.pctMs(q)
		if d := got - want; d < -want/256-0.0005 || d > want/256+0.0005 {
			t.Errorf("q%v: histogram %.4fms, sample %.4fms", q, got, want)
		}
	}
	if got, want := k.pctMs(1), float64(all[len(all)-1])/1e6; got != want {
		t.Errorf("max: %vms, want the exact %vms", got, want)
	}
	o := newLatKind()
	o.merge(k)
	o.merge(k)
	if o.count() != 2*len(all) || o.pctMs(0.5) != k.pctMs(0.5) || o.MaxNs != k.MaxNs {
		t.Errorf("merged: count %d, median %v (want %v)", o.count(), o.pctMs(0.5), k.pctMs(0.5))
	}
	if newLatHist().quantile(0.5) != 0 || newLatKind().pctMs(0.99) != 0 {
		t.Error("an empty histogram's quantile is not 0")
	}
}

// TestLatHistConcurrent: workers sharing one latKind lose no count and
// keep the largest latency.
func TestLatHistConcurrent(t *testing.T) {
	k := newLatKind()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 10000 {
				k.add(int64(w*10000+i) * 1000)
			}
		})
	}
	wg.Wait()
	if k.count() != 80000 || k.MaxNs != 79999*1000 {
		t.Fatalf("count %d, max %dns", k.count(), k.MaxNs)
	}
}

// TestLatHistJSON: a histogram travels as its buckets in use and comes
// back equal; an index out of range or repeated is refused.
func TestLatHistJSON(t *testing.T) {
	k := newLatKind()
	for _, ns := range []int64{1, 900, 150_000, 2_000_000, 2_000_001, int64(time.Hour)} {
		k.add(ns)
	}
	b, err := json.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 200 {
		t.Errorf("%d bytes for 6 latencies: %s", len(b), b)
	}
	var back latKind
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Hist, k.Hist) || back.MaxNs != k.MaxNs {
		t.Fatalf("round trip: %s", b)
	}
	for _, bad := range []string{`[[5248,1]]`, `[[3,1],[3,2]]`, `[[1,4294967296]]`, `{"a":1}`} {
		var h latHist
		if err := json.Unmarshal([]byte(bad), &h); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
